"""Postings segments: the append target, frozen runs, sorted runs, and their merging.

Life of a segment: *active* (batches append to it) -> *frozen* (full; no more appends) ->
merged with some *sorted* segments into a new sorted one (size-tiered, so every posting is
rewritten O(log n) times). The merge itself (a long ``CREATE TABLE AS ... ORDER BY``) runs on
a background thread; registering its result is a short transaction on the writer thread.

DuckDB's catalog is not versioned for readers that have not yet touched a table, so a
dropped segment could vanish under a query that read the old registry. Registry changes are
therefore transactional row updates, and the tables themselves are dropped later, under the
exclusive side of ``SegmentLock`` that queries hold shared while they run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from aivault import log
from aivault.envvars import env_int
from aivault.indexer import schema, sql_maint, sql_write
from aivault.indexer.bm25_formula import SQL_VALUES
from aivault.indexer.duck import one
from aivault.indexer.store import now_ms, transaction

_log = log.get("indexer.segments")

# Postings in the active segment before it is frozen. Every query scans the active segment
# unsorted, so it is kept to about a millisecond's worth; size-tiered merging keeps the total
# merge work O(n log n) however small this is.
FREEZE_ROWS = env_int("AIVAULT_FREEZE_ROWS", 300_000)
# Merge policy (see SegmentSet.plan).
L0_FANIN = 6
TIER_FANIN = 4
TIER_RATIO = 4.0
MAX_FANIN = 8
# A merge of more postings than this sorts them in parts, one range of term hashes after another
# (term_ranges): each part's sort fits in DuckDB's memory instead of spilling to disk. Measured on the
# 59.4M postings of a one-shot 1M-message index (512 MB, two threads, alternated): one sort 14.7-17.6 s,
# four or five parts 12.3-14.5 s, eight 15.2 s (each part scans the inputs again).
SORT_PART_ROWS = env_int("AIVAULT_SORT_PART_ROWS", 12_000_000)
_HASHES = 1 << 64  # term ids are signed 64-bit hashes (aivault/text.py term_hash), evenly spread


def _compact_all(unsorted: list[Segment], ranked: list[Segment]) -> list[Segment]:
    """The inputs of a compaction ``all`` (SegmentSet.plan): every segment, except the largest
    sorted one when it is over TIER_RATIO times all the rest together; none if that leaves one
    sorted segment alone."""
    everything = sorted(unsorted + ranked, key=lambda s: s.rows)
    rest = everything[:-1]
    largest = everything[-1] if everything else None
    if largest is not None and largest.state == "sorted" and sum(s.rows for s in rest) * TIER_RATIO <= largest.rows:
        everything = rest  # keep the largest: the work stays bounded by the small ones
    if len(everything) > 1 or any(s.state != "sorted" for s in everything):
        return everything
    return []


def term_ranges(rows: int) -> list[str]:
    """The term ranges a merge of ``rows`` postings sorts one after another, as SQL conditions in
    ascending term order that together take every term once; none (one sort) for up to
    SORT_PART_ROWS. Appending each range's sorted rows after the previous one's gives exactly the
    order of one sort, since the order starts with the term."""
    parts = max(1, -(-rows // max(SORT_PART_ROWS, 1)))
    if parts == 1:
        return []
    bounds = [-(_HASHES >> 1) + i * (_HASHES // parts) for i in range(1, parts)]
    ranges = []
    for i in range(parts):
        lower = [f"term >= {bounds[i - 1]}"] if i else []
        upper = [f"term < {bounds[i]}"] if i < parts - 1 else []
        ranges.append(" AND ".join(lower + upper))
    return ranges


class SegmentLock:
    """Many readers or one dropper (a small readers-writer lock)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._writer = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass(slots=True)
class Segment:
    name: str
    state: str  # active | frozen | sorted
    rows: int


@dataclass(slots=True)
class MergePlan:
    inputs: list[Segment]
    target: str
    avgdl: float
    # Set when the merged table is written, before it is registered: the daemon names the
    # segment's postings sidecar with it and builds that first (indexer/merges.py).
    created_at: int = 0

    @property
    def sort_parts(self) -> int:
        """How many term ranges the merge sorts one after another (term_ranges)."""
        return max(len(term_ranges(sum(s.rows for s in self.inputs))), 1)


