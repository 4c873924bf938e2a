"""BM25 over memory-mapped postings (query/postings.py), scored in NumPy: the same ranking as the
SQL of query/bm25.py, in fewer statements.

Every rule of the SQL is reproduced exactly -- the same postings (conversation scope, filters,
the rarest term bounding an all-terms match, a common term's best TERM_CAP postings by impact
among its candidates), the same floating-point expression per posting, ``round(x, 6)`` as DuckDB
rounds (half away from zero), the same tie-breaks -- so a query returns the same sessions in the
same order, with the same scores, whichever path answered it (tests/system/test_fastrank.py compares both
on every route).

Statements left per search: the snapshot, the postings of segments that are not sorted (one,
when there are any), the filtered sessions (only with filters), and once per generation the
sessions' update times (and, for any-word ranking, their lengths).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from aivault.indexer.bm25_formula import AS_WRITTEN, impact, weighted
from aivault.indexer.duck import one
from aivault.query import sql
from aivault.query.chunk_texts import Row as EvidenceRow
from aivault.query.chunk_texts import TextSegment
from aivault.query.postings import SegmentArrays
from aivault.query.records import Plan, Row, Snapshot
from aivault.query.request import SearchRequest
from aivault.query.weights import PHRASE_CANDIDATES, SESSION_CHUNK_WEIGHT
from aivault.query.weights import idf as _idf

# The constants exactly as the SQL writes them (str() of the float, read back as a DOUBLE).
_K1 = AS_WRITTEN["k1"]
_B = AS_WRITTEN["b"]
_K1P1 = AS_WRITTEN["k1_plus_1"]
_CHUNK_WEIGHT = float(repr(SESSION_CHUNK_WEIGHT))

# Group postings by chunk through a table over the chunk ids (np.bincount) rather than a sort when
# there are more than one posting per this many ids of the range (a sort of n costs more than a
# pass over n * DENSE_GROUPING slots).
DENSE_GROUPING = 16
# Any-word ranking sums each term's tf per session in a table over (session, term) slots up to this
# many slots (sessions x query terms; 8 MB of counts), else by a sort.
DENSE_PAIRS_MAX = 1 << 20
# Up to this many sessions, a new generation's page rows are all read on the sidecar thread (~5 ms for
# 1,400 sessions, ~40 ms for 14,000): a page's sessions then come from memory from the first search on.
PRELOAD_MAX_SESSIONS = 50_000


def round6(x: Any) -> Any:
    """DuckDB's round(x, 6) of non-negative doubles: half away from zero (NumPy rounds half to even)."""
    y = np.asarray(x, dtype=np.float64) * 1e6
    t = np.trunc(y)
    return (t + ((y - t) >= 0.5)) / 1e6


