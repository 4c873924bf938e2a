"""Devin CLI sessions (docs/formats.md §23): ``sessions.db``'s message tree, transcripts as a fallback.

The root is Devin's CLI data folder, ``~/.local/share/devin/cli`` (macOS
``~/Library/Application Support/devin/cli``; Devin documents no environment variable). Its
``sessions.db`` is the live store (SQLite, WAL): a ``sessions`` row per session and a
``message_nodes`` tree per session whose ``chat_message`` column holds one OpenAI-shaped message
(scanner/parsers/openai_chat.py). Retries and edits are sibling nodes; ``sessions.main_chain_id``
names the leaf of the chain the user sees, which is walked up through ``parent_node_id``, as
Devin's own exporter does. Every visible session is a ``whole`` unit ``"<db>#<session id>"``
(scanner/parsers/sqlite_units.py). ``transcripts/<id>.json`` (an ATIF export written when a session
ends, covering part of it) is read only where there is no database.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import KindName, Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import read_settled
from aivault.scanner.parsers.jsonutil import as_object, first_text, loads_line, to_epoch_ms
from aivault.scanner.parsers.openai_chat import arguments_text, content_texts, joined, tool_calls
from aivault.scanner.parsers.sqlite_units import ListedSession, columns, due, list_sessions, pick, snapshot
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "devin"
DB_NAME: Final = "sessions.db"
TRANSCRIPTS_DIR: Final = "transcripts"
CLI_DIR: Final = "cli"  # a root named one level up (~/.local/share/devin) is read through it
# Nodes can be rewritten when a request completes; the newest ones are fingerprinted.
SIGNATURE_TAIL: Final = 3
_ROLES: Final[dict[str, str]] = {"user": "user", "assistant": "assistant", "agent": "assistant", "tool": "tool",
                                 "system": "system"}

# --- SQL (column names chosen by _schema among our own constants) ---------------------------------
LIST_SESSIONS: Final = """
SELECT s.id, {s_title}, {s_created}, {s_last}, {s_chain}, coalesce(a.n, 0), a.newest,
       (SELECT group_concat(tail, ',') FROM (
            SELECT n.rowid || ':' || coalesce(length(n.chat_message), '') AS tail
            FROM message_nodes n WHERE n.session_id = s.id ORDER BY n.rowid DESC LIMIT {tail}))
FROM sessions s
LEFT JOIN (SELECT session_id, count(*) AS n, max(rowid) AS newest FROM message_nodes GROUP BY session_id) a
       ON a.session_id = s.id
WHERE {visible}"""
SESSION_ROW: Final = """
SELECT s.id, {s_title}, {s_created}, {s_last}, {s_chain},
       (SELECT count(*) FROM message_nodes n WHERE n.session_id = s.id),
       (SELECT max(n.rowid) FROM message_nodes n WHERE n.session_id = s.id),
       (SELECT group_concat(tail, ',') FROM (
            SELECT n.rowid || ':' || coalesce(length(n.chat_message), '') AS tail
            FROM message_nodes n WHERE n.session_id = s.id ORDER BY n.rowid DESC LIMIT {tail})),
       {s_cwd}
