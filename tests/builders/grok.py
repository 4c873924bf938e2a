"""Grok Build session folders (docs/formats.md §21) and a writer of whole sessions for tests.

``GrokWriter`` writes ``<grok home>/sessions/<url-encoded cwd>/<id>/``: ``updates.jsonl``
envelopes as Grok Build 1.0 persists them (text streamed as chunks, a tool call then its updates,
``rewind_marker`` appended by ``/rewind``) and the ``summary.json`` index entry.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from tests.builders.common import BASE_TIME, epoch_ms, iso_ms

MODEL = "grok-build-1"


def envelope(session_id: str, update: dict[str, Any], seconds: int, *, xai: bool = False) -> dict[str, Any]:
    """One line of updates.jsonl: ``_x.ai/session/update`` for xAI's own update kinds."""
    return {"timestamp": seconds, "method": "_x.ai/session/update" if xai else "session/update",
            "params": {"sessionId": session_id, "update": update}}


def text_chunk(kind: str, text: str, **meta: Any) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if meta:
        update["_meta"] = meta
    return update


def tool_call(call_id: str, title: str, kind: str, raw_input: dict[str, Any] | None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, "kind": kind,
                              "status": "pending"}
    if raw_input is not None:
        update["rawInput"] = raw_input
    return update


def tool_update(call_id: str, status: str, output: str | None = None, **extra: Any) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status, **extra}
    if output is not None:
        update["content"] = [{"type": "content", "content": {"type": "text", "text": output}}]
    return update


def summary(session_id: str, cwd: str, created: str, updated: str, *, title: str | None = None,
            parent: str | None = None, branch: str | None = "main") -> dict[str, Any]:
    doc: dict[str, Any] = {"info": {"id": session_id, "cwd": cwd}, "session_summary": None, "generated_title": title,
                           "title_is_manual": False, "created_at": created, "updated_at": updated,
                           "last_active_at": updated, "num_messages": 0, "current_model_id": MODEL,
                           "parent_session_id": parent, "agent_name": "grok-build", "chat_format_version": 1,
                           "head_branch": branch}
    return doc


class GrokWriter:
    """Appends one session's updates; the envelope clock advances 2 s per line."""

    def __init__(self, grok_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 start: datetime = BASE_TIME, title: str | None = None, parent: str | None = None,
                 branch: str | None = "main") -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd, self.title, self.parent, self.branch = cwd, title, parent, branch
        self.seconds = epoch_ms(start) // 1000
        self.created = self.seconds
        self.dir = grok_home / "sessions" / quote(cwd, safe="") / self.session_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "updates.jsonl"
        self.path.touch()
        self.prompts = 0
        self.calls = 0
        self.save_summary()

    def write(self, update: dict[str, Any], *, xai: bool = False) -> GrokWriter:
        self.seconds += 2
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(envelope(self.session_id, update, self.seconds, xai=xai)) + b"\n")
        return self

    def save_summary(self) -> None:
        doc = summary(self.session_id, self.cwd, iso_ms(self.created * 1000), iso_ms(self.seconds * 1000),
                      title=self.title, parent=self.parent, branch=self.branch)
        (self.dir / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")

    def retitle(self, title: str) -> GrokWriter:
        self.title = title
        self.save_summary()
        return self

    def user(self, *chunks: str) -> GrokWriter:
        """A prompt, written as one user chunk per argument (the next prompt index)."""
        for text in chunks:
            self.write(text_chunk("user_message_chunk", text, promptIndex=self.prompts))
        self.prompts += 1
        return self

    def think(self, *chunks: str) -> GrokWriter:
        for text in chunks:
            self.write(text_chunk("agent_thought_chunk", text, promptId=f"p-{self.prompts}"))
        return self

    def say(self, *chunks: str) -> GrokWriter:
        """The reply, streamed as the given chunks, then the turn's completion."""
        for text in chunks:
            self.write(text_chunk("agent_message_chunk", text, promptId=f"p-{self.prompts}"))
        return self.write({"sessionUpdate": "turn_completed", "prompt_id": f"p-{self.prompts}",
                           "stop_reason": "end_turn"}, xai=True)

    def tool(self, title: str, kind: str, raw_input: dict[str, Any], output: str, *,
             status: str = "completed") -> GrokWriter:
        call_id = f"call_{self.calls}"
        self.calls += 1
        self.write(tool_call(call_id, title, kind, raw_input))
        self.write(tool_update(call_id, "in_progress"))
        return self.write(tool_update(call_id, status, output))

    def rewind(self, target_prompt_index: int) -> GrokWriter:
        """``/rewind``: back to before prompt ``target_prompt_index``; later prompts count from there."""
        self.write({"sessionUpdate": "rewind_marker", "target_prompt_index": target_prompt_index,
                    "created_at": iso_ms(self.seconds * 1000)}, xai=True)
        self.prompts = target_prompt_index
        return self