class SessionTable:
    """The sessions of one generation: ids in order, update times, and (on demand) lengths."""

    def __init__(self, key: tuple[str, int], cur: duckdb.DuckDBPyConnection) -> None:
        self.key = key
        got = cur.execute(sql.SELECT_SESSION_TIMES).fetchnumpy()
        sess = np.asarray(got["sess"], dtype=np.int64)
        upd = got["updated_at"]
        null = np.ma.getmaskarray(upd)
        updated = np.where(null, -1, np.ma.getdata(upd)).astype(np.int64)
        order = np.argsort(sess, kind="stable")
        self.sess = sess[order]
        self.updated = updated[order]
        self.null = null[order]
        # Sort key for "updated_at DESC NULLS LAST": NULL lowest.
        self.order_key = np.where(self.null, -np.inf, self.updated.astype(np.float64))
        self._lengths: np.ndarray[Any, Any] | None = None
        self._titles: dict[tuple[str, str], str] | None = None
        self._page: dict[int, tuple[Any, ...]] = {}  # page_sessions' rows, as this generation shows them
        self._rows: dict[str, int] = {}  # rows of the segments that are not sorted
        self._mutex = threading.Lock()

    @property
    def count(self) -> int:
        return len(self.sess)

    def lookup(self, sess: Any) -> tuple[Any, Any]:
        """(index into this table, found) for each of ``sess``."""
        idx = np.searchsorted(self.sess, sess)
        idx_c = np.minimum(idx, max(len(self.sess) - 1, 0))
        found = (idx < len(self.sess)) & (self.sess[idx_c] == sess) if len(self.sess) else np.zeros(len(sess), bool)
        return idx_c, found

    def rows(self, cur: duckdb.DuckDBPyConnection, segment: str) -> int:
        """The rows of a segment that is not sorted: it changes only with the generation."""
        with self._mutex:
            n = self._rows.get(segment)
            if n is None:
                row = one(cur, sql.COUNT_ROWS.format(segment=segment))
                n = self._rows[segment] = int(row[0]) if row else 0
            return n

    def titles(self, cur: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], str]:
        """The agents' own session titles (the ``titles`` table), which win over the transcript's."""
        with self._mutex:
            if self._titles is None:
                self._titles = {(str(a), str(i)): str(t) for a, i, t in cur.execute(sql.SELECT_TITLES).fetchall()}
            return self._titles

    def page_rows(self, cur: duckdb.DuckDBPyConnection, sessions: list[int]) -> dict[int, tuple[Any, ...]]:
        """hits.assemble's session rows of ``sessions`` (titles applied), by session. A session's row
        changes only with the generation (a batch that changes one advances it), so each is read
        from DuckDB once per generation; later pages showing it take it from here."""
        with self._mutex:
            missing = [int(x) for x in sessions if int(x) not in self._page]
        if missing:
            titles = self.titles(cur)
            fetched: dict[int, tuple[Any, ...]] = {}
            page = sql.SELECT_PAGE_SESSIONS.format(sessions=", ".join(str(x) for x in missing))
            for r in cur.execute(page).fetchall():
                fetched[int(r[0])] = (r[0], r[1], r[2], titles.get((r[1], r[2]), r[3]), *r[4:])
            with self._mutex:
                self._page.update(fetched)
        with self._mutex:
            return {int(x): self._page[int(x)] for x in sessions if int(x) in self._page}

    def preload(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Read every session's page row of this generation (on the sidecar thread, in a transaction of
        its own: one that sees another generation reads nothing)."""
        with sql.read_transaction(cur):
            row = one(cur, sql.SELECT_IDENTITY_GENERATION)
            if row is None or (str(row[0]), int(row[1])) != self.key:
                return
            titles = {(str(a), str(i)): str(t) for a, i, t in cur.execute(sql.SELECT_TITLES).fetchall()}
            rows = cur.execute(sql.SELECT_ALL_PAGE_SESSIONS).fetchall()
        fetched = {int(r[0]): (r[0], r[1], r[2], titles.get((r[1], r[2]), r[3]), *r[4:]) for r in rows}
        with self._mutex:
            for sess, page_row in fetched.items():
                self._page.setdefault(sess, page_row)
            if self._titles is None:
                self._titles = titles

    def updated_of(self, sessions: list[int]) -> dict[int, int]:
        """updatedAt (-1 when unknown) of those of ``sessions`` that exist."""
        if not sessions:
            return {}
        arr = np.asarray(sessions, dtype=np.int64)
        idx, found = self.lookup(arr)
        return {int(arr[i]): int(self.updated[idx[i]]) for i in np.flatnonzero(found)}

    def lengths(self, cur: duckdb.DuckDBPyConnection) -> Any:
        """Each session's length in tokens (its chunks' dl summed), aligned with ``sess``; NaN
        for a session without chunks. Read once per generation, inside the caller's snapshot."""
        with self._mutex:
            if self._lengths is None:
                got = cur.execute(sql.SELECT_SESSION_LENGTHS).fetchnumpy()
                keys = list(got)
                s = np.asarray(got[keys[0]], dtype=np.int64)
                dl = np.asarray(got[keys[1]], dtype=np.float64)
                out = np.full(len(self.sess), np.nan)
                idx, found = self.lookup(s)
                out[idx[found]] = dl[found]
                self._lengths = out
            return self._lengths


@dataclass(slots=True)
class _Part:
    """One segment's postings of one term."""

    ordered: bool  # in the segment's impact order (a sorted segment)
    chunk: Any
    sess: Any
    tf: Any
    dl: Any
    conv: Any


