"""The records a search hands between its stages: the snapshot it reads, the plan it builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A ranked session: (internal session id, score, its evidence chunk or None).
Row = tuple[int, float, int | None]


@dataclass(slots=True)
class Plan:
    """The route the planner chose and the terms it ranked by; ranking fills in the rest."""

    route: str
    terms: list[str]
    capped: bool = False
    repaired: dict[str, str] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    # updatedAt (-1 when unknown) of the ranked sessions, read with them (fusion breaks ties by it)
    updated: dict[int, int] = field(default_factory=dict)
    # any-word ranking: each ranked session's rank by its session-level BM25 and by its best chunk's
    ranks: dict[int, tuple[int, int]] = field(default_factory=dict)
    # any-word ranking: the share of the query's session idf each ranked session holds (0..1]
    coverage: dict[int, float] = field(default_factory=dict)
    # Chunk rows (chunk, role, ts, text) already read by ranking (the phrase candidates): evidence
    # the page need not read again
    evidence: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    # any-word ranking: the best session BM25 and best chunk BM25 the scores are relative to; None: this
    # index's own (a merged search over several indexes gives the best of them all, query/federated.py)
    maxima: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one page is read against: the generation fence and BM25's collection statistics."""

    identity: str
    generation: int
    n_chunks: int
    avgdl: float
    segments: list[tuple[str, str]]  # (name, state)
    tokenizer: int  # the TOKENIZER_VERSION the indexed terms were cut with
    # The daemon's memory-mapped postings (query/fastrank.SearchPostings) when every sorted segment
    # has its sidecar; None: every posting is read in DuckDB.
    postings: Any = None
    # The sessions any-word ranking's session idf is taken over; None: this index's own count (a merged
    # search over several indexes gives their sum, query/federated.py).
    n_sessions: int | None = None
