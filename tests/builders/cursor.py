"""Cursor agent records (docs/formats.md §5): transcript lines, the chat store, and a writer for tests.

A transcript is ``<data>/projects/<slug>/agent-transcripts/<id>/<id>.jsonl`` with one
``{role, message:{content:[blocks]}}`` per line; the chat store is
``<chats>/<md5(workspace)>/<id>/{store.db, meta.json}``. The functions are pure so the tests and
the benchmark generator write the same shapes.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import uuid as _uuid
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

MODEL = "claude-4.5-sonnet"
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def project_slug(cwd: str) -> str:
    """Cursor's project folder name: every run of non-alphanumerics becomes one ``-``."""
    return _NON_ALNUM.sub("-", cwd).strip("-")


def transcript_path(projects: Path, cwd: str, chat_id: str) -> Path:
    """The nested layout of cursor-agent 2026.04.29+; ``projects`` stands for ``~/.cursor/projects``."""
    return projects / project_slug(cwd) / "agent-transcripts" / chat_id / f"{chat_id}.jsonl"


def subagent_path(projects: Path, cwd: str, parent_id: str, child_id: str) -> Path:
    return projects / project_slug(cwd) / "agent-transcripts" / parent_id / "subagents" / f"{child_id}.jsonl"


def chat_dir(chats: Path, cwd: str, chat_id: str) -> Path:
    """``<chats>/<md5(workspace)>/<chat id>``; ``chats`` stands for ``~/.cursor/chats``."""
    return chats / hashlib.md5(cwd.encode(), usedforsecurity=False).hexdigest() / chat_id


def timestamp_tag(t: datetime, utc_offset_h: int = 0) -> str:
    """``<timestamp>Wednesday, Sep 9, 2026, 1:36 AM (UTC+8)</timestamp>`` of ``t`` in a fixed offset."""
    local = t.astimezone(timezone(timedelta(hours=utc_offset_h)))
    hour = local.hour % 12 or 12
    zone = "UTC" if utc_offset_h == 0 else f"UTC{utc_offset_h:+d}"
    body = f"{local:%A}, {local:%b} {local.day}, {local.year}, {hour}:{local:%M} {local:%p} ({zone})"
    return f"<timestamp>{body}</timestamp>"


# --- transcript lines ---------------------------------------------------------------------------

def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(thinking: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking}


def tool_use_block(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    # Cursor writes no tool-use id in transcripts (agentsview #1627: the Subagent call has id null).
    return {"type": "tool_use", "name": name, "input": tool_input}


def tool_result_block(output: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": None, "content": [text_block(output)]}


def user_query(text: str, t: datetime | None = None) -> str:
    """What Cursor writes for a typed prompt: a ``<timestamp>`` tag, then ``<user_query>``."""
    tag = timestamp_tag(t) + "\n" if t is not None else ""
    return f"{tag}<user_query>\n{text}\n</user_query>"


def line(role: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": role, "message": {"content": blocks}}


def turn_ended(status: str = "success") -> dict[str, Any]:
    return {"type": "turn_ended", "status": status}


# --- the chat store -----------------------------------------------------------------------------

def store_meta(agent_id: str, created_at_ms: int, *, name: str = "New Agent", workspace_path: str | None = None,
               latest_root_blob_id: str = "0" * 64) -> dict[str, Any]:
    d: dict[str, Any] = {"agentId": agent_id, "latestRootBlobId": latest_root_blob_id, "name": name,
                         "mode": "default", "createdAt": created_at_ms, "lastUsedModel": MODEL}
    if workspace_path is not None:
        d["workspacePath"] = workspace_path
    return d


def meta_json(created_ms: int, updated_ms: int, *, title: str | None = None,
              has_conversation: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"schemaVersion": 1, "createdAtMs": created_ms, "updatedAtMs": updated_ms,
                         "hasConversation": has_conversation}
    if title is not None:
        d["title"] = title
    return d


def blob(role: str, content: str | list[dict[str, Any]], *, created_at: int | None = None) -> bytes:
    """A JSON message blob (AI SDK shape); the turn graph blobs beside them are protobuf."""
    d: dict[str, Any] = {"id": str(_uuid.uuid4()), "role": role, "content": content}
    if created_at is not None:
        d["createdAt"] = created_at
    return orjson.dumps(d)


def turn_graph_blob(text: str) -> bytes:
    """A stand-in for a protobuf node (field 1, length-delimited): anything not starting with '{'."""
    data = text.encode()
    return b"\x0a" + bytes([len(data) & 0x7F]) + data


def write_store_db(path: Path, meta: dict[str, Any], blobs: list[bytes], *, hex_meta: bool = True,
                   wal: bool = False) -> None:
    """store.db as cursor-agent writes it: ``blobs(id = sha256(data), data)`` and ``meta`` key "0"."""
    path.parent.mkdir(parents=True, exist_ok=True)
    value = orjson.dumps(meta)
    with closing(sqlite3.connect(path)) as con:
        if wal:
            con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS blobs (id TEXT PRIMARY KEY, data BLOB)")
        con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('0', ?)", (value.hex() if hex_meta else value.decode(),))
        for data in blobs:
            con.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (hashlib.sha256(data).hexdigest(), data))
        con.commit()


# --- a writer for tests --------------------------------------------------------------------------

class CursorWriter:
    """Appends transcript lines for one chat under ``<data>/projects`` and keeps its chat folder."""

    def __init__(self, data: Path, chat_id: str | None = None, *, cwd: str = "/home/dev/app",
                 start: datetime = BASE_TIME, chats: Path | None = None) -> None:
        self.chat_id = chat_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.t = start
        self.path = transcript_path(data / "projects", cwd, self.chat_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.chat = chat_dir(chats if chats is not None else data / "chats", cwd, self.chat_id)

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(obj) + b"\n")

    def user(self, text: str) -> CursorWriter:
        self.t += timedelta(minutes=1)
        self.write(line("user", [text_block(user_query(text, self.t))]))
        return self

    def assistant(self, text: str) -> CursorWriter:
        self.write(line("assistant", [text_block(text)]))
        self.write(turn_ended())
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> CursorWriter:
        self.write(line("assistant", [tool_use_block(name, args)]))
        self.write(line("user", [tool_result_block(output)]))
        return self

    def store(self, *, name: str = "New Agent", title: str | None = None) -> CursorWriter:
        """The chat folder cursor-agent keeps: store.db (meta only) and meta.json."""
        created = epoch_ms(BASE_TIME)
        write_store_db(self.chat / "store.db", store_meta(self.chat_id, created, name=name,
                                                          workspace_path=self.cwd), [])
        (self.chat / "meta.json").write_bytes(orjson.dumps(meta_json(created, epoch_ms(self.t), title=title)))
        return self
