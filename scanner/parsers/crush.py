"""Crush sessions (docs/formats.md §11): one SQLite database per project, ``<project>/.crush/crush.db``.

Crush registers every project it runs in with ``projects.json`` in its global data directory. The
default roots are that registry folder (the registry is read again each pass, so a project
registered later is found) and the data directory of each project registered when the scanner
started: the units live under it, so a full pass sees a project's deleted sessions gone, and it is
small to look through (the project's own tree is never walked). A root named on the command line
is a project folder holding ``.crush/``, a folder whose sub-folders are projects, a data directory,
or a registry folder. Every session is a ``whole`` unit ``"<db>#<session id>"``
(scanner/parsers/sqlite_units.py); the title-generation side sessions Crush creates (``title-<parent id>``,
upstream ``CreateTitleSession``) are not conversations and are left out. Crush's timestamps are
whole seconds (a message updated twice in one second keeps its ``updated_at``), so a session's
signature also covers its last messages' sizes and finish times, read through the session index
without touching the other rows.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.sqlite_units import (
    ListedSession,
    SessionSql,
    columns,
    due,
    list_sessions,
    pick,
    read_session,
)
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "crush"
DATA_DIR: Final = ".crush"  # options.data_directory's default
DB_NAME: Final = "crush.db"
REGISTRY: Final = "projects.json"
# projects.json lists folders; anything larger is not what Crush writes.
REGISTRY_MAX_BYTES: Final = 4 * 1024 * 1024
TITLE_SESSION_PREFIX: Final = "title-"
# The title a session carries until the small model has named it.
PLACEHOLDER_TITLES: Final = frozenset({"New Session", "Untitled Session", ""})
# Streaming rewrites a session's newest messages in place; these many of them are fingerprinted.
SIGNATURE_TAIL: Final = 3
_ROLE_OF: Final[dict[str, RoleName]] = {"user": "user", "assistant": "assistant", "tool": "tool", "system": "system"}
BOOKKEEPING_PARTS: Final = frozenset({"finish"})
ATTACHMENT_PARTS: Final = frozenset({"image_url", "binary"})

# --- SQL (column names chosen by _schema among our own constants) ---------------------------------
SESSION_SIGNATURE: Final = """
SELECT s.id, {s_parent}, {s_updated}, {s_title},
       (SELECT count(*) FROM messages WHERE messages.session_id = s.id),
       (SELECT max(messages.rowid) FROM messages WHERE messages.session_id = s.id),
       (SELECT group_concat(tail, ',') FROM (
            SELECT messages.rowid || ':' || coalesce({m_updated}, '') || ':' || coalesce({m_finished}, '') || ':'
                   || coalesce(length(messages.parts), '') AS tail
            FROM messages WHERE messages.session_id = s.id ORDER BY messages.rowid DESC LIMIT {tail})),
       {s_created}, {s_workspace}
FROM sessions s"""
MESSAGES: Final = """SELECT role, parts, {m_created}, {m_summary} FROM messages WHERE session_id = ?
ORDER BY {m_created}, rowid"""


def _schema(con: sqlite3.Connection) -> SessionSql:
    s = columns(con, "sessions", ("id",))
    m = columns(con, "messages", ("id", "session_id", "role", "parts"))
    sql = SESSION_SIGNATURE.format(
        s_parent=pick(s, "parent_session_id", alias="s"), s_updated=pick(s, "updated_at", alias="s"),
        s_title=pick(s, "title", alias="s"), s_created=pick(s, "created_at", alias="s"),
        s_workspace=pick(s, "workspace_cwd", alias="s"), m_updated=pick(m, "updated_at", alias="messages"),
        m_finished=pick(m, "finished_at", alias="messages"), tail=SIGNATURE_TAIL)
    return SessionSql(sessions=sql, messages=MESSAGES.format(m_created=pick(m, "created_at", "updated_at"),
                                                           m_summary=pick(m, "is_summary_message")))


def _signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:7])


def is_title_session(session_id: str, parent_id: object) -> bool:
    """Crush's ``title-<parent>`` side session that asks the small model for a title."""
    return isinstance(parent_id, str) and session_id == TITLE_SESSION_PREFIX + parent_id


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_schema(con).sessions):
        sid = str(row[0])
        if not is_title_session(sid, row[1]):
            yield sid, _signature(row), int(row[4] or 0)


