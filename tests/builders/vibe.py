"""Mistral Vibe session folders (docs/formats.md §31) and a writer of whole sessions for tests.

A session is ``<save dir>/session_<UTC yyyymmdd_HHMMSS>_<first 8 of the id>/`` holding
``messages.jsonl`` (one ``LLMMessage`` a line, ``model_dump(exclude_none=True)``, appended after each
turn; the system prompt is not written) and ``meta.json`` (rewritten after each turn, as Vibe's
``SessionLogger.save_interaction`` does). ``fork`` is the TUI's ``/rewind``: a new session whose meta
names the parent and whose messages start with the parent's up to the rewind point; ``subagent``
is a task-tool run under ``<session>/agents/<child>/``.
"""

from __future__ import annotations

import json
import os
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME

MODEL = "mistral-medium-3.5"
SYSTEM_PROMPT = "You are Vibe, a coding agent."


def save_dir(vibe_home: Path) -> Path:
    """``<VIBE_HOME>/logs/session``."""
    return vibe_home / "logs" / "session"


def folder_name(session_id: str, start: datetime) -> str:
    return f"session_{start.strftime('%Y%m%d_%H%M%S')}_{session_id[:8]}"


def user(text: str, *, injected: bool = False, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "injected": injected, "message_id": str(_uuid.uuid4()), **extra}


def assistant(text: str | None = None, *, reasoning: str | None = None,
              tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An assistant message in the order Vibe dumps its fields (None fields are left out)."""
    d: dict[str, Any] = {"role": "assistant"}
    if text is not None:
        d["content"] = text
    d["injected"] = False
    if reasoning is not None:
        d["reasoning_content"] = reasoning
        d["reasoning_message_id"] = str(_uuid.uuid4())
    if tool_calls:
        d["tool_calls"] = tool_calls
    d["message_id"] = str(_uuid.uuid4())
    return d


def tool_call(call_id: str, name: str, arguments: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """``arguments`` travel as a JSON string, as the model wrote them."""
    return {"id": call_id, "index": index, "function": {"name": name, "arguments": json.dumps(arguments)},
            "type": "function"}


def tool_result(call_id: str, name: str, output: str) -> dict[str, Any]:
    return {"role": "tool", "content": output, "injected": False, "name": name, "tool_call_id": call_id}


class VibeWriter:
    """One session folder; ``save()`` appends the messages added since the last save and rewrites
    ``meta.json`` (each call is a turn, 20 s after the previous one)."""

    def __init__(self, directory: Path, *, cwd: str = "/home/dev/app", branch: str | None = "main",
                 session_id: str | None = None, start: datetime = BASE_TIME, parent: str | None = None,
                 folder: Path | None = None) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.branch = branch
        self.start = start
        self.end = start
        self.parent = parent
        self.title: str | None = None
        self.title_source = "auto"
        self.messages: list[dict[str, Any]] = []
        self.saved = 0
        self.path = folder or directory / folder_name(self.session_id, start)
        self.path.mkdir(parents=True, exist_ok=True)

    def add(self, *messages: dict[str, Any]) -> VibeWriter:
        self.messages += messages
        return self

    def turn(self, prompt: str, *replies: dict[str, Any]) -> VibeWriter:
        """A user prompt and what followed it, saved."""
        return self.add(user(prompt), *replies).save()

    def rename(self, title: str) -> VibeWriter:
        """``/rename``: a manual title, kept over the automatic one."""
        self.title, self.title_source = title, "manual"
        return self.save(force=True)

    def save(self, *, force: bool = False) -> VibeWriter:
        new = self.messages[self.saved:]
        if not new and not force:
            return self
        self.end += timedelta(seconds=20)
        with (self.path / "messages.jsonl").open("a", encoding="utf-8") as fh:
            for m in new:
                fh.write(json.dumps(m, ensure_ascii=False) + "\n")
        self.saved = len(self.messages)
        self.write_meta()
        return self

    def auto_title(self) -> str:
        first = next((m for m in self.messages if m["role"] == "user"), None)
        if first is None:
            return "Untitled session"
        text = str(first["content"])
        return text[:50] + ("…" if len(text) > 50 else "")

    def meta(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id, "parent_session_id": self.parent,
            "start_time": self.start.isoformat(), "end_time": self.end.isoformat(),
            "git_commit": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "git_branch": self.branch,
            "environment": {"working_directory": self.cwd}, "username": "dev",
            "title": self.title if self.title_source == "manual" else self.auto_title(),
            "title_source": self.title_source, "loops": [], "experiments": None,
            "stats": {"steps": len(self.messages), "session_prompt_tokens": 1200, "session_completion_tokens": 300,
                      "context_tokens": 1500},
            "total_messages": self.saved, "tools_available": [], "config": {"active_model": MODEL},
            "agent_profile": {"name": "default", "overrides": {}},
            "system_prompt": {"role": "system", "content": SYSTEM_PROMPT, "injected": False},
        }

    def write_meta(self) -> None:
        tmp = self.path / f"tmp{os.getpid()}.json.tmp"
        tmp.write_text(json.dumps(self.meta(), indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path / "meta.json")

    def fork(self, keep: int, *, start: datetime | None = None) -> VibeWriter:
        """``/rewind`` to before message ``keep``: a new session naming this one as its parent, whose
        first save writes the kept messages again."""
        child = VibeWriter(self.path.parent, cwd=self.cwd, branch=self.branch,
                           start=start or self.end + timedelta(seconds=5), parent=self.session_id)
        child.messages = [dict(m) for m in self.messages[:keep]]
        return child

    def subagent(self, name: str) -> VibeWriter:
        """A task-tool run: its own session under ``<this session>/agents/<name>/``."""
        return VibeWriter(self.path, cwd=self.cwd, branch=self.branch, start=self.end, parent=self.session_id,
                          folder=self.path / "agents" / name)
