"""The labelled queries: an incident's three queries (exact, paraphrase, mixed), each checked against the
words of its session by the rules of ``bench.quality.checks``.

``bench.quality.corpus`` labels the incidents it writes; ``python -m bench.quality.topics`` checks every
incident's queries with the same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.quality.checks import check_query, session_terms
from bench.quality.incident import Incident

KINDS: tuple[str, ...] = ("exact", "paraphrase", "mixed")


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    """A query, its kind, the sessions that answer it, and whether it passed its kind's check."""

    id: str
    kind: str
    query: str
    relevant: tuple[str, ...]
    incident: str
    accepted: bool
    reason: str  # why the check rejected it; empty when accepted
    scope_paths: tuple[str, ...] = ()  # asked with these scopePaths (LoCoMo: the conversation's folder)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["relevant"] = list(self.relevant)
        d["scope_paths"] = list(self.scope_paths)
        return d


def label(incident: Incident, relevant: Sequence[str]) -> list[LabelledQuery]:
    """The incident's three queries, each checked against the words of its session."""
    terms = session_terms(incident.steps, incident.cwd, incident.branch)
    decoy = (session_terms(incident.distractor_steps, incident.cwd, incident.branch)
             if incident.distractor_steps is not None else None)
    out: list[LabelledQuery] = []
    for kind, query in (("exact", incident.exact), ("paraphrase", incident.paraphrase), ("mixed", incident.mixed)):
        verdict = check_query(kind, query, terms)
        ok, reason = verdict.ok, verdict.reason
        if ok and kind == "exact" and decoy is not None and check_query("exact", query, decoy).ok:
            # An exact query its distractor also answers would make the label a coin toss.
            ok, reason = False, "the distractor holds every term too"
        out.append(LabelledQuery(f"{incident.key}/{kind}", kind, query, tuple(relevant), incident.key, ok, reason))
    return out
