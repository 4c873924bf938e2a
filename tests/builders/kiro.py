"""Kiro CLI stores (docs/formats.md §24) written as the CLI writes them, for tests.

``KiroWriter`` appends 2.x ``{version, kind, data}`` lines to ``sessions/cli/<uuid>.jsonl`` and rewrites
the ``<uuid>.json`` sidecar after each turn, as kiro-cli 2.6 does; ``rewind`` forks a new session that
replays the parent's lines up to a prompt under the same message ids (2.6's ``/rewind``).
``KiroV3Writer`` writes the V3 engine's ``<hash>/<session dir>/messages.jsonl`` and ``session.json``.
``create_db`` / ``add_conversation`` write the older ``data.sqlite3``, whose documents
``conversation`` builds.
"""

from __future__ import annotations

import json
import sqlite3
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms, iso

MODEL = "claude-sonnet-4.5"


def line(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"version": "v1", "kind": kind, "data": data}


def text_block(text: str) -> dict[str, Any]:
    return {"kind": "text", "data": text}


def tool_use_block(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "toolUse", "data": {"toolUseId": tool_id, "name": name, "input": tool_input}}


def shell_result(tool_id: str, stdout: str, stderr: str = "", exit_status: int = 0,
                 status: str = "success") -> dict[str, Any]:
    """A ToolResults entry for a shell call: the JSON {exit_status, stdout, stderr} item."""
    out = {"exit_status": f"exit status: {exit_status}", "stdout": stdout, "stderr": stderr}
    return {"kind": "toolResult", "data": {"toolUseId": tool_id, "content": [{"kind": "json", "data": out}],
                                           "status": status}}


def text_result(tool_id: str, text: str, status: str = "success") -> dict[str, Any]:
    return {"kind": "toolResult", "data": {"toolUseId": tool_id, "content": [{"kind": "text", "data": text}],
                                           "status": status}}


