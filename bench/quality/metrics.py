"""Ranking metrics with binary relevance (the standard IR definitions).

``ranked`` is the list a route returned, best first; ``relevant`` the ids judged relevant. A
repeated id in ``ranked`` counts once, at its first position, so a route cannot earn credit twice
for the same session.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

__all__ = ["dedupe", "mrr_at_k", "ndcg_at_k", "percentile", "recall_any_at_k", "recall_at_k"]


def dedupe(ranked: Sequence[str]) -> list[str]:
    """``ranked`` with later repeats of an id removed."""
    return list(dict.fromkeys(ranked))


def _check(relevant: Collection[str], k: int) -> None:
    if k <= 0:
        raise ValueError("k must be positive")
    if not relevant:
        # Every metric here divides by something derived from the relevant set.
        raise ValueError("a query needs at least one relevant id")


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """|relevant ∩ top k| / |relevant|."""
    _check(relevant, k)
    rel = set(relevant)
    return sum(1 for doc in dedupe(ranked)[:k] if doc in rel) / len(rel)


def recall_any_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 when any relevant id is within the top k, else 0 (LoCoMo's "found": one evidence session
    suffices, however many the question names)."""
    _check(relevant, k)
    rel = set(relevant)
    return 1.0 if any(doc in rel for doc in dedupe(ranked)[:k]) else 0.0


def mrr_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 / rank of the first relevant id within the top k (ranks start at 1), else 0."""
    _check(relevant, k)
    rel = set(relevant)
    for i, doc in enumerate(dedupe(ranked)[:k], 1):
        if doc in rel:
            return 1.0 / i
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """DCG@k / ideal DCG@k with gain 1 for a relevant id and discount 1 / log2(rank + 1)."""
    _check(relevant, k)
    rel = set(relevant)
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(dedupe(ranked)[:k], 1) if doc in rel)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / ideal


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile by linear interpolation between closest ranks (NaN for no values)."""
    if not values:
        return float("nan")
    if not 0.0 <= p <= 100.0:
        raise ValueError("p must be within [0, 100]")
    s = sorted(values)
    pos = (len(s) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
