"""BM25 in SQL: per-segment postings scans, the scoring statement, and the phrase check.

A chunk's score is its BM25 over the query terms. In the strict routes (phrase, all, typo) a
session's score is its best chunk's, so a session with 600 matching chunks cannot crowd out one
with a single better match. In any-word ranking, where the words of a question are spread over a
conversation, the session is also scored as one document (its postings summed, its length the sum
of its chunks', session idf): the score is that session BM25 relative to the best session's plus
``SESSION_CHUNK_WEIGHT`` times the best chunk's relative to the best chunk's (bench/quality:
LoCoMo dev R@5 0.876 -> see bench/README.md "Ranking quality"). The statement texts live in
``query/sql.py``; this module decides which scans a query needs and fills them in.
"""

from __future__ import annotations

import math
import re
from typing import Any

import duckdb

from aivault.indexer.bm25_formula import SQL_VALUES
from aivault.indexer.duck import one
from aivault.query import sql
from aivault.query.records import Plan, Row, Snapshot
from aivault.query.request import SearchRequest
from aivault.query.weights import PHRASE_CANDIDATES, SESSION_CHUNK_WEIGHT
from aivault.query.weights import idf as _idf
from aivault.text import normalize

# Postings read per term when a term is too common to read whole: its best TERM_CAP by BM25 impact
# among its candidates -- each sorted segment's first TERM_CAP (a sorted segment keeps each term's
# highest-impact postings first) and the other segments' rows (_scans). One bound for the whole
# index rather than one per segment: a common word costs the same however many segments a burst of
# new transcripts left, and its answer does not change when a merge joins them.
TERM_CAP = 50_000
# In any-word ranking, words in more than this share of chunks are left out (see score) -- once
# they are also common in absolute terms: in a small index a word in 5% of chunks may well be
# the topic ("lock" among 200 chunks), and its postings cost nothing.
UBIQUITOUS_SHARE = 0.05
UBIQUITOUS_MIN_DF = 1000


def term_scan(name: str, state: str, hashes: list[int], columns: str, extra: str = "") -> list[str]:
    """SELECT branches reading ``hashes`` from one segment.

    A sorted segment gets one equality scan per term: zone maps then skip all but that term's
    row groups, whereas an IN list is pruned only by its min..max range, which for a few
    random hashes spans nearly the whole segment. An unsorted segment is scanned once.
    """
    if not hashes:
        return []
    if state == "sorted":
        return [sql.TERM_EQ.format(columns=columns, segment=name, term=h, extra=extra) for h in hashes]
    lst = ", ".join(str(h) for h in hashes)
    return [sql.TERM_IN.format(columns=columns, segment=name, terms=lst, extra=extra)]


def filter_clause(req: SearchRequest) -> tuple[str, list[Any]]:
    """A WHERE fragment over ``sessions s`` for the request's filters, with its parameters."""
    f = req.filters
    clauses: list[str] = []
    args: list[Any] = []
    if f.agents:
        clauses.append(sql.FILTER_AGENTS.format(marks=", ".join("?" for _ in f.agents)))
        args += list(f.agents)
    if f.scope_paths:
        ors = []
        for p in f.scope_paths:
            if p == "/":
                ors.append(sql.FILTER_ANY_PATH)
            else:
                ors.append(sql.FILTER_PATH)
                args += [p, p + "/"]
        clauses.append(sql.FILTER_PATHS.format(alternatives=" OR ".join(ors)))
    if f.since_ms is not None:
        clauses.append(sql.FILTER_SINCE)
        args.append(f.since_ms)
    if f.branches:
        clauses.append(sql.FILTER_BRANCHES.format(marks=", ".join("?" for _ in f.branches)))
        args += list(f.branches)
    return (" AND ".join(clauses) if clauses else sql.NO_FILTER), args


