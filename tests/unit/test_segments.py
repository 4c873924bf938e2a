"""The size-tiered merge policy (indexer/segments.py SegmentSet.plan), on registries of given sizes, and a
merge's sort in term ranges on a DuckDB file (tests/system/test_segment_merges.py runs merges in a daemon)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import aivault.indexer.segments as seg_mod
from aivault.indexer.segments import L0_FANIN, TIER_FANIN, Segment, SegmentSet


def _set(*sizes: int, frozen: tuple[int, ...] = ()) -> SegmentSet:
    segs = [Segment(f"seg_{i}", "sorted", n) for i, n in enumerate(sizes)]
    segs += [Segment(f"seg_f{i}", "frozen", n) for i, n in enumerate(frozen)]
    return SegmentSet([*segs, Segment("seg_active", "active", 10)])


def _compact(s: SegmentSet, compact: str | None) -> list[list[int]]:
    """Run plans to completion, applying each merge; returns the input sizes of every merge."""
    merges: list[list[int]] = []
    n = 100
    while True:
        plan, n = s.plan(n, 50.0, compact=compact)
        if plan is None:
            return merges
        merges.append(sorted(seg.rows for seg in plan.inputs))
        names = {seg.name for seg in plan.inputs}
        s.segments = [seg for seg in s.segments if seg.name not in names]
        s.segments.append(Segment(plan.target, "sorted", sum(seg.rows for seg in plan.inputs)))
        s.merging = False


def _sorted_sizes(s: SegmentSet) -> list[int]:
    return sorted(seg.rows for seg in s.segments if seg.state == "sorted")


def test_without_compaction_only_full_tiers_merge() -> None:
    """Sorted segments merge once TIER_FANIN share a size class; frozen ones once L0_FANIN wait."""
    s = _set(50_000_000, 3_800_000, 3_800_000, 2_900_000)
    assert _compact(s, None) == []
    s = _set(*([1_000] * TIER_FANIN))
    assert _compact(s, None) == [[1_000] * TIER_FANIN]
    s = _set(frozen=(300,) * (L0_FANIN - 1))
    assert _compact(s, None) == []


def test_compacting_merges_the_small_segments_but_never_rewrites_a_much_larger_one() -> None:
    """compact='all' leaves at most two sorted segments, and rewrites the largest only when comparable."""
    s = _set(49_600_000, 3_800_000, 3_800_000, 2_900_000)
    assert _compact(s, "all") == [[2_900_000, 3_800_000, 3_800_000]]
    assert _sorted_sizes(s) == [10_500_000, 49_600_000]
    s = _set(49_600_000, 3_000)  # one new small segment: left alone, no 50M-row rewrite
    assert _compact(s, "all") == []
    s = _set(20_000_000, 9_000_000, 1_000, frozen=(300, 300))
    assert _compact(s, "all") == [[300, 300, 1_000, 9_000_000, 20_000_000]]  # frozen ones too, in one sort
    assert _sorted_sizes(s) == [29_001_600]


def test_a_compaction_for_a_reclaim_s_copy_takes_the_active_segment_as_it_stands() -> None:
    """plan_all_with_active merges what compact='all' would, with the unfrozen active segment among
    the inputs; an empty active segment and a much larger sorted one stay; a running merge blocks it."""
    def inputs(s: SegmentSet) -> list[tuple[str, int]] | None:
        plan, _ = s.plan_all_with_active(100, 50.0)
        return None if plan is None else sorted((seg.state, seg.rows) for seg in plan.inputs)

    bulk = SegmentSet([Segment("seg_1", "active", 59_000_000)])
    assert inputs(bulk) == [("active", 59_000_000)]
    assert bulk.merging and inputs(bulk) is None  # planned: nothing else merges meanwhile
    assert inputs(_set(1_000, frozen=(300,))) == [("active", 10), ("frozen", 300), ("sorted", 1_000)]
    assert inputs(_set(3_000_000, frozen=(300,))) == [("active", 10), ("frozen", 300)]  # the large one stays
    assert inputs(_set(49_600_000)) == [("active", 10)]
    assert inputs(SegmentSet([Segment("seg_1", "sorted", 9), Segment("seg_2", "active", 0)])) is None
    assert inputs(SegmentSet([Segment("seg_1", "sorted", 9), Segment("seg_2", "sorted", 9),
                              Segment("seg_3", "active", 0)])) == [("sorted", 9), ("sorted", 9)]


def test_compacting_sorts_each_posting_once() -> None:
    """The end of a one-shot index (a dozen equal tiers, frozen leftovers) is one merge, not tiers of tiers."""
    s = _set(*([3_800_000] * 12), frozen=(300_000,) * 3)
    merges = _compact(s, "all")
    assert len(merges) == 1 and len(merges[0]) == 15
    assert _sorted_sizes(s) == [12 * 3_800_000 + 900_000]
    s = _set(40_000_000, *([300_000] * 10), frozen=(300_000,))  # the rest is small: the largest stays
    assert _compact(s, "all") == [[300_000] * 11]
    assert _sorted_sizes(s) == [3_300_000, 40_000_000]


def test_term_ranges_take_every_term_hash_once_in_ascending_order() -> None:
    """A merge's term ranges split the whole signed 64-bit hash space, in order, with no gap or overlap."""
    assert seg_mod.term_ranges(seg_mod.SORT_PART_ROWS) == []
    ranges = seg_mod.term_ranges(seg_mod.SORT_PART_ROWS * 4 + 1)
    assert len(ranges) == 5
    bounds = [-(1 << 63) + i * ((1 << 64) // 5) for i in range(1, 5)]
    edges = [-(1 << 63), -(1 << 63) + 1, -1, 0, 1, (1 << 63) - 1, *bounds, *(b - 1 for b in bounds)]
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t (term BIGINT)")
        con.executemany("INSERT INTO t VALUES (?)", [[v] for v in edges])
        con.execute("INSERT INTO t SELECT (hash(range)::HUGEINT - (1::HUGEINT << 63))::BIGINT FROM range(20000)")
        total = int(con.execute("SELECT count(*) FROM t").fetchone()[0])  # type: ignore[index]
        spans = [con.execute(f"SELECT count(*), min(term), max(term) FROM t WHERE {r}").fetchone() for r in ranges]
    finally:
        con.close()
    assert sum(int(n) for n, _, _ in spans) == total  # type: ignore[misc]
    assert all(n > 2000 for n, _, _ in spans)  # type: ignore[misc]  # evenly spread hashes: no part is starved
    assert all(spans[i][2] < spans[i + 1][1] for i in range(len(spans) - 1))  # type: ignore[index]


def test_a_merge_sorted_in_parts_writes_exactly_what_one_sort_writes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Sorting a merge one term range after another gives the same rows in the same order as one sort."""
    from aivault.indexer import schema as q
    from aivault.indexer.segments import MergePlan

    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    try:
        con.execute("CREATE TABLE sessions (sess INTEGER)")
        con.execute("INSERT INTO sessions SELECT range FROM range(0, 40) WHERE range % 7 <> 3")  # some gone
        inputs = []
        for i, n in enumerate((30_000, 20_000, 10_000)):
            name = f"seg_{i}"
            con.execute(q.CREATE_SEGMENT.format(name=name))
            # Common and rare terms, repeated (tf, dl) pairs (impact ties broken by the chunk).
            con.execute(f"""INSERT INTO {name} SELECT
                (hash((range * 7919) % {300 + i})::HUGEINT - (1::HUGEINT << 63))::BIGINT, {i} * 1000000 + range,
                (range % 40)::INTEGER, (1 + range % 5)::USMALLINT, (10 + range % 13)::USMALLINT, range % 3 = 0
                FROM range({n})""")
            inputs.append(Segment(name, "frozen", n))
        SegmentSet.run_merge(con, MergePlan(inputs, "seg_one", 11.5))
        monkeypatch.setattr(seg_mod, "SORT_PART_ROWS", 13_000)
        assert len(seg_mod.term_ranges(60_000)) == 5
        rows = SegmentSet.run_merge(con, MergePlan(inputs, "seg_parts", 11.5))
        one_sort = con.execute("SELECT * FROM seg_one ORDER BY rowid").fetchall()
        in_parts = con.execute("SELECT * FROM seg_parts ORDER BY rowid").fetchall()
    finally:
        con.close()
    assert rows == len(in_parts) == len(one_sort) < 60_000  # the gone sessions' postings left out
    assert in_parts == one_sort
