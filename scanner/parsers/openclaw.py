"""OpenClaw sessions (docs/formats.md §18): pi-format transcripts, in JSONL files or in the agent's SQLite store.

The state folder (``$OPENCLAW_STATE_DIR``, else ``~/.openclaw``; ``~/.clawdbot`` and ``~/.moltbot`` before
the renames) holds ``agents/<agent id>/``, the root's children. Per agent:

* ``sessions/<session id>.jsonl``: one transcript per session in pi's tree format (read through
  scanner/parsers/pitree.py), and ``sessions.json`` mapping each session *key* (``agent:main:main``, what
  ``openclaw chat --session`` takes) to its current session id. A transcript archived by ``/reset``
  (``<id>.jsonl.reset.<time>``) is indexed too, without a resume command: its key has moved on. Deleted
  (``.deleted.<time>``) and backup (``.bak.<time>``) archives, pre-compaction checkpoint copies
  (``<id>.checkpoint.<uuid>.jsonl``) and trajectory logs are not conversations of their own.
* ``agent/openclaw-agent.sqlite`` (newer builds, WAL): ``transcript_events`` holds each session's entries
  (one ``event_json`` per JSONL line, in ``seq`` order) and ``session_windows`` its key, display name and
  lineage. Every session with events is a ``whole`` unit ``"<db>#<session id>"``
  (scanner/parsers/sqlite_units.py), read in one read-only transaction; its leaf is the index state's
  ``leaf_event_id`` when that is current. A JSONL file of a session the database holds events for is not
  read again.

A JSONL unit's signature covers, beside the file, what the database and ``sessions.json`` say of it
(key, display name, parent), so a rename or a reset in either re-reads the session once.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import loads_line
from aivault.scanner.parsers.pitree import (
    PiTree,
    expand,
    parent_id,
    read_file,
    read_tree,
    without_gateway_stamp,
)
from aivault.scanner.parsers.sqlite_units import ListedSession, columns, due, list_sessions, pick, snapshot
from aivault.scanner.parsers.textutil import nonblank
from aivault.scanner.sources import (
    Found,
    Root,
    RootProblem,
    Unit,
    check_root,
    db_change_stamp,
    signature,
    size_mtime,
)
from aivault.scanner.spec import AgentSpec

AGENT: Final = "openclaw"
DB_NAME: Final = "openclaw-agent.sqlite"
DB_DIR: Final = "agent"
SESSIONS_DIR: Final = "sessions"
INDEX: Final = "sessions.json"
RESUME: Final = "openclaw chat --session"
INDEX_MAX_BYTES: Final = 32 * 1024 * 1024  # sessions.json: one small entry per chat
RESET_MARK: Final = ".jsonl.reset."
_ARCHIVE_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z")
_CHECKPOINT = re.compile(r"\.checkpoint\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$", re.I)

# --- SQL (optional column names chosen by _queries among our own constants) ------------------------
SESSIONS: Final = """
SELECT e.session_id, count(*), max(e.seq), {e_created}, {w_updated}, {w_display}, {w_key}, {w_successor}, {leaf}
FROM transcript_events e LEFT JOIN session_windows w ON w.session_id = e.session_id{where}
GROUP BY e.session_id"""
EVENTS: Final = "SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq"
WINDOWS: Final = """
SELECT w.session_id, {w_key}, {w_display}, {w_parent_key}, {w_spawned_by}, {w_previous}, {w_successor}
FROM session_windows w{where}"""
# The window a key leads to now: the one no later window continues, else the newest.
KEY_LATEST: Final = "SELECT w.session_id FROM session_windows w WHERE w.session_key = ? ORDER BY {order} LIMIT 1"
ID_KNOWN: Final = "SELECT 1 FROM session_windows WHERE session_id = ?"
SUCCESSOR: Final = "EXISTS(SELECT 1 FROM session_windows n WHERE n.previous_session_id = w.session_id)"
LEAF: Final = """(SELECT s.leaf_event_id FROM session_transcript_index_state s
    WHERE s.session_id = e.session_id AND {current})"""
ONE: Final = " WHERE {alias}.session_id = ?"
_LEAF_COLUMN: Final = 8  # the SESSIONS column holding the leaf


@dataclass(frozen=True, slots=True)
class Queries:
    sessions: str  # every session with events: its id, then its change signature's parts, the leaf last
    windows: str  # the session windows: id, key, display name, parent key, spawned by, previous id, successor
    key_latest: str  # the newest window of a key


def _queries(con: sqlite3.Connection, where: bool = False) -> Queries:
    """The statements for this database's columns; UnitUnreadable when a table or column needed is missing."""
    e = columns(con, "transcript_events", ("session_id", "seq", "event_json"))
    w = columns(con, "session_windows", ("session_id",))
    s = columns(con, "session_transcript_index_state")
    leaf = "NULL"
    if "leaf_event_id" in s:
        leaf = LEAF.format(current="s.needs_rebuild = 0" if "needs_rebuild" in s else "1")
    successor = SUCCESSOR if "previous_session_id" in w else "0"
    sessions = SESSIONS.format(
        e_created="max(e.created_at)" if "created_at" in e else "NULL", w_updated=pick(w, "updated_at", alias="w"),
        w_display=pick(w, "display_name", alias="w"), w_key=pick(w, "session_key", alias="w"),
        w_successor=successor, leaf=leaf, where=ONE.format(alias="e") if where else "")
    windows = WINDOWS.format(
        w_key=pick(w, "session_key", alias="w"), w_display=pick(w, "display_name", alias="w"),
        w_parent_key=pick(w, "parent_session_key", alias="w"), w_spawned_by=pick(w, "spawned_by", alias="w"),
        w_previous=pick(w, "previous_session_id", alias="w"), w_successor=successor,
        where=ONE.format(alias="w") if where else "")
    newest = f"{pick(w, 'updated_at', 'created_at', alias='w')} DESC"
    order = [successor, newest] if "previous_session_id" in w else [newest]
    key_latest = KEY_LATEST.format(order=", ".join(order))
    return Queries(sessions, windows, key_latest if "session_key" in w else "")