def score(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
          hashes: dict[str, int], df: dict[int, int], filt_sql: str, filt_args: list[Any], offset: int,
          count: int, *, require_all: bool, phrase: str | None = None,
          memo: dict[str, Any] | None = None, sdf: dict[int, int] | None = None) -> list[Row]:
    """One page of sessions ranked by BM25 over ``hashes`` (all of them in one chunk when
    ``require_all``; the words in order, whole, when ``phrase`` is a pattern)."""
    key = (frozenset(hashes.values()), req.scope, offset, count)
    if memo is not None and phrase is None and require_all and memo.get("key") == key:
        # The phrase route's statement already ranked this page for the all-terms route.
        rows: list[Row] = memo["all_rows"]
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
    px = snap.postings
    if not require_all and phrase is None and sdf is not None:
        if px is not None:
            from aivault.query import fastrank

            return fastrank.score_sessions(px, req, snap, plan, list(hashes.values()), df, sdf, filt_sql,
                                           filt_args, offset, count, cap=TERM_CAP)
        return _score_sessions(cur, req, snap, plan, list(hashes.values()), df, sdf, filt_sql, filt_args, offset,
                               count)
    if px is not None:
        from aivault.query import fastrank

        page, page_updated, top = fastrank.score(px, req, snap, plan, list(hashes.values()), df, filt_sql,
                                                 filt_args, offset, count, require_all=require_all,
                                                 phrase=phrase is not None, cap=TERM_CAP)
    else:
        page, page_updated, top = _score_sql(cur, req, snap, plan, hashes, df, filt_sql, filt_args, offset, count,
                                             require_all=require_all, phrase=phrase is not None)
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
    matched = phrase_matches(cur, plan, top, phrase, px)
    return rank_chunks(cur, req, plan, [c for c in top if c[0] in matched], offset, count, px)


def phrase_matches(cur: duckdb.DuckDBPyConnection, plan: Plan, top: list[tuple[int, int, float]], phrase: str,
                   postings: Any = None) -> set[int]:
    """The chunks of ``top`` (chunk, sess, score) whose text holds the phrase ``phrase`` (a pattern)."""
    rx = re.compile(phrase, re.IGNORECASE)
    # Read as evidence rows: the page's evidence chunks are mostly among these (hits.assemble).
    rows_read = evidence_rows(cur, postings, [c[0] for c in top])
    plan.evidence.update((int(r[0]), r) for r in rows_read)
    return {int(r[0]) for r in rows_read if rx.search(normalize(r[3]))}


def phrase_candidates(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
                      hashes: dict[str, int], df: dict[int, int], filt_sql: str,
                      filt_args: list[Any]) -> list[tuple[int, int, float]]:
    """The phrase route's candidates as ``score`` reads them: the best PHRASE_CANDIDATES + 1 chunks
    (chunk, sess, score) holding all of ``hashes``, best first (ties: the lower chunk id)."""
    if snap.postings is not None:
        from aivault.query import fastrank

        _, _, top = fastrank.score(snap.postings, req, snap, plan, list(hashes.values()), df, filt_sql, filt_args,
                                   0, 0, require_all=True, phrase=True, cap=TERM_CAP)
    else:
        _, _, top = _score_sql(cur, req, snap, plan, hashes, df, filt_sql, filt_args, 0, 0, require_all=True,
                               phrase=True)
    top.sort(key=lambda c: (-c[2], c[0]))
    return top


def session_maxima(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
                   hashes: list[int], df: dict[int, int], sdf: dict[int, int], filt_sql: str,
                   filt_args: list[Any]) -> tuple[float, float] | None:
    """Any-word ranking's best session BM25 and best chunk BM25 over ``hashes`` (the terms left after the
    ubiquitous cut), which the page's scores are relative to; None when no session matches."""
    if snap.postings is not None:
        from aivault.query import fastrank

        return fastrank.session_maxima(snap.postings, req, snap, plan, hashes, df, sdf, filt_sql, filt_args,
                                       cap=TERM_CAP)
    n_sess = max(session_count(cur, snap), 1)
    n = max(snap.n_chunks, 1)
    avg_sdl = max(snap.avgdl * n / n_sess, 1.0)
    parts, args, capped = _postings(req, snap, hashes, df, filt_sql, filt_args)
    if capped:
        plan.capped = True
    statement = sql.SESSION_MAXIMA.format(
        postings=" UNION ALL ".join(parts), idf_rows=_idf2_rows(hashes, n, n_sess, df, sdf),
        bm25=sql.BM25_SUM.format(**SQL_VALUES, avgdl=snap.avgdl),
        session_bm25=sql.SESSION_BM25_SUM.format(**SQL_VALUES, avgdl=avg_sdl))
    row = one(cur, statement, args)
    if row is None or row[0] is None or row[1] is None:
        return None
    return float(row[0]), float(row[1])


