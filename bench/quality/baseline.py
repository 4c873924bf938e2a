"""The plain baseline every route is measured against: BM25 over whole sessions.

Each session is one document, the concatenation of the text aivault indexed for it (read back
from the index, so the baseline ranks exactly the same text); words are lower-cased runs of ASCII
letters and digits, nothing is stemmed or dropped; k1 1.2, b 0.75, idf ``ln(1 + (N - df + 0.5) /
(df + 0.5))``. The collection is the set of sessions a query may return (its scope), so a LoCoMo
question is ranked among its conversation's sessions as the data set's authors rank it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class SessionBM25:
    """BM25 over a fixed set of documents (session id -> text)."""

    def __init__(self, docs: Mapping[str, str]) -> None:
        self.ids = sorted(docs)
        self.tf = {d: Counter(words(docs[d])) for d in self.ids}
        self.dl = {d: sum(c.values()) for d, c in self.tf.items()}
        self.n = len(self.ids)
        self.avgdl = (sum(self.dl.values()) / self.n) if self.n else 1.0
        self.df: Counter[str] = Counter(t for c in self.tf.values() for t in c)

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def score(self, query: str, doc: str) -> float:
        tf = self.tf[doc]
        norm = K1 * (1 - B + B * self.dl[doc] / self.avgdl)
        return sum(self.idf(t) * tf[t] * (K1 + 1) / (tf[t] + norm) for t in set(words(query)) if t in tf)

    def rank(self, query: str, k: int, among: Iterable[str] | None = None) -> list[str]:
        """The ``k`` best documents (of ``among``, default all) with a positive score, best first;
        ties by id, so the order is reproducible."""
        pool: Sequence[str] = self.ids if among is None else sorted(among)
        scored = [(self.score(query, d), d) for d in pool]
        return [d for s, d in sorted(scored, key=lambda x: (-x[0], x[1])) if s > 0][:k]