class SearchPostings:
    """The postings one search reads: slices of the sorted segments' sidecars and of the other
    segments' postings in memory (``tails``, query/postings.py), and those of the other segments
    not loaded yet read from DuckDB (one statement per batch of new terms)."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, segments: list[tuple[str, str]],
                 arrays: dict[str, SegmentArrays], sessions: SessionTable,
                 tails: dict[str, SegmentArrays] | None = None, texts: list[TextSegment] | None = None) -> None:
        self.cur = cur
        self.segments = segments
        self.arrays = arrays
        self.sessions = sessions
        self.tails = tails or {}
        self.texts = texts or []
        # Segments that are not sorted, hold rows and are not in memory: their postings are read in DuckDB.
        self._unsorted = [(i, name) for i, (name, state) in enumerate(segments)
                          if state != "sorted" and name not in self.tails and sessions.rows(cur, name) > 0]
        self._fetched: dict[int, list[_Part]] = {}
        self._df: dict[int, int] = {}
        self._sdf: dict[int, int] = {}

    def _fetch(self, hashes: list[int]) -> None:
        new = [h for h in dict.fromkeys(hashes) if h not in self._fetched]
        if not new:
            return
        for h in new:
            self._fetched[h] = []
        if not self._unsorted:
            return
        terms = ", ".join(str(h) for h in new)
        statement = " UNION ALL ".join(sql.SELECT_UNSORTED.format(seg=i, name=name, terms=terms)
                                       for i, name in self._unsorted)
        got = self.cur.execute(statement).fetchnumpy()
        if not len(got["term"]):
            return
        seg, term = np.asarray(got["seg"]), np.asarray(got["term"])
        for h in new:
            for i, _ in self._unsorted:
                m = (term == h) & (seg == i)
                if m.any():
                    self._fetched[h].append(_Part(False, np.asarray(got["chunk"])[m], np.asarray(got["sess"])[m],
                                                  np.asarray(got["tf"])[m], np.asarray(got["dl"])[m],
                                                  np.asarray(got["conv"])[m]))

    def evidence(self, chunks: list[int]) -> list[EvidenceRow]:
        """SELECT_EVIDENCE's rows of ``chunks`` (chunk, role, ts, text; those that exist): from the
        text segments for the ids they cover (an id there exists while its session does), the
        others from DuckDB."""
        ids = np.asarray(chunks, dtype=np.int64)
        rest = np.ones(len(ids), bool)
        out: list[EvidenceRow] = []
        for seg in self.texts:
            inside = rest & (ids >= seg.lo) & (ids < seg.hi)
            if inside.any():
                out.extend(seg.rows(ids[inside], self._live))
                rest &= ~inside
        if rest.any():
            out.extend(sql.select_evidence(self.cur, ids[rest].tolist()))
        return out

    def _live(self, sess: Any) -> Any:
        return self.sessions.lookup(sess)[1]

    def parts(self, h: int) -> list[_Part]:
        self._fetch([h])
        out: list[_Part] = []
        for name, state in self.segments:
            ordered = state == "sorted"  # a tail is in term order, but not in impact order within a term
            a = self.arrays[name] if ordered else self.tails.get(name)
            if a is None:
                continue
            lo, hi = a.span(h)
            if hi > lo:
                out.append(_Part(ordered, a.chunk[lo:hi], a.sess[lo:hi], a.tf[lo:hi], a.dl[lo:hi], a.conv[lo:hi]))
        out.extend(self._fetched[h])
        return out

    def document_frequencies(self, hashes: list[int], sessions: dict[int, int] | None = None) -> dict[int, int]:
        """As planner.document_frequencies: chunks (and with ``sessions``, sessions) holding each term."""
        self._fetch(hashes)
        out: dict[int, int] = {}
        for h in hashes:
            parts = self.parts(h)
            n = sum(len(p.chunk) for p in parts)
            if n == 0:
                continue
            out[h] = n
            if sessions is not None:
                if h not in self._sdf:
                    self._sdf[h] = _distinct(np.concatenate([np.asarray(p.sess) for p in parts]))
                sessions[h] = self._sdf[h]
        return out


def _distinct(ids: Any) -> int:
    """How many distinct values ``ids`` (non-negative session ids, dense) holds."""
    if not len(ids):
        return 0
    seen = np.zeros(int(ids.max()) + 1, bool)
    seen[ids] = True
    return int(np.count_nonzero(seen))


class _Members:
    """Membership in a set of small dense ids (chunk or session ids, in any order, repeats allowed):
    a table built once per set, one gather per array tested (no sort, no search)."""

    __slots__ = ("_table", "_top")

    def __init__(self, ids: Any) -> None:
        self._top = int(ids.max()) if len(ids) else -1
        # One slot past the largest id, never set: a tested value above it is clipped there. Ids
        # are counters (never negative), so clipping below never lands on a member either.
        self._table = np.zeros(self._top + 2, bool)
        self._table[ids] = True

    def mask(self, values: Any) -> Any:
        if self._top < 0 or not len(values):
            return np.zeros(len(values), bool)
        return np.take(self._table, values, mode="clip")


def _member(values: Any, ids: Any) -> Any:
    """``values`` found among ``ids`` (a mask of ``values``)."""
    return _Members(ids).mask(values)


def _allowed(cur: duckdb.DuckDBPyConnection, filt_sql: str, filt_args: list[Any]) -> Any | None:
    """The sessions passing the filters (sorted), or None without filters."""
    if not filt_args and filt_sql == sql.NO_FILTER:
        return None
    got = cur.execute(sql.SELECT_ALLOWED.format(filters=filt_sql), filt_args).fetchnumpy()
    return np.sort(np.asarray(got["sess"], dtype=np.int64))


def _impact(tf: Any, dl: Any, avgdl: float) -> Any:
    """Each posting's BM25 impact, the expression of sql.IMPACT_ORDER evaluated as DuckDB does."""
    return impact(tf.astype(np.float64), dl.astype(np.float64), avgdl, _K1, _B)