def session_count(cur: duckdb.DuckDBPyConnection, snap: Snapshot) -> int:
    """The sessions any-word ranking's session idf is taken over: the snapshot's count when given (a merged
    search), else this index's sessions (the generation's session table on the daemon's fast path)."""
    if snap.n_sessions is not None:
        return snap.n_sessions
    if snap.postings is not None:
        n: int = snap.postings.sessions.count
        return n
    row = one(cur, sql.SELECT_SESSION_COUNT)
    return int(row[0]) if row else 0


def _idf2_rows(hashes: list[int], n: int, n_sess: int, df: dict[int, int], sdf: dict[int, int]) -> str:
    """IDF2_ROW of each term: its chunk idf and its session idf."""
    return ", ".join(sql.IDF2_ROW.format(term=h, idf=repr(_idf(n, df.get(h, 0))),
                                         sidf=repr(_idf(n_sess, min(sdf.get(h, 0), n_sess)))) for h in hashes)


def evidence_rows(cur: duckdb.DuckDBPyConnection, postings: Any, chunks: list[int]) -> list[Any]:
    """SELECT_EVIDENCE's rows (chunk, role, ts, text) of those of ``chunks`` that exist: from the daemon's
    text segments where it has them (query/fastrank.py SearchPostings.evidence), else from DuckDB."""
    if postings is not None:
        evidence: list[Any] = postings.evidence(chunks)
        return evidence
    return sql.select_evidence(cur, chunks)


def _score_sql(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
               hashes: dict[str, int], df: dict[int, int], filt_sql: str, filt_args: list[Any], offset: int,
               count: int, *, require_all: bool,
               phrase: bool) -> tuple[list[Row], dict[int, int], list[tuple[int, int, float]]]:
    """The scoring statement's page, its update times and (with ``phrase``) the phrase candidates."""
    statement, all_args, capped = _statement(req, snap, list(hashes.values()), df, filt_sql, filt_args, offset,
                                             count, require_all=require_all, phrase=phrase)
    if capped:
        plan.capped = True
    page: list[Row] = []
    page_updated: dict[int, int] = {}
    top: list[tuple[int, int, float]] = []
    for part, sess, value, chunk, updated in cur.execute(statement, all_args).fetchall():
        if part == 0:
            page.append((int(sess), float(value), int(chunk)))
            page_updated[int(sess)] = int(updated) if updated is not None else -1
        else:
            top.append((int(chunk), int(sess), float(value)))
    return page, page_updated, top


def _capped_order(state: str, snap: Snapshot, filtered: bool) -> str:
    """How a capped term's postings are ordered before its LIMIT: a sorted segment holds them in
    impact order already (kept by a plain scan, but not through the semi-join a session filter
    adds, which would take an arbitrary TERM_CAP of them: its row order is asked for then)."""
    if state == "sorted":
        return sql.STORAGE_ORDER if filtered else ""
    return sql.IMPACT_ORDER.format(**SQL_VALUES, avgdl=snap.avgdl)


def _postings(req: SearchRequest, snap: Snapshot, hashes: list[int], df: dict[int, int], filt_sql: str,
              filt_args: list[Any]) -> tuple[list[str], list[Any], list[int]]:
    """The per-segment postings scans of any-word ranking, their parameters, and the capped terms."""
    conv = sql.ONLY_CONVERSATION if req.scope == "conversation" else ""
    sess_f = sql.ONLY_SESSIONS.format(filters=filt_sql) if filt_args or filt_sql != sql.NO_FILTER else ""
    capped_terms = [h for h in hashes if df.get(h, 0) > TERM_CAP]
    parts, args = _scans(snap, hashes, capped_terms, conv, sess_f, filt_args)
    return parts, args, capped_terms


