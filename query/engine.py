"""The search engine: plan a route, score chunks with BM25 in SQL, rank sessions, page them.

Ranking: each chunk gets a BM25 score; a session's score is its best chunk's, so a session
with 600 matching chunks cannot crowd out one with a single better match. Ties break by
``updatedAt`` (newer first) and then by the internal session id, so paging is stable.

Every page is assembled inside one read transaction (one snapshot) and checked against the
committed generation afterwards: if a write landed meanwhile, the page answers
``stale-cursor`` instead of mixing two states of the index (SPEC §3).
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from aivault.errors import MalformedCursor
from aivault.indexer.segments import K1, B, SegmentLock
from aivault.protocol import Role
from aivault.query.cursor import Position, mint, open_cursor, query_key
from aivault.query.hybrid import (
    CUT_REPORTED,
    HYBRID_CANDIDATES,
    SIMILARITY_FLOOR,
    VECTOR_CANDIDATES,
    Fused,
    VectorSource,
    fuse,
    prefers_semantic,
    trace_entry,
    vector_sessions,
)
from aivault.query.request import SearchRequest
from aivault.query.snippets import make_snippet
from aivault.text import FUNCTION_WORDS, VOCAB_MAX_CHARS, iter_tokens, normalize, query_terms, term_hash

# Postings read per term when a term is too common to read whole; the sorted segments keep
# each term's highest-impact postings first, so these are its best candidates.
TERM_CAP = 50_000
# In any-word ranking, words in more than this share of chunks are left out (see _score) -- once
# they are also common in absolute terms: in a small index a word in 5% of chunks may well be
# the topic ("lock" among 200 chunks), and its postings cost nothing.
UBIQUITOUS_SHARE = 0.05
UBIQUITOUS_MIN_DF = 1000
# Chunks (best BM25 first) whose text is checked for a phrase; more candidates are reported as
# truncated.candidates.
PHRASE_CANDIDATES = 100
# Typo repair is tried for queries of at most this many terms.
TYPO_MAX_TERMS = 3
_NO_IDS = np.zeros(0, np.int64)
_NO_SIMS = np.zeros(0, np.float32)


@dataclass(slots=True)
class Plan:
    route: str
    terms: list[str]
    capped: bool = False
    repaired: dict[str, str] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    # updatedAt (-1 when unknown) of the ranked sessions, read with them (fusion breaks ties by it)
    updated: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    identity: str
    generation: int
    n_chunks: int
    avgdl: float
    segments: list[tuple[str, str]]  # (name, state)


class Engine:
    """Answers searches from one DuckDB database (a writer's connection or a read-only one)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, key: bytes, *, lock: SegmentLock | None = None,
                 committed_generation: Callable[[], int | None] | None = None,
                 vectors: VectorSource | None = None) -> None:
        self._con = con
        self._key = key
        self.vectors = vectors
        self._lock = lock
        self._committed = committed_generation
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._cursors_lock = threading.Lock()
        # The query's embedding and nearest-neighbour search run here while the lexical ranking
        # runs in DuckDB: both release the GIL, so on two cores they overlap.
        self._vector_pool = ThreadPoolExecutor(1, thread_name_prefix="query-vectors") \
            if vectors is not None else None
        # Vector neighbours below this cosine are dropped (query/hybrid.py); bench/quality/floor.py
        # sweeps it to measure the constant, nothing else changes it.
        self.similarity_floor = SIMILARITY_FLOOR
        # Called after a page is assembled and before the generation fence is checked; tests use
        # it to land a real write in exactly that window.
        self.assembly_hook: Callable[[], None] | None = None

    def _cur(self) -> duckdb.DuckDBPyConnection:
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cur", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cur = cur
            with self._cursors_lock:
                self._cursors.append(cur)
        return cur

    def close(self) -> None:
        if self._vector_pool is not None:
            self._vector_pool.shutdown(wait=True)
        with self._cursors_lock:
            for cur in self._cursors:
                with contextlib.suppress(duckdb.Error):
                    cur.close()
            self._cursors.clear()

    @contextmanager
    def _read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock.shared() if self._lock else nullcontext():
            cur = self._cur()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            finally:
                cur.execute("ROLLBACK")

    def _snapshot(self, cur: duckdb.DuckDBPyConnection) -> Snapshot:
        row = cur.execute("SELECT identity, generation, n_chunks, sum_dl FROM meta").fetchone()
        assert row is not None
        n = int(row[2])
        segs = [(str(a), str(b)) for a, b in cur.execute("SELECT name, state FROM segments").fetchall()]
        return Snapshot(str(row[0]), int(row[1]), n, (int(row[3]) / n) if n else 1.0, segs)

    # --- search -------------------------------------------------------------------------------
    def semantic_ready(self) -> bool:
        return self.vectors is not None and self.vectors.ready()

    def search(self, req: SearchRequest, *, freshness_truncated: bool = False,
               force_route: str | None = None) -> dict[str, Any]:
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
                return {"kind": "malformed-cursor"}
            if pos.query_key != qk:
                return {"kind": "malformed-cursor"}
        if self.vectors is not None:
            self.vectors.note_search()  # background embedding leaves the other core to searches
            try:
                return self._search(req, pos, qk, freshness_truncated, force_route)
            finally:
                self.vectors.note_search()
        return self._search(req, pos, qk, freshness_truncated, force_route)

    def _search(self, req: SearchRequest, pos: Position | None, qk: bytes, freshness_truncated: bool,
                force_route: str | None) -> dict[str, Any]:
        # Decided before the clock starts: in a read-only process the first semantic query loads
        # the vector sidecar and the model, which is set-up, not search time (durationMs).
        family = force_route or ("hybrid" if prefers_semantic(req.text) and query_terms(req.text)
                                 and self.semantic_ready() else "lexical")
        with self._read() as cur:
            t0 = time.perf_counter()
            snap = self._snapshot(cur)
            if pos is not None and (pos.identity != snap.identity or pos.generation != snap.generation):
                return {"kind": "stale-cursor", "generation": snap.generation, "expectedGeneration": pos.generation}
            offset = pos.offset if pos else 0
            fused: list[Fused] = []
            if family == "lexical":
                plan, rows = self._rank(cur, req, snap, offset, req.limit + 1)
            else:
                plan, fused = self._semantic(cur, req, snap, family)
                rows = [(f.sess, f.score, f.chunk) for f in fused[offset : offset + req.limit + 1]]
            has_more = len(rows) > req.limit
            rows = rows[: req.limit]
            hits, cut = self._hits(cur, req, plan, rows)
            trace = self._trace(cur, plan, rows, fused, offset) if req.debug else None
            duration = (time.perf_counter() - t0) * 1000
            if self.assembly_hook is not None:
                self.assembly_hook()
        if self._committed is not None:
            now = self._committed()
            if now is not None and now != snap.generation:
                return {"kind": "stale-cursor", "generation": now, "expectedGeneration": snap.generation}
        cursor = mint(self._key, Position(qk, snap.generation, snap.identity, offset + len(rows))) if has_more else None
        result: dict[str, Any] = {
            "kind": "results",
            "hits": hits,
            "page": {"cursor": cursor, "hasMore": has_more},
            "generation": snap.generation,
            "truncated": {"candidates": plan.capped, "snippets": cut, "query": req.query_truncated,
                          "freshness": freshness_truncated},
            "durationMs": round(duration, 3),
        }
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
        assert self.vectors is not None and self._vector_pool is not None
        pending = self._vector_pool.submit(self.vectors.search, req.text, VECTOR_CANDIDATES)
        if family == "hybrid":
            lex_plan, lexical = self._rank(cur, req, snap, 0, HYBRID_CANDIDATES)
            lexical_route, lex_updated = lex_plan.route, lex_plan.updated
            plan = Plan("hybrid", lex_plan.terms, capped=lex_plan.capped, repaired=lex_plan.repaired,
                        tried=[*lex_plan.tried, "hybrid"])
        else:
            lexical = []
            plan = Plan("vector", query_terms(req.text), tried=["vector"])
        found = pending.result()
        ids, sims = found if found else (_NO_IDS, _NO_SIMS)
        filt_sql, filt_args = _filters(req)
        vector = vector_sessions(cur, ids, sims, filt_sql, filt_args, req.scope == "conversation")
        updated = {**lex_updated, **{n.sess: n.updated for n in vector}}
        return plan, fuse(lexical, lexical_route, [(n.sess, n.chunk, n.similarity) for n in vector], updated,
                          req.filters.sort, floor=self.similarity_floor)

    def _trace(self, cur: duckdb.DuckDBPyConnection, plan: Plan, rows: list[tuple[int, float, int | None]],
               fused: list[Fused], offset: int) -> dict[str, Any]:
        """Per-hit ranks in each route and the fused score; and why the next candidates were cut."""
        by_sess = {f.sess: f for f in fused}
        page = [r[0] for r in rows]
        after = fused[offset + len(rows) : offset + len(rows) + CUT_REPORTED] if fused else []
        ids = dict(cur.execute(f"SELECT sess, session_id FROM sessions WHERE sess IN "
                               f"({', '.join(map(str, page + [f.sess for f in after])) or 'NULL'})").fetchall())
        if not fused:  # a lexical route: the rank is the position in the lexical order
            trace = [{"sessionId": ids.get(s), "matchedBy": "lexical", "lexicalRank": offset + i + 1,
                      "vectorRank": None, "score": score} for i, (s, score, _) in enumerate(rows)]
            return {"trace": trace}
        trace = [trace_entry(str(ids.get(s)), by_sess[s]) for s in page]
        cut = [{**trace_entry(str(ids.get(f.sess)), f), "reason": "ranked below this page"} for f in after]
        return {"trace": trace, "cut": cut}

    # --- planning and ranking -------------------------------------------------------------------
    def _rank(self, cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, offset: int,
              count: int) -> tuple[Plan, list[tuple[int, float, int | None]]]:
        terms = query_terms(req.text)
        filt_sql, filt_args = _filters(req)
        if not terms:
            if not req.operators:
                return Plan("empty", []), []
            plan = Plan("operators", [])
            plan.tried.append("operators")
            sql = (f"SELECT s.sess, 0.0, NULL FROM sessions s WHERE {filt_sql} "
                   "ORDER BY s.updated_at DESC NULLS LAST, s.sess LIMIT ? OFFSET ?")
            return plan, [(int(a), float(b), None) for a, b, _ in
                          cur.execute(sql, [*filt_args, count, offset]).fetchall()]
        hashes = {t: term_hash(t) for t in terms}
        df = self._df(cur, snap, list(hashes.values()))
        tried: list[str] = []
        phrase = phrase_pattern(req.text) if len(terms) > 1 else None
        routes = ["phrase", "all", "typo", "any"] if phrase else ["all", "typo", "any"]
        repaired: dict[str, str] = {}
        memo: dict[str, Any] = {}  # the phrase route's all-terms candidates, reused by "all"
        for route in routes:
            if route == "any" and len(terms) == 1 and not repaired:
                break  # the same as "all" for a single known term
            if route == "typo":
                # In a long description an unknown word is more likely absent than misspelled, and
                # scanning the vocabulary costs: repair only short queries.
                missing = [t for t in terms if df.get(hashes[t], 0) == 0] if len(terms) <= TYPO_MAX_TERMS else []
                repaired = self._repair(cur, snap, missing) if missing else {}
                if not repaired:
                    continue
                for new in repaired.values():
                    hashes[new] = term_hash(new)
                df.update(self._df(cur, snap, [hashes[n] for n in repaired.values()]))
            tried.append(route)
            use = [repaired.get(t, t) for t in terms] if route in ("typo", "any") else terms
            if route == "any":
                # Any-word matching on "the" or "my" alone is noise: keep the words that say something.
                use = [t for t in use if t not in FUNCTION_WORDS] or use
            present = {t: hashes[t] for t in dict.fromkeys(use) if df.get(hashes[t], 0) > 0}
            require_all = route in ("phrase", "all", "typo")
            if not present or (require_all and len(present) < len(dict.fromkeys(use))):
                continue
            plan = Plan(route, list(present), tried=list(tried), repaired=dict(repaired))
            args = (cur, req, snap, plan, present, df, filt_sql, filt_args)
            pat = phrase if route == "phrase" else None
            rows = self._score(*args, offset, count, require_all=require_all, phrase=pat, memo=memo)
            # A route answers when it has any match at all, whatever page was asked for.
            if rows or (offset > 0 and self._score(*args, 0, 1, require_all=require_all, phrase=pat, memo=memo)):
                return plan, rows
        return Plan(tried[-1] if tried else "all", terms, tried=tried, repaired=repaired), []

    def _repair(self, cur: duckdb.DuckDBPyConnection, snap: Snapshot, missing: list[str]) -> dict[str, str]:
        """Closest indexed words to query words the index has never seen (typo repair)."""
        out: dict[str, str] = {}
        for word in missing:
            if len(word) < 4 or len(word) > VOCAB_MAX_CHARS or not word.isalpha():
                continue
            dist = 1 if len(word) <= 5 else 2
            rows = cur.execute(
                """SELECT term, min(damerau_levenshtein(term, ?)) AS d FROM vocab_log
                   WHERE length(term) BETWEEN ? AND ? AND (term[1] = ? OR term[2] = ?)
                   GROUP BY term HAVING d <= ? ORDER BY d, term LIMIT 20""",
                [word, len(word) - dist, len(word) + dist, word[0], word[1], dist]).fetchall()
            if not rows:
                continue
            best_d = rows[0][1]
            cands = [str(t) for t, d in rows if d == best_d]
            dfs = self._df(cur, snap, [term_hash(c) for c in cands])
            ranked = sorted(cands, key=lambda c: (-dfs.get(term_hash(c), 0), c))
            if dfs.get(term_hash(ranked[0]), 0) > 0:
                out[word] = ranked[0]
        return out

    def _df(self, cur: duckdb.DuckDBPyConnection, snap: Snapshot, hashes: list[int]) -> dict[int, int]:
        branches = [_term_scan(name, state, hashes, "term") for name, state in snap.segments]
        union = " UNION ALL ".join(b for group in branches for b in group)
        rows = cur.execute(f"SELECT term, count(*) FROM ({union}) GROUP BY term").fetchall()
        return {int(t): int(n) for t, n in rows}

    def _score(self, cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
               hashes: dict[str, int], df: dict[int, int], filt_sql: str, filt_args: list[Any], offset: int,
               count: int, *, require_all: bool, phrase: str | None = None,
               memo: dict[str, Any] | None = None) -> list[tuple[int, float, int | None]]:
        key = (frozenset(hashes.values()), req.scope, offset, count)
        if memo is not None and phrase is None and require_all and memo.get("key") == key:
            # The phrase route's statement already ranked this page for the all-terms route.
            rows: list[tuple[int, float, int | None]] = memo["all_rows"]
            plan.updated.update(memo["all_updated"])
            return rows
        n = max(snap.n_chunks, 1)
        if not require_all and len(hashes) > 1:
            # Any-word ranking: a word in a large share of all chunks (low idf) moves little score
            # but costs the most postings; leave it out when the query has more telling words.
            limit = max(UBIQUITOUS_SHARE * n, UBIQUITOUS_MIN_DF)
            telling = {t: h for t, h in hashes.items() if df.get(h, 0) <= limit}
            if telling:
                hashes = telling
                plan.terms = list(telling)  # snippets mark the words that ranked, not the dropped ones
        conv = " AND conv" if req.scope == "conversation" else ""
        sess_f = f" AND sess IN (SELECT s.sess FROM sessions s WHERE {filt_sql})" if filt_args or filt_sql != "TRUE" \
            else ""
        by_rarity = sorted(hashes.values(), key=lambda h: df.get(h, 0))
        driver = by_rarity[0]
        restrict = ""
        capped_terms = [h for h in by_rarity if df.get(h, 0) > TERM_CAP]
        if require_all and len(hashes) > 1 and df.get(driver, 0) <= TERM_CAP:
            # The rarest term bounds the candidates exactly; other terms only need checking there.
            restrict = " AND chunk IN (SELECT chunk FROM drv)"
            capped_terms = []
        parts: list[str] = []
        args: list[Any] = []
        for name, state in snap.segments:
            free = [h for h in hashes.values() if h not in capped_terms]
            for branch in _term_scan(name, state, free, "term, chunk, sess, tf, dl", conv + sess_f + restrict):
                parts.append(branch)
                args += filt_args if sess_f else []
            for h in capped_terms:
                order = "" if state == "sorted" else \
                    f" ORDER BY tf::DOUBLE / (tf + {K1} * (1 - {B} + {B} * dl / {snap.avgdl})) DESC, chunk"
                parts.append(f"(SELECT term, chunk, sess, tf, dl FROM {name} WHERE term = {h}{conv}{sess_f}"
                             f"{order} LIMIT {TERM_CAP})")
                args += filt_args if sess_f else []
        if capped_terms:
            plan.capped = True
        idf_rows = ", ".join(
            f"({h}::BIGINT, {math.log(1 + (n - df.get(h, 0) + 0.5) / (df.get(h, 0) + 0.5))!r}::DOUBLE)"
            for h in hashes.values())
        drv = ""
        drv_args: list[Any] = []
        if restrict:
            drv_parts = [b for name, state in snap.segments for b in
                         _term_scan(name, state, [driver], "chunk", conv + sess_f)]
            drv = "drv AS (" + " UNION ALL ".join(drv_parts) + "), "
            drv_args = [a for _ in snap.segments for a in (filt_args if sess_f else [])]
        having = f" HAVING count(*) = {len(hashes)}" if require_all and len(hashes) > 1 else ""
        order = "b.score DESC, s.updated_at DESC NULLS LAST, b.sess" if req.filters.sort == "relevance" \
            else "s.updated_at DESC NULLS LAST, b.score DESC, b.sess"
        bm25 = (f"round(sum(i.idf * p.tf * {K1 + 1}::DOUBLE / (p.tf + {K1}::DOUBLE"
                f" * (1 - {B}::DOUBLE + {B}::DOUBLE * p.dl / {snap.avgdl!r}::DOUBLE))), 6)")
        # With a phrase, one statement yields both the all-terms page (part 0) and the best
        # PHRASE_CANDIDATES chunks holding all terms (part 1): if the phrase is found in none of
        # them, the all-terms route needs no second pass over the postings.
        phrase_part = f"""
            UNION ALL (SELECT 1, sess, score, chunk, NULL FROM w ORDER BY score DESC, chunk
                       LIMIT {PHRASE_CANDIDATES + 1})""" if phrase is not None else ""
        page_sql = f"SELECT 0, b.sess, b.score, b.chunk, s.updated_at FROM b JOIN sessions s USING (sess) " \
                   f"WHERE {filt_sql} " \
                   f"ORDER BY {order} LIMIT ? OFFSET ?"
        if phrase is not None:
            # DuckDB answers a lone parenthesized SELECT with parameters with no rows; only
            # parenthesize when a UNION follows.
            page_sql = f"({page_sql})"
        sql = f"""
            WITH {drv}p AS ({" UNION ALL ".join(parts)}),
            i(term, idf) AS (VALUES {idf_rows}),
            w AS {"MATERIALIZED " if phrase is not None else ""}(
                SELECT p.chunk, any_value(p.sess) AS sess, {bm25} AS score
                FROM p JOIN i USING (term) GROUP BY p.chunk{having}),
            b AS (SELECT sess, max(score) AS score, first(chunk ORDER BY score DESC, chunk) AS chunk
                  FROM w GROUP BY sess)
            {page_sql}{phrase_part}"""
        all_args = [*drv_args, *args, *filt_args, count, offset]
        page: list[tuple[int, float, int | None]] = []
        page_updated: dict[int, int] = {}
        top: list[tuple[int, int, float]] = []
        for part, sess, score, chunk, updated in cur.execute(sql, all_args).fetchall():
            if part == 0:
                page.append((int(sess), float(score), int(chunk)))
                page_updated[int(sess)] = int(updated) if updated is not None else -1
            else:
                top.append((int(chunk), int(sess), float(score)))
        if phrase is None:
            plan.updated.update(page_updated)
            return page
        if memo is not None:
            memo.update(key=key, all_rows=page, all_updated=page_updated)
        top.sort(key=lambda c: (-c[2], c[0]))
        if len(top) > PHRASE_CANDIDATES:
            plan.capped = True
            top = top[:PHRASE_CANDIDATES]
        if not top:
            return []
        rx = re.compile(phrase, re.IGNORECASE)
        matched = {int(c) for c, text in cur.execute(
            f"SELECT chunk, text FROM chunks WHERE chunk IN ({', '.join(str(c[0]) for c in top)})").fetchall()
            if rx.search(normalize(text))}
        return self._rank_chunks(cur, req, plan, [c for c in top if c[0] in matched], offset, count)

    def _rank_chunks(self, cur: duckdb.DuckDBPyConnection, req: SearchRequest, plan: Plan,
                     cands: list[tuple[int, int, float]],
                     offset: int, count: int) -> list[tuple[int, float, int | None]]:
        """Sessions ranked by their best chunk among ``cands`` (chunk, sess, score; best first)."""
        best: dict[int, tuple[float, int]] = {}
        for chunk, sess, score in cands:
            old = best.get(sess)
            if old is None or (score, -chunk) > (old[0], -old[1]):
                best[sess] = (score, chunk)
        if not best:
            return []
        updated = {int(s): (u if u is not None else -1) for s, u in cur.execute(
            f"SELECT sess, updated_at FROM sessions WHERE sess IN ({', '.join(map(str, best))})").fetchall()}
        live = [s for s in best if s in updated]  # a session deleted since its postings were written
        if req.filters.sort == "relevance":
            live.sort(key=lambda s: (-best[s][0], -updated[s], s))
        else:
            live.sort(key=lambda s: (-updated[s], -best[s][0], s))
        plan.updated.update(updated)
        return [(s, best[s][0], best[s][1]) for s in live[offset : offset + count]]

    # --- hits -------------------------------------------------------------------------------------
    def _hits(self, cur: duckdb.DuckDBPyConnection, req: SearchRequest, plan: Plan,
              rows: list[tuple[int, float, int | None]]) -> tuple[list[dict[str, Any]], int]:
        if not rows:
            return [], 0
        sess_ids = [r[0] for r in rows]
        meta = {int(r[0]): r for r in cur.execute(
            f"""SELECT s.sess, s.agent, s.session_id, coalesce(t.title, s.title), s.cwd, s.branch, s.updated_at,
                      s.message_count, s.resume_command, s.present
               FROM sessions s LEFT JOIN titles t ON t.agent = s.agent AND t.session_id = s.session_id
               WHERE s.sess IN ({", ".join(str(int(x)) for x in sess_ids)})""").fetchall()}
        chunk_ids = [r[2] for r in rows if r[2] is not None]
        chunks = {int(r[0]): r for r in cur.execute(
            f"SELECT chunk, role, ts, text FROM chunks WHERE chunk IN ({', '.join(str(int(x)) for x in chunk_ids)})"
        ).fetchall()} if chunk_ids else {}
        terms = set(plan.terms)
        hits: list[dict[str, Any]] = []
        cut = 0
        for sess, score, chunk in rows:
            m = meta.get(sess)
            if m is None:
                continue
            evidence: dict[str, Any] | None = None
            c = chunks.get(chunk) if chunk is not None else None
            if c is not None:
                snip = make_snippet(c[3], terms)
                cut += 1 if snip.cut else 0
                evidence = {"snippet": snip.text, "role": Role(int(c[1])).wire, "timestamp": c[2]}
            hits.append({
                "agent": m[1],
                "sessionId": m[2],
                "title": m[3],
                "cwd": m[4],
                "branch": m[5],
                "updatedAt": m[6],
                "messageCount": int(m[7]),
                "score": score,
                "source": "present" if m[9] else "unverifiable",
                "evidence": evidence,
                "resumeCommand": m[8],
            })
        return hits, cut