def _best_of(chunk: Any, tf: Any, dl: Any, avgdl: float, cap: int) -> Any:
    """Which ``cap`` of a capped term's candidate rows rank first by impact (highest first, then the
    lowest chunk id, as sql.IMPACT_ORDER orders them): a mask, so the rows keep their order."""
    imp = _impact(tf, dl, avgdl)
    edge = -np.partition(-imp, cap - 1)[cap - 1]  # the cap-th highest impact
    keep = imp > edge
    tied = np.flatnonzero(imp == edge)
    room = cap - int(keep.sum())
    keep[tied[np.argsort(chunk[tied], kind="stable")[:room]]] = True
    return keep


def _gather(px: SearchPostings, hashes: list[int], conv_only: bool, allowed: Any | None, capped: set[int],
            cap: int, avgdl: float, restrict: Any | None = None) -> tuple[Any, Any, Any, Any, Any]:
    """Postings of ``hashes`` as the SQL scans read them: (term, chunk, sess, tf, dl).

    A capped term's candidates are each sorted segment's first ``cap`` rows (its impact order) and
    every row of the other segments; of these it keeps the ``cap`` best by impact (bm25._scans)."""
    cols: list[tuple[Any, Any, Any, Any, Any]] = []
    allowed_m = _Members(allowed) if allowed is not None else None
    restrict_m = _Members(restrict) if restrict is not None else None
    for h in hashes:
        first = len(cols)
        for p in px.parts(h):
            # The rows kept, as positions in the segment's order; the most selective test first
            # (the restriction to a rare term's chunks), the others only on what it left.
            keep = np.flatnonzero(restrict_m.mask(p.chunk)) if restrict_m is not None else None
            if conv_only:
                conv = np.asarray(p.conv if keep is None else p.conv[keep])
                keep = np.flatnonzero(conv) if keep is None else keep[conv]
            if allowed_m is not None:
                m = allowed_m.mask(p.sess if keep is None else p.sess[keep])
                keep = np.flatnonzero(m) if keep is None else keep[m]
            if keep is None:
                chunk, sess, tf, dl = p.chunk, p.sess, p.tf, p.dl
            else:
                chunk, sess, tf, dl = p.chunk[keep], p.sess[keep], p.tf[keep], p.dl[keep]
            if h in capped and p.ordered and len(chunk) > cap:
                chunk, sess, tf, dl = chunk[:cap], sess[:cap], tf[:cap], dl[:cap]
            if len(chunk):
                cols.append((np.full(len(chunk), h, np.int64), chunk, sess, tf, dl))
        if h in capped and sum(len(c[1]) for c in cols[first:]) > cap:
            term_cols = [np.concatenate([c[i] for c in cols[first:]]) for i in range(5)]
            keep = _best_of(term_cols[1], term_cols[3], term_cols[4], avgdl, cap)
            cols[first:] = [tuple(col[keep] for col in term_cols)]
    if not cols:
        e = np.zeros(0, np.int64)
        return e, e, e.astype(np.int32), e.astype(np.uint16), e.astype(np.uint16)
    return tuple(np.concatenate([c[i] for c in cols]) for i in range(5))  # type: ignore[return-value]


