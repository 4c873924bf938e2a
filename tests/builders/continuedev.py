"""Continue sessions (docs/formats.md §25) written as Continue writes them, for tests.

``ContinueWriter`` keeps one session's ``history`` and rewrites ``sessions/<sessionId>.json`` whole after
every change, updating its entry in ``sessions/sessions.json`` too, as Continue's ``History.save`` does.
Items follow ``core/index.d.ts``: ``{message, contextItems, toolCallStates?, reasoning?,
conversationSummary?}``; tool calls carry their arguments as a JSON string.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME, epoch_ms


def context_item(name: str, content: str) -> dict[str, Any]:
    return {"name": name, "description": name, "content": content, "uri": {"type": "file", "value": f"file:///{name}"}}


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class ContinueWriter:
    """One session under ``<global dir>/sessions``; every call appends to its history and saves it whole."""

    def __init__(self, global_dir: Path, session_id: str | None = None, *, title: str = "New Session",
                 workspace: str = "/home/dev/app", created: datetime = BASE_TIME, mode: str = "agent",
                 index: bool = True) -> None:
        self.folder = global_dir / "sessions"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.session_id = session_id or str(_uuid.uuid4())
        self.path = self.folder / f"{self.session_id}.json"
        self.title = title
        self.workspace = workspace
        self.created = created
        self.mode = mode
        self.index = index
        self.history: list[dict[str, Any]] = []
        self.calls = 0

    def add(self, message: dict[str, Any], **extra: Any) -> ContinueWriter:
        self.history.append({"message": message, "contextItems": extra.pop("context", []), **extra})
        return self.save()

    def user(self, text: str, context: list[dict[str, Any]] | None = None) -> ContinueWriter:
        return self.add({"role": "user", "content": text, "id": str(_uuid.uuid4())}, context=context or [])

    def assistant(self, text: str, *, reasoning: str | None = None) -> ContinueWriter:
        extra: dict[str, Any] = {}
        if reasoning is not None:
            extra["reasoning"] = {"text": reasoning, "startAt": 0, "active": False}
        return self.add({"role": "assistant", "content": text, "id": str(_uuid.uuid4())}, **extra)

    def tool(self, name: str, args: dict[str, Any], output: str, *, as_message: bool = False,
             status: str = "done") -> ContinueWriter:
        """An assistant turn calling ``name``: the result in its toolCallStates (the IDE's way), or also as a
        following role "tool" message (``as_message``)."""
        self.calls += 1
        call = tool_call(f"tc{self.calls}", name, args)
        state = {"toolCallId": call["id"], "toolCall": call, "status": status, "parsedArgs": args,
                 "output": [{"name": name, "description": "tool output", "content": output}]}
        self.add({"role": "assistant", "content": "", "toolCalls": [call]}, toolCallStates=[state])
        if as_message:
            self.add({"role": "tool", "content": output, "toolCallId": call["id"]})
        return self

    def document(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "title": self.title, "workspaceDirectory": self.workspace,
                "history": self.history, "mode": self.mode, "chatModelTitle": "Claude Sonnet 4.5",
                "usage": {"promptTokens": 1200, "completionTokens": 300, "totalTokens": 1500}}

    def save(self) -> ContinueWriter:
        self.path.write_text(json.dumps(self.document(), indent=2))
        if self.index:
            index_path = self.folder / "sessions.json"
            entries = json.loads(index_path.read_text()) if index_path.exists() else []
            entries = [e for e in entries if e.get("sessionId") != self.session_id]
            entries.append({"sessionId": self.session_id, "title": self.title,
                            "dateCreated": str(epoch_ms(self.created)), "workspaceDirectory": self.workspace,
                            "messageCount": len(self.history)})
            index_path.write_text(json.dumps(entries))
        return self