def phrase_pattern(text: str) -> str | None:
    """A pattern matching the query's words in order, whole, separated only by non-word characters."""
    words = [m.group(0) for m in iter_tokens(normalize(text))]
    if len(words) < 2:
        return None
    return r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)"


def _term_scan(name: str, state: str, hashes: list[int], columns: str, extra: str = "") -> list[str]:
    """SELECT branches reading ``hashes`` from one segment.

    A sorted segment gets one equality scan per term: zone maps then skip all but that term's
    row groups, whereas an IN list is pruned only by its min..max range, which for a few
    random hashes spans nearly the whole segment. An unsorted segment is scanned once.
    """
    if not hashes:
        return []
    if state == "sorted":
        return [f"SELECT {columns} FROM {name} WHERE term = {h}{extra}" for h in hashes]
    lst = ", ".join(str(h) for h in hashes)
    return [f"SELECT {columns} FROM {name} WHERE term IN ({lst}){extra}"]


def _filters(req: SearchRequest) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``sessions s`` for the request's filters, with its parameters."""
    f = req.filters
    clauses: list[str] = []
    args: list[Any] = []
    if f.agents:
        clauses.append(f"s.agent IN ({', '.join('?' for _ in f.agents)})")
        args += list(f.agents)
    if f.scope_paths:
        ors = []
        for p in f.scope_paths:
            if p == "/":
                ors.append("s.cwd IS NOT NULL")
            else:
                ors.append("(s.cwd = ? OR starts_with(s.cwd, ?))")
                args += [p, p + "/"]
        clauses.append("(" + " OR ".join(ors) + ")")
    if f.since_ms is not None:
        clauses.append("s.updated_at >= ?")
        args.append(f.since_ms)
    if f.branches:
        clauses.append(f"s.branch IN ({', '.join('?' for _ in f.branches)})")
        args += list(f.branches)
    return (" AND ".join(clauses) if clauses else "TRUE"), args
