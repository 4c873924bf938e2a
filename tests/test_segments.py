"""The size-tiered merge policy (indexer/segments.py SegmentSet.plan), on registries of given sizes,
and the bulk load of a one-shot index on a real daemon."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

import aivault.indexer.segments as seg_mod
import aivault.indexer.service
import aivault.vault.live
from aivault.errors import IndexerClosed
from aivault.home import Home
from aivault.indexer.segments import L0_FANIN, TIER_FANIN, Segment, SegmentSet
from aivault.indexer.store import BULK_MEMORY_LIMIT, BULK_PASS_THREADS, MEMORY_LIMIT, THREADS
from aivault.priority import BACKGROUND_NICE
from tests.builders import ClaudeWriter
from tests.conftest import root_args, wait_until


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


def _states(daemon: Any) -> list[str]:
    return [seg.state for seg in daemon.service.indexer.writer.segments.segments]


def _memory_limit(daemon: Any) -> str:
    return str(daemon.service.indexer.writer.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])


def _threads(daemon: Any) -> int:
    return int(daemon.service.indexer.writer.con.execute("SELECT current_setting('threads')").fetchone()[0])


def _limit_of(setting: str) -> str:
    con = duckdb.connect(config={"memory_limit": setting})
    try:
        return str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_a_bulk_load_sorts_at_the_end_and_a_search_ends_it(home: Home, roots: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot index sorts nothing until its final compaction and commits with fewer DuckDB threads; a search
    ends the bulk load."""
    from aivault.broker.daemon import Daemon
    from aivault.vault.endpoints import search_sessions

    monkeypatch.setattr(seg_mod, "FREEZE_ROWS", 50)  # read at every batch
    monkeypatch.setattr(aivault.indexer.service, "IDLE_FREEZE_AFTER_S", 1e9)  # no idle compaction meanwhile
    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False, bulk=True)
    d.start()
    sessions = 0
    try:
        for _ in range(L0_FANIN + 2):  # a batch or more per pass, each enough to freeze a segment
            for _ in range(2):
                ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{sessions}").user(
                    f"walrus number {sessions} " + " ".join(f"w{sessions}x{j}" for j in range(60)))
                sessions += 1
            d.service.indexer.reconcile(True).result(60)
        # Every posting so far waits in the active segment: nothing was frozen or merged.
        assert _states(d) == ["active"] and d.service.indexer.writer.segments.active.rows > 50 * L0_FANIN
        # ... and DuckDB keeps less of what it wrote cached than it may while searches run.
        assert _memory_limit(d) == _limit_of(BULK_MEMORY_LIMIT) != _limit_of(MEMORY_LIMIT)
        assert _threads(d) == BULK_PASS_THREADS < THREADS  # the scanners have the other cores
        # A search during a bulk load (another client through the daemon socket) ends it: the
        # pile is frozen and sorted without waiting for more.
        assert len(search_sessions(d.service, {"query": "walrus", "limit": 100})["hits"]) == sessions
        assert wait_until(lambda: "sorted" in _states(d) and "frozen" not in _states(d), timeout=30), _states(d)
        assert _memory_limit(d) == _limit_of(MEMORY_LIMIT)
        assert wait_until(lambda: _threads(d) == THREADS, timeout=30)  # once the merges the search began end
        ClaudeWriter(roots["claude"], cwd="/home/dev/late").user("walrus late " + " ".join(
            f"late{j}" for j in range(60)))
        sessions += 1
        d.service.indexer.reconcile(True).result(60)
        d.service.indexer.compact("all").result(60)  # resolves only once the merges are done
        states = _states(d)
        assert "frozen" not in states and 1 <= states.count("sorted") <= 2, states
        assert d.service.indexer.writer.segments.active.rows == 0
        assert len(search_sessions(d.service, {"query": "walrus", "limit": 100})["hits"]) == sessions
        assert len(search_sessions(d.service, {"query": "w7x59"})["hits"]) == 1
    finally:
        d.close()


def test_a_daemons_merges_leave_a_core_to_searches_and_sort_with_all_when_nobody_searches(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk load commits with BULK_PASS_THREADS and sorts at the end with every DuckDB thread; a merge that
    starts while people search (a search within MERGE_QUIET_S) runs with MERGE_THREADS, one that starts with
    nobody searching with every thread again, and the database's setting is put back when a merge ends."""
    from aivault.broker.daemon import Daemon
    from aivault.indexer.merges import MERGE_THREADS
    from aivault.vault.endpoints import search_sessions

    assert MERGE_THREADS < THREADS
    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False, bulk=True)
    d.start()
    try:
        ix = d.service.indexer
        seen: list[int] = []

        def threads_now(cur: Any) -> int:
            return int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0])

        nices: list[int] = []
        base = os.getpriority(os.PRIO_PROCESS, 0)

        def record(name: str, created_at: int) -> None:  # on the merge thread, before the setting is put back
            nices.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            cur = d.service.con.cursor()
            try:
                seen.append(threads_now(cur))
            finally:
                cur.close()

        ix.merges.prepare = record
        ClaudeWriter(roots["claude"], cwd="/home/dev/bulk").user("a walrus in the bulk load")
        ix.reconcile(True).result(60)
        assert _threads(d) == BULK_PASS_THREADS < THREADS  # its batches committed with fewer
        ix.compact("all").result(60)
        assert seen == [THREADS], seen
        assert search_sessions(d.service, {"query": "walrus"})["hits"]  # a search ends the bulk load
        assert wait_until(lambda: not ix.bulk, timeout=30)
        ix.compact("all").result(60)
        ClaudeWriter(roots["claude"], cwd="/home/dev/daemon").user("a walrus the daemon merges")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert seen[1:] and set(seen[1:]) == {MERGE_THREADS}, seen
        assert nices[0] == base and set(nices[1:]) == {max(base, BACKGROUND_NICE)}, nices  # yields to searches
        monkeypatch.setattr(aivault.vault.live, "MERGE_QUIET_S", 0.0)  # the last search is long past
        del seen[:]
        ClaudeWriter(roots["claude"], cwd="/home/dev/quiet").user("a walrus nobody searches for")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert seen and set(seen) == {THREADS}, seen
        cur = d.service.con.cursor()
        try:
            assert threads_now(cur) == THREADS
        finally:
            cur.close()
    finally:
        d.close()