def _scans(snap: Snapshot, hashes: list[int], capped_terms: list[int], conv: str, sess_f: str,
           filt_args: list[Any], restrict: str = "") -> tuple[list[str], list[Any]]:
    """The postings branches over every segment: each term whole (inside ``restrict``'s chunks when
    given), or a capped term's best TERM_CAP over all segments; and the filter parameters each
    branch binds, in order."""
    parts: list[str] = []
    args: list[Any] = []
    bound = filt_args if sess_f else []
    free = [h for h in hashes if h not in capped_terms]
    for name, state in snap.segments:
        for branch in term_scan(name, state, free, "term, chunk, sess, tf, dl", conv + sess_f + restrict):
            parts.append(branch)
            args += bound
    for h in capped_terms:
        # Each segment's best TERM_CAP (a sorted one's first, in its order); of those, the best TERM_CAP.
        branches = [sql.CAPPED_TERM.format(segment=name, term=h, extra=conv + sess_f,
                                           order=_capped_order(state, snap, bool(sess_f)), cap=TERM_CAP)
                    for name, state in snap.segments]
        args += bound * len(branches)
        if len(branches) == 1:
            parts.append(branches[0])
        else:
            parts.append(sql.CAPPED_ACROSS.format(branches=" UNION ALL ".join(branches), cap=TERM_CAP,
                                                  order=sql.IMPACT_ORDER.format(**SQL_VALUES, avgdl=snap.avgdl)))
    return parts, args


def _score_sessions(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, plan: Plan,
                    hashes: list[int], df: dict[int, int], sdf: dict[int, int], filt_sql: str,
                    filt_args: list[Any], offset: int, count: int) -> list[Row]:
    """One page of any-word ranking: session BM25 and best-chunk BM25 combined (see the module doc)."""
    n_sess = max(session_count(cur, snap), 1)
    n = max(snap.n_chunks, 1)
    avg_sdl = max(snap.avgdl * n / n_sess, 1.0)  # all live chunk tokens over the sessions
    parts, args, capped = _postings(req, snap, hashes, df, filt_sql, filt_args)
    if capped:
        plan.capped = True
    idf_rows = _idf2_rows(hashes, n, n_sess, df, sdf)
    order = sql.ORDER_BY_RELEVANCE if req.filters.sort == "relevance" else sql.ORDER_BY_NEWEST
    if plan.maxima is None:
        template, maxima = sql.SCORE_SESSIONS, {}
    else:  # a merged search's best session and chunk (query/federated.py)
        template = sql.SCORE_SESSIONS_GIVEN_MAXIMA
        maxima = {"max_session": sql.MAXIMUM.format(value=plan.maxima[0]),
                  "max_chunk": sql.MAXIMUM.format(value=plan.maxima[1])}
    statement = template.format(
        postings=" UNION ALL ".join(parts), idf_rows=idf_rows,
        bm25=sql.BM25_SUM.format(**SQL_VALUES, avgdl=snap.avgdl),
        session_bm25=sql.SESSION_BM25_SUM.format(**SQL_VALUES, avgdl=avg_sdl),
        chunk_weight=repr(SESSION_CHUNK_WEIGHT), filters=filt_sql, order=order, **maxima)
    total = sum(_idf(n_sess, min(sdf.get(h, 0), n_sess)) for h in hashes) or 1.0
    page: list[Row] = []
    for _, sess, value, chunk, updated, srank, crank, covered in cur.execute(
            statement, [*args, *filt_args, count, offset]).fetchall():
        page.append((int(sess), float(value), int(chunk)))
        plan.updated[int(sess)] = int(updated) if updated is not None else -1
        plan.ranks[int(sess)] = (int(srank), int(crank))
        plan.coverage[int(sess)] = min(float(covered) / total, 1.0)
    return page


