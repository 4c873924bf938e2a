"""Semantic and hybrid retrieval: vector candidates, Reciprocal Rank Fusion, the route heuristic.

Hybrid = the lexical planner's best ``HYBRID_CANDIDATES`` sessions and the sessions of the
``VECTOR_CANDIDATES`` nearest chunks, each list ranked by its own evidence (a session keeps its
best rank per route), fused by weighted Reciprocal Rank Fusion:
``score = w_lex / (RRF_K + lexical rank) + 1 / (RRF_K + vector rank)``. Ties break by
``updatedAt`` (newer first) and then by the internal session id, so paging is stable.

The weights come from the retrieval-quality benchmark (bench/quality, 522 labelled queries):
plain RRF (k = 60, equal weights) let the lexical "any word" list — which matches many
sessions on common words — bury the vector hits (paraphrase Recall@5 0.08, vector alone 0.43)
and cost exact queries a little (0.994 vs 1.000). So:
* when the lexical planner answered strictly (a phrase, or every term in one chunk) its sessions
  hold what was asked: they keep first place (``STRICT_BONUS``) and vectors order the rest;
* when it fell back to typo repair or any-word matching, only its best ``LOOSE_DEPTH`` sessions
  take part, at weight ``LOOSE_WEIGHT`` -- except a session whose BM25 score is at least
  ``DOMINANCE`` times the next one's: the words clearly point at it (an error message quoted
  nearly whole, whose words span two chunks), so it keeps first place like a strict answer.
  Without that rule one exact query of 174 fell to rank 6 (its vector rank was 94);
* an any-word list scored per session (query/bm25.py) is not cut to ``LOOSE_DEPTH``: each of its
  sessions takes part at ``COVERAGE_WEIGHT`` times the share of the query's session idf it holds,
  so a conversation holding most of a question's words outranks the vectors' guess while a
  paraphrase's stray one-word matches count little (LoCoMo dev hybrid R@5 0.851 -> 0.920 over the
  cut list; bench/README.md "Ranking quality");
* k = 20 rather than 60: with a short, noisy lexical list, the top vector ranks must count;
* a session only the vectors found is dropped when its nearest chunk is less similar than
  ``SIMILARITY_FLOOR``: a query nothing in the index resembles (a made-up word) gets no results
  rather than the 200 nearest chunks' sessions. Vector ranks are counted before that cut, so
  below the floor the vectors still order the sessions the words found.
Measured: exact R@5 1.000 (lexical 1.000), paraphrase 0.397 (lexical 0.000), mixed 0.897
(lexical 0.839), MRR@10 0.673 -- the same with the floor as without it; the floor costs paraphrase
R@10 0.471 -> 0.460 (two sessions the vectors ranked 6th to 10th, below it) and stops 139 of 150
nonsense queries from listing any session (bench/README.md).

Which queries go hybrid is decided by ``prefers_semantic``, from what the retrieval-quality
benchmark measured: with strict lexical answers kept first, hybrid matched lexical on exact
queries (R@5 1.000 both) and beat it on paraphrased (0.397 vs 0.000) and mixed (0.897 vs 0.862)
ones, while a shape heuristic that sent anything containing an identifier to lexical lost
0.10–0.15 of that. So every multi-word query goes hybrid — identifiers, paths and error codes
still lean lexical because their exact matches take first place — and only a quoted phrase (the
user asked for those exact words) or a single code-like token (a lookup: vectors add only noise
after its matches) stays purely lexical. When vectors are not ready the planner never waits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from aivault.protocol import Kind
from aivault.query import sql

if TYPE_CHECKING:
    import numpy as np

RRF_K = 20
STRICT_ROUTES = ("phrase", "all")
STRICT_BONUS = 1.0
LOOSE_WEIGHT = 0.7
LOOSE_DEPTH = 10
DOMINANCE = 2.0
# Any-word lists scored per session (query/bm25.py) take part whole, each session weighted by
# COVERAGE_WEIGHT times the share of the query's words (session idf) it holds: a conversation
# holding most of a question's words counts more than the vectors' rank, a paraphrase's stray
# one-word matches count little.
COVERAGE_WEIGHT = 2.0
HYBRID_CANDIDATES = 200
VECTOR_CANDIDATES = 200
CUT_REPORTED = 10
# A session only the vectors found is a result only when its nearest chunk is at least this
# similar (cosine): every query has VECTOR_CANDIDATES nearest chunks, even a word no session holds.
# Measured by bench/quality/floor.py on the 20k-filler quality bench: the nearest chunk of 150
# nonsense queries (made-up words, random letters, off-topic questions) p50 0.27, p90 0.33, max
# 0.42; the relevant session's nearest chunk, when vectors ranked it in their top 5, p0 0.34 /
# p5 0.36 (paraphrase), p5 0.38 (mixed). 0.34 is the highest floor costing no R@5 (0.345 loses a
# paraphrase); 11 of the 150 nonsense queries, all random strings, keep a vector-only hit (all 150
# at no floor). A rule relative to the best neighbour cannot drop a nonsense query's best; one
# relative to the 200th separated worse (nonsense best minus 200th p50 0.12, relevant p5 0.10).
SIMILARITY_FLOOR = 0.34

_CODEY = re.compile(r"[A-Za-z][a-z0-9]*[A-Z]|_|/|\\|::|\(\)|[0-9][A-Za-z]|[A-Za-z][0-9]|#\d|--\w|\.\w")
_WORD = re.compile(r"[^\W\d_]+")


class VectorSource(Protocol):
    def ready(self) -> bool: ...

    def search(self, text: str, k: int = VECTOR_CANDIDATES) -> tuple[np.ndarray, np.ndarray] | None: ...

    def model(self) -> str | None:
        """The fingerprint of the model whose vectors ``search`` compares (aivault.embed), or None when
        not ready: similarities from two indexes compare only when it is the same."""
        ...


def prefers_semantic(text: str) -> bool:
    """Hybrid for descriptions and questions; lexical for a quoted phrase or code outside a question,
    or a single identifier-like lookup."""
    stripped = text.strip()
    if not stripped:
        return False
    if '"' in stripped or "`" in stripped:
        # A question naming a quoted title still asks in words (bench/README "Ranking quality").
        from aivault.query.planner import question_shaped
        from aivault.text import query_terms

        return question_shaped(stripped, query_terms(stripped))
    tokens = stripped.split()
    if len(tokens) == 1:
        token = tokens[0].strip(".,;:?!'")
        return bool(_WORD.fullmatch(token)) and not _CODEY.search(token) and len(token) > 3
    return True


@dataclass(frozen=True, slots=True)
class Fused:
    sess: int
    score: float
    chunk: int | None
    lexical_rank: int | None
    vector_rank: int | None
    similarity: float | None = None  # cosine of the session's nearest chunk, when vectors ranked it

    @property
    def matched_by(self) -> str:
        """Which rankings counted this session: "lexical", "vector" (found by meaning only) or "both"."""
        if self.lexical_rank is not None and self.vector_rank is not None:
            return "both"
        return "vector" if self.vector_rank is not None else "lexical"


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A session's nearest chunk among the query's vector candidates."""

    sess: int
    chunk: int
    updated: int  # updatedAt, -1 when unknown
    similarity: float


