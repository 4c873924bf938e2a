"""All SQL of the read side, as named constants: searches, reading a session, status.

One of the four modules SQL is written in, by purpose (tests/unit/test_structure.py fails on a statement
anywhere else): the write side's tables and migrations are ``indexer/schema.py``, its writes
``indexer/sql_write.py``, its maintenance ``indexer/sql_maint.py``. BM25's constants and per-posting
expressions come from ``indexer/bm25_formula.py``, which the NumPy scorer (query/fastrank.py) evaluates too.

Statements assembled from parts -- one scan per segment and term, an IN list of a page's ids, a
filter clause -- are templates with ``{name}`` placeholders, filled with ``str.format``. Ids and
term hashes are written into the text rather than bound: they are integers the engine computed, and
a Python list bound as a parameter costs DuckDB an import probe per element. Only user-given values
(filters, page bounds) travel as ``?`` parameters.

The text of every statement, whitespace included, is what the engine sent when these were inline
f-strings: the assembled statements are byte-identical to the ones the benchmarks measured.
Two helpers: ``read_transaction`` (the read transaction the background reads share) and
``select_evidence`` (SELECT_EVIDENCE filled and read, for the text segments' fallback and the SQL path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from aivault.indexer.bm25_formula import IMPACT_SQL, weighted_sql

# --- the snapshot (query/engine.py) ------------------------------------------------------------
# One read transaction per page: every statement of the page sees the same committed state.
BEGIN_READ: Final = "BEGIN TRANSACTION"
# A search writes nothing; rolling back is the cheapest way to end its snapshot.
END_READ: Final = "ROLLBACK"


@contextmanager
def read_transaction(cur: Any) -> Iterator[None]:
    """BEGIN_READ ... END_READ around a background read (a search's own is query/engine.py's, which
    may begin late)."""
    cur.execute(BEGIN_READ)
    try:
        yield
    finally:
        cur.execute(END_READ)

# The fence (identity, generation), BM25's collection statistics, and the tokenizer the terms were
# cut with, in one row read inside the page's snapshot.
SELECT_SNAPSHOT: Final = "SELECT identity, generation, n_chunks, sum_dl, tokenizer, next_chunk FROM meta"
# The segments the page's postings scans visit, each with its creation time, which names its postings
# sidecar (query/postings.py).
SELECT_SEGMENTS_CREATED: Final = "SELECT name, state, created_at FROM segments"
# One segment's row count, numbered, for a UNION ALL over the segments that are not sorted.
COUNT_SEGMENT_AS: Final = "SELECT {seg}::INTEGER, count(*) FROM {name}"

# --- filters (query/bm25.py: filter_clause) -----------------------------------------------------
# Fragments over ``sessions s``, AND-ed; "TRUE" when the request has no filter, so every statement
# can splice the clause in unconditionally.
NO_FILTER: Final = "TRUE"
FILTER_AGENTS: Final = "s.agent IN ({marks})"
# "path:/" asks for sessions whose folder is known at all.
FILTER_ANY_PATH: Final = "s.cwd IS NOT NULL"
# The folder itself or below it: a prefix test on "dir/" so that /a/b does not match /a/bc.
FILTER_PATH: Final = "(s.cwd = ? OR starts_with(s.cwd, ?))"
FILTER_PATHS: Final = "({alternatives})"
FILTER_SINCE: Final = "s.updated_at >= ?"
FILTER_BRANCHES: Final = "s.branch IN ({marks})"

# --- the planner (query/planner.py) -------------------------------------------------------------
# Operators without words: the filtered sessions, newest first, paged.
SELECT_FILTERED_SESSIONS: Final = ("SELECT s.sess, 0.0, NULL FROM sessions s WHERE {filters} "
                                   "ORDER BY s.updated_at DESC NULLS LAST, s.sess LIMIT ? OFFSET ?")
# Document frequencies of the query's term hashes: one row per posting read by ``{scans}``
# (a UNION ALL of per-segment TERM_EQ / TERM_IN branches), counted per term.
SELECT_DF: Final = "SELECT term, count(*) FROM ({scans}) GROUP BY term"
# The same with the sessions holding each term (any-word ranking's session idf): read only when
# that route runs, the strict routes do not pay for the distinct count.
SELECT_DF_SESSIONS: Final = "SELECT term, count(*), count(DISTINCT sess) FROM ({scans}) GROUP BY term"
# Typo repair: the vocabulary's words within edit distance ``d`` of a word the index has never seen.
# Length and first-or-second-letter bounds let DuckDB skip most of the vocabulary before the
# edit distance is computed; closest first, then alphabetical, so the choice is stable.
SELECT_VOCAB_NEIGHBOURS: Final = """SELECT term, min(damerau_levenshtein(term, ?)) AS d FROM vocab_log
                   WHERE length(term) BETWEEN ? AND ? AND (term[1] = ? OR term[2] = ?)
                   GROUP BY term HAVING d <= ? ORDER BY d, term LIMIT 20"""

# --- postings scans and BM25 (query/bm25.py) ----------------------------------------------------
# A sorted segment is read with one equality scan per term: zone maps then skip every row group
# but that term's, where an IN list is pruned only by its min..max range.
TERM_EQ: Final = "SELECT {columns} FROM {segment} WHERE term = {term}{extra}"
# An unsorted (active or frozen) segment has no zone maps worth using: one scan for all terms.
TERM_IN: Final = "SELECT {columns} FROM {segment} WHERE term IN ({terms}){extra}"
# A term too common to read whole: its TERM_CAP highest-impact postings. A sorted segment holds
# them first already (no ORDER BY); an unsorted one is ordered by IMPACT_ORDER.
CAPPED_TERM: Final = ("(SELECT term, chunk, sess, tf, dl FROM {segment} WHERE term = {term}{extra}"
                      "{order} LIMIT {cap})")
# A capped term's best postings over all segments: the best of each segment's best (bm25._scans).
CAPPED_ACROSS: Final = "(SELECT term, chunk, sess, tf, dl FROM ({branches}){order} LIMIT {cap})"
# A posting's BM25 impact, the order the merge sorts segments by (indexer/sql_maint.py MERGE_SELECT).
IMPACT_ORDER: Final = " ORDER BY " + IMPACT_SQL + " DESC, chunk"
# A sorted segment's own row order (its impact order), asked for when a session filter's semi-join
# would otherwise hand a capped term's rows over in any order.
STORAGE_ORDER: Final = " ORDER BY rowid"
# Scope "conversation": postings of message text only (the segment's ``conv`` flag).
ONLY_CONVERSATION: Final = " AND conv"
# Filters applied inside every scan, so postings of filtered-out sessions are never summed.
ONLY_SESSIONS: Final = " AND sess IN (SELECT s.sess FROM sessions s WHERE {filters})"
# All-terms ranking: other terms are read only in the chunks holding the rarest (the ``drv`` CTE).
ONLY_DRIVER_CHUNKS: Final = " AND chunk IN (SELECT chunk FROM drv)"
# The chunks holding the rarest term: a UNION ALL of its per-segment scans.
DRIVER_CTE: Final = "drv AS ({scans}), "
# One term's idf, as a VALUES row: computed in Python, so the statement joins a constant table.
IDF_ROW: Final = "({term}::BIGINT, {idf}::DOUBLE)"
# All-terms ranking: a chunk counts only when every term has a posting in it.
HAVING_ALL_TERMS: Final = " HAVING count(*) = {n}"
# Ties break by updatedAt (newer first), then the internal id: pages are stable.
ORDER_BY_RELEVANCE: Final = "b.score DESC, s.updated_at DESC NULLS LAST, b.sess"
ORDER_BY_NEWEST: Final = "s.updated_at DESC NULLS LAST, b.score DESC, b.sess"
# A chunk's BM25 score (k1, b and avgdl written in); rounded so that equal sums compare equal.
BM25_SUM: Final = "round(sum(" + weighted_sql("i.idf", "p.tf", "p.dl") + "), 6)"
# Part 0 of the scoring statement: the page of sessions, each with its best chunk.
SCORE_PAGE: Final = ("SELECT 0, b.sess, b.score, b.chunk, s.updated_at FROM b JOIN sessions s USING (sess) "
                     "WHERE {filters} "
                     "ORDER BY {order} LIMIT ? OFFSET ?")
# DuckDB answers a lone parenthesized SELECT with parameters with no rows: SCORE_PAGE is
# parenthesized only when PHRASE_TOP follows it.
BEFORE_UNION: Final = "({statement})"
# Part 1, with a phrase: the best PHRASE_CANDIDATES + 1 chunks holding all terms, whose text is then
# checked for the phrase; the one past the bound says the candidates were truncated.
PHRASE_TOP: Final = """
            UNION ALL (SELECT 1, sess, score, chunk, NULL FROM w ORDER BY score DESC, chunk
                       LIMIT {limit})"""
# The scoring statement: postings ``p`` (``{postings}``: per-segment scans), idf table ``i``,
# chunk scores ``w`` (MATERIALIZED when both parts read it), each session's best chunk ``b``.
SCORE: Final = """
            WITH {driver}p AS ({postings}),
            i(term, idf) AS (VALUES {idf_rows}),
            w AS {materialized}(
                SELECT p.chunk, any_value(p.sess) AS sess, {bm25} AS score
                FROM p JOIN i USING (term) GROUP BY p.chunk{having}),
            b AS (SELECT sess, max(score) AS score, first(chunk ORDER BY score DESC, chunk) AS chunk
                  FROM w GROUP BY sess)
            {page}{phrase}"""
# Any-word ranking scores the session as one document as well (query/bm25.py): each term's
# postings summed per session (``st``), the session's length from its chunks (``sl``), BM25 over
# that (``ss``, session idf ``sidf``), and the best chunk as before (``bc``). A session's score is
# its session BM25 over the best session's plus SESSION_CHUNK_WEIGHT times its best chunk's over
# the best chunk's; the ranks by each are kept for the debug trace.
# The any-word statement's CTEs up to ``bc``, shared by SCORE_SESSIONS, SCORE_SESSIONS_GIVEN_MAXIMA and
# SESSION_MAXIMA.
_SESSIONS_WITH: Final = """
            WITH p AS ({postings}),
            i(term, idf, sidf) AS (VALUES {idf_rows}),
            w AS (
                SELECT p.chunk, any_value(p.sess) AS sess, {bm25} AS score
                FROM p JOIN i USING (term) GROUP BY p.chunk),
            st AS (SELECT term, sess, sum(tf) AS tf FROM p GROUP BY term, sess),
            sl AS (SELECT sess, sum(dl)::DOUBLE AS dl FROM chunks
                   WHERE sess IN (SELECT DISTINCT sess FROM st) GROUP BY sess),
            ss AS (SELECT st.sess, {session_bm25} AS score, sum(i.sidf) AS covered
                   FROM st JOIN i USING (term) JOIN sl USING (sess) GROUP BY st.sess),
            bc AS (SELECT sess, max(score) AS score, first(chunk ORDER BY score DESC, chunk) AS chunk
                   FROM w GROUP BY sess)"""
# The rest of the any-word statement; ``{max_session}`` and ``{max_chunk}`` are what the session and the
# chunk BM25 are taken relative to.
_SESSIONS_PAGE: Final = """,
            b AS (SELECT bc.sess, bc.chunk,
                         round(ss.score / {max_session} + {chunk_weight} * bc.score / {max_chunk}, 6)
                             AS score,
                         rank() OVER (ORDER BY ss.score DESC, bc.sess) AS srank,
                         rank() OVER (ORDER BY bc.score DESC, bc.sess) AS crank, ss.covered
                  FROM bc JOIN ss USING (sess))
            SELECT 0, b.sess, b.score, b.chunk, s.updated_at, b.srank, b.crank, b.covered
            FROM b JOIN sessions s USING (sess)
            WHERE {filters} ORDER BY {order} LIMIT ? OFFSET ?"""
# The best session and the best chunk of this index (a window over ``b``).
SCORE_SESSIONS: Final = _SESSIONS_WITH + _SESSIONS_PAGE.replace("{max_session}", "max(ss.score) OVER ()").replace(
    "{max_chunk}", "max(bc.score) OVER ()")
# A merged search over several indexes (query/federated.py): relative to the best session and chunk of
# them all, written in as DOUBLE literals (MAXIMUM).
SCORE_SESSIONS_GIVEN_MAXIMA: Final = _SESSIONS_WITH + _SESSIONS_PAGE
MAXIMUM: Final = "{value!r}::DOUBLE"
# This index's best session BM25 and best chunk BM25 of an any-word query (NULL: no session matches),
# over the sessions SCORE_SESSIONS's window takes them over.
SESSION_MAXIMA: Final = _SESSIONS_WITH + """
            SELECT max(ss.score), max(bc.score) FROM bc JOIN ss USING (sess)"""
# One term's idf per chunk and per session, as a VALUES row.
IDF2_ROW: Final = "({term}::BIGINT, {idf}::DOUBLE, {sidf}::DOUBLE)"
# Session BM25 over the summed postings: tf of the term in the session, dl the session's length.
SESSION_BM25_SUM: Final = "sum(" + weighted_sql("i.sidf", "st.tf", "sl.dl") + ")"
# The collection a session score is taken over: sessions (BM25 N) and their mean length in tokens.
SELECT_SESSION_COUNT: Final = "SELECT count(*) FROM sessions"
# updatedAt of the sessions the phrase was found in; a session missing here was deleted since.
SELECT_UPDATED: Final = "SELECT sess, updated_at FROM sessions WHERE sess IN ({sessions})"

# --- hits (query/hits.py) -----------------------------------------------------------------------
# A page's session metadata; a title from the agent's own index (``titles``) wins over the
# transcript's.
SELECT_HIT_SESSIONS: Final = (
    """SELECT s.sess, s.agent, s.session_id, coalesce(t.title, s.title), s.cwd, s.branch, s.updated_at,
                      s.message_count, s.resume_command, s.present
               FROM sessions s LEFT JOIN titles t ON t.agent = s.agent AND t.session_id = s.session_id
               WHERE s.sess IN ({sessions})""")
# The evidence chunks of a page, and the phrase candidates (whose texts are checked for the phrase
# and kept as evidence rows for the page).
SELECT_EVIDENCE: Final = "SELECT chunk, role, ts, text FROM chunks WHERE chunk IN ({chunks})"


def select_evidence(cur: Any, chunks: list[int]) -> list[Any]:
    """SELECT_EVIDENCE's rows (chunk, role, ts, text) of those of ``chunks`` that exist."""
    return list(cur.execute(SELECT_EVIDENCE.format(chunks=", ".join(str(int(c)) for c in chunks))).fetchall())


