"""The search engine: one page of results per request, read inside one snapshot and fenced.

The page is planned and ranked lexically (query/planner.py, BM25 in SQL in query/bm25.py), or
fused with the vector neighbours (query/hybrid.py), then turned into hits (query/hits.py). Ties
break by ``updatedAt`` (newer first) and then by the internal session id, so paging is stable.

Every page is assembled inside one read transaction (one snapshot) and checked against the
committed generation afterwards: if a write landed meanwhile, the page answers
``stale-cursor`` instead of mixing two states of the index (docs/contract.md §3).

In the daemon the snapshot's two statements (the meta row, the segment list) are read once per
write: while the process's write fence (indexer/store.WriteFence) shows no write since they were
read, a search reuses them and begins its read transaction only at its first statement of its own,
then checks the fence again (a write that ended in between: the page is read again the ordinary
way). A search answered from memory-mapped postings and text segments runs no statement at all.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import duckdb

from aivault import log
from aivault.errors import MalformedCursor
from aivault.indexer.segments import SegmentLock
from aivault.indexer.store import WriteFence
from aivault.priority import SearchGate
from aivault.protocol import SearchResult, Truncated, malformed_cursor, results, stale_cursor, unavailable
from aivault.query import hits, planner, sql
from aivault.query.bm25 import filter_clause
from aivault.query.cursor import Position, mint, open_cursor, query_key
from aivault.query.hybrid import (
    HYBRID_CANDIDATES,
    SIMILARITY_FLOOR,
    VECTOR_CANDIDATES,
    Fused,
    VectorSource,
    fuse,
    prefers_semantic,
    vector_sessions,
)
from aivault.query.records import Plan, Snapshot
from aivault.query.request import SearchRequest

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor
from aivault.indexer.duck import one
from aivault.redact import Policy
from aivault.text import TOKENIZER_VERSION, query_terms

_log = log.get("query.engine")


class _Moved(BaseException):
    """A write ended between the reused snapshot and the search's first statement (not an error:
    the page is read again in a transaction of its own). BaseException, so no handler for errors
    on the way can take it for one."""


# The snapshot rows a search read and the fence token they were read under: (token, meta row,
# [(segment, state, created_at)]).
_Cached = tuple[int, tuple[Any, ...], list[tuple[str, str, int]]]


class _Read:
    """A search's cursor. Either its read transaction is open from the start, or (``meta`` given:
    the snapshot reused under fence token ``token``) it begins at the first statement, which then
    raises _Moved if the fence moved since the snapshot was read."""

    __slots__ = ("begun", "cur", "fence", "hook", "meta", "segments", "token")

    def __init__(self, cur: duckdb.DuckDBPyConnection, fence: WriteFence | None, token: int | None,
                 cached: _Cached | None,
                 hook: Callable[[], None] | None = None) -> None:
        self.cur = cur
        self.fence = fence
        self.token = token
        self.begun = cached is None
        self.meta = cached[1] if cached else None
        self.segments = cached[2] if cached else None
        self.hook = hook

    def execute(self, query: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        if not self.begun:
            if self.hook is not None:
                self.hook()
            self.cur.execute(sql.BEGIN_READ)
            self.begun = True
            if self.fence is None or self.fence.token() != self.token:
                raise _Moved
        return self.cur.execute(query, parameters)


class Engine:
    """Answers searches from one DuckDB database (a writer's connection or a read-only one)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, key: bytes, *, lock: SegmentLock | None = None,
                 committed_generation: Callable[[], int | None] | None = None,
                 vectors: VectorSource | None = None, postings: Any = None, fence: WriteFence | None = None,
                 activity: SearchGate | None = None, redaction: Policy | None = None) -> None:
        self._con = con
        # Display-time secret redaction of every snippet and title shown (aivault/redact.py): the second
        # line behind index-time redaction, for an index built before a rule existed.
        self.redaction = redaction or Policy()
        # The process's write fence (the daemon: every write goes through this connection's process)
        # and the snapshot rows read under its token; None: every search reads them.
        self._fence = fence
        self._cached: _Cached | None = None
        # query/postings.PostingsSidecars in the daemon: BM25 over memory-mapped sorted segments
        # (query/fastrank.py); None reads every posting in DuckDB.
        self.postings = postings
        self._sessions: Any = None  # query/fastrank.SessionTable of the last generation searched
        self._key = key
        self.vectors = vectors
        self._lock = lock
        self._committed = committed_generation
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursors_lock = threading.Lock()
        # The query's embedding and nearest-neighbour search run here while the lexical ranking
        # runs in DuckDB: both release the GIL, so on two cores they overlap.
        self._vector_pool: ThreadPoolExecutor | None = None
        if vectors is not None:
            from concurrent.futures import ThreadPoolExecutor

            self._vector_pool = ThreadPoolExecutor(1, thread_name_prefix="query-vectors")
        # Vector neighbours below this cosine are dropped (query/hybrid.py); bench/quality/floor.py
        # sweeps it to measure the constant, nothing else changes it.
        self.similarity_floor = SIMILARITY_FLOOR
        # Called after a page is assembled and before the generation fence is checked; tests use
        # it to land a real write in exactly that window.
        self.assembly_hook: Callable[[], None] | None = None
        # Called when a search that reuses the snapshot rows reaches its first statement, before its
        # transaction begins; tests land a real write in exactly that window.
        self.reuse_hook: Callable[[], None] | None = None
        self._tokenizer_warned = False
        # Searches in flight and when the last one ended: a daemon's merges sort with fewer threads
        # while people are searching (indexer/merges.py), and its background embedding starts no
        # work meanwhile (indexer/semantic.py) -- the daemon passes the vector service's gate, so
        # each search is counted once, for both.
        self.activity = activity if activity is not None else SearchGate()
        self.on_search: Callable[[], None] | None = None  # called as each search begins (indexer/merges.py)

    def _cur(self) -> duckdb.DuckDBPyConnection:
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cur", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cur = cur
            with self._cursors_lock:
                self._cursors.append(cur)
        return cur

    def close(self) -> None:
        if self.postings is not None:
            self.postings.close()
        if self._vector_pool is not None:
            self._vector_pool.shutdown(wait=True)
        with self._cursors_lock:
            for cur in self._cursors:
                with contextlib.suppress(duckdb.Error):
                    cur.close()
            self._cursors.clear()

    @contextmanager
    def _read(self, reuse: bool = False) -> Iterator[_Read]:
        """The search's cursor; ``reuse``: with the snapshot rows of the last search when the fence
        shows no write since (the transaction then begins at the first statement, if any)."""
        with self._lock.shared() if self._lock else nullcontext():
            cur = self._cur()
            token = self._fence.token() if self._fence is not None else None
            cached = self._cached if reuse and token is not None and self._cached and self._cached[0] == token else None
            r = _Read(cur, self._fence, token, cached, self.reuse_hook)
            if r.begun:
                cur.execute(sql.BEGIN_READ)
            try:
                yield r
            finally:
                if r.begun:
                    cur.execute(sql.END_READ)

    def _snapshot(self, r: _Read) -> Snapshot:
        cur = cast(duckdb.DuckDBPyConnection, r)
        if r.meta is not None and r.segments is not None:
            row, rows = r.meta, r.segments
        else:
            got = one(cur, sql.SELECT_SNAPSHOT)
            assert got is not None
            row = tuple(got)
            rows = [(str(a), str(b), int(c)) for a, b, c in cur.execute(sql.SELECT_SEGMENTS_CREATED).fetchall()]
            if r.token is not None and self._fence is not None and self._fence.token() == r.token:
                self._cached = (r.token, row, rows)  # read with no write begun since BEGIN: that state
        n = int(row[2])
        identity, generation = str(row[0]), int(row[1])
        segs = [(a, b) for a, b, _ in rows]
        if self.postings is None:
            return Snapshot(identity, generation, n, (int(row[3]) / n) if n else 1.0, segs, int(row[4]))
        px = None
        arrays = self.postings.arrays(identity, rows)
        if arrays is not None:
            from aivault.query.fastrank import PRELOAD_MAX_SESSIONS, SearchPostings, SessionTable

            table = self._sessions
            if table is None or table.key != (identity, generation):
                table = self._sessions = SessionTable((identity, generation), cur)
                if table.count <= PRELOAD_MAX_SESSIONS:
                    self.postings.later(table.preload)
            tails = self.postings.tails(identity, [(a, c, table.rows(cur, a)) for a, b, c in rows if b != "sorted"])
            px = SearchPostings(cur, segs, arrays, table, tails, self.postings.texts(identity, int(row[5])))
        return Snapshot(identity, generation, n, (int(row[3]) / n) if n else 1.0, segs, int(row[4]), px)

    def prepare_postings(self) -> None:
        """Queue the sidecar builds of sorted segments that have none, the loads into memory of the
        other segments' postings, and the next text segment when one is due. The daemon calls this
        every second, so a merge's output is mapped, frozen segments are in memory and a large
        batch's texts are written before a search needs them: a burst of new transcripts otherwise
        left its frozen segments to the first searches, which read them in DuckDB beside the merge
        sorting them (docs/design.md §4a)."""
        if self.postings is None:
            return
        with self._read() as cur:
            row = one(cur, sql.SELECT_SNAPSHOT)
            if row is None:
                return
            segs = [(str(a), str(b), int(c)) for a, b, c in cur.execute(sql.SELECT_SEGMENTS_CREATED).fetchall()]
            identity = str(row[0])
            self.postings.arrays(identity, segs)
            unsorted = [(a, c) for a, b, c in segs if b != "sorted"]
            if unsorted:
                counts = cur.execute(" UNION ALL ".join(sql.COUNT_SEGMENT_AS.format(seg=i, name=a)
                                                        for i, (a, _) in enumerate(unsorted))).fetchall()
                rows = dict(counts)
                self.postings.tails(identity, [(a, c, int(rows.get(i, 0))) for i, (a, c) in enumerate(unsorted)])
            self.postings.texts(identity, int(row[5]))

    @contextmanager
    def reading(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, Snapshot]]:
        """A read transaction and its snapshot, counted as a search: the steps of a merged search over
        several indexes (query/federated.py) each read one."""
        self.activity.begins()
        try:
            if self.on_search is not None:
                self.on_search()
            with self._read() as r:
                yield cast(duckdb.DuckDBPyConnection, r), self._snapshot(r)
        finally:
            self.activity.ends()

    def committed_generation(self) -> int | None:
        """The generation committed now, when the engine is given a way to know it (the daemon)."""
        return self._committed() if self._committed is not None else None

    # --- search -------------------------------------------------------------------------------
    def semantic_ready(self) -> bool:
        return self.vectors is not None and self.vectors.ready()

    def vector_model(self) -> str | None:
        """The fingerprint of the model this index's vectors come from, when a vector search can run now."""
        return self.vectors.model() if self.vectors is not None and self.vectors.ready() else None

    def search(self, req: SearchRequest, *, freshness_truncated: bool = False,
               force_route: str | None = None) -> SearchResult:
        """One page of results. ``force_route`` ("lexical", "vector", "hybrid") overrides the
        planner's choice between the lexical routes and the semantic ones (benchmarks, tests)."""
        if force_route in ("vector", "hybrid") and not self.semantic_ready():
            raise ValueError(f"route {force_route!r} is not available: vectors are not ready")
        pos: Position | None = None
        qk = query_key(req)
        if req.cursor is not None:
            try:
                pos = open_cursor(self._key, req.cursor)
            except MalformedCursor:
                return malformed_cursor()
            if pos.query_key != qk:
                return malformed_cursor()
        self.activity.begins()
        try:
            if self.on_search is not None:
                self.on_search()
            return self._search(req, pos, qk, freshness_truncated, force_route)
        finally:
            self.activity.ends()

    def _search(self, req: SearchRequest, pos: Position | None, qk: bytes, freshness_truncated: bool,
                force_route: str | None) -> SearchResult:
        # Decided before the clock starts: in a read-only process the first semantic query loads
        # the vector sidecar and the model, which is set-up, not search time (durationMs).
        family = force_route or ("hybrid" if prefers_semantic(req.text) and query_terms(req.text)
                                 and self.semantic_ready() else "lexical")
        try:
            return self._page(req, pos, qk, freshness_truncated, family, reuse=True)
        except _Moved:  # a write ended between the reused snapshot and the first statement
            return self._page(req, pos, qk, freshness_truncated, family, reuse=False)

    def _page(self, req: SearchRequest, pos: Position | None, qk: bytes, freshness_truncated: bool,
              family: str, *, reuse: bool) -> SearchResult:
        with self._read(reuse) as r:
            t0 = time.perf_counter()
            snap = self._snapshot(r)
            cur = cast(duckdb.DuckDBPyConnection, r)  # _Read has the one method the search uses
            if snap.tokenizer != TOKENIZER_VERSION:
                self._refuse_tokenizer(snap.tokenizer)
                return unavailable("not-ready")
            if pos is not None and (pos.identity != snap.identity or pos.generation != snap.generation):
                return stale_cursor(snap.generation, pos.generation)
            offset = pos.offset if pos else 0
            fused: list[Fused] = []
            if family == "lexical":
                plan, rows = planner.rank(cur, req, snap, offset, req.limit + 1)
            else:
                plan, fused = self._semantic(cur, req, snap, family)
                rows = [(f.sess, f.score, f.chunk) for f in fused[offset : offset + req.limit + 1]]
            has_more = len(rows) > req.limit
            rows = rows[: req.limit]
            page_hits, cut = hits.assemble(cur, req, plan, rows, snap.postings, redactor=self.redaction.redactor())
            trace = hits.trace(cur, rows, fused, offset, plan.ranks) if req.debug else None
            duration = (time.perf_counter() - t0) * 1000
            if self.assembly_hook is not None:
                self.assembly_hook()
        if self._committed is not None:
            now = self._committed()
            if now is not None and now != snap.generation:
                return stale_cursor(now, snap.generation)
        cursor = mint(self._key, Position(qk, snap.generation, snap.identity, offset + len(rows))) if has_more else None
        result = results(page_hits, cursor=cursor, has_more=has_more, generation=snap.generation,
                         truncated=Truncated(candidates=plan.capped, snippets=cut, query=req.query_truncated,
                                             freshness=freshness_truncated),
                         duration_ms=round(duration, 3))
        if req.debug:
            report: dict[str, Any] = {"route": plan.route, "scope": req.scope}
            dbg: dict[str, Any] = {"route": plan.route}
            if plan.repaired:
                dbg["repairedTerms"] = dict(plan.repaired)
                report["repairedTerms"] = dict(plan.repaired)
            dbg["plannerReport"] = report
            if trace is not None:
                dbg.update(trace)
            result["debug"] = dbg
        return result

    # --- semantic routes ---------------------------------------------------------------------------
    def _semantic(self, cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot,
                  family: str) -> tuple[Plan, list[Fused]]:
        """The whole fused candidate list (bounded), from which the page is cut."""
        lexical_route = "any"
        lex_updated: dict[int, int] = {}
        coverage: dict[int, float] = {}
        assert self.vectors is not None and self._vector_pool is not None
        pending = self._vector_pool.submit(self.vectors.search, req.text, VECTOR_CANDIDATES)
        if family == "hybrid":
            lex_plan, lexical = planner.rank(cur, req, snap, 0, HYBRID_CANDIDATES)
            lexical_route, lex_updated, coverage = lex_plan.route, lex_plan.updated, lex_plan.coverage
            plan = Plan("hybrid", lex_plan.terms, capped=lex_plan.capped, repaired=lex_plan.repaired,
                        evidence=lex_plan.evidence,
                        tried=[*lex_plan.tried, "hybrid"], ranks=lex_plan.ranks)
        else:
            lexical = []
            plan = Plan("vector", query_terms(req.text), tried=["vector"])
        found = pending.result()
        if found:
            ids, sims = found
        else:  # NumPy is loaded by then (the vector code uses it); a lexical search never imports it
            import numpy as np

            ids, sims = np.zeros(0, np.int64), np.zeros(0, np.float32)
        filt_sql, filt_args = filter_clause(req)
        vector = vector_sessions(cur, ids, sims, filt_sql, filt_args, req.scope == "conversation")
        updated = {**lex_updated, **{n.sess: n.updated for n in vector}}
        return plan, fuse(lexical, lexical_route, [(n.sess, n.chunk, n.similarity) for n in vector], updated,
                          req.filters.sort, floor=self.similarity_floor, coverage=coverage)

    def _refuse_tokenizer(self, indexed: int) -> None:
        """Terms cut by another tokenizer would silently miss: say once how to rebuild."""
        if self._tokenizer_warned:
            return
        self._tokenizer_warned = True
        _log.warning("the index was built by another tokenizer version; searches answer not-ready until "
                     "`aivault index` (or `aivault serve`) re-indexes it", indexed=indexed, current=TOKENIZER_VERSION)
