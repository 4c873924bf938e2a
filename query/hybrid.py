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
* k = 20 rather than 60: with a short, noisy lexical list, the top vector ranks must count.
Measured: exact R@5 1.000 (lexical 1.000), paraphrase 0.397 (lexical 0.000), mixed 0.897
(lexical 0.862).

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
from typing import Any, Protocol

import duckdb
import numpy as np

RRF_K = 20
STRICT_ROUTES = ("phrase", "all")
STRICT_BONUS = 1.0
LOOSE_WEIGHT = 0.7
LOOSE_DEPTH = 10
DOMINANCE = 2.0
HYBRID_CANDIDATES = 200
VECTOR_CANDIDATES = 200
CUT_REPORTED = 10

_CODEY = re.compile(r"[A-Za-z][a-z0-9]*[A-Z]|_|/|\\|::|\(\)|[0-9][A-Za-z]|[A-Za-z][0-9]|#\d|--\w|\.\w")
_WORD = re.compile(r"[^\W\d_]+")


class VectorSource(Protocol):
    def ready(self) -> bool: ...

    def note_search(self) -> None: ...

    def search(self, text: str, k: int = VECTOR_CANDIDATES) -> tuple[np.ndarray, np.ndarray] | None: ...


def prefers_semantic(text: str) -> bool:
    """Hybrid for descriptions; lexical for a quoted phrase or a single identifier-like lookup."""
    stripped = text.strip()
    if not stripped or '"' in stripped or "`" in stripped:
        return False
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


def vector_sessions(cur: duckdb.DuckDBPyConnection, chunk_ids: np.ndarray, filt_sql: str, filt_args: list[Any],
                    conversation: bool) -> list[tuple[int, int, int]]:
    """(session, best chunk, updatedAt or -1) in nearest-first order, for chunks of live sessions
    passing the filters."""
    if len(chunk_ids) == 0:
        return []
    order = {int(c): i for i, c in enumerate(chunk_ids.tolist())}
    kind = " AND c.kind = 0" if conversation else ""
    rows = cur.execute(
        f"""SELECT c.chunk, c.sess, s.updated_at FROM chunks c JOIN sessions s USING (sess)
            WHERE c.chunk IN ({", ".join(map(str, order))}){kind} AND {filt_sql}""", filt_args).fetchall()
    ranked = sorted((order[int(c)], int(c), int(s), -1 if u is None else int(u)) for c, s, u in rows)
    seen: dict[int, tuple[int, int]] = {}
    for _, chunk, sess, updated in ranked:
        seen.setdefault(sess, (chunk, updated))
    return [(sess, chunk, updated) for sess, (chunk, updated) in seen.items()]


def fuse(lexical: list[tuple[int, float, int | None]], lexical_route: str, vector: list[tuple[int, int]],
         updated: dict[int, int], sort: str) -> list[Fused]:
    """Weighted Reciprocal Rank Fusion of two session rankings (ranks start at 1); see the module doc."""
    strict = lexical_route in STRICT_ROUTES
    dominant: int | None = None
    if not strict:
        lexical = lexical[:LOOSE_DEPTH]
        if len(lexical) > 1 and lexical[0][1] >= DOMINANCE * lexical[1][1] > 0:
            dominant = lexical[0][0]
    lex_rank = {s: i + 1 for i, (s, _, _) in enumerate(lexical)}
    vec_rank = {s: i + 1 for i, (s, _) in enumerate(vector)}
    evidence: dict[int, int | None] = {s: c for s, _, c in lexical}
    for s, c in vector:
        evidence.setdefault(s, c)
    out = []
    for s in evidence:
        lr, vr = lex_rank.get(s), vec_rank.get(s)
        score = 0.0
        if lr:
            if strict or s == dominant:
                score += STRICT_BONUS + 1.0 / (RRF_K + lr)
            else:
                score += LOOSE_WEIGHT / (RRF_K + lr)
        if vr:
            score += 1.0 / (RRF_K + vr)
        out.append(Fused(s, round(score, 9), evidence[s], lr, vr))
    if sort == "newest":
        out.sort(key=lambda f: (-updated.get(f.sess, -1), -f.score, f.sess))
    else:
        out.sort(key=lambda f: (-f.score, -updated.get(f.sess, -1), f.sess))
    return out


def trace_entry(session_id: str, f: Fused) -> dict[str, Any]:
    return {"sessionId": session_id, "lexicalRank": f.lexical_rank, "vectorRank": f.vector_rank,
            "fusedScore": f.score}