@dataclass(slots=True)
class SegmentSet:
    """The writer's view of the segments (the registry table is the truth for readers)."""

    segments: list[Segment] = field(default_factory=list)
    to_drop: list[str] = field(default_factory=list)
    merging: bool = False

    @property
    def active(self) -> Segment:
        for s in self.segments:
            if s.state == "active":
                return s
        raise RuntimeError("no active segment")

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, next_segment: int) -> tuple[SegmentSet, int]:
        """Read the registry, drop orphans a crash left behind, make sure one segment is active."""
        rows = con.execute(sql_write.SELECT_SEGMENTS).fetchall()
        registered = {name for name, _ in rows}
        tables = {r[0] for r in con.execute(sql_maint.LIST_SEGMENT_TABLES).fetchall()}
        for orphan in sorted(tables - registered):
            con.execute(schema.DROP_SEGMENT.format(name=orphan))
            _log.info("dropped orphan segment", segment=orphan)
        segs = [Segment(name, state, int(one(con, sql_maint.COUNT_SEGMENT.format(name=name))[0]))  # type: ignore[index]
                for name, state in rows]
        out = cls(segs)
        if not any(s.state == "active" for s in segs):
            name = f"seg_{next_segment}"
            next_segment += 1
            with transaction(con):
                con.execute(schema.CREATE_SEGMENT.format(name=name))
                con.execute(sql_write.INSERT_SEGMENT_ROW, [name, "active", now_ms()])
                con.execute(sql_write.SET_NEXT_SEGMENT, [next_segment])
            out.segments.append(Segment(name, "active", 0))
        return out, next_segment

    def freeze(self, con: duckdb.DuckDBPyConnection, next_segment: int) -> int:
        """Start a new active segment; the old one becomes frozen. Returns the next free number."""
        old = self.active
        name = f"seg_{next_segment}"
        with transaction(con):
            con.execute(schema.CREATE_SEGMENT.format(name=name))
            con.execute(sql_write.INSERT_SEGMENT_ROW, [name, "active", now_ms()])
            con.execute(sql_write.SET_SEGMENT_STATE, ["frozen", old.name])
            con.execute(sql_write.SET_NEXT_SEGMENT, [next_segment + 1])
        old.state = "frozen"
        self.segments.append(Segment(name, "active", 0))
        return next_segment + 1

    def plan(self, next_segment: int, avgdl: float, *, compact: str | None = None) -> tuple[MergePlan | None, int]:
        """The next merge to run, if any (size-tiered, bounded fan-in).

        * Frozen segments merge together once there are L0_FANIN of them (or when compacting).
        * Sorted segments of one size class (a factor TIER_RATIO apart) merge once there are
          TIER_FANIN of them, so each posting is rewritten O(log n) times, with few segments
          for queries to visit.
        * ``compact="frozen"`` (a one-shot index ending) also merges fewer frozen segments.
        * ``compact="all"`` (a one-shot index ending, the daemon when idle) merges in one sort
          everything except the largest sorted segment when that one is over TIER_RATIO times
          all the rest together, else everything. So the work is bounded by the small segments
          (a few new files never rewrite the whole index), no posting is sorted twice on the
          way (tiers of at most MAX_FANIN inputs had sorted 60M postings twice at 1M
          messages), and a query visits at most two sorted segments. (Measured at 1M
          messages: five segments answered 1-term queries ~1.5x slower than two.)
        """
        if self.merging:
            return None, next_segment
        frozen = [s for s in self.segments if s.state == "frozen"]
        ranked = sorted((s for s in self.segments if s.state == "sorted"), key=lambda s: s.rows)
        inputs: list[Segment] = []
        if compact == "all":
            inputs = _compact_all(frozen, ranked)
        elif len(frozen) >= L0_FANIN or (compact and frozen):
            inputs = frozen[:MAX_FANIN]
        else:
            classes: dict[int, list[Segment]] = {}
            for seg in ranked:
                cls = int(math.log(max(seg.rows, 1), TIER_RATIO))
                classes.setdefault(cls, []).append(seg)
            for cls in sorted(classes):
                if len(classes[cls]) >= TIER_FANIN:
                    inputs = classes[cls][:MAX_FANIN]
                    break
        return self._planned(inputs, next_segment, avgdl)

    def plan_all_with_active(self, next_segment: int, avgdl: float) -> tuple[MergePlan | None, int]:
        """A compaction ``all`` whose inputs include the active segment as it stands, unfrozen: the
        merge a reclaim's copy runs on the way when a one-shot index ends (indexer/reclaim.py).
        None when a merge is running or there is nothing to merge."""
        if self.merging:
            return None, next_segment
        unsorted = [s for s in self.segments if s.state == "frozen" or (s.state == "active" and s.rows)]
        ranked = sorted((s for s in self.segments if s.state == "sorted"), key=lambda s: s.rows)
        return self._planned(_compact_all(unsorted, ranked), next_segment, avgdl)

    def _planned(self, inputs: list[Segment], next_segment: int, avgdl: float) -> tuple[MergePlan | None, int]:
        if not inputs:
            return None, next_segment
        self.merging = True
        return MergePlan(inputs, f"seg_{next_segment}", max(avgdl, 1.0)), next_segment + 1

    @staticmethod
    def run_merge(con: duckdb.DuckDBPyConnection, plan: MergePlan, *, source: str = "") -> int:
        """The slow part, on a background cursor; returns the merged row count.

        The sort does not need the inputs' order, and keeping it costs memory. If DuckDB still
        runs out of memory sorting many inputs at once, the inputs are first copied into one
        staging table (a streaming copy) and sorted from there, which it handles out of core.
        Over MAX_FANIN inputs go that way at once: measured at 1M messages, a union of eight
        ~3.8M-posting segments already ran out of memory (1 GB) after two seconds of work.
        ``source`` (``"db".``) reads the inputs from another attached database: a reclaim writes
        the merged segment into its copy of the index (``con`` USEs the copy).
        Over SORT_PART_ROWS postings are sorted in parts (``term_ranges``), a statement each: the
        table is registered only once whole, so a failure or a kill between parts leaves what a
        failed single statement leaves, an unregistered table that is dropped (``abandon``, or as an
        orphan at the next start).
        """
        con.execute(sql_maint.UNORDERED_INSERTS)
        union = " UNION ALL ".join(sql_maint.SEGMENT_ROWS.format(source=source, name=s.name) for s in plan.inputs)
        ranges = term_ranges(sum(s.rows for s in plan.inputs))
        if len(plan.inputs) <= MAX_FANIN:
            try:
                SegmentSet._sort(con, plan, union, ranges)
            except duckdb.OutOfMemoryException:
                _log.warning("merge ran out of memory; retrying through a staging table", target=plan.target)
                con.execute(schema.DROP_SEGMENT.format(name=plan.target))
            else:
                return SegmentSet._count(con, plan)
        staging = f"{plan.target}_staging"
        con.execute(sql_maint.CREATE_STAGING.format(staging=staging, union=union))
        try:
            SegmentSet._sort(con, plan, sql_maint.SEGMENT_ROWS.format(source="", name=staging), ranges)
        finally:
            con.execute(schema.DROP_SEGMENT.format(name=staging))
        return SegmentSet._count(con, plan)

    @staticmethod
    def _sort(con: duckdb.DuckDBPyConnection, plan: MergePlan, inputs: str, ranges: list[str]) -> None:
        """Write ``plan.target`` from ``inputs`` sorted: one statement, or one per term range."""
        args = {"target": plan.target, "inputs": inputs, **SQL_VALUES, "avgdl": plan.avgdl}
        if not ranges:
            con.execute(sql_maint.MERGE_SEGMENTS.format(terms="", **args))
            return
        con.execute(schema.CREATE_SEGMENT.format(name=plan.target))
        for terms in ranges:
            con.execute(sql_maint.MERGE_SEGMENT_PART.format(terms=f" AND {terms}", **args))

    @staticmethod
    def _count(con: duckdb.DuckDBPyConnection, plan: MergePlan) -> int:
        row = one(con, sql_maint.COUNT_SEGMENT.format(name=plan.target))
        return int(row[0]) if row else 0

    def register(self, con: duckdb.DuckDBPyConnection, plan: MergePlan, rows: int, next_segment: int) -> None:
        """Swap the merged segment in for its inputs (a short transaction on the writer)."""
        with transaction(con):
            for s in plan.inputs:
                con.execute(sql_maint.DELETE_SEGMENT_ROW, [s.name])
            con.execute(sql_write.INSERT_SEGMENT_ROW, [plan.target, "sorted", plan.created_at or now_ms()])
            con.execute(sql_maint.RAISE_NEXT_SEGMENT, [next_segment])
        names = {s.name for s in plan.inputs}
        sorted_before = [s for s in self.segments if s.state == "sorted" and s.name not in names]
        others = [s for s in self.segments if s.state != "sorted" and s.name not in names]
        # Older sorted segments first, then the merged one (it holds the newest postings).
        self.segments = [*sorted_before, Segment(plan.target, "sorted", rows), *others]
        self.to_drop.extend(sorted(names))
        self.merging = False

    def abandon(self, con: duckdb.DuckDBPyConnection, plan: MergePlan) -> None:
        """Forget a merge that failed: its table is dropped (or, if even that fails, dropped as an
        orphan at the next start); its inputs stay as they were."""
        self.merging = False
        try:
            con.execute(schema.DROP_SEGMENT.format(name=plan.target))
        except duckdb.Error as exc:
            _log.warning("a failed merge's table was not dropped; the next start drops it", target=plan.target,
                         error=str(exc))

    def drop_retired(self, con: duckdb.DuckDBPyConnection, lock: SegmentLock) -> None:
        if not self.to_drop:
            return
        with lock.exclusive():
            for name in self.to_drop:
                con.execute(schema.DROP_SEGMENT.format(name=name))
        self.to_drop.clear()