# --- what beside a transcript names it -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Side:
    """What the session windows and ``sessions.json`` say of one session."""

    key: str | None = None  # the session key that still leads to this session (resumable)
    title: str | None = None  # session_windows.display_name
    parent: str | None = None  # the parent key's (or spawner's, or predecessor's) session id

    def parts(self) -> tuple[str | None, str | None, str | None]:
        return (self.key, self.title, self.parent)


NO_SIDE: Final = Side()


def _window_side(con: sqlite3.Connection, q: Queries, row: tuple[Any, ...]) -> Side:
    """A window row's Side: parent by ``parent_session_key``, then ``spawned_by`` (a key or an id), then
    ``previous_session_id`` (the session a /reset continued from); its key only while no window
    continues it."""
    _, key, display, parent_key, spawned_by, previous, successor = row

    def by_key(value: object) -> str | None:
        if not q.key_latest or not nonblank(value):
            return None
        found = con.execute(q.key_latest, (value,)).fetchone()
        return str(found[0]) if found is not None else None

    parent = by_key(parent_key) or by_key(spawned_by)
    if parent is None and nonblank(spawned_by) and con.execute(ID_KNOWN, (spawned_by,)).fetchone() is not None:
        parent = str(spawned_by)
    parent = parent or nonblank(previous)
    return Side(key=nonblank(key) if not successor else None, title=nonblank(display), parent=parent)


def _index_keys(path: str) -> dict[str, str]:
    """``sessions.json`` as session id -> key (the first key in sorted order when several share one)."""
    try:
        with open(path, "rb") as f:
            doc = loads_line(f.read(INDEX_MAX_BYTES))
    except OSError:
        return {}
    keys: dict[str, str] = {}
    for key, entry in sorted(doc.items()) if isinstance(doc, dict) else ():
        sid = nonblank(entry.get("sessionId")) if isinstance(entry, dict) else None
        if sid is not None and isinstance(key, str) and key:
            keys.setdefault(sid, key)
    return keys


