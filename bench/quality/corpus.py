"""Build the labelled corpus: incident and distractor sessions, filler, and the query set.

    out/claude/projects/<munged cwd>/<uuid>.jsonl                 Claude Code sessions
    out/codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl     Codex sessions
    out/codex/session_index.jsonl                                  Codex thread names (from the filler)
    out/queries.json                                               the labelled queries
    out/corpus.json                                                which session is which

Incidents alternate between Claude Code and Codex; a distractor is written as the other agent,
so near-duplicates never line up with one format. The filler comes from ``bench.gen_corpus``
(generated into ``out/filler`` and moved under the same two roots) so the labelled sessions have
to be found among thousands of ordinary ones. Everything is a function of the seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.gen_corpus import generate
from bench.quality.incident import Incident, Step
from bench.quality.labels import LabelledQuery, label
from bench.quality.render import render_claude, render_codex
from tests.builders import claude, codex
from tests.builders.common import epoch_ms, iso, uuid4, uuid7

_YEAR = datetime(2026, 1, 1, tzinfo=UTC)
# What build() owns under ``out``; it never deletes anything else there.
_OWNED = ("claude", "codex", "filler", "queries.json", "corpus.json")


@dataclass(frozen=True, slots=True)
class WrittenSession:
    session_id: str
    agent: str  # "claude" | "codex"
    role: str  # "incident" | "distractor"
    incident: str
    path: str  # relative to out


def _write(path: Path, lines: Sequence[bytes], mtime: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    # The file's mtime is when the agent last appended to it, as on a real disk.
    ts = mtime.timestamp()
    os.utime(path, (ts, ts))


def _last_time(lines: Sequence[bytes], fallback: datetime) -> datetime:
    for line in reversed(lines):
        ts = json.loads(line).get("timestamp")
        if isinstance(ts, str):
            return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return fallback


def write_session(out: Path, agent: str, steps: Sequence[Step], session_id: str, cwd: str, branch: str,
                  start: datetime) -> Path:
    """Write one session in ``agent``'s on-disk layout under ``out`` and return its path."""
    if agent == "claude":
        lines = render_claude(steps, session_id, cwd, branch, start)
        path = claude.session_path(out / "claude" / "projects", cwd, session_id)
    else:
        lines = render_codex(steps, session_id, cwd, branch, start)
        path = codex.rollout_path(out / "codex" / "sessions", iso(start), session_id)
    _write(path, lines, _last_time(lines, start))
    return path


def _merge_tree(src: Path, dst: Path) -> None:
    """Move every file under ``src`` to the same relative place under ``dst``."""
    for root, _dirs, files in os.walk(src):
        for name in files:
            s = Path(root) / name
            d = dst / s.relative_to(src)
            d.parent.mkdir(parents=True, exist_ok=True)
            os.replace(s, d)


def add_filler(out: Path, messages: int, seed: int) -> dict[str, Any]:
    """Generate ``messages`` filler messages and move them under out's claude and codex roots."""
    tmp = out / "filler"
    manifest = generate(tmp, messages, seed=seed, overwrite=True)
    _merge_tree(tmp / "claude" / "projects", out / "claude" / "projects")
    _merge_tree(tmp / "codex" / "sessions", out / "codex" / "sessions")
    # Archived rollouts go back into the dated tree they were archived from: the benchmark
    # indexes exactly two roots (claude/projects, codex/sessions), and their files must not be lost.
    archived = tmp / "codex" / "archived_sessions"
    if archived.is_dir():
        for f in sorted(archived.iterdir()):
            day = f.name[len("rollout-") : len("rollout-") + 10].replace("-", "/")
            d = out / "codex" / "sessions" / day / f.name
            d.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, d)
    index = tmp / "codex" / "session_index.jsonl"
    if index.exists():
        os.replace(index, out / "codex" / "session_index.jsonl")
    shutil.rmtree(tmp)
    return manifest


def _clear(out: Path) -> None:
    for name in _OWNED:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def build(out: Path, *, filler_messages: int, seed: int,
          incidents: Sequence[Incident] | None = None) -> list[LabelledQuery]:
    """Write the corpus and ``queries.json`` under ``out``; return every labelled query.

    ``incidents`` defaults to all of ``bench.quality.topics``; tests pass a handful.
    Rejected queries are kept (``accepted`` false, with the reason) so a report can count them;
    the runner evaluates only accepted ones.
    """
    if incidents is None:
        from bench.quality.topics import INCIDENTS

        incidents = INCIDENTS
    keys = [i.key for i in incidents]
    if len(set(keys)) != len(keys):
        raise ValueError("incident keys must be unique")
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    r = random.Random(seed)
    sessions: list[WrittenSession] = []
    queries: list[LabelledQuery] = []

    def place(agent: str, steps: Sequence[Step], inc: Incident, role: str) -> str:
        day = r.randrange(0, 360)
        start = _YEAR + timedelta(days=day, hours=min(22, max(7, round(r.gauss(14, 3)))),
                                  minutes=r.randrange(60), seconds=r.randrange(60))
        sid = uuid4(r) if agent == "claude" else uuid7(epoch_ms(start), r)
        path = write_session(out, agent, steps, sid, inc.cwd, inc.branch, start)
        sessions.append(WrittenSession(sid, agent, role, inc.key, str(path.relative_to(out))))
        return sid

    for n, inc in enumerate(incidents):
        agent = ("claude", "codex")[(n + seed) % 2]
        sid = place(agent, inc.steps, inc, "incident")
        if inc.distractor_steps is not None:
            place("codex" if agent == "claude" else "claude", inc.distractor_steps, inc, "distractor")
        queries += label(inc, [sid])

    filler: dict[str, Any] | None = add_filler(out, filler_messages, seed) if filler_messages > 0 else None
    (out / "queries.json").write_text(json.dumps([q.to_json() for q in queries], indent=1) + "\n")
    (out / "corpus.json").write_text(json.dumps({
        "seed": seed,
        "incidents": len(incidents),
        "distractors": sum(1 for s in sessions if s.role == "distractor"),
        "fillerMessages": filler_messages,
        "fillerSessions": filler["sessions"] if filler else 0,
        "sessions": [asdict(s) for s in sessions],
    }, indent=1) + "\n")
    return queries


def load_queries(out: Path) -> list[LabelledQuery]:
    """The queries ``build`` wrote to ``out/queries.json``."""
    raw = json.loads((out / "queries.json").read_text())
    return [LabelledQuery(q["id"], q["kind"], q["query"], tuple(q["relevant"]), q["incident"], q["accepted"],
                          q["reason"], tuple(q.get("scope_paths") or ())) for q in raw]
