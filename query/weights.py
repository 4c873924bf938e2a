"""BM25's idf and the ranking constants both scorers share (the SQL of query/bm25.py and the NumPy of
query/fastrank.py), so that neither imports the other."""

from __future__ import annotations

import math

# Chunks (best BM25 first) whose text is checked for a phrase; more candidates are reported as
# truncated.candidates.
PHRASE_CANDIDATES = 100
# Any-word ranking: the weight of the best chunk's (relative) BM25 beside the session's.
SESSION_CHUNK_WEIGHT = 0.25


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency of a term in ``df`` of ``n`` documents (never negative)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
