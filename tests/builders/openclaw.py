"""OpenClaw's stores (docs/formats.md §18): per-agent JSONL transcripts with ``sessions.json``, and the SQLite store.

``SCHEMA`` is ``openclaw-agent.sqlite`` at schema version 17 (the tables a transcript reader uses, as
ctx's admission check lists them: STRICT tables, the same columns and keys). ``OpenClawDb`` writes
sessions into it the way the runtime appends: a window per session, each entry an event in ``seq``
order (through a ``PiWriter`` whose sink is the database), and the index state naming the leaf.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms
from tests.builders.pi import PiWriter

DB_NAME = "openclaw-agent.sqlite"
RUNTIME_CONTEXT = "openclaw.runtime-context"

SCHEMA = """
PRAGMA user_version=17;
CREATE TABLE schema_meta (
  meta_key TEXT NOT NULL PRIMARY KEY, role TEXT NOT NULL, schema_version INTEGER NOT NULL,
  agent_id TEXT, app_version TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_windows (
  session_id TEXT NOT NULL PRIMARY KEY, session_key TEXT NOT NULL, previous_session_id TEXT,
  reason TEXT, session_scope TEXT NOT NULL DEFAULT 'conversation', created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL, transcript_updated_at INTEGER DEFAULT NULL,
  transcript_observed_at INTEGER DEFAULT NULL,
  session_entry_provenance INTEGER NOT NULL DEFAULT 0, acp_owned INTEGER NOT NULL DEFAULT 0,
  plugin_owner_id TEXT, hook_external_content_source TEXT, started_at INTEGER, ended_at INTEGER,
  status TEXT, chat_type TEXT, channel TEXT, account_id TEXT, primary_conversation_id TEXT,
  model_provider TEXT, model TEXT, agent_harness_id TEXT, parent_session_key TEXT, spawned_by TEXT,
  display_name TEXT
) STRICT;
CREATE INDEX idx_agent_session_windows_updated_at ON session_windows(updated_at DESC, session_id);
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT NOT NULL,
  created_at INTEGER NOT NULL, PRIMARY KEY (session_id, seq)
) STRICT;
CREATE TABLE transcript_event_identities (
  session_id TEXT NOT NULL, event_id TEXT NOT NULL, seq INTEGER NOT NULL, event_type TEXT,
  parent_id TEXT, message_idempotency_key TEXT, created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, event_id)
) STRICT;
CREATE TABLE session_transcript_index_state (
  session_id TEXT NOT NULL PRIMARY KEY, indexed_seq INTEGER NOT NULL, leaf_event_id TEXT,
  needs_rebuild INTEGER NOT NULL DEFAULT 0, active_event_count INTEGER NOT NULL DEFAULT 0,
  active_message_count INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_transcript_active_events (
  session_id TEXT NOT NULL, active_position INTEGER NOT NULL, event_seq INTEGER NOT NULL,
  message_position INTEGER, PRIMARY KEY (session_id, active_position)
) STRICT;
"""


def sessions_dir(agents: Path, agent: str = "main") -> Path:
    return agents / agent / "sessions"


def write_index(agents: Path, keys: dict[str, str], agent: str = "main", *, updated: datetime = BASE_TIME) -> Path:
    """``sessions.json``: session key -> its current session (``keys`` maps key -> session id)."""
    path = sessions_dir(agents, agent) / "sessions.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {key: {"sessionId": sid, "updatedAt": epoch_ms(updated), "sessionFile": f"{sid}.jsonl"}
           for key, sid in keys.items()}
    path.write_bytes(orjson.dumps(doc))
    return path


def transcript(agents: Path, session_id: str, *, agent: str = "main", cwd: str | None = "/home/dev/bot",
               start: datetime = BASE_TIME) -> PiWriter:
    """A JSONL transcript ``agents/<agent>/sessions/<id>.jsonl``."""
    return PiWriter(sessions_dir(agents, agent) / f"{session_id}.jsonl", session_id=session_id, cwd=cwd,
                    start=start)


def runtime_context(w: PiWriter, content: str = "Current time: 09:00. Channel: telegram.") -> PiWriter:
    """The hidden runtime context OpenClaw injects before a turn."""
    return w.custom_message(content, display=False, custom_type=RUNTIME_CONTEXT)


class OpenClawDb:
    """``agents/<agent>/agent/openclaw-agent.sqlite`` (WAL), written as the runtime commits."""

    def __init__(self, agents: Path, agent: str = "main") -> None:
        self.path = agents / agent / "agent" / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.agent = agent
        self.con = sqlite3.connect(self.path)
        self.con.execute("PRAGMA journal_mode=WAL")
        if not self.con.execute("SELECT name FROM sqlite_master WHERE name = 'session_windows'").fetchone():
            self.con.executescript(SCHEMA)
            now = epoch_ms(BASE_TIME)
            self.con.execute("INSERT INTO schema_meta VALUES ('primary', 'agent', 17, ?, '2026.8.1', ?, ?)",
                             (agent, now, now))
            self.con.commit()

    def close(self) -> None:
        self.con.close()

    def window(self, session_id: str, key: str, *, display_name: str | None = None, previous: str | None = None,
               parent_key: str | None = None, spawned_by: str | None = None, at: datetime = BASE_TIME) -> None:
        """Insert or replace a session window."""
        ms = epoch_ms(at)
        self.con.execute(
            "INSERT OR REPLACE INTO session_windows (session_id, session_key, previous_session_id, created_at,"
            " updated_at, parent_session_key, spawned_by, display_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, key, previous, ms, ms, parent_key, spawned_by, display_name))
        self.con.commit()

    def writer(self, session_id: str, *, cwd: str | None = "/home/dev/bot", start: datetime = BASE_TIME) -> PiWriter:
        """A PiWriter whose entries become this session's events (each committed, with the leaf moved)."""

        def sink(obj: dict[str, Any]) -> None:
            seq = self.con.execute("SELECT coalesce(max(seq), 0) + 1 FROM transcript_events WHERE session_id = ?",
                                   (session_id,)).fetchone()[0]
            created = epoch_ms(start + timedelta(seconds=2 * seq))
            self.con.execute("INSERT INTO transcript_events VALUES (?, ?, ?, ?)",
                             (session_id, seq, orjson.dumps(obj).decode(), created))
            if "id" in obj and obj.get("type") != "session":
                self.con.execute(
                    "INSERT OR REPLACE INTO transcript_event_identities VALUES (?, ?, ?, ?, ?, NULL, ?)",
                    (session_id, obj["id"], seq, obj["type"], obj.get("parentId"), created))
                self.con.execute(
                    "INSERT OR REPLACE INTO session_transcript_index_state (session_id, indexed_seq, leaf_event_id,"
                    " updated_at) VALUES (?, ?, ?, ?)", (session_id, seq, obj["id"], created))
            self.con.commit()

        return PiWriter(None, session_id=session_id, cwd=cwd, start=start, sink=sink)

    def set_leaf(self, session_id: str, leaf: str, *, needs_rebuild: bool = False) -> None:
        """Point the index state's leaf elsewhere (a branch navigated to), or mark it stale."""
        self.con.execute("UPDATE session_transcript_index_state SET leaf_event_id = ?, needs_rebuild = ?"
                         " WHERE session_id = ?", (leaf, int(needs_rebuild), session_id))
        self.con.commit()