# --- messages -------------------------------------------------------------------------------------
def _part_messages(out: list[Message], skips: dict[str, int], role: RoleName, part: object, ts: int | None) -> None:
    if not isinstance(part, dict):
        count_skip(skips, "malformed-record")
        return
    ptype = part.get("type")
    data = as_object(part.get("data"))
    if ptype == "text":
        text = data.get("text")
        if isinstance(text, str) and text.strip():
            out.append(Message(role, "text", text, ts))
        else:
            count_skip(skips, "empty_text")
    elif ptype == "reasoning":
        text = data.get("thinking")
        if isinstance(text, str) and text.strip():
            out.append(Message("assistant", "thinking", text, ts))
        else:
            count_skip(skips, "empty_thinking")
    elif ptype == "tool_call":
        name = data.get("name") if isinstance(data.get("name"), str) and data.get("name") else "tool"
        raw = data.get("input")
        # The arguments are a JSON string (the model's own text); one that does not parse is kept as is.
        parsed = loads_line(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else raw
        args = compact_json(parsed) if parsed is not None else (raw if isinstance(raw, str) else "{}")
        out.append(Message("assistant", "tool_call", f"{name} {args}", ts))
    elif ptype == "tool_result":
        content = data.get("content")
        text = content if isinstance(content, str) else compact_json(content) if content is not None else ""
        if data.get("is_error") is True:
            text = f"[error] {text}"
        out.append(Message("tool", "tool_result", text, ts))
    elif isinstance(ptype, str) and ptype in BOOKKEEPING_PARTS:
        count_skip(skips, f"bookkeeping:{ptype}")
    elif isinstance(ptype, str) and ptype in ATTACHMENT_PARTS:
        count_skip(skips, f"attachment:{ptype}")
    else:
        count_skip(skips, f"unknown_part:{str(ptype)[:40]}")


def _resume_command(session_id: str, cwd: str | None, parent_id: str | None) -> str | None:
    """``crush --session <id>`` from the project folder (PR #2422, 2026-03): each project has its
    own database, and Crush refuses to continue a child (agent tool) session."""
    if cwd is None or parent_id:
        return None
    return f"cd {shlex.quote(cwd)} && crush --session {shlex.quote(session_id)}"


def read_unit(found: Found) -> Unit:
    """One Crush session, read in one transaction."""
    db, session_id = found.locator[:2]
    project = found.locator[2] if len(found.locator) > 2 else _project_of(db)
    row, rows = read_session(found, _schema)
    out: list[Message] = []
    skips: dict[str, int] = {}
    first_user: str | None = None
    times: list[int] = []
    for role_name, raw, created, summary in rows:
        role = _ROLE_OF.get(role_name) if isinstance(role_name, str) else None
        if role is None:
            count_skip(skips, f"unknown_role:{str(role_name)[:40]}")
            continue
        if summary:
            role = "system"  # a compaction summary Crush wrote for the model, not the user's words
        ts = to_epoch_ms(created)
        if ts is not None:
            times.append(ts)
        parts = loads_line(raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass"))
        if not isinstance(parts, list):
            count_skip(skips, "malformed-record")
            continue
        before = len(out)
        for part in parts:
            _part_messages(out, skips, role, part, ts)
        if role == "user" and first_user is None:
            first_user = next((m.text for m in out[before:] if m.kind == "text"), None)
    cwd = nonblank(row[8]) or project
    title = nonblank(row[3])
    if title is None or title in PLACEHOLDER_TITLES:
        title = first_line_title(first_user) if first_user else None
    started = to_epoch_ms(row[7])
    updated = [t for t in (to_epoch_ms(row[2]), *times) if t is not None]
    parent = nonblank(row[1])
    info = SessionInfo(agent=AGENT, session_id=session_id, title=title, cwd=cwd,
                       started_at=started if started is not None else min(times, default=None),
                       updated_at=max(updated) if updated else None, message_count=len(out),
                       resume_command=_resume_command(session_id, cwd, parent), parent_session_id=parent)
    return Unit(info, out, _signature(row), skips)


def _project_of(db: str) -> str | None:
    """The folder holding ``.crush/``: the project Crush ran in (when no registry named it)."""
    data_dir = os.path.dirname(db)
    return os.path.dirname(data_dir) if os.path.basename(data_dir) == DATA_DIR else None


# --- where the databases are ----------------------------------------------------------------------
def registry_projects(registry: str) -> list[tuple[str, str]]:
    """(project folder, database path) for each project in ``projects.json``. A relative project
    path is taken from the registry's folder, a relative data directory from the project's."""
    try:
        with open(registry, "rb") as fh:
            raw = fh.read(REGISTRY_MAX_BYTES + 1)
    except OSError:
        return []
    doc = loads_line(raw) if len(raw) <= REGISTRY_MAX_BYTES else None
    projects = doc.get("projects") if isinstance(doc, dict) else None
    out: list[tuple[str, str]] = []
    base = os.path.dirname(registry)
    for entry in projects if isinstance(projects, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not entry["path"]:
            continue
        folder = os.path.normpath(os.path.join(base, os.path.expanduser(str(entry["path"]))))
        data_dir = entry.get("data_dir")
        data_dir = data_dir if isinstance(data_dir, str) and data_dir else DATA_DIR
        out.append((folder, os.path.normpath(os.path.join(folder, os.path.expanduser(data_dir), DB_NAME))))
    return out


def _databases(root: Root, problems: list[RootProblem]) -> list[tuple[str, str | None]]:
    """(database, project folder if known) for every project the root leads to."""
    path = root.path
    if os.path.isfile(path) and path.endswith(".json"):
        return [(db, folder) for folder, db in registry_projects(path)]
    if check_root(root, problems) is None:
        return []
    found: list[tuple[str, str | None]] = []
    registry = os.path.join(path, REGISTRY)
    if os.path.isfile(registry):
        found += [(db, folder) for folder, db in registry_projects(registry)]
    for db, project in ((os.path.join(path, DB_NAME), _project_of(os.path.join(path, DB_NAME))),
                        (os.path.join(path, DATA_DIR, DB_NAME), path)):
        if os.path.isfile(db):
            found.append((db, project))
    if not found and root.explicit:
        try:
            with os.scandir(path) as it:
                children = sorted(e.path for e in it if e.is_dir() and not e.name.startswith("."))
        except OSError as exc:
            problems.append(RootProblem(path, f"cannot list root: {exc.strerror or exc}"))
            children = []
        found += [(db, c) for c, db in ((c, os.path.join(c, DATA_DIR, DB_NAME)) for c in children)
                  if os.path.isfile(db)]
    projects: dict[str, str | None] = {}
    for db, project in found:
        if projects.get(db) is None:  # a database reached twice keeps the project folder it was named with
            projects[db] = project
    return list(projects.items())


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The sessions of every project database the root leads to (a database is listed again only
    when its stamp moved)."""
    for db, project in _databases(root, problems):
        listing, fresh = list_sessions(db, root, problems, dirs, _list, extra=(project,) if project else ())
        if listing is not None:
            yield from due(listing, fresh, full)


def _registry_dir(env: Mapping[str, str], home: Path) -> Path:
    if env.get("CRUSH_GLOBAL_DATA"):
        return Path(env["CRUSH_GLOBAL_DATA"]).expanduser()
    data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    return data / "crush"


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """The registry folder (``$CRUSH_GLOBAL_DATA``, else ``$XDG_DATA_HOME/crush``, else
    ``~/.local/share/crush``) and the data directory of every project it lists now."""
    registry = _registry_dir(env, home).absolute()
    roots = [Root(AGENT, str(registry))]
    roots += [Root(AGENT, os.path.dirname(db)) for _, db in registry_projects(str(registry / REGISTRY))]
    return list(dict.fromkeys(roots))


SPEC = AgentSpec(
    name=AGENT, label="Crush", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="<project>/.crush/crush.db (SQLite), listed in projects.json",
    shaped=lambda name: name == DB_NAME)