def _holding_all(got: tuple[Any, Any, Any, Any, Any], hashes: list[int]) -> tuple[Any, Any, Any, Any, Any]:
    """The gathered rows of the chunks that hold every term, in their order.

    What the all-terms count (``need``) keeps anyway -- a (term, chunk) posting exists at most once:
    a chunk's postings are cut once and live in one segment -- but found first, with one byte per
    chunk id counting the terms that hold it (a pass over each term's run of rows), so the grouping
    that sums the scores sees only the intersection: two common terms at 1M messages had ~100k rows
    grouped over a 1M-slot table."""
    term, chunk = got[0], got[1]
    if not len(chunk):
        return got
    starts, ends = _runs(term)
    if len(starts) < len(set(hashes)):  # a term without rows: no chunk holds them all
        return tuple(col[:0] for col in got)
    # How many of the terms each chunk holds (each run is one term's rows, a chunk at most once in it).
    held = np.zeros(int(chunk.max()) + 1, np.uint8)
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        held[chunk[a:b]] += 1
    keep = held[chunk] == len(starts)
    if bool(keep.all()):
        return got
    return tuple(col[keep] for col in got)


def _runs(term: Any) -> tuple[Any, Any]:
    """Where each run of equal terms starts and ends (``_gather`` appends each term's rows together)."""
    starts = np.concatenate([[0], np.flatnonzero(term[1:] != term[:-1]) + 1])
    return starts, np.concatenate([starts[1:], [len(term)]])


def _weights(term: Any, weight: dict[int, float], runs: tuple[Any, Any] | None = None) -> Any:
    """``weight`` of each row's term. Rows come in runs of one term (``_gather`` appends each term's
    postings together): one lookup per run, then the runs repeated."""
    if not len(term):
        return np.zeros(0)
    keys = np.array(sorted(weight), dtype=np.int64)
    values = np.array([weight[int(k)] for k in keys])
    starts, ends = runs if runs is not None else _runs(term)
    return np.repeat(values[np.searchsorted(keys, term[starts])], ends - starts)


def _chunk_scores(term: Any, chunk: Any, sess: Any, tf: Any, dl: Any, idf: dict[int, float], avgdl: float,
                  need: int | None) -> tuple[Any, Any, Any]:
    """Per chunk: (chunk, sess, BM25 rounded), as the ``w`` CTE; ``need``: only chunks holding that
    many postings (all terms)."""
    if not len(chunk):
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0)
    runs = _runs(term)  # one pass, for the weights and the one-term test below
    w = _weights(term, idf, runs)
    tff = tf.astype(np.float64)
    contrib = weighted(w, tff, dl.astype(np.float64), avgdl, _K1, _K1P1, _B)  # sql.BM25_SUM's terms
    top = int(chunk.max())
    if need is None and len(runs[0]) == 1:
        # One term: a chunk holds it at most once, so every row is its own chunk -- nothing to add
        # up; ordering by chunk needs no stable sort (the ids are distinct).
        order = np.argsort(chunk)
        chunks, sessions, sums = chunk[order], np.asarray(sess)[order].astype(np.int64), contrib[order]
        counts = None
    elif len(chunk) * DENSE_GROUPING > top:
        # Many postings for the id range: sum into a table over the chunk ids (each chunk's
        # postings added in their order, as a stable sort would), no sort.
        sums_all = np.bincount(chunk, weights=contrib, minlength=top + 1)
        if need is None:
            seen = np.zeros(top + 1, bool)  # a byte a slot: finding the chunks scans 1/8 of a count table
            seen[chunk] = True
            chunks = np.flatnonzero(seen)
            counts = None
        else:
            counts_all = np.bincount(chunk, minlength=top + 1)
            chunks = np.flatnonzero(counts_all)
            counts = counts_all[chunks]
        sums = sums_all[chunks]
        sess_of = np.zeros(top + 1, np.asarray(sess).dtype)  # the sidecars' int32: half the table
        sess_of[chunk] = sess
        sessions = sess_of[chunks].astype(np.int64)
    else:
        order = np.argsort(chunk, kind="stable")
        c_sorted = chunk[order]
        starts = np.flatnonzero(np.concatenate([[True], c_sorted[1:] != c_sorted[:-1]]))
        sums = np.add.reduceat(contrib[order], starts)
        chunks = c_sorted[starts]
        sessions = np.asarray(sess)[order][starts].astype(np.int64)
        counts = np.diff(np.concatenate([starts, [len(c_sorted)]]))
    if need is not None:
        assert counts is not None
        keep = counts == need
        chunks, sessions, sums = chunks[keep], sessions[keep], sums[keep]
    return chunks.astype(np.int64), sessions, round6(sums)


