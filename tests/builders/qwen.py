"""Qwen Code ChatRecords (docs/formats.md §10) and a writer of whole sessions for tests.

Every record starts from ``record``: the tree link (``uuid``/``parentUuid``), the session's
fields, type and time. ``QwenWriter`` keeps the chain: each record's parent is the previous one,
and ``rewind`` starts a new branch from an earlier record, as Qwen's ``/rewind`` does.
"""

from __future__ import annotations

import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso, munge

VERSION = "0.21.13"
MODEL = "qwen3-coder-plus"
HOOK_OPEN = "<qwen:user-prompt-submit-context>"
HOOK_CLOSE = "</qwen:user-prompt-submit-context>"


def session_path(qwen_home: Path, cwd: str, session_id: str, *, archived: bool = False) -> Path:
    """``<qwen home>/projects/<sanitized cwd>/chats[/archive]/<session id>.jsonl``."""
    chats = qwen_home / "projects" / munge(cwd) / "chats"
    return (chats / "archive" if archived else chats) / f"{session_id}.jsonl"


def record(session_id: str, uuid: str, parent: str | None, timestamp: str, kind: str, cwd: str, *,
           branch: str | None = None, version: str = VERSION, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"uuid": uuid, "parentUuid": parent, "sessionId": session_id, "timestamp": timestamp,
                         "type": kind, "cwd": cwd, "version": version}
    if branch is not None:
        d["gitBranch"] = branch
    d.update(extra)
    return d


def text_part(text: str, *, thought: bool = False) -> dict[str, Any]:
    return {"text": text, "thought": True} if thought else {"text": text}


def call_part(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"functionCall": {"id": call_id, "name": name, "args": args}}


def response_part(call_id: str, name: str, output: str) -> dict[str, Any]:
    return {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}


def hook_part(context: str) -> dict[str, Any]:
    """The trailing part a UserPromptSubmit hook adds to the prompt."""
    return {"text": f"{HOOK_OPEN}\n{context}\n{HOOK_CLOSE}"}


def user_fields(text: str, *, hook_context: str | None = None, display: bool = True) -> dict[str, Any]:
    """``systemPayload`` + ``message`` of a user prompt; ``display=False`` writes parts only (older builds)."""
    parts = [text_part(text)] + ([hook_part(hook_context)] if hook_context is not None else [])
    d: dict[str, Any] = {}
    if display:
        payload: dict[str, Any] = {"displayText": text}
        if hook_context is not None:
            payload["hookContext"] = hook_context
        d["systemPayload"] = payload
    d["message"] = {"role": "user", "parts": parts}
    return d


def model_fields(parts: list[dict[str, Any]], model: str = MODEL) -> dict[str, Any]:
    return {"model": model, "message": {"role": "model", "parts": parts}}


def tool_result_fields(call_id: str, name: str, output: str) -> dict[str, Any]:
    return {"message": {"role": "user", "parts": [response_part(call_id, name, output)]},
            "toolCallResult": {"callId": call_id, "status": "success", "resultDisplay": output}}


def system_fields(subtype: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"subtype": subtype, "systemPayload": payload}


class QwenWriter:
    """Appends one session's records; uuids and times advance per record, parents follow the chain."""

    def __init__(self, qwen_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 branch: str | None = "main", start: datetime = BASE_TIME, archived: bool = False) -> None:
        self.cwd = cwd
        self.branch = branch
        self.session_id = session_id or str(_uuid.uuid4())
        self.path = session_path(qwen_home, cwd, self.session_id, archived=archived)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.t = start
        self.last: str | None = None
        self.uuids: list[str] = []

    def add(self, kind: str, **fields: Any) -> str:
        """Write one record as the child of the last one; returns its uuid."""
        self.t += timedelta(seconds=2)
        uuid = str(_uuid.uuid4())
        self.write(record(self.session_id, uuid, self.last, iso(self.t), kind, self.cwd, branch=self.branch,
                          **fields))
        self.last = uuid
        self.uuids.append(uuid)
        return uuid

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as f:
            f.write(orjson.dumps(obj) + b"\n")

    def user(self, text: str, *, hook_context: str | None = None) -> QwenWriter:
        self.add("user", **user_fields(text, hook_context=hook_context))
        return self

    def assistant(self, text: str, *, thinking: str | None = None) -> QwenWriter:
        parts = ([text_part(thinking, thought=True)] if thinking else []) + [text_part(text)]
        self.add("assistant", **model_fields(parts))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> QwenWriter:
        call_id = f"call-{len(self.uuids)}"
        self.add("assistant", **model_fields([call_part(call_id, name, args)]))
        self.add("tool_result", **tool_result_fields(call_id, name, output))
        return self

    def title(self, title: str, source: str = "manual") -> QwenWriter:
        self.add("system", **system_fields("custom_title", {"customTitle": title, "titleSource": source}))
        return self

    def rewind(self, to_uuid: str) -> QwenWriter:
        """Branch from ``to_uuid``: the rewind record hangs under it and the next records under that."""
        self.last = to_uuid
        self.add("system", **system_fields("rewind", {"targetUuid": to_uuid}))
        return self
