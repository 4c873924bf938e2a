"""OpenCode sessions (docs/formats.md §4): the SQLite database of 1.2+, and the legacy JSON tree.

The root is OpenCode's data directory (``$XDG_DATA_HOME/opencode``). It holds ``opencode.db`` and,
for other release channels, ``opencode-<channel>.db`` (opencode #2987); every session in them is a
``whole`` unit ``"<db>#<session id>"`` (scanner/parsers/sqlite_units.py). Its change signature is the
session row's ``time_updated`` and title plus, over its ``message`` and ``part`` rows, their count
and newest ``time_updated``: child rows change without the session row (437 sessions in one
13.5 GB database, AV format doc), and rows deleted by a revert change the count. Columns are looked
up before they are used, so the 1.14 Drizzle schema change (cass #227) or a later one reads what is
there or fails naming what is missing. The legacy ``storage/`` tree (scanner/parsers/opencode/legacy.py)
is read for the sessions no database holds.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aivault.errors import UnitChanged
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms
from aivault.scanner.parsers.opencode import legacy
from aivault.scanner.parsers.opencode.parts import AGENT, Conversation, SessionRecord, add_message, build_unit
from aivault.scanner.parsers.sqlite_units import ListedSession, columns, due, list_sessions, pick, snapshot
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

DB_NAME: Final = "opencode.db"
CHANNEL_DB_PREFIX: Final = "opencode-"  # opencode-stable.db, opencode-beta.db, ...

# --- SQL (column names come from _Schema, chosen among our own constants) -------------------------
# Every session with the values its signature is made of.
LIST_SESSIONS: Final = """
SELECT s.id, {s_updated}, {s_title}, coalesce(m.n, 0), m.newest, coalesce(p.n, 0), p.newest
FROM session s
LEFT JOIN (SELECT session_id, count(*) AS n, max({m_updated}) AS newest FROM message GROUP BY session_id) m
       ON m.session_id = s.id
LEFT JOIN ({part_counts}) p ON p.session_id = s.id"""
PART_COUNTS: Final = "SELECT session_id, count(*) AS n, max({p_updated}) AS newest FROM part GROUP BY session_id"
# Parts without a session_id column are counted through their message.
PART_COUNTS_VIA_MESSAGE: Final = """SELECT message.session_id AS session_id, count(*) AS n, max({p_updated}) AS newest
FROM part JOIN message ON message.id = part.message_id GROUP BY message.session_id"""
# One session: the same signature values (so an unchanged session is recognised), and its fields.
SESSION_ROW: Final = """
SELECT s.id, {s_updated}, {s_title},
       (SELECT count(*) FROM message WHERE message.session_id = s.id),
       (SELECT max({m_updated}) FROM message WHERE message.session_id = s.id),
       ({part_count}), ({part_newest}),
       {s_directory}, {s_parent}, {s_created}, {s_project}
FROM session s WHERE s.id = ?"""
PART_COUNT: Final = "SELECT count(*) FROM part WHERE part.session_id = s.id"
PART_NEWEST: Final = "SELECT max({p_updated}) FROM part WHERE part.session_id = s.id"
PART_COUNT_VIA_MESSAGE: Final = ("SELECT count(*) FROM part JOIN message ON message.id = part.message_id "
                                 "WHERE message.session_id = s.id")
PART_NEWEST_VIA_MESSAGE: Final = ("SELECT max({p_updated}) FROM part JOIN message ON message.id = part.message_id "
                                  "WHERE message.session_id = s.id")
# Messages in time order, their parts in id order (the ids are time-sortable).
MESSAGES: Final = "SELECT id, data, {m_created} FROM message WHERE session_id = ? ORDER BY {m_created}, id"
PARTS: Final = "SELECT message_id, id, data FROM part WHERE session_id = ? ORDER BY message_id, id"
PARTS_VIA_MESSAGE: Final = """SELECT part.message_id, part.id, part.data FROM part
JOIN message ON message.id = part.message_id WHERE message.session_id = ? ORDER BY part.message_id, part.id"""
PROJECT_WORKTREE: Final = "SELECT worktree FROM project WHERE id = ?"


@dataclass(frozen=True, slots=True)
class _Schema:
    """The columns this database has, and the SQL built from them."""

    list_sessions: str
    session_row: str
    messages: str
    parts: str
    has_worktree: bool


def _schema(con: sqlite3.Connection) -> _Schema:
    s = columns(con, "session", ("id",))
    m = columns(con, "message", ("id", "session_id", "data"))
    p = columns(con, "part", ("id", "message_id", "data"))
    m_updated = pick(m, "time_updated", "time_created", alias="message")
    p_updated = pick(p, "time_updated", "time_created", alias="part")
    common = {"s_updated": pick(s, "time_updated", alias="s"), "s_title": pick(s, "title", alias="s"),
              "m_updated": m_updated}
    by_session = "session_id" in p
    part_counts = (PART_COUNTS if by_session else PART_COUNTS_VIA_MESSAGE).format(p_updated=p_updated)
    part_count = PART_COUNT if by_session else PART_COUNT_VIA_MESSAGE
    part_newest = (PART_NEWEST if by_session else PART_NEWEST_VIA_MESSAGE).format(p_updated=p_updated)
    return _Schema(
        list_sessions=LIST_SESSIONS.format(part_counts=part_counts, **common),
        session_row=SESSION_ROW.format(part_count=part_count, part_newest=part_newest,
                                       s_directory=pick(s, "directory", alias="s"),
                                       s_parent=pick(s, "parent_id", alias="s"),
                                       s_created=pick(s, "time_created", alias="s"),
                                       s_project=pick(s, "project_id", alias="s"), **common),
        messages=MESSAGES.format(m_created=pick(m, "time_created", "time_updated")),
        parts=PARTS if by_session else PARTS_VIA_MESSAGE,
        has_worktree="worktree" in columns(con, "project"))


def _signature(row: tuple[object, ...]) -> int:
    """A session's change signature from (id, updated, title, messages, newest, parts, newest)."""
    return signature(*row[1:7])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_schema(con).list_sessions):
        yield str(row[0]), _signature(row), int(row[3] or 0) + int(row[5] or 0)