# The public ids of the sessions a debug trace names ("NULL" when there are none).
SELECT_SESSION_IDS: Final = "SELECT sess, session_id FROM sessions WHERE sess IN ({sessions})"

# --- vectors (query/hybrid.py) ------------------------------------------------------------------
# The sessions of the nearest chunks, live and passing the filters; nearest-first order is
# restored in Python from the vector ranks.
SELECT_NEIGHBOURS: Final = """SELECT c.chunk, c.sess, s.updated_at FROM chunks c JOIN sessions s USING (sess)
            WHERE c.chunk IN ({chunks}){kind} AND {filters}"""
# Scope "conversation": message text only (Kind.TEXT).
ONLY_TEXT_CHUNKS: Final = " AND c.kind = {kind:d}"

# --- reading a session (query/transcript.py) ----------------------------------------------------
# The indexed sessions with one public id (an agent filter spliced in as AND s.agent = ?), newest
# first: the first is the one read. A title from the agent's own index wins, as in hits.
SELECT_SESSION_BY_ID: Final = (
    """SELECT s.sess, s.agent, s.session_id, coalesce(t.title, s.title), s.cwd, s.branch, s.updated_at,
                      s.message_count, s.resume_command, s.present
               FROM sessions s LEFT JOIN titles t ON t.agent = s.agent AND t.session_id = s.session_id
               WHERE s.session_id = ?{agent} ORDER BY s.updated_at DESC NULLS LAST, s.sess DESC""")
