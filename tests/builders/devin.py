"""Devin CLI stores (docs/formats.md §23): ``sessions.db`` and the ``transcripts/<id>.json`` export.

Devin is closed source and no licence-clean sample was found, so ``SCHEMA`` is built from the
public format notes (the columns the peers' readers select): ``sessions`` with ``main_chain_id``
naming the leaf of the active chain, ``message_nodes`` a tree through ``parent_node_id`` whose
``chat_message`` is one OpenAI-shaped message with Devin's ``metadata``. ``DevinDb`` writes sessions
for tests one committed node at a time (WAL, times in epoch seconds) and can retry from an earlier
node, which starts a sibling branch; ``transcript`` writes the ATIF export of a session.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms, iso

MODEL = "claude-sonnet-4-5"

SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, title TEXT, working_directory TEXT, model TEXT, created_at INTEGER NOT NULL,
    last_activity_at INTEGER, hidden INTEGER NOT NULL DEFAULT 0, main_chain_id INTEGER
);
CREATE TABLE message_nodes (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT, node_id INTEGER NOT NULL, parent_node_id INTEGER,
    session_id TEXT NOT NULL REFERENCES sessions(id), chat_message TEXT NOT NULL, created_at INTEGER NOT NULL
);
CREATE INDEX idx_message_nodes_session ON message_nodes(session_id, created_at);
CREATE TABLE prompt_history (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, prompt TEXT, created_at INTEGER);
CREATE TABLE tool_call_state (tool_call_id TEXT PRIMARY KEY, session_id TEXT, state TEXT);
"""


def seconds(t: datetime) -> int:
    return epoch_ms(t) // 1000


def create_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SCHEMA)
    return con


class DevinDb:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = create_db(path) if not path.exists() else sqlite3.connect(path, isolation_level=None)
        self.next_node = 1

    def close(self) -> None:
        self.con.close()

    def session(self, cwd: str | None = "/home/dev/api", *, title: str | None = None, start: datetime = BASE_TIME,
                session_id: str = "5b0e8c1a-7d2f-4e6b-9a31-0c4d2e6f8a10", hidden: bool = False) -> DevinSession:
        self.con.execute("INSERT INTO sessions (id, title, working_directory, model, created_at, last_activity_at, "
                         "hidden) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (session_id, title, cwd, MODEL, seconds(start), seconds(start), int(hidden)))
        return DevinSession(self, session_id, start)


class DevinSession:
    """One session: each node is committed 3 s after the previous one and becomes the main chain's leaf."""

    def __init__(self, db: DevinDb, session_id: str, start: datetime) -> None:
        self.db = db
        self.session_id = session_id
        self.t = start
        self.leaf: int | None = None
        self._calls = 0
        self._requests = 0

    def node(self, message: dict[str, Any], *, parent: int | None = None, raw: str | None = None) -> int:
        """Commit one node under ``parent`` (default: the current leaf) and make it the leaf."""
        self.t += timedelta(seconds=3)
        node_id = self.db.next_node
        self.db.next_node += 1
        parent = self.leaf if parent is None else parent
        con = self.db.con
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO message_nodes (node_id, parent_node_id, session_id, chat_message, created_at) "
                    "VALUES (?, ?, ?, ?, ?)", (node_id, parent, self.session_id,
                                               raw if raw is not None else orjson.dumps(message).decode(),
                                               seconds(self.t)))
        con.execute("UPDATE sessions SET main_chain_id = ?, last_activity_at = ? WHERE id = ?",
                    (node_id, seconds(self.t), self.session_id))
        con.execute("COMMIT")
        self.leaf = node_id
        return node_id

    def metadata(self, *, typed: bool | None = None) -> dict[str, Any]:
        self._requests += 1
        meta: dict[str, Any] = {"request_id": f"req_{self._requests}", "generation_model": MODEL,
                                "created_at": iso(self.t + timedelta(seconds=3)),
                                "metrics": {"input_tokens": 1200, "output_tokens": 40, "cache_read_tokens": 8000,
                                            "cache_creation_tokens": None}}
        if typed is not None:
            meta["is_user_input"] = typed
        return meta

    def user(self, text: str, *, typed: bool = True) -> DevinSession:
        self.node({"role": "user", "content": text, "metadata": self.metadata(typed=typed)})
        return self

    def system(self, text: str) -> DevinSession:
        self.node({"role": "system", "content": text})
        return self

    def assistant(self, text: str | None, *, think: str | None = None,
                  tools: list[tuple[str, dict[str, Any], str]] | None = None) -> DevinSession:
        """An assistant node; each tool (name, args, output) is answered by a ``tool`` node."""
        calls = []
        for name, args, _ in tools or []:
            self._calls += 1
            calls.append({"id": f"call_{self._calls}", "type": "function",
                          "function": {"name": name, "arguments": orjson.dumps(args).decode()}})
        msg: dict[str, Any] = {"role": "assistant", "content": text or ""}
        if think:
            msg["thinking"] = think
        if calls:
            msg["tool_calls"] = calls
        msg["metadata"] = self.metadata()
        self.node(msg)
        for call, (_, _, output) in zip(calls, tools or [], strict=True):
            self.node({"role": "tool", "tool_call_id": call["id"], "content": output})
        return self

    def retry_from(self, node_id: int) -> DevinSession:
        """The next node is a sibling of the nodes after ``node_id`` (a retry or an edit)."""
        self.leaf = node_id
        return self


# --- the transcript export (ATIF v1.7 with Devin's extras) -----------------------------------------
def step(step_id: int, source: str, t: datetime, message: str | list[dict[str, Any]] = "",
         **extra: Any) -> dict[str, Any]:
    return {"step_id": step_id, "timestamp": iso(t), "source": source, "message": message, **extra}


def transcript(session_id: str, steps: list[dict[str, Any]], *, cwd: str | None = None,
               start: datetime = BASE_TIME) -> bytes:
    doc: dict[str, Any] = {"schema_version": "ATIF-v1.7", "session_id": session_id,
                           "agent": {"name": "devin", "version": "3000.3.22", "model_name": MODEL, "extra": {}},
                           "steps": steps, "final_metrics": {"total_prompt_tokens": 9000, "total_cached_tokens": 8000},
                           "created_at": iso(start)}
    if cwd is not None:
        doc["working_directory"] = cwd
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)