# Per agent folder: the stamps of sessions.json and the database, and the Sides read at them.
_SIDES: dict[str, tuple[object, dict[str, Side]]] = {}


def sides(agent_dir: str) -> dict[str, Side]:
    """The Side of every session of one agent folder, read again when ``sessions.json`` or the database
    changed; a database that cannot be read now leaves only what ``sessions.json`` says (and is tried
    again next time)."""
    index = os.path.join(agent_dir, SESSIONS_DIR, INDEX)
    db = os.path.join(agent_dir, DB_DIR, DB_NAME)
    stamp = (size_mtime(index), db_change_stamp(db))
    cached = _SIDES.get(agent_dir)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    found: dict[str, Side] = {}
    complete = True
    if os.path.exists(db):
        try:
            with snapshot(db) as con:
                q = _queries(con)
                for row in con.execute(q.windows).fetchall():
                    found[str(row[0])] = _window_side(con, q, row)
        except (UnitChanged, UnitUnreadable, sqlite3.Error):
            complete = False
    for sid, key in _index_keys(index).items():
        side = found.get(sid, NO_SIDE)
        found[sid] = Side(key=key, title=side.title, parent=side.parent)
    if complete:
        _SIDES[agent_dir] = (stamp, found)
    return found


# --- one session -----------------------------------------------------------------------------------
def _unit(sid: str, tree: PiTree, side: Side, sig: int, skips: dict[str, int], *, resumable: bool) -> Unit:
    """The Unit of one OpenClaw transcript: title the display name, else pi's precedence with the gateway's
    time stamp taken off the first prompt; resume ``openclaw chat --session <key>`` while the key still
    leads here."""
    first = without_gateway_stamp(tree.first_user) if tree.first_user else None
    resume = f"{RESUME} {shlex.quote(side.key)}" if resumable and side.key else None
    session = SessionInfo(agent=AGENT, session_id=sid, title=side.title or tree.title(first), cwd=tree.cwd,
                          branch=None, started_at=tree.started, updated_at=tree.updated,
                          message_count=len(tree.messages), resume_command=resume,
                          parent_session_id=side.parent or parent_id(tree.parent_ref))
    return Unit(session, tree.messages, sig, skips)


def transcript_kind(name: str) -> str | None:
    """``live`` for ``<id>.jsonl``, ``reset`` for a transcript archived by /reset, None for everything
    else of a sessions folder (the index, checkpoints, trajectories, deleted and backup archives)."""
    if name.endswith(".jsonl"):
        return None if name.endswith(".trajectory.jsonl") or _CHECKPOINT.search(name) else "live"
    mark = name.rfind(RESET_MARK)
    if mark > 0 and _ARCHIVE_STAMP.fullmatch(name[mark + len(RESET_MARK):]):
        return "reset"
    return None


def file_session_id(name: str) -> str:
    """The session id a transcript's file name carries (before ``.jsonl``)."""
    return name[: name.index(".jsonl")]


def _file_signature(base: int, side: Side) -> int:
    return signature(base, side.parts())


def read_unit(found: Found) -> Unit:
    """One OpenClaw session: a database session (``found.locator`` is ``(db, session id)``) or a transcript file."""
    if found.locator:
        return _read_db_session(found)
    name = os.path.basename(found.path)
    kind = transcript_kind(name)
    agent_dir = os.path.dirname(os.path.dirname(found.path))
    skips: dict[str, int] = {}
    fb, objs = read_file(found.path, skips)
    side = sides(agent_dir).get(file_session_id(name), NO_SIDE)
    tree = read_tree(objs, skips)
    sid = tree.session_id or file_session_id(name)
    return _unit(sid, tree, side, _file_signature(fb.signature, side), skips, resumable=kind == "live")


