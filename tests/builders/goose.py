"""Goose rows and files (docs/formats.md §12): ``sessions.db`` (v1.20+) and the legacy JSONL sessions.

``SCHEMA`` is ``sessions.db`` as Goose's ``SessionStorage::create`` makes it (schema version 9).
The content functions are pure and return ``MessageContent`` blocks as Goose serialises them
(camelCase tags); ``GooseDb`` writes sessions for tests the way ``add_message`` commits them, and
``legacy_lines`` writes a pre-1.20 ``<id>.jsonl``.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
INSERT INTO schema_version (version) VALUES (9);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    user_set_name BOOLEAN DEFAULT FALSE,
    session_type TEXT NOT NULL DEFAULT 'user',
    working_dir TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    extension_data TEXT DEFAULT '{}',
    total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
    schedule_id TEXT, recipe_json TEXT, user_recipe_values_json TEXT,
    provider_name TEXT, model_config_json TEXT, tenant_id TEXT, user_id TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content_json TEXT NOT NULL,
    created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    tokens INTEGER,
    metadata_json TEXT
);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_timestamp ON messages(timestamp);
CREATE INDEX idx_messages_message_id ON messages(message_id);
CREATE INDEX idx_sessions_updated ON sessions(updated_at DESC);
CREATE INDEX idx_sessions_type ON sessions(session_type);
"""

VISIBLE: dict[str, bool] = {"userVisible": True, "agentVisible": True}
AGENT_ONLY: dict[str, bool] = {"userVisible": False, "agentVisible": True}


# --- content blocks --------------------------------------------------------------------------------
def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def thinking(t: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": "sig"}


def tool_request(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "toolRequest", "id": call_id, "toolCall": {"status": "success",
                                                               "value": {"name": name, "arguments": arguments}}}


def tool_response(call_id: str, output: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "toolResponse", "id": call_id, "toolResult": {
        "status": "success", "value": {"content": [{"type": "text", "text": output}], "isError": is_error}}}


def system_notification(msg: str) -> dict[str, Any]:
    return {"type": "systemNotification", "notificationType": "inlineMessage", "msg": msg}


def message(role: str, created_s: int, content: list[dict[str, Any]], *,
            metadata: dict[str, bool] | None = None) -> dict[str, Any]:
    """A ``Message`` as one legacy JSONL line holds it."""
    return {"role": role, "created": created_s, "content": content, "metadata": metadata or VISIBLE}


def sql_time(t: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS`` in UTC, as SQLite's CURRENT_TIMESTAMP writes it."""
    return t.strftime("%Y-%m-%d %H:%M:%S")


# --- sessions.db -----------------------------------------------------------------------------------
def create_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")  # sqlx's default
    con.executescript(SCHEMA)
    return con


class GooseDb:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = create_db(path) if not path.exists() else sqlite3.connect(path, isolation_level=None)
        self._day_counter: dict[str, int] = {}

    def close(self) -> None:
        self.con.close()

    def session(self, working_dir: str = "/home/dev/api", name: str = "", *, start: datetime = BASE_TIME,
                session_type: str = "user", session_id: str | None = None) -> GooseSession:
        day = start.strftime("%Y%m%d")
        if session_id is None:
            self._day_counter[day] = self._day_counter.get(day, 0) + 1
            session_id = f"{day}_{self._day_counter[day]}"
        return GooseSession(self, session_id, working_dir, name, session_type, start)


class GooseSession:
    """One session: each call commits one message row, 5 s after the previous one."""

    def __init__(self, db: GooseDb, session_id: str, working_dir: str, name: str, session_type: str,
                 start: datetime) -> None:
        self.db = db
        self.session_id = session_id
        self.t = start
        db.con.execute("INSERT INTO sessions (id, name, session_type, working_dir, created_at, updated_at, "
                       "extension_data) VALUES (?, ?, ?, ?, ?, ?, '{}')",
                       (session_id, name, session_type, working_dir, sql_time(start), sql_time(start)))
        self._n = 0

    def add(self, role: str, content: list[dict[str, Any]], *, metadata: dict[str, bool] | None = None) -> GooseSession:
        self.t += timedelta(seconds=5)
        self._n += 1
        con = self.db.con
        con.execute("BEGIN")
        con.execute("INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, timestamp, "
                    "metadata_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (f"msg_{self.session_id}_{self._n}", self.session_id, role, orjson.dumps(content).decode(),
                     epoch_ms(self.t) // 1000, sql_time(self.t), orjson.dumps(metadata or VISIBLE).decode()))
        con.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (sql_time(self.t), self.session_id))
        con.execute("COMMIT")
        return self

    def user(self, t: str) -> GooseSession:
        return self.add("user", [text(t)])

    def assistant(self, t: str, *, think: str | None = None,
                  tools: list[tuple[str, dict[str, Any], str]] | None = None) -> GooseSession:
        """An assistant message; each tool (name, args, output) is answered by a user-role toolResponse."""
        calls = [(f"toolu_{self._n}_{i}", name, args, out) for i, (name, args, out) in enumerate(tools or [])]
        content = ([thinking(think)] if think else []) + ([text(t)] if t else [])
        content += [tool_request(cid, name, args) for cid, name, args, _ in calls]
        self.add("assistant", content)
        if calls:
            self.add("user", [tool_response(cid, out) for cid, _, _, out in calls])
        return self

    def rename(self, name: str) -> GooseSession:
        self.db.con.execute("UPDATE sessions SET name = ?, user_set_name = TRUE, updated_at = datetime('now') "
                            "WHERE id = ?", (name, self.session_id))
        return self


# --- legacy JSONL ----------------------------------------------------------------------------------
def legacy_metadata(working_dir: str, description: str, message_count: int) -> dict[str, Any]:
    return {"working_dir": working_dir, "description": description, "schedule_id": None,
            "message_count": message_count, "total_tokens": 1200, "input_tokens": 1000, "output_tokens": 200,
            "accumulated_total_tokens": 1200, "accumulated_input_tokens": 1000, "accumulated_output_tokens": 200}


def legacy_lines(working_dir: str, description: str, messages: list[dict[str, Any]]) -> bytes:
    """A legacy session file: the metadata line, then one line per message."""
    lines = [legacy_metadata(working_dir, description, len(messages)), *messages]
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)
