"""TraeX (TRAE CLI 2.0) rollouts (docs/formats.md §28) and a writer of whole rollouts for tests.

TraeX writes Codex rollouts (tests/builders/codex.py builds their records); what differs is where
(``~/.trae/cli/sessions/YYYY/MM/DD/``) and a few fields: ``originator`` ``codex-tui``, a ``trae``
model provider, TRAE base instructions, a richer ``turn_context`` and ``task_started``, and
reasoning whose only readable copy is an ``agent_reasoning_raw_content`` event after an encrypted
item, as in the de-identified real rollout the corpus holds.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders import codex as cb
from tests.builders.common import BASE_TIME, epoch_ms, iso

VERSION = "0.200.19"
MODEL = "gpt-5-codex"
BASE_INSTRUCTIONS = "You are TRAE CLI, a coding agent."


def sessions_dir(user_home: Path) -> Path:
    """``~/.trae/cli/sessions`` under ``user_home``."""
    return user_home / ".trae" / "cli" / "sessions"


def session_meta(session_id: str, timestamp: str, cwd: str, *, branch: str,
                 parent: str | None = None) -> dict[str, Any]:
    """TraeX's first line payload; a sub-agent names its parent thread in ``source.subagent``."""
    source: Any = "cli"
    if parent is not None:
        source = {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1, "agent_path": None,
                                                "agent_nickname": "Averroes", "agent_role": "explorer"}}}
    d: dict[str, Any] = {"id": session_id, "timestamp": timestamp, "cwd": cwd, "originator": "codex-tui",
                         "cli_version": VERSION, "source": source}
    if parent is not None:
        d.update(thread_source="subagent", agent_nickname="Averroes", agent_role="explorer")
    d.update(model_provider="trae", base_instructions={"text": BASE_INSTRUCTIONS},
             git={"commit_hash": "0" * 40, "branch": branch, "repository_url": None})
    return d


def turn_context(turn_id: str, cwd: str, day: str) -> dict[str, Any]:
    return {"turn_id": turn_id, "cwd": cwd, "current_date": day, "timezone": "Asia/Shanghai",
            "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
            "permission_profile": "default", "model": MODEL, "model_provider": "trae", "personality": None,
            "collaboration_mode": {"kind": "default"}, "realtime_active": False}


def task_started(turn_id: str, started_ms: int) -> dict[str, Any]:
    return {"type": "task_started", "turn_id": turn_id, "started_at": started_ms, "model_context_window": 272000,
            "collaboration_mode_kind": "default"}


class TraexWriter:
    """Appends a TraeX rollout under ``<sessions>/YYYY/MM/DD/rollout-...-<id>.jsonl``, lines 2 s apart."""

    def __init__(self, sessions: Path, session_id: str | None = None, *, cwd: str = "/home/dev/api",
                 branch: str = "main", start: datetime = BASE_TIME, parent: str | None = None) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.t = start
        self.turns = 0
        self.path = cb.rollout_path(sessions, iso(start), self.session_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.line("session_meta", session_meta(self.session_id, iso(start), cwd, branch=branch, parent=parent))

    def line(self, kind: str, payload: dict[str, Any]) -> TraexWriter:
        self.t += timedelta(seconds=2)
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(cb.line(iso(self.t), kind, payload)) + b"\n")
        return self

    def user(self, text: str) -> TraexWriter:
        """A turn's start: task_started, turn_context, the prompt in both streams."""
        self.turns += 1
        turn = f"turn-{self.turns}"
        self.line("event_msg", task_started(turn, epoch_ms(self.t)))
        self.line("turn_context", turn_context(turn, self.cwd, iso(self.t)[:10]))
        self.line("response_item", cb.user_item(text))
        return self.line("event_msg", {"type": "user_message", "message": text, "images": None,
                                       "local_images": None, "text_elements": []})

    def reasoning(self, text: str) -> TraexWriter:
        """An encrypted reasoning item, its text only in the raw reasoning event after it."""
        self.line("response_item", {"type": "reasoning", "summary": [], "content": None,
                                    "encrypted_content": "REDACTED"})
        return self.line("event_msg", {"type": "agent_reasoning_raw_content", "text": text})

    def tool(self, command: str, output: str) -> TraexWriter:
        call_id = f"call_exec_{self.turns}_{epoch_ms(self.t)}"
        self.line("response_item", cb.function_call("exec_command", json.dumps({"cmd": command}), call_id))
        return self.line("response_item", cb.function_call_output(call_id, output))

    def assistant(self, text: str) -> TraexWriter:
        self.line("response_item", cb.assistant_item(text))
        self.line("event_msg", {"type": "agent_message", "message": text, "phase": None, "memory_citation": None})
        return self.line("event_msg", {"type": "task_complete", "turn_id": f"turn-{self.turns}",
                                       "last_agent_message": text})