SESSION_AGENT: Final = " AND s.agent = ?"
# A session's message positions (the ordinals its chunks carry), in order; ``{scope}`` narrows
# them to the conversation (CONVERSATION_CHUNKS) or is empty.
SELECT_POSITIONS: Final = "SELECT DISTINCT ord FROM chunks WHERE sess = ?{scope} ORDER BY ord"
# Scope "conversation": what the user and the assistant wrote (written in, not bound: fixed codes).
CONVERSATION_CHUNKS: Final = " AND role IN ({roles}) AND kind = {kind:d}"
# The message that holds the most of a query's words (each word a ``contains`` test on the lower-
# cased text, summed), earliest first among equals: where "around the hit" centres.
SELECT_BEST_POSITION: Final = """SELECT ord, ({matches}) AS words FROM chunks WHERE sess = ?{scope}
               ORDER BY words DESC, ord LIMIT 1"""
WORD_IN_CHUNK: Final = "CASE WHEN contains(lower(text), ?) THEN 1 ELSE 0 END"
# The chosen messages: each message's chunks joined back in order (chunks do not overlap), with
# the role, kind and time of its first chunk; cut to ``?`` characters (+1, to tell a cut).
SELECT_MESSAGES: Final = """SELECT ord, first(role ORDER BY part), first(kind ORDER BY part), min(ts),
               left(string_agg(text, '' ORDER BY part), ?), sum(length(text))
               FROM chunks WHERE sess = ? AND ord IN ({positions}){scope} GROUP BY ord ORDER BY ord"""

