"""The indexer thread's mailbox: what other threads ask of the only writer, one typed record each.

Other threads never touch the database writer; they put one of these on the indexer's queue and
the indexer thread handles it between batches (indexer/service.py ``_handle``). Requests that
wait for an answer carry the future the indexer settles.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aivault.indexer.segments import MergePlan
    from aivault.indexer.semantic import Publication
    from aivault.indexer.vectors import VectorIndex


@dataclass(frozen=True, slots=True)
class ReconcileAsked:
    """A scan pass starting after now; the future resolves with its summary when committed."""

    full: bool
    fut: Future[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CompactAsked:
    """Freeze and merge segments (``frozen``: the unsorted ones; ``all``: also the tiers)."""

    mode: str
    fut: Future[None]


@dataclass(frozen=True, slots=True)
class CopyMergeAsked:
    """Plan the merge a reclaim's copy runs on the way (a one-shot index ending); the future
    resolves with the plan, or None when merging in place is the better course."""

    fut: Future[MergePlan | None]


@dataclass(frozen=True, slots=True)
class EndBulk:
    """Searches have started: the bulk load's postings get sorted from now on."""


@dataclass(frozen=True, slots=True)
class MergeDone:
    """A merge thread finished; the new segment is registered by the writer."""

    plan: MergePlan
    rows: int


@dataclass(frozen=True, slots=True)
class MergeFailed:
    plan: MergePlan
    error: str


# From the background embedder (indexer/vector_service.py), which commits through the writer too.
@dataclass(frozen=True, slots=True)
class VectorsAlign:
    """Make the stored vectors belong to this model (dropping them if they do not)."""

    fingerprint: str
    fut: Future[Any]


@dataclass(frozen=True, slots=True)
class VectorsSwap:
    """Put a rebuilt vector index in place of the live one."""

    index: VectorIndex
    fut: Future[Any]


@dataclass(frozen=True, slots=True)
class VectorsPublish:
    """Commit newly embedded vectors; the future resolves with the new vector epoch."""

    pub: Publication
    fut: Future[int]


Mail = (ReconcileAsked | CompactAsked | CopyMergeAsked | EndBulk | MergeDone | MergeFailed | VectorsAlign
        | VectorsSwap | VectorsPublish)
