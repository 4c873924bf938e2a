"""Gemini CLI session records (docs/formats.md §3) and a writer of whole sessions for tests.

The record functions are pure and return the dicts Gemini CLI writes, keys in its order: the
metadata line, message records (``user``/``gemini``/``info``), ``$set`` updates and checkpoints,
``$rewindTo``. ``GeminiWriter`` lays a session out as under ``~/.gemini`` (``projects.json``,
``tmp/<slug>/.project_root``, ``tmp/<slug>/chats/session-….jsonl``).
"""

from __future__ import annotations

import hashlib
import re
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Self

import orjson

from tests.builders.common import BASE_TIME, iso

MODEL = "gemini-2.5-pro"
CONTEXT_ACK = "Got it. Thanks for the context!"


def project_hash(project_root: str) -> str:
    """The SHA-256 hex of the project root: ``projectHash`` and the legacy project folder name."""
    return hashlib.sha256(project_root.encode()).hexdigest()


def slugify(project_root: str) -> str:
    """The registry's short id for a project: its folder name, lower-case, non-alphanumerics as '-'."""
    base = project_root.rstrip("/").rsplit("/", 1)[-1].lower()
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", base)).strip("-") or "project"


def session_file_name(start: datetime, session_id: str) -> str:
    """``session-<YYYY-MM-DDTHH-MM>-<first 8 of the id>.jsonl`` (main sessions, v0.40+)."""
    return f"session-{start.strftime('%Y-%m-%dT%H-%M')}-{session_id[:8]}.jsonl"


def registry(projects: dict[str, str]) -> dict[str, Any]:
    """``~/.gemini/projects.json``: project root -> slug."""
    return {"projects": projects}


def metadata(session_id: str, project_root: str, timestamp: str, *, kind: str | None = "main",
             summary: str | None = None, directories: list[str] | None = None) -> dict[str, Any]:
    """The first line of a session log."""
    d: dict[str, Any] = {"sessionId": session_id, "projectHash": project_hash(project_root),
                         "startTime": timestamp, "lastUpdated": timestamp}
    if kind is not None:
        d["kind"] = kind
    if directories is not None:
        d["directories"] = directories
    if summary is not None:
        d["summary"] = summary
    return d


def user_message(mid: str, timestamp: str, text: str, *, display: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"id": mid, "timestamp": timestamp, "type": "user", "content": [{"text": text}]}
    if display is not None:
        d["displayContent"] = [{"text": display}]
    return d


def thought(subject: str, description: str, timestamp: str) -> dict[str, Any]:
    return {"subject": subject, "description": description, "timestamp": timestamp}


def tool_call(call_id: str, name: str, args: dict[str, Any], output: str | None, timestamp: str, *,
              status: str = "success", display: str | None = None) -> dict[str, Any]:
    """A ``toolCalls[]`` entry; ``output`` None is a call still waiting for its result."""
    d: dict[str, Any] = {"id": call_id, "name": name, "args": args}
    if output is not None:
        d["result"] = [{"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}]
    d["status"] = status
    d["timestamp"] = timestamp
    if display is not None:
        d["resultDisplay"] = display
    return d


def gemini_message(mid: str, timestamp: str, text: str, *, thoughts: list[dict[str, Any]] | None = None,
                   tool_calls: list[dict[str, Any]] | None = None, model: str = MODEL,
                   tokens: dict[str, int] | None = None, kind: str = "gemini") -> dict[str, Any]:
    """A model turn; ``kind`` is the fork's own type where it renamed it (Tabnine CLI: ``tabnine``)."""
    d: dict[str, Any] = {"id": mid, "timestamp": timestamp, "type": kind, "content": text,
                         "thoughts": thoughts or []}
    if tokens is not None:
        d["tokens"] = tokens
    d["model"] = model
    if tool_calls:
        d["toolCalls"] = tool_calls
    return d


def info_message(mid: str, timestamp: str, text: str, kind: str = "info") -> dict[str, Any]:
    """An ``info`` / ``error`` / ``warning`` record."""
    return {"id": mid, "timestamp": timestamp, "type": kind, "content": text}


def set_metadata(**fields: Any) -> dict[str, Any]:
    return {"$set": fields}


def checkpoint(messages: list[dict[str, Any]], last_updated: str) -> dict[str, Any]:
    """``$set.messages``: the whole message list, as ``updateMessagesFromHistory`` writes it."""
    return {"$set": {"messages": messages, "lastUpdated": last_updated}}


def rewind(mid: str) -> dict[str, Any]:
    return {"$rewindTo": mid}


def session_context(workspace: str, tmp_dir: str) -> str:
    """The environment block Gemini CLI sends as the first user turn."""
    return ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
            f"The project's temporary directory is: {tmp_dir}\n- **Workspace Directories:**\n  - {workspace}\n"
            f"- **Directory Structure:**\n\nShowing up to 200 items (files + folders).\n\n{workspace}/\n"
            "├───README.md\n└───src/\n</session_context>")


def legacy_document(meta: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A pre-0.40 ``session-*.json``: the metadata and every message in one document."""
    return {**meta, "messages": messages}


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


class GeminiWriter:
    """Appends one session's records under a ``.gemini`` folder; ids and times advance per record."""

    ASSISTANT_TYPE = "gemini"  # a fork's writer (tests/builders/tabnine.py) names its own
    MODEL = MODEL

    def __init__(self, gemini_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 start: datetime = BASE_TIME, register: bool = True, parent: str | None = None,
                 directories: list[str] | None = None) -> None:
        self.cwd = cwd
        self.session_id = session_id or str(_uuid.uuid4())
        self.t = start
        self._n = 0
        slug = slugify(cwd)
        project = gemini_home / "tmp" / slug
        if register:
            path = gemini_home / "projects.json"
            known = orjson.loads(path.read_bytes())["projects"] if path.exists() else {}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(orjson.dumps(registry({**known, cwd: slug})))
        chats = project / "chats" / parent if parent else project / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        self.path = chats / (f"{self.session_id}.jsonl" if parent else session_file_name(start, self.session_id))
        self.write(metadata(self.session_id, cwd, iso(start), kind="subagent" if parent else "main",
                            directories=directories))

    def _ts(self) -> str:
        self.t += timedelta(seconds=2)
        return iso(self.t)

    def next_id(self) -> str:
        self._n += 1
        return f"msg-{self._n}"

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as f:
            f.write(orjson.dumps(obj) + b"\n")

    def user(self, text: str) -> Self:
        self.write(user_message(self.next_id(), self._ts(), text))
        return self

    def assistant(self, text: str, *, thinking: str | None = None) -> Self:
        ts = self._ts()
        thoughts = [thought("Plan", thinking, ts)] if thinking else []
        self.write(gemini_message(self.next_id(), ts, text, thoughts=thoughts, model=self.MODEL,
                                  kind=self.ASSISTANT_TYPE))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> Self:
        ts = self._ts()
        call = tool_call(f"{name}-{self._n + 1}", name, args, output, ts)
        self.write(gemini_message(self.next_id(), ts, "", tool_calls=[call], model=self.MODEL,
                                  kind=self.ASSISTANT_TYPE))
        return self

    def title(self, summary: str) -> Self:
        self.write(set_metadata(summary=summary, lastUpdated=self._ts()))
        return self