def _read_db_session(found: Found) -> Unit:
    db, sid = found.locator[:2]
    skips: dict[str, int] = {}
    with snapshot(db, found.path) as con:
        q = _queries(con, where=True)
        row = con.execute(q.sessions, (sid,)).fetchone()
        if row is None:
            raise UnitChanged(f"session {sid} has no events in {db} any more")
        events = con.execute(EVENTS, (sid,)).fetchall()
        window = con.execute(q.windows, (sid,)).fetchone()
        side = _window_side(con, q, window) if window is not None else NO_SIDE
    objs: list[dict[str, Any]] = []
    for (raw,) in events:
        obj = loads_line(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else None
        if isinstance(obj, dict):
            objs.append(obj)
        else:
            count_skip(skips, "malformed-record")
    leaf = row[_LEAF_COLUMN]
    tree = read_tree(objs, skips, leaf=leaf if isinstance(leaf, str) else None)
    return _unit(sid, tree, side, _db_signature(row), skips, resumable=True)


def _db_signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_queries(con).sessions):
        yield str(row[0]), _db_signature(row), int(row[1] or 0)


def _predecessor(path: str) -> str | None:
    """A transcript /reset archived continues the live file it was renamed from (``<id>.jsonl``), whose
    rows it replaces instead of standing beside them."""
    name = os.path.basename(path)
    if transcript_kind(name) != "reset":
        return None
    return os.path.join(os.path.dirname(path), name[: name.rindex(RESET_MARK)] + ".jsonl")


# --- discovery and roots ---------------------------------------------------------------------------
def _transcripts(agent_dir: str, held: frozenset[str], root: Root, problems: list[RootProblem]) -> Iterator[Found]:
    """The transcript files of one agent folder whose sessions the database does not hold (a stat each:
    the folder is flat and a transcript grows in place, so it is listed every pass)."""
    folder = os.path.join(agent_dir, SESSIONS_DIR)
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if transcript_kind(e.name) is not None), key=lambda e: e.name)
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {folder}: {exc.strerror or exc}"))
        return
    if not entries:
        return
    known = sides(agent_dir)
    for entry in entries:
        sid = file_session_id(entry.name)
        if sid in held:
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if entry.is_file():
            base = signature(st.st_size, st.st_mtime_ns, st.st_ino)
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size,
                        _file_signature(base, known.get(sid, NO_SIDE)), "whole")


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Per agent folder under the root: the database's sessions (listed again only when its stamp moved),
    then the transcript files it does not hold."""
    if check_root(root, problems) is None:
        return
    try:
        with os.scandir(root.path) as it:
            agents = sorted(e.path for e in it if e.is_dir())
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list root: {exc.strerror or exc}"))
        return
    for agent_dir in agents:
        db = os.path.join(agent_dir, DB_DIR, DB_NAME)
        listing, fresh = list_sessions(db, root, problems, dirs, _list)
        held: frozenset[str] = frozenset()
        if listing is not None:
            yield from due(listing, fresh, full)
            held = listing.ids
        yield from _transcripts(agent_dir, held, root, problems)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$OPENCLAW_STATE_DIR/agents`` (default ``~/.openclaw/agents``) and the folders of the earlier names,
    ``~/.clawdbot/agents`` and ``~/.moltbot/agents``; the same on every OS."""
    state = expand(env["OPENCLAW_STATE_DIR"], home) if env.get("OPENCLAW_STATE_DIR") else home / ".openclaw"
    paths = [state / "agents", home / ".clawdbot" / "agents", home / ".moltbot" / "agents"]
    return [Root(AGENT, str(p)) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="OpenClaw", default_roots=default_roots, discover=discover, read_unit=read_unit,
    predecessor=_predecessor,
    expects="<agent>/sessions/<session id>.jsonl (pi's JSONL tree) or <agent>/agent/openclaw-agent.sqlite",
    shaped=lambda name: name.endswith(".jsonl") or name == DB_NAME)