def _best_chunks(chunks: Any, sessions: Any, scores: Any) -> tuple[Any, Any, Any]:
    """Per session: its best chunk's score and that chunk (ties: the lower chunk id), as ``b``.

    ``chunks`` ascend (``_chunk_scores`` sorts them); a stable sort by session keeps that order
    inside each session, so the first chunk reaching the session's best score is the one wanted.
    """
    if not len(chunks):
        e = np.zeros(0, np.int64)
        return e, np.zeros(0), e
    if bool(np.all(sessions[1:] >= sessions[:-1])):
        order = None  # a session's chunks are usually consecutive ids: already grouped
        s, sc, ch = sessions, scores, chunks
    else:
        order = np.argsort(sessions, kind="stable")
        s, sc, ch = sessions[order], scores[order], chunks[order]
    first = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    best = np.maximum.reduceat(sc, first)
    group = np.repeat(np.arange(len(first)), np.diff(np.concatenate([first, [len(s)]])))
    at_best = np.flatnonzero(sc == best[group])
    # The first position per group reaching its best score.
    g = group[at_best]
    keep = np.concatenate([[True], g[1:] != g[:-1]])
    pick = at_best[keep]
    return s[first], best, ch[pick]


def _page(req: SearchRequest, table: SessionTable, allowed: Any | None, sess: Any, score: Any, offset: int,
          count: int) -> tuple[Any, dict[int, int]]:
    """The positions (into ``sess``) of one page, live sessions passing the filters, in the SQL's
    order; and their update times (-1 when unknown)."""
    idx, found = table.lookup(sess)
    if allowed is not None:
        found &= _member(sess, allowed)
    pos = np.flatnonzero(found)
    u = table.order_key[idx[pos]]
    sc = score[pos]
    relevance = req.filters.sort == "relevance"
    k = offset + count
    if k > 0 and len(pos) > 4 * k:
        # Only rows whose first sort key reaches the k-th largest can be among the first k: sort those
        # (the same first k, in the same order) instead of every session that matched.
        first = sc if relevance else u
        kth = np.partition(first, len(first) - k)[len(first) - k]
        near = first >= kth
        pos, u, sc = pos[near], u[near], sc[near]
    ss = sess[pos]
    order = np.lexsort((ss, -u, -sc) if relevance else (ss, -sc, -u))
    chosen = pos[order[offset : offset + count]]
    updated = {int(sess[i]): int(table.updated[idx[i]]) for i in chosen}
    return chosen, updated


