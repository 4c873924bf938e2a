"""LoCoMo (Maharana et al., ACL 2024) as a session-search benchmark: conversations become transcripts.

    python -m bench.quality.run --datasets locomo [--locomo /work/shared/bench-data/locomo-dev]

The data set is read from its directory at bench time and never copied into the repository: one
JSON file per conversation (``speaker_a``, ``speaker_b``, ``session_N`` turn lists, their
``session_N_date_time`` and ``qa``). Each session becomes one Claude Code transcript (speaker A's
turns as the user, speaker B's as the assistant) in one project folder per conversation; every
question of categories 1-4 (5, adversarial, has no evidence) is asked with that folder as
``scopePaths``, and it is found when any session holding its evidence (``D3:12`` = session 3) is
in the top k (Recall_any@k).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.quality.corpus import write_session
from bench.quality.incident import Step
from bench.quality.labels import LabelledQuery
from tests.builders.common import uuid4

DEFAULT_DIR = Path("/work/shared/bench-data/locomo-dev")
# The README's names for the categories; 5 (adversarial) has no evidence and is left out.
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KINDS: tuple[str, ...] = tuple(CATEGORIES.values())
# Where the conversations' project folders live (the scopePaths of their questions).
PROJECTS_ROOT = "/home/locomo"
_OWNED = ("claude", "queries.json", "corpus.json")
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D(\d+):")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                      "september", "october", "november", "december"), 1)}


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    start: datetime
    turns: tuple[tuple[str, str], ...]  # (speaker, text)


@dataclass(frozen=True, slots=True)
class Question:
    number: int  # position in the conversation's qa list
    text: str
    category: int
    evidence: tuple[int, ...]  # session numbers holding the evidence


@dataclass(frozen=True, slots=True)
class Conversation:
    key: str  # the file's stem ("26")
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def cwd(self) -> str:
        return f"{PROJECTS_ROOT}/conv-{self.key}"


def parse_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as a UTC time (LoCoMo's one format)."""
    m = _DATE.search(text)
    if m is None:
        raise ValueError(f"not a LoCoMo session time: {text!r}")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=UTC)


def evidence_sessions(evidence: Sequence[str]) -> tuple[int, ...]:
    """Session numbers named by evidence ids (``D3:12``; some entries hold several, ``D8:6; D9:17``)."""
    return tuple(sorted({int(n) for e in evidence for n in _EVIDENCE.findall(str(e))}))


def parse_conversation(key: str, raw: dict[str, Any]) -> Conversation:
    """One conversation file: its non-empty sessions in order and its questions of categories 1-4
    that name at least one evidence session."""
    sessions: list[Session] = []
    for name, value in raw.items():
        m = _SESSION_KEY.fullmatch(name)
        if m is None or not isinstance(value, list) or not value:
            continue
        n = int(m.group(1))
        turns = tuple((str(t["speaker"]), str(t["text"])) for t in value if str(t.get("text", "")).strip())
        sessions.append(Session(n, parse_date(str(raw[f"session_{n}_date_time"])), turns))
    sessions.sort(key=lambda s: s.number)
    known = {s.number for s in sessions}
    questions = []
    for i, q in enumerate(raw.get("qa") or []):
        ev = tuple(n for n in evidence_sessions(q.get("evidence") or []) if n in known)
        if q.get("category") in CATEGORIES and ev:
            questions.append(Question(i, str(q["question"]), int(q["category"]), ev))
    return Conversation(key, str(raw["speaker_a"]), str(raw["speaker_b"]), tuple(sessions), tuple(questions))


def load(directory: Path) -> list[Conversation]:
    """Every ``*.json`` conversation of a LoCoMo directory, by file name."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{directory}: no LoCoMo conversation files (*.json)")
    return [parse_conversation(p.stem, json.loads(p.read_text())) for p in files]


def steps(conv: Conversation, session: Session) -> tuple[Step, ...]:
    """A session as transcript steps: speaker A's turns are the user's, everyone else's the assistant's."""
    out = [Step("user" if speaker == conv.speaker_a else "assistant", text) for speaker, text in session.turns]
    if not out or out[0].kind != "user":
        # A transcript starts with the user; a session B opens gets an empty-handed greeting first.
        out.insert(0, Step("user", f"{conv.speaker_a} here."))
    return tuple(out)


def build(out: Path, conversations: Sequence[Conversation], *, seed: int = 1) -> list[LabelledQuery]:
    """Write every session as a Claude Code transcript under ``out/claude/projects`` and return the
    questions as labelled queries (kind = category name, scoped to their conversation's folder)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in _OWNED:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    r = random.Random(seed)
    queries: list[LabelledQuery] = []
    sessions: list[dict[str, Any]] = []
    for conv in conversations:
        ids: dict[int, str] = {}
        for s in conv.sessions:
            sid = uuid4(r)
            path = write_session(out, "claude", steps(conv, s), sid, conv.cwd, "main", s.start)
            ids[s.number] = sid
            sessions.append({"session_id": sid, "conversation": conv.key, "session": s.number,
                             "path": str(path.relative_to(out))})
        for q in conv.questions:
            queries.append(LabelledQuery(f"locomo-{conv.key}/{q.number}", CATEGORIES[q.category], q.text,
                                         tuple(ids[n] for n in q.evidence), conv.key, True, "",
                                         scope_paths=(conv.cwd,)))
    (out / "queries.json").write_text(json.dumps([q.to_json() for q in queries], indent=1) + "\n")
    (out / "corpus.json").write_text(json.dumps({"seed": seed, "conversations": len(conversations),
                                                 "sessions": sessions}, indent=1) + "\n")
    return queries
