"""Zed's agent thread store (docs/formats.md §27): ``threads/threads.db``.

``SCHEMA`` is the ``threads`` table as a current Zed leaves it (the original five columns plus the
ones later versions add with ``ALTER TABLE``), ``LEGACY_SCHEMA`` the original table. The block and
message functions are pure and return the serialized thread's JSON (version 0.3.0: Rust's
externally tagged enums; ``legacy_*``: the agent-1 shape). ``ZedThread`` saves a thread the way Zed
does, rewriting its whole row (a zstd frame, or plain JSON for a pre-compression row) with a new
``updated_at`` on every save.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import zstandard

from tests.builders.common import BASE_TIME

LEGACY_SCHEMA = """
CREATE TABLE threads (id TEXT PRIMARY KEY, summary TEXT NOT NULL, updated_at TEXT NOT NULL, data_type TEXT NOT NULL,
                      data BLOB NOT NULL);
"""
SCHEMA = LEGACY_SCHEMA + """
ALTER TABLE threads ADD COLUMN parent_id TEXT;
ALTER TABLE threads ADD COLUMN folder_paths TEXT;
ALTER TABLE threads ADD COLUMN folder_paths_order TEXT;
ALTER TABLE threads ADD COLUMN created_at TEXT;
"""


def rfc3339(t: datetime) -> str:
    """chrono's ``to_rfc3339`` of a UTC time: ``+00:00``, not ``Z``."""
    return t.isoformat()


# --- version 0.3.0 blocks and messages ------------------------------------------------------------
def text(t: str) -> dict[str, Any]:
    return {"Text": t}


def mention(abs_path: str, content: str) -> dict[str, Any]:
    """A file mention: the ``MentionUri::File`` variant and the file's text put before the model."""
    return {"Mention": {"uri": {"File": {"abs_path": abs_path}}, "content": content}}


def thinking(t: str) -> dict[str, Any]:
    return {"Thinking": {"text": t, "signature": None}}


def tool_use(use_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"ToolUse": {"id": use_id, "name": name, "raw_input": orjson.dumps(arguments).decode(),
                        "input": arguments, "is_input_complete": True}}


def tool_result(use_id: str, name: str, output: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"tool_use_id": use_id, "tool_name": name, "is_error": is_error, "content": [{"Text": output}],
            "output": None}


def user(msg_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"User": {"id": msg_id, "content": list(blocks)}}


def agent(*blocks: dict[str, Any], results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"Agent": {"content": list(blocks), "tool_results": {r["tool_use_id"]: r for r in results or []},
                      "reasoning_details": None}}


def document(title: str, messages: list[Any], updated: datetime, **extra: Any) -> dict[str, Any]:
    return {"version": "0.3.0", "title": title, "updated_at": rfc3339(updated), "messages": messages,
            "model": {"provider": "anthropic", "model": "claude-sonnet-4-5"}, **extra}


# --- agent 1 (version 0.2.0) ------------------------------------------------------------------------
def legacy_message(msg_id: int, role: str, *segments: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {"id": msg_id, "role": role, "segments": [{"type": kind, "text": t} for kind, t in segments], **extra}


def legacy_document(summary: str, messages: list[dict[str, Any]], updated: datetime) -> dict[str, Any]:
    return {"version": "0.2.0", "summary": summary, "updated_at": rfc3339(updated), "messages": messages}


# --- the store --------------------------------------------------------------------------------------
def compress(doc: dict[str, Any]) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(orjson.dumps(doc))


class ZedDb:
    def __init__(self, path: Path, schema: str = SCHEMA) -> None:
        self.path = path
        fresh = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(path, isolation_level=None)
        if fresh:
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.executescript(schema)

    def close(self) -> None:
        self.con.close()

    def thread(self, thread_id: str, title: str = "New Thread", *, folders: tuple[str, ...] = ("/home/dev/api",),
               start: datetime = BASE_TIME, parent: str | None = None) -> ZedThread:
        return ZedThread(self, thread_id, title, folders, start, parent)

    def put(self, thread_id: str, summary: str, updated: datetime, data_type: str, data: bytes | str, *,
            folders: tuple[str, ...] = (), order: str | None = None, created: datetime | None = None,
            parent: str | None = None) -> None:
        """One row as Zed's ``save_thread`` writes it (folders sorted, their places in ``order``)."""
        cols: dict[str, Any] = {"id": thread_id, "summary": summary, "updated_at": rfc3339(updated),
                                "data_type": data_type, "data": data}
        table = {row[1] for row in self.con.execute("PRAGMA table_info(threads)")}
        if "folder_paths" in table:
            ordered = sorted(folders)
            cols.update(parent_id=parent, folder_paths="\n".join(ordered) if folders else None,
                        folder_paths_order=order if order is not None else
                        ",".join(str(folders.index(p)) for p in ordered) if folders else None,
                        created_at=rfc3339(created or updated))
        self.con.execute(f"INSERT OR REPLACE INTO threads ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         tuple(cols.values()))


class ZedThread:
    """A 0.3.0 thread, saved (its whole row rewritten, zstd) after every message, 2 s apart."""

    def __init__(self, db: ZedDb, thread_id: str, title: str, folders: tuple[str, ...], start: datetime,
                 parent: str | None) -> None:
        self.db = db
        self.thread_id = thread_id
        self.title = title
        self.folders = folders
        self.start = start
        self.t = start
        self.parent = parent
        self.messages: list[Any] = []
        self.save()

    def save(self) -> None:
        doc = document(self.title, self.messages, self.t)
        self.db.put(self.thread_id, self.title, self.t, "zstd", compress(doc), folders=self.folders,
                    created=self.start, parent=self.parent)

    def add(self, message: Any) -> ZedThread:
        self.t += timedelta(seconds=2)
        self.messages.append(message)
        self.save()
        return self

    def ask(self, prompt: str) -> ZedThread:
        return self.add(user(f"u{len(self.messages)}", text(prompt)))

    def answer(self, reply: str, *, think: str | None = None,
               tools: list[tuple[str, dict[str, Any], str]] | None = None) -> ZedThread:
        """An agent message: thinking, each tool use (answered in ``tool_results``), then the reply."""
        n = len(self.messages)
        uses = [(f"toolu_{n}_{i}", name, args, out) for i, (name, args, out) in enumerate(tools or [])]
        blocks = ([thinking(think)] if think else []) + [tool_use(uid, name, args) for uid, name, args, _ in uses]
        blocks.append(text(reply))
        return self.add(agent(*blocks, results=[tool_result(uid, name, out) for uid, name, _, out in uses]))

    def rename(self, title: str) -> ZedThread:
        self.title = title
        self.t += timedelta(seconds=1)
        self.save()
        return self