def score(px: SearchPostings, req: SearchRequest, snap: Snapshot, plan: Plan, hashes: list[int], df: dict[int, int],
          filt_sql: str, filt_args: list[Any], offset: int, count: int, *, require_all: bool,
          phrase: bool, cap: int) -> tuple[list[Row], dict[int, int], list[tuple[int, int, float]]]:
    """bm25's scoring statement: one page (sessions by their best chunk), the page's update times,
    and with ``phrase`` the best PHRASE_CANDIDATES + 1 chunks (chunk, sess, score) to check."""
    cur = px.cur
    conv_only = req.scope == "conversation"
    allowed = _allowed(cur, filt_sql, filt_args)
    by_rarity = sorted(hashes, key=lambda h: df.get(h, 0))
    driver = by_rarity[0]
    restrict = None
    capped = {h for h in by_rarity if df.get(h, 0) > cap}
    if require_all and len(hashes) > 1 and df.get(driver, 0) <= cap:
        # The rarest term bounds the candidates exactly; other terms only need checking there.
        got = _gather(px, [driver], conv_only, allowed, set(), cap, snap.avgdl)
        restrict = got[1]  # the driver's chunks (a membership table: no need to sort them)
        capped = set()
    got = _gather(px, hashes, conv_only, allowed, capped, cap, snap.avgdl, restrict)
    if capped:
        plan.capped = True
    n = max(snap.n_chunks, 1)
    idf = {h: _idf(n, df.get(h, 0)) for h in hashes}
    need = len(hashes) if require_all and len(hashes) > 1 else None
    if need is not None:
        got = _holding_all(got, hashes)
    chunks, sessions, scores = _chunk_scores(*got, idf, snap.avgdl, need)
    bs, bscore, bchunk = _best_chunks(chunks, sessions, scores)
    chosen, updated = _page(req, px.sessions, allowed, bs, bscore, offset, count)
    page: list[Row] = [(int(bs[i]), float(bscore[i]), int(bchunk[i])) for i in chosen]
    top: list[tuple[int, int, float]] = []
    if phrase:
        top = [(int(chunks[i]), int(sessions[i]), float(scores[i]))
               for i in np.lexsort((chunks, -scores))[: PHRASE_CANDIDATES + 1]]
    return page, updated, top


def score_sessions(px: SearchPostings, req: SearchRequest, snap: Snapshot, plan: Plan, hashes: list[int],
                   df: dict[int, int], sdf: dict[int, int], filt_sql: str, filt_args: list[Any], offset: int,
                   count: int, *, cap: int) -> list[Row]:
    """bm25._score_sessions: any-word ranking with the session as one document."""
    got = _sessions_scored(px, req, snap, plan, hashes, df, sdf, filt_sql, filt_args, cap)
    if got is None:
        return []
    common, b_ss, b_chunk_score, b_chunk, b_cov, sidf, allowed = got
    table = px.sessions
    if plan.maxima is None:
        final = round6(b_ss / b_ss.max() + _CHUNK_WEIGHT * b_chunk_score / b_chunk_score.max())
    else:  # a merged search's best session and chunk (query/federated.py)
        final = round6(b_ss / plan.maxima[0] + _CHUNK_WEIGHT * b_chunk_score / plan.maxima[1])
    srank = np.empty(len(common), np.int64)
    srank[np.lexsort((common, -b_ss))] = np.arange(1, len(common) + 1)
    crank = np.empty(len(common), np.int64)
    crank[np.lexsort((common, -b_chunk_score))] = np.arange(1, len(common) + 1)
    chosen, updated = _page(req, table, allowed, common, final, offset, count)
    total = sum(sidf[h] for h in hashes) or 1.0
    page: list[Row] = []
    for i in chosen:
        s = int(common[i])
        page.append((s, float(final[i]), int(b_chunk[i])))
        plan.updated[s] = updated[s]
        plan.ranks[s] = (int(srank[i]), int(crank[i]))
        plan.coverage[s] = min(float(b_cov[i]) / total, 1.0)
    return page


def session_maxima(px: SearchPostings, req: SearchRequest, snap: Snapshot, plan: Plan, hashes: list[int],
                   df: dict[int, int], sdf: dict[int, int], filt_sql: str, filt_args: list[Any], *,
                   cap: int) -> tuple[float, float] | None:
    """bm25.session_maxima: the best session BM25 and best chunk BM25 (None: no session matches)."""
    got = _sessions_scored(px, req, snap, plan, hashes, df, sdf, filt_sql, filt_args, cap)
    if got is None:
        return None
    return float(got[1].max()), float(got[2].max())


