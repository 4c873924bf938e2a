"""Hermes Agent stores (docs/formats.md §19): ``state.db`` and the legacy ``sessions/`` files.

``SCHEMA`` is the ``sessions`` and ``messages`` tables of Hermes' ``SCHEMA_SQL`` (schema version 30,
``hermes_state_common.py``) with their indexes; ``OLD_SCHEMA`` the reduced ``messages`` table of a
pre-0.17 per-profile store (deja-vu's fixture). ``HermesDb`` writes sessions for tests the way
``append_message`` commits them (one transaction per row, the session's counters bumped, times
in epoch seconds as REAL) in WAL mode, and rewinds and compacts in place as Hermes does;
``legacy_jsonl`` / ``legacy_json`` write the files older builds kept in ``sessions/``.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

MODEL = "claude-sonnet-4-5"
CONTENT_JSON_PREFIX = "\x01json:"

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (30);
CREATE TABLE IF NOT EXISTS system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, created_source TEXT, user_id TEXT, session_key TEXT,
    chat_id TEXT, chat_type TEXT, thread_id TEXT, display_name TEXT, origin_json TEXT,
    expiry_finalized INTEGER DEFAULT 0, model TEXT, model_config TEXT, system_prompt TEXT,
    system_prompt_hash TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
    message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0, input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0, cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0, cwd TEXT, git_branch TEXT, git_repo_root TEXT,
    git_metadata_generation INTEGER NOT NULL DEFAULT 0, billing_provider TEXT, billing_base_url TEXT,
    billing_mode TEXT, estimated_cost_usd REAL, actual_cost_usd REAL, cost_status TEXT, cost_source TEXT,
    pricing_version TEXT, title TEXT, title_source TEXT, last_activity_at REAL, last_activity_description TEXT,
    last_activity_provenance TEXT, api_call_count INTEGER DEFAULT 0, handoff_state TEXT, handoff_platform TEXT,
    handoff_error TEXT, compression_failure_cooldown_until REAL, compression_failure_error TEXT,
    compression_fallback_streak INTEGER NOT NULL DEFAULT 0, compression_ineffective_count INTEGER NOT NULL DEFAULT 0,
    compression_recovery_deadline REAL, compression_overload_streak INTEGER NOT NULL DEFAULT 0, profile_name TEXT,
    transport_profile TEXT, rewind_count INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0, hidden INTEGER NOT NULL DEFAULT 0, last_read_at REAL, tool_names TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id),
    FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash)
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, effect_disposition TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT, reasoning_content TEXT,
    reasoning_details TEXT, codex_reasoning_items TEXT, codex_message_items TEXT, platform_message_id TEXT,
    observed INTEGER DEFAULT 0, _compressed_summary INTEGER NOT NULL DEFAULT 0, active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT, display_kind TEXT, display_metadata TEXT,
    display_identity BLOB, display_order INTEGER
);
CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id);
CREATE INDEX IF NOT EXISTS idx_messages_session_active ON messages(session_id, active, timestamp);
"""

# A pre-0.17 per-profile store: a smaller sessions table and no state columns on messages.
OLD_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, parent_session_id TEXT,
                       started_at REAL NOT NULL, ended_at REAL, message_count INTEGER DEFAULT 0, title TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                       content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL,
                       token_count INTEGER, finish_reason TEXT);
"""


def seconds(t: datetime) -> float:
    """Epoch seconds as Hermes stores them (REAL, from ``time.time()``)."""
    return epoch_ms(t) / 1000.0


def session_id(t: datetime, suffix: str) -> str:
    """Hermes' session id: ``YYYYMMDD_HHMMSS_<8 hex>``."""
    return f"{t.strftime('%Y%m%d_%H%M%S')}_{suffix}"


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped tool call whose arguments are the model's JSON text."""
    return {"id": call_id, "call_id": call_id, "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}


def create_db(path: Path, schema: str = SCHEMA) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(schema)
    return con


class HermesDb:
    """A ``state.db`` (the schema is created when the file does not exist)."""

    def __init__(self, path: Path, schema: str = SCHEMA) -> None:
        self.path = path
        self.con = create_db(path, schema) if not path.exists() else sqlite3.connect(path, isolation_level=None)

    def close(self) -> None:
        self.con.close()

    def session(self, cwd: str | None = "/home/dev/etl", *, title: str | None = None, start: datetime = BASE_TIME,
                suffix: str = "9c1d2e3f", source: str = "cli", parent: str | None = None, branch: str | None = "main",
                profile: str | None = None) -> HermesSession:
        sid = session_id(start, suffix)
        self.con.execute("INSERT INTO sessions (id, source, model, started_at, last_activity_at, cwd, git_branch, "
                         "title, title_source, parent_session_id, profile_name) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (sid, source, MODEL, seconds(start), seconds(start), cwd, branch, title,
                          "llm" if title else None, parent, profile))
        return HermesSession(self, sid, start)