class KiroWriter:
    """One 2.x session: ``<kiro home>/sessions/cli/<id>.jsonl`` and its sidecar, written turn by turn."""

    def __init__(self, kiro_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 start: datetime = BASE_TIME, parent: str | None = None, reason: str = "subagent") -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.folder = kiro_home / "sessions" / "cli"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{self.session_id}.jsonl"
        self.sidecar_path = self.folder / f"{self.session_id}.json"
        self.created = start
        self.t = start
        self.parent = parent
        self.reason = reason
        self.title: str | None = None
        self.lines: list[dict[str, Any]] = []
        self.turns: list[list[str]] = []  # message ids per user turn (the sidecar's user_turn_metadatas)

    def write(self, obj: dict[str, Any]) -> None:
        self.lines.append(obj)
        with self.path.open("ab") as f:
            f.write(orjson.dumps(obj) + b"\n")

    def _mid(self) -> str:
        return str(_uuid.uuid4())

    def prompt(self, text: str) -> KiroWriter:
        self.t += timedelta(seconds=5)
        mid = self._mid()
        self.write(line("Prompt", {"message_id": mid, "content": [text_block(text)],
                                   "meta": {"timestamp": epoch_ms(self.t) // 1000}}))
        self.title = self.title or text
        self.turns.append([mid])
        return self

    def assistant(self, text: str, tools: list[tuple[str, dict[str, Any]]] | None = None) -> KiroWriter:
        """An AssistantMessage: its text (empty when it only calls tools), then its tool uses."""
        blocks = [text_block(text)] + [tool_use_block(f"tooluse_{self._mid()[:8]}", n, i) for n, i in tools or []]
        mid = self._mid()
        self.write(line("AssistantMessage", {"message_id": mid, "content": blocks}))
        self.turns[-1].append(mid)
        return self

    def results(self, results: list[dict[str, Any]]) -> KiroWriter:
        mid = self._mid()
        self.write(line("ToolResults", {"message_id": mid, "content": results, "results": {}}))
        self.turns[-1].append(mid)
        return self

    def shell(self, command: str, stdout: str, reply: str) -> KiroWriter:
        """A turn's tool round: the call, its output, then the assistant's reply."""
        self.assistant("", [("shell", {"command": command, "__tool_use_purpose": f"Run {command}"})])
        tool_id = self.lines[-1]["data"]["content"][1]["data"]["toolUseId"]
        self.results([shell_result(tool_id, stdout)])
        return self.assistant(reply).save()

    def save(self) -> KiroWriter:
        """Rewrite the sidecar, as kiro-cli does at the end of each turn."""
        self.t += timedelta(seconds=2)
        turns = [{"loop_id": {"agent_id": {"name": "kiro_default", "parent_id": None, "rand": None}, "rand": 1},
                  "result": {"Ok": {"id": self._mid(), "role": "assistant", "content": [], "meta": {}}},
                  "message_ids": ids, "end_reason": "UserTurnEnd", "end_timestamp": iso(self.t),
                  "input_token_count": 0, "output_token_count": 0, "context_usage_percentage": 4.5,
                  "metering_usage": [{"value": 0.016, "unit": "credit", "unitPlural": "credits"}]}
                 for ids in self.turns]
        doc: dict[str, Any] = {"session_id": self.session_id, "cwd": self.cwd, "created_at": iso(self.created),
                               "updated_at": iso(self.t), "title": self.title or "",
                               "session_created_reason": self.reason}
        if self.parent is not None:
            doc["parent_session_id"] = self.parent
        doc["session_state"] = {"version": "v1", "conversation_metadata": {"user_turn_metadatas": turns},
                                "rts_model_state": {"conversation_id": self.session_id,
                                                    "model_info": {"model_name": MODEL, "model_id": MODEL}},
                                "agent_name": "kiro_default"}
        self.sidecar_path.write_text(json.dumps(doc, indent=2))
        return self

    def rewind(self, prompt_index: int, session_id: str | None = None) -> KiroWriter:
        """/rewind to the ``prompt_index``-th prompt: a new session replaying this one's lines before it and
        that prompt itself (the same message ids), whose sidecar names this one as its parent."""
        prompts = [i for i, obj in enumerate(self.lines) if obj["kind"] == "Prompt"]
        end = prompts[prompt_index + 1] if prompt_index + 1 < len(prompts) else len(self.lines)
        fork = KiroWriter(self.folder.parent.parent, self.cwd, session_id, start=self.t, parent=self.session_id,
                          reason="rewind")
        for obj in self.lines[:end]:
            fork.write(obj)
            if obj["kind"] == "Prompt":
                fork.title = fork.title or obj["data"]["content"][0]["data"]
                fork.turns.append([obj["data"]["message_id"]])
            else:
                fork.turns[-1].append(obj["data"]["message_id"])
        return fork.save()


# --- the V3 engine -----------------------------------------------------------------------------------
class KiroV3Writer:
    """One V3 session: ``<kiro home>/sessions/<hash>/<folder>/messages.jsonl`` and ``session.json``."""

    def __init__(self, kiro_home: Path, cwd: str = "/home/dev/app", folder: str | None = None, *,
                 title: str | None = None, start: datetime = BASE_TIME, parent: str | None = None,
                 workspace_hash: str = "8e890988228762f5") -> None:
        self.session_id = folder or f"sess_{_uuid.uuid4()}"
        self.dir = kiro_home / "sessions" / workspace_hash / self.session_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "messages.jsonl"
        self.t = start
        meta: dict[str, Any] = {"schemaVersion": "1.0.0", "dataModelVersion": 1, "id": self.session_id,
                                "workspacePaths": [cwd], "rootPaths": [cwd], "createdAt": iso(start),
                                "lastModifiedAt": iso(start), "agentMode": "vibe", "modelId": "auto",
                                "status": "idle"}
        if title is not None:
            meta["title"] = title
        if parent is not None:
            meta["parentSessionId"] = parent
        self.meta = meta
        self._save()

    def _save(self) -> None:
        (self.dir / "session.json").write_text(json.dumps(self.meta))

    def add(self, payload: dict[str, Any], line_id: str | None = None) -> str:
        self.t += timedelta(seconds=1)
        lid = line_id or str(_uuid.uuid4())
        with self.path.open("ab") as f:
            f.write(orjson.dumps({"id": lid, "timestamp": iso(self.t), "payload": payload}) + b"\n")
        self.meta["lastModifiedAt"] = iso(self.t)
        self._save()
        return lid

    def user(self, text: str) -> KiroV3Writer:
        self.add({"type": "user", "content": text, "images": [], "documents": []})
        return self

    def say(self, text: str, op: str = "Say") -> KiroV3Writer:
        self.add({"type": "assistant", "content": text, "operationType": op, "executionId": "exec-1"})
        return self

    def tool(self, name: str, args: dict[str, Any], output: str, *, success: bool = True) -> KiroV3Writer:
        call = f"call-{_uuid.uuid4().hex[:8]}"
        self.add({"type": "tool_call", "toolCallId": call, "toolName": name, "args": args, "status": "completed"})
        self.add({"type": "tool_result", "toolCallId": call, "content": output, "success": success})
        return self


# --- the older SQLite store ------------------------------------------------------------------------
SCHEMA = """
CREATE TABLE migrations (id INTEGER PRIMARY KEY, version INTEGER NOT NULL, migration_time INTEGER NOT NULL);
CREATE TABLE conversations (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE conversations_v2 (
    key TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (key, conversation_id)
);
CREATE INDEX idx_conversations_v2_key_updated ON conversations_v2(key, updated_at DESC);
CREATE INDEX idx_conversations_v2_updated_at ON conversations_v2(updated_at DESC);
"""


def create_db(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    """An empty ``data.sqlite3`` with the tables kiro-cli creates (WAL, as it runs, unless ``wal`` is off)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SCHEMA)
    con.commit()
    return con


def prompt_entry(prompt: str, at: datetime, cwd: str, assistant: dict[str, Any], end: datetime | None = None,
                 content: dict[str, Any] | None = None) -> dict[str, Any]:
    """One history entry: the user's message (a prompt, or ``content``), the assistant's answer."""
    user = {"additional_context": "", "env_context": {"env_state": {"operating_system": "linux",
                                                                    "current_working_directory": cwd}},
            "content": content if content is not None else {"Prompt": {"prompt": prompt}},
            "timestamp": at.isoformat(), "images": None}
    meta = {"request_id": str(_uuid.uuid4()), "stream_end_timestamp_ms": epoch_ms(end or at + timedelta(seconds=3))}
    return {"user": user, "assistant": assistant, "request_metadata": meta}


def response(text: str) -> dict[str, Any]:
    return {"Response": {"message_id": str(_uuid.uuid4()), "content": text}}


def tool_use(text: str, uses: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {"ToolUse": {"message_id": str(_uuid.uuid4()), "content": text,
                        "tool_uses": [{"id": i, "name": n, "orig_name": n, "args": a, "orig_args": a}
                                      for i, n, a in uses]}}


def tool_results(results: list[tuple[str, str, str]]) -> dict[str, Any]:
    """``ToolUseResults`` content: (tool use id, output text, status)."""
    return {"ToolUseResults": {"tool_use_results": [
        {"tool_use_id": i, "content": [{"Text": t}], "status": s} for i, t, s in results]}}


def conversation(conversation_id: str, history: list[Any], **extra: Any) -> dict[str, Any]:
    return {"conversation_id": conversation_id, "next_message": None, "history": history, "transcript": [],
            "tools": {}, "context_manager": None, "model": MODEL, **extra}


def add_conversation(con: sqlite3.Connection, key: str, doc: dict[str, Any], created: datetime,
                     updated: datetime) -> None:
    """Insert or replace a conversation row, as kiro-cli saves after every turn."""
    con.execute("INSERT OR REPLACE INTO conversations_v2 VALUES (?, ?, ?, ?, ?)",
                (key, doc["conversation_id"], json.dumps(doc), epoch_ms(created), epoch_ms(updated)))
    con.commit()
