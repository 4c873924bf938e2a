"""Junie CLI sessions (docs/formats.md §33): the session index and a writer of ``events.jsonl``.

``JunieWriter`` appends a session's line to ``<junie home>/sessions/index.jsonl`` (again whenever the
entry changes: the last line wins) and its events to ``session-<id>/events.jsonl``; a block's status
updates repeat its ``stepId``, as Junie writes them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms


def index_line(session_id: str, created: int, updated: int, project_dir: str | None,
               task_name: str | None) -> dict[str, Any]:
    d: dict[str, Any] = {"sessionId": session_id, "createdAt": created, "updatedAt": updated}
    if project_dir is not None:
        d["projectDir"] = project_dir
    if task_name is not None:
        d["taskName"] = task_name
    return d


def prompt(text: str) -> dict[str, Any]:
    return {"kind": "UserPromptEvent", "prompt": text}


def agent_event(at: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "SessionA2uxEvent", "timestampMs": at, "event": {"agentEvent": {"kind": kind, **fields}}}


class JunieWriter:
    """One Junie session: its index entry and its events, appended as the session goes."""

    def __init__(self, junie_home: Path, project_dir: str | None = "/home/dev/app",
                 session_id: str = "session-260301-100000-a1b2", *, task_name: str | None = None,
                 start: datetime = BASE_TIME) -> None:
        self.sessions = junie_home / "sessions"
        self.session_id = session_id
        self.project_dir = project_dir
        self.task_name = task_name
        self.created = self.t = epoch_ms(start)
        self.path = self.sessions / session_id / "events.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.steps = 0
        self.touch_index()

    def touch_index(self) -> None:
        with (self.sessions / "index.jsonl").open("ab") as f:
            f.write(orjson.dumps(index_line(self.session_id, self.created, self.t, self.project_dir,
                                            self.task_name)) + b"\n")

    def write(self, *records: dict[str, Any]) -> JunieWriter:
        with self.path.open("ab") as f:
            f.write(b"".join(orjson.dumps(r) + b"\n" for r in records))
        return self

    def at(self) -> int:
        self.t += 2000
        return self.t

    def step(self, prefix: str) -> str:
        self.steps += 1
        return f"{prefix}-{self.steps}"

    def ask(self, text: str) -> JunieWriter:
        return self.write(prompt(text))

    def terminal(self, command: str, output: str, *, exit_code: int | None = 0) -> JunieWriter:
        """A terminal block as Junie writes it: RUNNING first, then COMPLETED with the output."""
        step = self.step("terminal")
        done: dict[str, Any] = {"stepId": step, "command": command, "details": output, "status": "COMPLETED"}
        if exit_code is not None:
            done["exitCode"] = exit_code
        return self.write(agent_event(self.at(), "TerminalBlockUpdatedEvent", stepId=step, command=command,
                                      details="", status="RUNNING"),
                          agent_event(self.at(), "TerminalBlockUpdatedEvent", **done))

    def edit(self, path: str, before: str, after: str) -> JunieWriter:
        change = {"beforeRelativePath": path, "afterRelativePath": path,
                  "beforeContent": {"kind": "text", "text": before}, "afterContent": {"kind": "text", "text": after}}
        return self.write(agent_event(self.at(), "FileChangesBlockUpdatedEvent", stepId=self.step("edit"),
                                      changes=[change], status="COMPLETED"))

    def result(self, text: str) -> JunieWriter:
        return self.write(agent_event(self.at(), "LlmResponseMetadataEvent",
                                      modelUsage=[{"model": "anthropic/claude-sonnet-4", "inputTokens": 10,
                                                   "outputTokens": 20}]),
                          agent_event(self.at(), "ResultBlockUpdatedEvent", stepId=self.step("result"), result=text))

    def rename(self, task_name: str) -> JunieWriter:
        self.task_name = task_name
        self.touch_index()
        return self