def _json(value: object) -> object | None:
    if isinstance(value, str):
        return loads_line(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return loads_line(value)
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def read_database_session(found: Found) -> Unit:
    """One session of an OpenCode database, read in one transaction."""
    db, session_id = found.locator
    with snapshot(db, found.path) as con:
        schema = _schema(con)
        row = con.execute(schema.session_row, (session_id,)).fetchone()
        if row is None:
            raise UnitChanged(f"session {session_id} is no longer in {os.path.basename(db)}")
        messages = con.execute(schema.messages, (session_id,)).fetchall()
        parts = con.execute(schema.parts, (session_id,)).fetchall()
        worktree = None
        if schema.has_worktree and row[10] is not None and not _text(row[7]):
            hit = con.execute(PROJECT_WORKTREE, (row[10],)).fetchone()
            worktree = _text(hit[0]) if hit else None
    conv = Conversation()
    by_message: dict[object, list[object]] = {}
    for message_id, _part_id, data in parts:
        by_message.setdefault(message_id, []).append(_json(data))
    for message_id, data, created in messages:
        add_message(conv, _json(data), by_message.pop(message_id, ()), to_epoch_ms(created))
    for orphans in by_message.values():  # parts whose message row is gone (a revert mid-read cannot be: one snapshot)
        for _ in orphans:
            count_skip(conv.skips, "orphan_part")
    newest = [t for t in (to_epoch_ms(row[1]), to_epoch_ms(row[4]), to_epoch_ms(row[6])) if t is not None]
    rec = SessionRecord(session_id=session_id, title=_text(row[2]), directory=_text(row[7]), parent_id=_text(row[8]),
                        created=to_epoch_ms(row[9]), updated=max(newest) if newest else None, worktree=worktree)
    return build_unit(rec, conv, _signature(row))


def read_unit(found: Found) -> Unit:
    if len(found.locator) == 2:
        return read_database_session(found)
    return legacy.read(found)


def _databases(folder: str) -> list[str]:
    """``opencode.db`` first, then the channel databases by name."""
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if e.name.endswith(".db") and e.is_file()
                     and (e.name == DB_NAME or e.name.startswith(CHANNEL_DB_PREFIX))]
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names, key=lambda n: (n != DB_NAME, n))]


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every session of every database under the root (a database is listed again only when its
    stamp moved), then the legacy sessions none of them holds. A session id already listed from
    an earlier database is not taken again from a later one."""
    if check_root(root, problems) is None:
        return
    seen: set[str] = set()
    for db in _databases(root.path):
        listing, fresh = list_sessions(db, root, problems, dirs, _list)
        if listing is None:
            continue
        yield from due(listing, fresh, full, seen)
        seen |= listing.ids
    yield from legacy.discover(root, problems, full, seen)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$XDG_DATA_HOME/opencode`` (``~/.local/share/opencode``, also on macOS)."""
    data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    return [Root(AGENT, str(data.absolute() / "opencode"))]


SPEC = AgentSpec(
    name=AGENT, label="OpenCode", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="opencode.db / opencode-<channel>.db (SQLite), or storage/session/<project>/<session>.json",
    shaped=lambda name: name == DB_NAME or (name.startswith(CHANNEL_DB_PREFIX) and name.endswith(".db"))
    or (name.startswith(legacy.SESSION_PREFIX) and name.endswith(".json")))