def vector_sessions(cur: duckdb.DuckDBPyConnection, chunk_ids: np.ndarray, scores: np.ndarray, filt_sql: str,
                    filt_args: list[Any], conversation: bool) -> list[Neighbour]:
    """Sessions of the nearest chunks, nearest first, for chunks of live sessions passing the filters
    (each session at its nearest chunk)."""
    if len(chunk_ids) == 0:
        return []
    order = {int(c): i for i, c in enumerate(chunk_ids.tolist())}
    sims = [float(x) for x in scores.tolist()]
    kind = sql.ONLY_TEXT_CHUNKS.format(kind=Kind.TEXT) if conversation else ""
    rows = cur.execute(sql.SELECT_NEIGHBOURS.format(chunks=", ".join(map(str, order)), kind=kind, filters=filt_sql),
                       filt_args).fetchall()
    ranked = sorted((order[int(c)], int(c), int(s), -1 if u is None else int(u)) for c, s, u in rows)
    seen: dict[int, Neighbour] = {}
    for i, chunk, sess, updated in ranked:
        if sess not in seen:
            seen[sess] = Neighbour(sess, chunk, updated, sims[i])
    return list(seen.values())


def fuse(lexical: list[tuple[int, float, int | None]], lexical_route: str, vector: list[tuple[int, int, float]],
         updated: dict[int, int], sort: str, *, floor: float = SIMILARITY_FLOOR,
         coverage: dict[int, float] | None = None, dominance: float = DOMINANCE,
         coverage_weight: float = COVERAGE_WEIGHT) -> list[Fused]:
    """Weighted Reciprocal Rank Fusion of two session rankings (ranks start at 1); see the module doc.

    ``vector`` is (session, nearest chunk, its similarity), nearest first. A session only the
    vectors found, less similar than ``floor``, is not a result; below the floor the vectors
    still order the sessions the words found. ``dominance`` and ``coverage_weight`` are the
    module's constants unless a benchmark replays other values (bench/quality/fusion.py)."""
    strict = lexical_route in STRICT_ROUTES
    dominant: int | None = None
    weighed = not strict and bool(coverage)
    if not strict:
        lexical = lexical if weighed else lexical[:LOOSE_DEPTH]
        if len(lexical) > 1 and lexical[0][1] >= dominance * lexical[1][1] > 0:
            dominant = lexical[0][0]
    lex_rank = {s: i + 1 for i, (s, _, _) in enumerate(lexical)}
    vec_rank = {s: i + 1 for i, (s, _, _) in enumerate(vector)}
    similarity = {s: sim for s, _, sim in vector}
    evidence: dict[int, int | None] = {s: c for s, _, c in lexical}
    for s, c, _ in vector:
        evidence.setdefault(s, c)
    out = []
    for s in evidence:
        lr, vr = lex_rank.get(s), vec_rank.get(s)
        if lr is None and similarity[s] < floor:
            continue
        score = 0.0
        if lr:
            if strict or s == dominant:
                score += STRICT_BONUS + 1.0 / (RRF_K + lr)
            elif weighed and coverage is not None:
                score += coverage_weight * coverage.get(s, 0.0) / (RRF_K + lr)
            else:
                score += LOOSE_WEIGHT / (RRF_K + lr)
        if vr:
            score += 1.0 / (RRF_K + vr)
        out.append(Fused(s, round(score, 9), evidence[s], lr, vr, similarity.get(s)))
    if sort == "newest":
        out.sort(key=lambda f: (-updated.get(f.sess, -1), -f.score, f.sess))
    else:
        out.sort(key=lambda f: (-f.score, -updated.get(f.sess, -1), f.sess))
    return out


def trace_entry(session_id: str, f: Fused) -> dict[str, Any]:
    return {"sessionId": session_id, "matchedBy": f.matched_by, "lexicalRank": f.lexical_rank,
            "vectorRank": f.vector_rank,
            "similarity": None if f.similarity is None else round(f.similarity, 4), "fusedScore": f.score}
