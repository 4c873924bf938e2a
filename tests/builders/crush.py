"""Crush rows (docs/formats.md §11): a project's ``.crush/crush.db`` and the ``projects.json`` registry.

``SCHEMA`` is the database as Crush's goose migrations leave it (the initial migration plus the
columns later ones add: provider, is_summary_message, summary_message_id), with its triggers.
The part functions are pure and return ``{"type", "data"}`` elements in the key order Crush's
``partWrapper`` writes; ``CrushDb`` writes sessions for tests, one commit per message.
"""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

MODEL = "claude-sonnet-4-5"
PROVIDER = "anthropic"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,  -- Unix timestamp in seconds
    created_at INTEGER NOT NULL,  -- Unix timestamp in seconds
    summary_message_id TEXT
);
CREATE TRIGGER IF NOT EXISTS update_sessions_updated_at
AFTER UPDATE ON sessions
BEGIN
UPDATE sessions SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE(path, session_id, version)
);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts BLOB NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    provider TEXT,
    is_summary_message INTEGER DEFAULT 0 NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id);
CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
UPDATE messages SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;
CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;
CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_delete
AFTER DELETE ON messages
BEGIN
UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
END;
"""

_counter = itertools.count()


# --- parts -----------------------------------------------------------------------------------------
def text(t: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": t}}


def reasoning(thinking: str, started: int, finished: int) -> dict[str, Any]:
    return {"type": "reasoning", "data": {"thinking": thinking, "signature": "sig", "started_at": started,
                                          "finished_at": finished}}


def tool_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    """A tool call; Crush keeps the arguments as the JSON text the model wrote."""
    raw = args if isinstance(args, str) else orjson.dumps(args).decode()
    return {"type": "tool_call", "data": {"id": call_id, "name": name, "input": raw, "type": "", "finished": True}}


def tool_result(call_id: str, name: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "data": {"tool_call_id": call_id, "name": name, "content": content,
                                            "metadata": "", "is_error": is_error}}


def finish(reason: str, at: int) -> dict[str, Any]:
    return {"type": "finish", "data": {"reason": reason, "time": at, "message": "", "details": ""}}


def image_url(url: str) -> dict[str, Any]:
    return {"type": "image_url", "data": {"url": url, "detail": ""}}


# --- the database ----------------------------------------------------------------------------------
def create_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SCHEMA)
    return con


def write_registry(registry_dir: Path, projects: list[tuple[str, str]]) -> Path:
    """``projects.json`` listing (path, data_dir) pairs, most recent first as Crush sorts them."""
    registry_dir.mkdir(parents=True, exist_ok=True)
    now = BASE_TIME.strftime("%Y-%m-%dT%H:%M:%S.000000000Z")
    doc = {"projects": [{"path": p, "data_dir": d, "last_accessed": now} for p, d in projects]}
    path = registry_dir / "projects.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


class CrushDb:
    """Writes sessions into ``<project>/.crush/crush.db`` as Crush commits them (seconds timestamps)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.path = project / ".crush" / "crush.db"
        self.con = create_db(self.path) if not self.path.exists() else sqlite3.connect(self.path, isolation_level=None)

    def close(self) -> None:
        self.con.close()

    def session(self, title: str = "New Session", *, parent_id: str | None = None, session_id: str | None = None,
                start: datetime = BASE_TIME) -> CrushSession:
        return CrushSession(self, session_id or str(uuid.uuid4()), title, parent_id, start)


class CrushSession:
    def __init__(self, db: CrushDb, session_id: str, title: str, parent_id: str | None, start: datetime) -> None:
        self.db = db
        self.session_id = session_id
        self.t = start
        s = epoch_ms(start) // 1000
        db.con.execute("INSERT INTO sessions (id, parent_session_id, title, created_at, updated_at) "
                       "VALUES (?, ?, ?, ?, ?)", (session_id, parent_id, title, s, s))

    def message(self, role: str, parts: list[dict[str, Any]], *, summary: bool = False) -> str:
        self.t += timedelta(seconds=5)
        s = epoch_ms(self.t) // 1000
        mid = str(uuid.UUID(int=next(_counter) + (1 << 100)))
        self.db.con.execute(
            "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at, finished_at, provider, "
            "is_summary_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mid, self.session_id, role, orjson.dumps(parts).decode(), MODEL if role == "assistant" else None, s, s,
             s if role == "assistant" else None, PROVIDER if role == "assistant" else None, int(summary)))
        return mid

    def user(self, t: str) -> CrushSession:
        self.message("user", [text(t)])
        return self

    def assistant(self, t: str, *, thinking: str | None = None,
                  tools: list[tuple[str, dict[str, Any], str]] | None = None) -> CrushSession:
        """An assistant turn; each tool (name, args, output) is called and answered by a tool message."""
        s = epoch_ms(self.t) // 1000
        parts = [reasoning(thinking, s, s)] if thinking else []
        calls = [(f"toolu_{next(_counter):04d}", name, args, out) for name, args, out in tools or []]
        parts += [tool_call(cid, name, args) for cid, name, args, _ in calls]
        if t:
            parts.append(text(t))
        parts.append(finish("tool_use" if calls else "end_turn", s))
        self.message("assistant", parts)
        if calls:
            self.message("tool", [tool_result(cid, name, out) for cid, name, _, out in calls])
        return self

    def rename(self, title: str) -> CrushSession:
        self.db.con.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, self.session_id))
        return self