def _sessions_scored(px: SearchPostings, req: SearchRequest, snap: Snapshot, plan: Plan, hashes: list[int],
                     df: dict[int, int], sdf: dict[int, int], filt_sql: str, filt_args: list[Any],
                     cap: int) -> tuple[Any, Any, Any, Any, Any, dict[int, float], Any | None] | None:
    """Any-word ranking's sessions as SQL's ``b`` holds them, before the page: (sessions, session BM25,
    best chunk BM25, best chunk, covered session idf, session idf by term, the filters' sessions); None
    when no session matches."""
    cur = px.cur
    table = px.sessions
    n_sess = max(table.count if snap.n_sessions is None else snap.n_sessions, 1)
    n = max(snap.n_chunks, 1)
    avg_sdl = max(snap.avgdl * n / n_sess, 1.0)
    allowed = _allowed(cur, filt_sql, filt_args)
    capped = {h for h in hashes if df.get(h, 0) > cap}
    got = _gather(px, hashes, req.scope == "conversation", allowed, capped, cap, snap.avgdl)
    if capped:
        plan.capped = True
    term, chunk, sess, tf, dl = got
    idf = {h: _idf(n, df.get(h, 0)) for h in hashes}
    sidf = {h: _idf(n_sess, min(sdf.get(h, 0), n_sess)) for h in hashes}
    chunks, sessions, scores = _chunk_scores(term, chunk, sess, tf, dl, idf, snap.avgdl, None)
    bs, bscore, bchunk = _best_chunks(chunks, sessions, scores)
    if not len(bs):
        return None
    # st: each term's tf summed per session; joined with the session lengths (a session without
    # chunks -- deleted since -- drops out, as the SQL's inner join drops it).
    sess64 = sess.astype(np.int64)
    keys = np.array(sorted(sidf), dtype=np.int64)
    slot = np.searchsorted(keys, term)
    pair = sess64 * len(keys) + slot  # by session, then term
    if len(pair) and int(pair.max()) < DENSE_PAIRS_MAX:
        # Sums of whole numbers: any order gives the same totals, so a table over the (session,
        # term) slots replaces the sort (a stable argsort of 250k rows took ~17 ms here).
        present = np.bincount(pair)
        st_pair = np.flatnonzero(present)
        st_tf = np.bincount(pair, weights=tf.astype(np.float64))[st_pair]
        st_sess, st_term = st_pair // len(keys), keys[st_pair % len(keys)]
    else:
        key_order = np.argsort(pair, kind="stable")
        ks, kt = sess64[key_order], term[key_order]
        starts = np.flatnonzero(np.concatenate([[True], (ks[1:] != ks[:-1]) | (kt[1:] != kt[:-1])]))
        st_sess, st_term = ks[starts], kt[starts]
        st_tf = np.add.reduceat(tf[key_order].astype(np.int64), starts).astype(np.float64)
    lengths = table.lengths(cur)
    idx, found = table.lookup(st_sess)
    sl = lengths[idx]
    keep = found & ~np.isnan(sl)
    st_sess, st_term, st_tf, sl = st_sess[keep], st_term[keep], st_tf[keep], sl[keep]
    w = _weights(st_term, sidf)
    contrib = weighted(w, st_tf, sl, avg_sdl, _K1, _K1P1, _B)  # sql.SESSION_BM25_SUM's terms
    sstarts = np.flatnonzero(np.concatenate([[True], st_sess[1:] != st_sess[:-1]])) if len(st_sess) else \
        np.zeros(0, np.int64)
    ss_sess = st_sess[sstarts]
    ss_score = np.add.reduceat(contrib, sstarts) if len(sstarts) else np.zeros(0)
    ss_cov = np.add.reduceat(w, sstarts) if len(sstarts) else np.zeros(0)
    # b: sessions with both a best chunk and a session score.
    common, bi, si = np.intersect1d(bs, ss_sess, assume_unique=True, return_indices=True)
    if not len(common):
        return None
    return common, ss_score[si], bscore[bi], bchunk[bi], ss_cov[si], sidf, allowed


def page_sessions(px: SearchPostings, sessions: list[int]) -> dict[int, tuple[Any, ...]]:
    """hits.assemble's SELECT_HIT_SESSIONS rows, by session: without the titles join, and each
    session read once per generation (SessionTable.page_rows)."""
    if not sessions:
        return {}
    return px.sessions.page_rows(px.cur, sessions)