# --- status and the read-only service (query/reports.py, aivault/vault/readonly.py) ------------------
# The index's generation: which commit a read or a status saw (query/transcript.py too).
SELECT_GENERATION: Final = "SELECT generation FROM meta"
COUNT_SESSIONS: Final = "SELECT count(*) FROM sessions"
# What the index holds under one root: its present units, the sessions among them that have
# messages, and the skip counters of those units (aivault doctor, and silent roots in status).
SELECT_ROOT_REPORT: Final = """SELECT count(*) FILTER (WHERE f.present),
    count(DISTINCT s.sess) FILTER (WHERE f.present AND s.message_count > 0),
    coalesce(sum(f.malformed) FILTER (WHERE f.present), 0), coalesce(sum(f.oversized) FILTER (WHERE f.present), 0),
    list(f.skips) FILTER (WHERE f.present AND f.skips <> '{}')
    FROM files f LEFT JOIN sessions s ON s.sess = f.sess WHERE starts_with(f.path, ?)"""
# Per-file skip counts for status: the present files' counters and skip maps.
SELECT_SKIPS: Final = """SELECT agent, sum(malformed), sum(oversized), list(skips) FILTER (WHERE skips <> '{}')
    FROM files WHERE present GROUP BY agent ORDER BY agent"""
