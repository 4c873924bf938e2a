"""Writers of real-format Claude Code and Codex transcripts for tests (FORMATS.md §1, §2)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BASE_TIME = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def munge(cwd: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in cwd)


class ClaudeWriter:
    """Appends Claude Code lines to ``<root>/<munged cwd>/<session>.jsonl``."""

    def __init__(self, root: Path, session_id: str | None = None, *, cwd: str = "/home/dev/app",
                 branch: str = "main", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.cwd = cwd
        self.branch = branch
        self.t = start
        self.path = root / munge(cwd) / f"{self.session_id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.parent: str | None = None
        self.n = 0

    def _env(self, kind: str) -> dict[str, Any]:
        self.n += 1
        self.t += timedelta(seconds=7)
        u = f"{self.session_id[:8]}-{self.n}"
        env = {"type": kind, "uuid": u, "parentUuid": self.parent, "isSidechain": False, "userType": "external",
               "cwd": self.cwd, "sessionId": self.session_id, "version": "2.1.40", "gitBranch": self.branch,
               "timestamp": iso(self.t)}
        self.parent = u
        return env

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def user(self, text: str) -> ClaudeWriter:
        self.write({**self._env("user"), "message": {"role": "user", "content": text}})
        return self

    def assistant(self, text: str) -> ClaudeWriter:
        self.write({**self._env("assistant"), "requestId": f"req_{self.n}",
                    "message": {"id": f"msg_{self.n}", "model": "claude-sonnet-4-5", "role": "assistant",
                                "content": [{"type": "text", "text": text}]}})
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> ClaudeWriter:
        tid = f"toolu_{self.n}"
        self.write({**self._env("assistant"), "message": {"id": f"msg_{self.n}", "role": "assistant",
                    "content": [{"type": "tool_use", "id": tid, "name": name, "input": args}]}})
        self.write({**self._env("user"), "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": output}]}})
        return self

    def title(self, title: str) -> ClaudeWriter:
        self.write({"type": "custom-title", "sessionId": self.session_id, "customTitle": title})
        return self


class CodexWriter:
    """Appends Codex rollout lines under ``<root>/2026/03/01/rollout-...-<id>.jsonl``."""

    def __init__(self, root: Path, session_id: str | None = None, *, cwd: str = "/home/dev/api",
                 branch: str = "main", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.t = start
        day = root / start.strftime("%Y/%m/%d")
        day.mkdir(parents=True, exist_ok=True)
        self.path = day / f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{self.session_id}.jsonl"
        self._line("session_meta", {"id": self.session_id, "timestamp": iso(self.t), "cwd": cwd,
                                    "originator": "codex_cli_rs", "cli_version": "0.120.0", "source": "cli",
                                    "git": {"branch": branch, "commit_hash": "abc123"}})
        self._line("turn_context", {"cwd": cwd, "model": "gpt-5-codex"})
        self._item({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>"}]})

    def _line(self, kind: str, payload: dict[str, Any]) -> None:
        self.t += timedelta(seconds=5)
        with self.path.open("a", encoding="utf-8") as fh:
            line = {"timestamp": iso(self.t), "type": kind, "payload": payload}
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    def _item(self, payload: dict[str, Any]) -> None:
        self._line("response_item", payload)

    def user(self, text: str) -> CodexWriter:
        self._item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        self._line("event_msg", {"type": "user_message", "message": text, "images": []})
        return self

    def assistant(self, text: str) -> CodexWriter:
        self._item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
        self._line("event_msg", {"type": "agent_message", "message": text})
        return self

    def tool(self, command: str, output: str) -> CodexWriter:
        cid = f"call_{self.t.timestamp():.0f}"
        self._item({"type": "function_call", "name": "shell", "call_id": cid,
                    "arguments": json.dumps({"command": ["bash", "-lc", command]})})
        self._item({"type": "function_call_output", "call_id": cid, "output": output})
        return self