def test_a_merge_that_began_with_nobody_searching_yields_when_a_search_comes(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge that started with every DuckDB thread (nobody searching) gives them back and lowers its
    thread's priority as soon as a search begins, and the setting is put back when it ends."""
    from aivault.broker.daemon import Daemon
    from aivault.indexer.merges import MERGE_THREADS
    from aivault.vault.endpoints import search_sessions

    monkeypatch.setattr(aivault.vault.live, "MERGE_QUIET_S", 0.0)  # nobody searched "recently"
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("a walrus before the merge")
    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False)
    d.start()
    try:
        ix = d.service.indexer
        ix.reconcile(True).result(60)
        inside, go = threading.Event(), threading.Event()
        seen: list[tuple[int, int]] = []
        base = os.getpriority(os.PRIO_PROCESS, 0)

        def held(name: str, created_at: int) -> None:  # on the merge thread, the sort done
            cur = d.service.con.cursor()
            try:
                seen.append((int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]),
                             os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
                inside.set()
                assert go.wait(60)
                seen.append((int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]),
                             os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
            finally:
                cur.close()

        ix.merges.prepare = held
        ClaudeWriter(roots["claude"], cwd="/home/dev/merge").user("a walrus the merge takes in")
        ix.reconcile(True).result(60)
        compacted = ix.compact("all")
        assert inside.wait(60)
        assert search_sessions(d.service, {"query": "walrus"})["hits"]  # a search while the merge runs
        go.set()
        compacted.result(60)
        assert seen[0] == (THREADS, base), seen
        assert seen[1] == (MERGE_THREADS, max(base, BACKGROUND_NICE)), seen
        cur = d.service.con.cursor()
        try:
            assert int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]) == THREADS
        finally:
            cur.close()
    finally:
        d.close()


def test_a_merge_whose_registration_fails_is_abandoned_and_the_indexer_goes_on(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A registration the database refuses drops the merged table, keeps its inputs, and the indexer
    goes on indexing, searching and merging (it used to end the indexer thread)."""
    from aivault.broker.daemon import Daemon
    from aivault.vault.endpoints import search_sessions

    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False)
    d.start()
    try:
        ix = d.service.indexer
        ClaudeWriter(roots["claude"], cwd="/home/dev/one").user("a walrus before the refusal")
        ix.reconcile(True).result(60)
        real = SegmentSet.register
        targets: list[str] = []

        def refuse(self: SegmentSet, con: Any, plan: Any, rows: int, next_segment: int) -> None:
            targets.append(plan.target)
            raise duckdb.IOException("simulated: could not write the registration")

        monkeypatch.setattr(SegmentSet, "register", refuse)
        before = [s.name for s in ix.writer.segments.segments]
        ix.compact("all").result(60)
        assert targets, "no merge was attempted"
        names = [s.name for s in ix.writer.segments.segments]  # the compaction froze the active one first
        assert set(before) <= set(names) and targets[0] not in names and not ix.writer.segments.merging, names

        def tables() -> set[str]:
            cur = d.service.con.cursor()
            try:
                return {str(r[0]) for r in cur.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            finally:
                cur.close()

        assert targets[0] not in tables(), "the abandoned merge's table was left behind"
        assert search_sessions(d.service, {"query": "walrus"})["hits"]
        monkeypatch.setattr(SegmentSet, "register", real)
        ClaudeWriter(roots["claude"], cwd="/home/dev/two").user("a walrus after the refusal")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert ix._thread is not None and ix._thread.is_alive()
        assert [s.state for s in ix.writer.segments.segments].count("sorted") == 1
        assert len(search_sessions(d.service, {"query": "walrus"})["hits"]) == 2
    finally:
        d.close()


def test_requests_to_a_stopped_indexer_settle_at_once(home: Home, roots: dict[str, Path]) -> None:
    """After the indexer stops, compact() resolves and reconcile() fails right away: no caller hangs."""
    from aivault.broker.daemon import Daemon

    ClaudeWriter(roots["claude"]).user("a walrus in the index")
    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False, bulk=True)
    d.start()
    ix = d.service.indexer
    ix.reconcile(True).result(60)
    ix.stop()
    compact, reconcile = ix.compact("all"), ix.reconcile(True)
    assert compact.result(timeout=5) is None  # a TimeoutError here is the hang this test is about
    with pytest.raises(IndexerClosed, match="closed"):
        reconcile.result(timeout=5)
    d.close()