# The indexer's last observations (indexer/writer.py writes them), for a status without a daemon.
SELECT_OBSERVATIONS: Final = "SELECT key, value FROM observations"
COUNT_PRESENT_FILES: Final = "SELECT count(*) FILTER (WHERE present), count(*) FROM files"

# --- the daemon's sidecar path (query/fastrank.py, query/postings.py, query/chunk_texts.py) -----
# The postings of the segments that are not sorted (nor held in memory), one numbered scan each
# for a UNION ALL.
SELECT_UNSORTED: Final = ("SELECT {seg}::INTEGER AS seg, term, chunk, sess, tf, dl, conv FROM {name} "
                          "WHERE term IN ({terms})")
# A segment's rows (a segment that is not sorted changes only with the generation).
COUNT_ROWS: Final = "SELECT count(*) FROM {segment}"
# The sessions of one generation: update times, and lengths (any-word ranking).
SELECT_SESSION_TIMES: Final = "SELECT sess, updated_at FROM sessions"
SELECT_SESSION_LENGTHS: Final = "SELECT sess, sum(dl)::DOUBLE FROM chunks GROUP BY sess"
SELECT_ALLOWED: Final = "SELECT s.sess FROM sessions s WHERE {filters}"
SELECT_TITLES: Final = "SELECT agent, session_id, title FROM titles"
# The generation a preload of the page rows belongs to.
SELECT_IDENTITY_GENERATION: Final = "SELECT identity, generation FROM meta"
# A page's sessions; titles are joined in Python (SessionTable.titles). ``list_contains`` rather than
# IN: DuckDB plans an IN list of constants as a join, ~3x slower on a page of ids (bench, 100k).
_PAGE_SESSION_COLUMNS = """s.sess, s.agent, s.session_id, s.title, s.cwd, s.branch, s.updated_at, s.message_count,
                         s.resume_command, s.present"""
SELECT_PAGE_SESSIONS: Final = ("SELECT " + _PAGE_SESSION_COLUMNS
                               + " FROM sessions s WHERE list_contains([{sessions}], s.sess)")
SELECT_ALL_PAGE_SESSIONS: Final = "SELECT " + _PAGE_SESSION_COLUMNS + " FROM sessions s"
# A segment's rows and its highest chunk id, and a slice of its postings by rowid (a sidecar build,
# in the segment's row order; a tail's load, in term order).
COUNT_SEGMENT_CHUNKS: Final = "SELECT count(*), coalesce(max(chunk), 0) FROM {name}"
SELECT_POSTINGS_SLICE: Final = ("SELECT term, chunk, sess, tf, dl, conv FROM {name} "
                                 "WHERE rowid >= {start} AND rowid < {stop}")
SELECT_POSTINGS_SLICE_BY_TERM: Final = SELECT_POSTINGS_SLICE + " ORDER BY term, chunk"
# The segments registered now, with their creation times (sidecars of others are pruned).
SELECT_SEGMENT_NAMES: Final = "SELECT name, created_at FROM segments"
# A text segment's range: chunk ids up to next_chunk, their texts in slices.
SELECT_NEXT_CHUNK: Final = "SELECT next_chunk FROM meta"
SELECT_CHUNK_TEXTS: Final = ("SELECT chunk, sess, role, ts, text FROM chunks WHERE chunk >= ? AND chunk < ? "
                              "ORDER BY chunk")
