"""Factory Droid session files (docs/formats.md §22) and a writer of whole sessions for tests.

``DroidWriter`` writes ``<factory home>/sessions/<cwd slug>/<id>.jsonl`` (a ``session_start`` line,
then ``message`` records holding Anthropic-style blocks, each the child of the previous one) and
the ``<id>.settings.json`` beside it.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso

VERSION = "0.81.0"
MODEL = "claude-sonnet-4-5-20250929"


def slug(cwd: str) -> str:
    """Droid's project folder name: the cwd with every ``/`` replaced by ``-``."""
    return cwd.replace("/", "-")


def session_start(session_id: str, cwd: str, title: str | None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "session_start", "id": session_id, "title": title, "sessionTitle": title,
                         "owner": "dev", "version": VERSION, "cwd": cwd}
    d.update(extra)
    return d


def message(msg_id: str, parent: str, timestamp: str, role: str, content: object) -> dict[str, Any]:
    return {"type": "message", "id": msg_id, "parentId": parent, "timestamp": timestamp,
            "message": {"role": role, "content": content}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(tool_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args}


def tool_result(tool_id: str, output: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": output}


def settings(model: str = MODEL) -> dict[str, Any]:
    return {"model": model, "reasoningEffort": "medium", "autonomyLevel": "auto-low",
            "tokenUsage": {"inputTokens": 1800, "outputTokens": 420, "cacheCreationTokens": 0,
                           "cacheReadTokens": 5200, "thinkingTokens": 90}}


class DroidWriter:
    """Appends one Droid session's records, 3 s apart."""

    def __init__(self, factory_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 title: str | None = None, start: datetime = BASE_TIME, flat: bool = False,
                 **start_fields: Any) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.t = start
        folder = factory_home / "sessions" if flat else factory_home / "sessions" / slug(cwd)
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{self.session_id}.jsonl"
        (folder / f"{self.session_id}.settings.json").write_text(json.dumps(settings()))
        self.last = self.session_id
        self.n = 0
        self.write(session_start(self.session_id, cwd, title, **start_fields))

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(obj) + b"\n")

    def add(self, role: str, content: object) -> DroidWriter:
        self.n += 1
        self.t += timedelta(seconds=3)
        msg_id = f"m{self.n}"
        self.write(message(msg_id, self.last, iso(self.t), role, content))
        self.last = msg_id
        return self

    def user(self, prompt: str, *, reminder: str | None = None) -> DroidWriter:
        """A prompt, with Droid's ``<system-reminder>`` block in front of it when given."""
        body = prompt if reminder is None else f"<system-reminder>\n{reminder}\n</system-reminder>\n\n{prompt}"
        return self.add("user", [text(body)])

    def assistant(self, reply: str, *, thought: str | None = None) -> DroidWriter:
        return self.add("assistant", ([thinking(thought)] if thought else []) + [text(reply)])

    def tool(self, name: str, args: dict[str, Any], output: str) -> DroidWriter:
        tool_id = f"toolu_{self.n:02d}"
        self.add("assistant", [tool_use(tool_id, name, args)])
        return self.add("user", [tool_result(tool_id, output)])
