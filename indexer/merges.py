"""Scheduling segment merges for the indexer thread: one merge at a time, in a thread of its own.

A merge reads and writes through its own cursor while batches keep committing; when it ends it
posts ``MergeDone`` (or ``MergeFailed``) to the indexer's mailbox, and the indexer thread registers
the new segment and plans the next merge. A *compaction* (``frozen``: merge the unsorted segments;
``all``: also the tiers) keeps planning until nothing is left in that mode, then resolves the
futures of everyone who asked for it.

Before posting ``MergeDone`` the merge thread calls ``prepare`` (the daemon's: build the merged
segment's postings sidecar, query/postings.py), so the segment is registered with its sidecar in
place: registered without one, every search read all its postings in DuckDB until the sidecar thread
had built it (~0.2 s for 3.8M postings at 1M messages, 130+ ms a search meanwhile).

While people search (``searching``: a search in flight or ended within ``MERGE_QUIET_S`` when the
merge starts), a daemon's merge runs with ``MERGE_THREADS`` DuckDB threads (``threads``; DuckDB's
setting is the database's, so it is lowered for the merge and put back after) in a thread of lower
priority (aivault/priority.py): with both threads sorting, the searches meanwhile took 1.6-3x their
idle time at 1M messages; with one, 1.0-1.4x, and the merge twice as long (docs/design.md §3). With
nobody searching (a burst of new transcripts, a bulk load) a merge sorts with every thread, so
frozen segments do not pile up faster than they are merged.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

import duckdb

from aivault import log, priority
from aivault.envvars import env_int
from aivault.heap import release_free_memory
from aivault.indexer import sql_maint
from aivault.indexer.mailbox import Mail, MergeDone, MergeFailed
from aivault.indexer.segments import MergePlan
from aivault.indexer.store import THREADS, now_ms
from aivault.indexer.writer import Writer

_log = log.get("indexer.merges")

# DuckDB threads a daemon's merge sorts with while people search, leaving the other core to them:
# a search in flight or ended less than MERGE_QUIET_S ago when the merge starts.
MERGE_THREADS = min(THREADS, env_int("AIVAULT_MERGE_THREADS", 1))
MERGE_QUIET_S = 30.0


class Merges:
    def __init__(self, con: duckdb.DuckDBPyConnection, writer: Writer, post: Callable[[Mail], None]) -> None:
        self.con = con
        self.writer = writer
        self._post = post
        self.mode: str | None = None  # the compaction under way, if any
        self._waiters: list[Future[None]] = []
        self.thread: threading.Thread | None = None
        # (segment, created_at): called on the merge thread once the merged table is written and
        # before it is registered; what it does not finish, searches do without.
        self.prepare: Callable[[str, int], None] | None = None
        # DuckDB threads a merge runs with while ``searching()``; None: the connection's own (a bulk load).
        self.threads: int | None = MERGE_THREADS
        self.searching: Callable[[], bool] | None = None
        # The merge running: its thread's native id and whether it yields to searches already.
        # Changed under _yield_lock by the merge thread and by searches (search_began).
        self._running: tuple[int, bool] | None = None
        self._yield_lock = threading.Lock()

    def compact(self, mode: str, fut: Future[None] | None = None) -> None:
        """Freeze the active segment and merge in ``mode`` until nothing is left (indexer thread)."""
        if fut is not None:
            self._waiters.append(fut)
        self.writer.maybe_freeze(force=True)
        self.mode = mode
        self.start()

    def start(self) -> None:
        """Start the next merge if one is due (in the current compaction mode, if any)."""
        if self.writer.segments.merging:
            # A merge is running, or done and not yet registered: its MergeDone carries on (in the
            # compaction mode, if any); planning now would wrongly find nothing to do.
            return
        plan = self.writer.plan_merge(compact=self.mode)
        if plan is None:
            self.mode = None
            self.done()
            return
        self.thread = threading.Thread(target=self._run, args=(plan,), name="merge", daemon=True)
        self.thread.start()

    def _run(self, plan: MergePlan) -> None:
        cur = self.con.cursor()
        searching = self.searching
        try:
            with self._yield_lock:
                self._running = (threading.get_native_id(), False)
                if searching is not None and searching():
                    self._yield(cur)
                if self.threads is None:  # a bulk load's sort: its pass committed with fewer threads
                    cur.execute(sql_maint.SET_THREADS.format(threads=THREADS))
            rows = self.writer.segments.run_merge(cur, plan)
            plan.created_at = now_ms()
            release_free_memory("merge")  # the sort's runs (aivault/heap.py)
            prepare = self.prepare
            if prepare is not None:
                try:
                    prepare(plan.target, plan.created_at)
                except Exception as exc:  # the sidecar thread builds it after registration instead
                    _log.warning("merged segment not prepared before registration", target=plan.target,
                                 error=str(exc), kind=type(exc).__name__)
            self._post(MergeDone(plan, rows))
        except Exception as exc:
            self._post(MergeFailed(plan, str(exc)))
        finally:
            with self._yield_lock:
                if self._running is not None and self._running[1]:
                    with contextlib.suppress(duckdb.Error):
                        cur.execute(sql_maint.SET_THREADS.format(threads=THREADS))
                self._running = None
            cur.close()

    def _yield(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Have the running merge leave a core to searches (``_yield_lock`` held): DuckDB down to
        ``threads`` (the sort goes on in the merge's own thread alone) and that thread's priority
        lowered. Nothing for a bulk load, or when the merge yields already."""
        running, threads = self._running, self.threads
        if running is None or running[1] or threads is None or threads >= THREADS:
            return
        priority.background_thread(running[0])
        cur.execute(sql_maint.SET_THREADS.format(threads=threads))
        self._running = (running[0], True)

    def search_began(self) -> None:
        """A search has started (any thread): a merge sorting with every thread since nobody was
        searching when it began gives the others back now, rather than at its next start."""
        running = self._running
        if running is None or running[1]:
            return  # the usual case, without the lock
        with self._yield_lock:
            cur = self.con.cursor()
            try:
                self._yield(cur)
            except duckdb.Error as exc:  # the search goes on; the merge keeps its threads
                _log.debug("the running merge could not be made to yield", error=str(exc))
            finally:
                cur.close()

    def finished(self, plan: MergePlan, rows: int) -> None:
        """A merge ended well: register its segment and go on (indexer thread). A registration that
        fails (a write the disk refused) abandons the merge like one that failed while it ran."""
        try:
            self.writer.finish_merge(plan, rows)
        except duckdb.Error as exc:
            self.failed(plan, f"registering the merged segment failed: {exc}")
            return
        _log.info("merged segments", target=plan.target, inputs=[s.name for s in plan.inputs], rows=rows,
                  sort_parts=plan.sort_parts)
        self.start()

    def failed(self, plan: MergePlan, error: str) -> None:
        _log.error("segment merge failed", target=plan.target, error=error)
        self.writer.segments.abandon(self.writer.con, plan)
        # The index stays whole, only less compact: whoever waits on compaction goes on.
        self.mode = None
        self.done()

    def done(self) -> None:
        """Resolve everyone waiting for a compaction."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            with contextlib.suppress(InvalidStateError):
                fut.set_result(None)

    def interrupt(self) -> None:
        """Stop a running merge (shutdown): its transaction rolls back, the old segments stay."""
        t = self.thread
        if t is not None and t.is_alive():
            self.con.interrupt()
            t.join(30)
