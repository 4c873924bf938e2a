"""Rovo Dev session folders (docs/formats.md §34) in the pydantic-ai message shape, rewritten whole.

Built from the public readers' evidence, not from a real capture (none is licence-clean):
``session_context.json`` holds ``message_history``, a list of pydantic-ai ``ModelRequest``
(``kind: "request"``) and ``ModelResponse`` (``kind: "response"``) messages; ``metadata.json`` names
the session. ``RovoWriter`` rewrites both after every change, as the CLI saves its session.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME, iso

MODEL = "anthropic:claude-sonnet-4"


def system_prompt(content: str, at: str) -> dict[str, Any]:
    return {"content": content, "timestamp": at, "dynamic_ref": None, "part_kind": "system-prompt"}


def user_prompt(content: str, at: str) -> dict[str, Any]:
    return {"content": content, "timestamp": at, "part_kind": "user-prompt"}


def tool_return(name: str, call_id: str, content: Any, at: str) -> dict[str, Any]:
    return {"tool_name": name, "content": content, "tool_call_id": call_id, "metadata": None, "timestamp": at,
            "part_kind": "tool-return"}


def text(content: str) -> dict[str, Any]:
    return {"content": content, "id": None, "part_kind": "text"}


def thinking(content: str) -> dict[str, Any]:
    return {"content": content, "id": None, "signature": None, "part_kind": "thinking"}


def tool_call(name: str, call_id: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return {"tool_name": name, "args": args if isinstance(args, str) else json.dumps(args), "tool_call_id": call_id,
            "id": None, "part_kind": "tool-call"}


def request(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"parts": parts, "instructions": None, "kind": "request"}


def response(parts: list[dict[str, Any]], at: str) -> dict[str, Any]:
    return {"parts": parts, "usage": {"input_tokens": 100, "output_tokens": 20}, "model_name": MODEL,
            "timestamp": at, "kind": "response", "provider_name": "anthropic", "vendor_id": None}


class RovoWriter:
    """One session folder under ``<sessions>/<session id>/``."""

    def __init__(self, sessions: Path, session_id: str = "4c0ffee0-0000-4000-8000-000000000001", *,
                 workspace: str | None = "/home/dev/app", title: str | None = None,
                 system: str | None = "You are Rovo Dev, Atlassian's coding agent.",
                 start: datetime = BASE_TIME, **metadata: Any) -> None:
        self.folder = sessions / session_id
        self.folder.mkdir(parents=True, exist_ok=True)
        self.session_id = session_id
        self.t = start
        self.created = iso(start)
        self.meta: dict[str, Any] = {"session_id": session_id, "title": title, "workspace_path": workspace,
                                     "created_at": self.created, "updated_at": self.created, **metadata}
        self.history: list[dict[str, Any]] = []
        self.system = system
        self.calls = 0
        self.save()

    @property
    def path(self) -> Path:
        return self.folder / "session_context.json"

    def at(self) -> str:
        self.t += timedelta(seconds=3)
        return iso(self.t)

    def save(self) -> None:
        self.meta["updated_at"] = iso(self.t)
        self.path.write_text(json.dumps({"message_history": self.history, "usage": {}}, indent=2))
        (self.folder / "metadata.json").write_text(json.dumps(self.meta, indent=2))

    def ask(self, prompt: str) -> RovoWriter:
        at = self.at()
        parts = [system_prompt(self.system, at)] if self.system and not self.history else []
        self.history.append(request([*parts, user_prompt(prompt, at)]))
        self.save()
        return self

    def reply(self, answer: str, *, thought: str | None = None) -> RovoWriter:
        parts = ([thinking(thought)] if thought else []) + [text(answer)]
        self.history.append(response(parts, self.at()))
        self.save()
        return self

    def tool(self, name: str, args: dict[str, Any], output: Any) -> RovoWriter:
        self.calls += 1
        call_id = f"toolu_{self.calls:04d}"
        self.history.append(response([tool_call(name, call_id, args)], self.at()))
        self.history.append(request([tool_return(name, call_id, output, self.at())]))
        self.save()
        return self

    def rename(self, title: str) -> RovoWriter:
        self.meta["title"] = title
        self.save()
        return self