FROM sessions s WHERE s.id = ? AND {visible}"""
NODES: Final = """SELECT node_id, parent_node_id, chat_message, {n_created} FROM message_nodes WHERE session_id = ?
ORDER BY {n_created}, rowid"""


@dataclass(frozen=True, slots=True)
class _Schema:
    list_sessions: str
    session_row: str
    nodes: str


def _schema(con: sqlite3.Connection) -> _Schema:
    s = columns(con, "sessions", ("id",))
    n = columns(con, "message_nodes", ("node_id", "parent_node_id", "session_id", "chat_message"))
    common = {"s_title": pick(s, "title", alias="s"), "s_created": pick(s, "created_at", alias="s"),
              "s_last": pick(s, "last_activity_at", alias="s"), "s_chain": pick(s, "main_chain_id", alias="s"),
              "visible": "coalesce(s.hidden, 0) <> 1" if "hidden" in s else "1", "tail": SIGNATURE_TAIL}
    return _Schema(list_sessions=LIST_SESSIONS.format(**common),
                   session_row=SESSION_ROW.format(s_cwd=pick(s, "working_directory", alias="s"), **common),
                   nodes=NODES.format(n_created=pick(n, "created_at")))


def _signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:8])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_schema(con).list_sessions):
        yield str(row[0]), _signature(row), int(row[5] or 0)


# --- the active chain -----------------------------------------------------------------------------
def active_chain(nodes: list[tuple[Any, ...]], leaf: object, skips: dict[str, int]) -> list[tuple[Any, ...]]:
    """The nodes from the root to ``leaf`` (``main_chain_id``; the newest node when it names none
    that exists), through ``parent_node_id``. A missing parent or a cycle ends the chain
    (``history-gap``); every node off it is a retry or an abandoned branch (``dead-branch``)."""
    by_id: dict[object, tuple[Any, ...]] = {}
    for node in nodes:
        by_id.setdefault(node[0], node)
    if leaf not in by_id:
        if leaf is not None:
            count_skip(skips, "missing-leaf")
        leaf = nodes[-1][0] if nodes else None
    chain: list[tuple[Any, ...]] = []
    seen: set[object] = set()
    current = leaf
    while current is not None and current not in seen and current in by_id:
        seen.add(current)
        node = by_id[current]
        chain.append(node)
        parent = node[1]
        if parent is not None and parent not in by_id:
            count_skip(skips, "history-gap")
        current = parent
    chain.reverse()
    dead = len(nodes) - len(chain)
    if dead > 0:
        count_skip(skips, "dead-branch", n=dead)
    return chain


@dataclass(slots=True)
class Conversation:
    """Messages of one session, built message by message (a database node or a transcript step)."""

    default_ts: int | None = None
    messages: list[Message] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)
    first_user: str | None = None
    times: list[int] = field(default_factory=list)

    def time(self, *values: object) -> int | None:
        for value in values:
            ts = to_epoch_ms(value)
            if ts is not None:
                self.times.append(ts)
                return ts
        return self.default_ts

    def user(self, text: str, ts: int | None, typed: object) -> None:
        if typed is False:  # a keepalive "continue" or a compactor request Devin sent itself
            count_skip(self.skips, "injected-context")
        elif text.strip():
            self.messages.append(Message("user", "text", text, ts))
            if self.first_user is None:
                self.first_user = text
        else:
            count_skip(self.skips, "empty_text")

    def add(self, text: str, kind: KindName, ts: int | None) -> None:
        if text.strip():
            self.messages.append(Message("tool" if kind == "tool_result" else "assistant", kind, text, ts))
        elif kind == "tool_result":
            count_skip(self.skips, "empty_result")

    def chat_message(self, raw: object, created: object) -> None:
        """One ``message_nodes.chat_message`` value."""
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        msg = loads_line(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else None
        if not isinstance(msg, dict):
            count_skip(self.skips, "malformed-record")
            return
        meta = as_object(msg.get("metadata"))
        role = _ROLES.get(msg["role"]) if isinstance(msg.get("role"), str) else None
        if role is None:
            count_skip(self.skips, "unknown_role", str(msg.get("role")))
            return
        ts = self.time(meta.get("created_at"), created)
        texts, thinking = content_texts(msg.get("content"), self.skips)
        if role == "system":
            count_skip(self.skips, "system-prompt")  # the instructions Devin sends with every session
        elif role == "user":
            self.user(joined(texts), ts, meta.get("is_user_input"))
        elif role == "tool":
            self.add(joined(texts), "tool_result", ts)
        else:
            top = msg.get("thinking")
            for thought in ([top] if isinstance(top, str) and top.strip() else []) + thinking:
                self.add(thought, "thinking", ts)
            self.add(joined(texts), "text", ts)
            for call in tool_calls(msg.get("tool_calls"), self.skips):
                self.add(call, "tool_call", ts)


def resume_command(session_id: str, cwd: str | None) -> str:
    cmd = f"devin -r {shlex.quote(session_id)}"
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd else cmd


def read_database_session(found: Found) -> Unit:
    """One session of ``sessions.db``: its active chain, read in one transaction."""
    db, session_id = found.locator[:2]
    with snapshot(db, found.path) as con:
        schema = _schema(con)
        row = con.execute(schema.session_row, (session_id,)).fetchone()
        if row is None:
            raise UnitChanged(f"session {session_id} is no longer in {os.path.basename(db)} (or is hidden)")
        nodes = con.execute(schema.nodes, (session_id,)).fetchall()
    created = to_epoch_ms(row[2])
    conv = Conversation(default_ts=created)
    for node in active_chain(nodes, row[4], conv.skips):
        conv.chat_message(node[2], node[3])
    cwd = nonblank(row[8])
    title = nonblank(row[1]) or (first_line_title(conv.first_user) if conv.first_user else None)
    updated = [t for t in (to_epoch_ms(row[3]), created, *conv.times) if t is not None]
    info = SessionInfo(agent=AGENT, session_id=session_id, title=title, cwd=cwd,
                       started_at=created if created is not None else min(conv.times, default=None),
                       updated_at=max(updated, default=None), message_count=len(conv.messages),
                       resume_command=resume_command(session_id, cwd))
    return Unit(info, conv.messages, _signature(row), conv.skips)


# --- the transcript export (ATIF) -------------------------------------------------------------------
def _transcript_cwd(doc: dict[str, Any]) -> str | None:
    agent = as_object(doc.get("agent"))
    found = first_text(doc, ("working_directory", "cwd")) or first_text(agent, ("working_directory", "cwd"))
    if found:
        return found
    dirs = doc.get("workspace_dirs")
    first = dirs[0] if isinstance(dirs, list) and dirs else None
    return first if isinstance(first, str) and first else first_text(as_object(first), ("root_path", "path"))


def _step(conv: Conversation, step: dict[str, Any]) -> None:
    meta = as_object(step.get("metadata"))
    typed = meta.get("is_user_input")
    source = step.get("source")
    if source is None:  # older exports mark user turns only with is_user_input
        source = "user" if typed is True else "agent"
    ts = conv.time(step.get("timestamp"), meta.get("created_at"))
    texts, thinking = content_texts(step.get("message"), conv.skips)
    if source == "system":
        count_skip(conv.skips, "system-prompt")
    elif source == "user":
        conv.user(joined(texts), ts, typed)
    elif source == "agent":
        reasoning = step.get("reasoning_content")
        for thought in ([reasoning] if isinstance(reasoning, str) else []) + thinking:
            conv.add(thought, "thinking", ts)
        conv.add(joined(texts), "text", ts)
        for call in step.get("tool_calls") or []:
            obj = as_object(call)
            name = obj.get("function_name")
            if isinstance(name, str) and name:
                conv.add(f"{name} {arguments_text(obj.get('arguments'))}", "tool_call", ts)
            else:
                conv.add(next(iter(tool_calls([obj], conv.skips)), ""), "tool_call", ts)
        for result in as_object(step.get("observation")).get("results") or []:
            out, _ = content_texts(as_object(result).get("content"), conv.skips)
            conv.add(joined(out), "tool_result", ts)
    else:
        count_skip(conv.skips, "unknown_record", str(source))


def read_transcript(found: Found) -> Unit:
    """A ``transcripts/<id>.json`` ATIF export (``{session_id, steps: [...]}``)."""
    path = found.path
    fb = read_settled(path)
    doc = loads_line(fb.data)
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        if doc is None and fb.recent:
            raise UnitChanged("the transcript is still being written")
        raise UnitUnreadable("not a Devin transcript (a JSON object with steps)")
    started = to_epoch_ms(doc.get("created_at"))
    conv = Conversation(default_ts=started)
    for step in doc["steps"]:
        if isinstance(step, dict):
            _step(conv, step)
        else:
            count_skip(conv.skips, "malformed-record")
    session_id = nonblank(doc.get("session_id")) or os.path.basename(path)[: -len(".json")]
    cwd = _transcript_cwd(doc)
    times = [t for t in (started, to_epoch_ms(doc.get("updated_at")), *conv.times) if t is not None]
    info = SessionInfo(agent=AGENT, session_id=session_id,
                       title=first_line_title(conv.first_user) if conv.first_user else None, cwd=cwd,
                       started_at=min(times, default=None), updated_at=max(times, default=None),
                       message_count=len(conv.messages), resume_command=resume_command(session_id, cwd))
    return Unit(info, conv.messages, fb.signature, conv.skips)


def read_unit(found: Found) -> Unit:
    return read_transcript(found) if len(found.locator) == 1 else read_database_session(found)


# --- discovery and roots --------------------------------------------------------------------------
def _base(root: Root) -> str:
    """The folder holding ``sessions.db`` / ``transcripts/``: the root, or its ``cli`` folder."""
    nested = os.path.join(root.path, CLI_DIR)
    if not os.path.exists(os.path.join(root.path, DB_NAME)) and not os.path.isdir(
            os.path.join(root.path, TRANSCRIPTS_DIR)) and os.path.isdir(nested):
        return nested
    return root.path


def _transcripts(folder: str, root: Root, problems: list[RootProblem]) -> Iterator[Found]:
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if e.name.endswith(".json") and not e.name.startswith(".")),
                             key=lambda e: e.name)
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {folder}: {exc.strerror or exc}"))
        return
    for entry in entries:
        try:
            st = entry.stat()
        except OSError:
            continue
        if entry.is_file():
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size,
                        signature(st.st_size, st.st_mtime_ns, st.st_ino), "whole", (entry.path,))


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The visible sessions of ``sessions.db`` (listed again only when its stamp moved); the
    transcripts only when there is no database."""
    if check_root(root, problems) is None:
        return
    base = _base(root)
    db = os.path.join(base, DB_NAME)
    if os.path.exists(db):
        listing, fresh = list_sessions(db, root, problems, dirs, _list)
        if listing is not None:
            yield from due(listing, fresh, full)
        return
    yield from _transcripts(os.path.join(base, TRANSCRIPTS_DIR), root, problems)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.local/share/devin/cli`` and, on macOS, ``~/Library/Application Support/devin/cli``."""
    return [Root(AGENT, str(home / ".local" / "share" / "devin" / CLI_DIR)),
            Root(AGENT, str(home / "Library" / "Application Support" / "devin" / CLI_DIR))]


SPEC = AgentSpec(
    name=AGENT, label="Devin CLI", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="sessions.db (SQLite: sessions, message_nodes), or transcripts/<session id>.json",
    shaped=lambda name: name == DB_NAME)