def _statement(req: SearchRequest, snap: Snapshot, hashes: list[int], df: dict[int, int], filt_sql: str,
               filt_args: list[Any], offset: int, count: int, *, require_all: bool,
               phrase: bool) -> tuple[str, list[Any], bool]:
    """The scoring statement, its parameters, and whether a term's postings were capped.

    With ``phrase``, one statement yields both the all-terms page (part 0) and the best
    PHRASE_CANDIDATES chunks holding all terms (part 1): if the phrase is found in none of them,
    the all-terms route needs no second pass over the postings.
    """
    n = max(snap.n_chunks, 1)
    conv = sql.ONLY_CONVERSATION if req.scope == "conversation" else ""
    sess_f = sql.ONLY_SESSIONS.format(filters=filt_sql) if filt_args or filt_sql != sql.NO_FILTER else ""
    by_rarity = sorted(hashes, key=lambda h: df.get(h, 0))
    driver = by_rarity[0]
    restrict = ""
    capped_terms = [h for h in by_rarity if df.get(h, 0) > TERM_CAP]
    if require_all and len(hashes) > 1 and df.get(driver, 0) <= TERM_CAP:
        # The rarest term bounds the candidates exactly; other terms only need checking there.
        restrict = sql.ONLY_DRIVER_CHUNKS
        capped_terms = []
    parts, args = _scans(snap, hashes, capped_terms, conv, sess_f, filt_args, restrict)
    idf_rows = ", ".join(
        sql.IDF_ROW.format(term=h, idf=repr(math.log(1 + (n - df.get(h, 0) + 0.5) / (df.get(h, 0) + 0.5))))
        for h in hashes)
    drv = ""
    drv_args: list[Any] = []
    if restrict:
        drv_parts = [b for name, state in snap.segments for b in term_scan(name, state, [driver], "chunk",
                                                                           conv + sess_f)]
        drv = sql.DRIVER_CTE.format(scans=" UNION ALL ".join(drv_parts))
        drv_args = [a for _ in snap.segments for a in (filt_args if sess_f else [])]
    having = sql.HAVING_ALL_TERMS.format(n=len(hashes)) if require_all and len(hashes) > 1 else ""
    order = sql.ORDER_BY_RELEVANCE if req.filters.sort == "relevance" else sql.ORDER_BY_NEWEST
    bm25 = sql.BM25_SUM.format(**SQL_VALUES, avgdl=snap.avgdl)
    page_sql = sql.SCORE_PAGE.format(filters=filt_sql, order=order)
    if phrase:
        page_sql = sql.BEFORE_UNION.format(statement=page_sql)
    statement = sql.SCORE.format(
        driver=drv, postings=" UNION ALL ".join(parts), idf_rows=idf_rows,
        materialized="MATERIALIZED " if phrase else "", bm25=bm25, having=having, page=page_sql,
        phrase=sql.PHRASE_TOP.format(limit=PHRASE_CANDIDATES + 1) if phrase else "")
    return statement, [*drv_args, *args, *filt_args, count, offset], bool(capped_terms)


def rank_chunks(cur: duckdb.DuckDBPyConnection, req: SearchRequest, plan: Plan, cands: list[tuple[int, int, float]],
                offset: int, count: int, snap_postings: Any = None) -> list[Row]:
    """Sessions ranked by their best chunk among ``cands`` (chunk, sess, score; best first)."""
    best: dict[int, tuple[float, int]] = {}
    for chunk, sess, value in cands:
        old = best.get(sess)
        if old is None or (value, -chunk) > (old[0], -old[1]):
            best[sess] = (value, chunk)
    if not best:
        return []
    if snap_postings is not None:  # the daemon's sessions of this generation (query/fastrank.py)
        updated = snap_postings.sessions.updated_of(list(best))
    else:
        updated = {int(s): (u if u is not None else -1) for s, u in cur.execute(
            sql.SELECT_UPDATED.format(sessions=", ".join(map(str, best)))).fetchall()}
    live = [s for s in best if s in updated]  # a session deleted since its postings were written
    if req.filters.sort == "relevance":
        live.sort(key=lambda s: (-best[s][0], -updated[s], s))
    else:
        live.sort(key=lambda s: (-updated[s], -best[s][0], s))
    plan.updated.update(updated)
    return [(s, best[s][0], best[s][1]) for s in live[offset : offset + count]]