class HermesSession:
    """One session: each call commits one message row, 4 s after the previous one."""

    def __init__(self, db: HermesDb, sid: str, start: datetime) -> None:
        self.db = db
        self.session_id = sid
        self.t = start
        self._calls = 0

    def row(self, role: str, content: str | list[dict[str, Any]] | None, **columns: Any) -> int:
        """Append one message row (``columns`` are any other ``messages`` columns)."""
        self.t += timedelta(seconds=4)
        stored = CONTENT_JSON_PREFIX + orjson.dumps(content).decode() if isinstance(content, list) else content
        cols = {"session_id": self.session_id, "role": role, "content": stored, "timestamp": seconds(self.t), **columns}
        con = self.db.con
        con.execute("BEGIN IMMEDIATE")
        cur = con.execute(f"INSERT INTO messages ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          tuple(cols.values()))
        con.execute("UPDATE sessions SET message_count = message_count + 1, last_activity_at = ? WHERE id = ?",
                    (seconds(self.t), self.session_id))
        con.execute("COMMIT")
        return int(cur.lastrowid or 0)

    def user(self, text: str | list[dict[str, Any]], **columns: Any) -> HermesSession:
        self.row("user", text, **columns)
        return self

    def assistant(self, text: str | None, *, think: str | None = None,
                  tools: list[tuple[str, dict[str, Any], str]] | None = None) -> HermesSession:
        """An assistant row; each tool (name, args, output) is answered by a ``tool`` row."""
        calls = []
        for name, args, _ in tools or []:
            self._calls += 1
            calls.append(tool_call(f"call_{self._calls}", name, args))
        self.row("assistant", text, reasoning=think, finish_reason="tool_calls" if calls else "stop",
                 tool_calls=orjson.dumps(calls).decode() if calls else None)
        for call, (name, _, output) in zip(calls, tools or [], strict=True):
            self.row("tool", output, tool_call_id=call["id"], tool_name=name)
        return self

    def undo(self, rows: int) -> HermesSession:
        """``/undo``: the newest ``rows`` active rows are taken back in place (``active = 0``)."""
        self.db.con.execute("UPDATE messages SET active = 0 WHERE id IN (SELECT id FROM messages WHERE session_id = ? "
                            "AND active = 1 ORDER BY id DESC LIMIT ?)", (self.session_id, rows))
        self.db.con.execute("UPDATE sessions SET rewind_count = rewind_count + 1 WHERE id = ?", (self.session_id,))
        return self

    def compact(self, summary: str) -> HermesSession:
        """In-place compaction: the live rows are archived (still shown) and a summary row continues."""
        self.db.con.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1",
                            (self.session_id,))
        self.row("user", summary, _compressed_summary=1)
        return self

    def end(self, reason: str) -> HermesSession:
        self.db.con.execute("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
                            (seconds(self.t), reason, self.session_id))
        return self

    def rename(self, title: str) -> HermesSession:
        self.db.con.execute("UPDATE sessions SET title = ?, title_source = 'user' WHERE id = ?",
                            (title, self.session_id))
        return self


# --- legacy files ----------------------------------------------------------------------------------
def legacy_jsonl(start: datetime, messages: list[dict[str, Any]], *, model: str = MODEL) -> bytes:
    """``sessions/<id>.jsonl``: the ``session_meta`` line, then one message per line."""
    meta = {"role": "session_meta", "tools": [{"type": "function", "function": {"name": "terminal"}}],
            "model": model, "platform": "cli", "timestamp": start.isoformat()}
    return b"".join(orjson.dumps(line) + b"\n" for line in [meta, *messages])


def legacy_json(sid: str, start: datetime, messages: list[dict[str, Any]], *, cwd: str | None = None,
                model: str = MODEL) -> bytes:
    """``sessions/session_<id>.json``: the whole session as one document."""
    doc: dict[str, Any] = {"session_id": sid, "model": model, "platform": "cli",
                           "session_start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "last_updated": (start + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if cwd is not None:
        doc["cwd"] = cwd
    doc.update(message_count=len(messages), messages=messages)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)
