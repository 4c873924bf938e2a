"""Hermes Agent sessions (docs/formats.md §19): ``state.db`` (SQLite, WAL) and the legacy JSON/JSONL files.

The root is Hermes' home, ``$HERMES_HOME`` (``~/.hermes``). Its ``state.db`` and each profile's
``profiles/<name>/state.db`` hold every session in a ``sessions`` table and their messages in a
``messages`` table (OpenAI chat shape, scanner/parsers/openai_chat.py), written by the running agent
in WAL mode: every session is a ``whole`` unit ``"<db>#<session id>"`` read read-only in one
transaction (scanner/parsers/sqlite_units.py). Hermes edits its transcript in place: ``/undo`` and
``/retry`` set ``active = 0`` on the rows they take back, in-place compaction archives rows with
``active = 0, compacted = 1`` (still shown) and clones the rows that arrived during it (one
``display_identity``), and presentation kinds are stamped on recent rows. So a session's signature
covers its row count, newest id, count of ``active`` rows and its newest rows' sizes and kinds, not
only its session row. Hermes 0.17 moved transcripts into ``state.db``; the
files older builds wrote, ``sessions/<id>.jsonl`` and ``sessions/session_<id>.json``, are read
(whole) for the ids no database holds, the JSONL before the JSON.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import as_object, loads_line, to_epoch_ms
from aivault.scanner.parsers.openai_chat import content_texts, joined, tool_calls
from aivault.scanner.parsers.sqlite_units import (
    ListedSession,
    SessionSql,
    columns,
    due,
    list_sessions,
    pick,
    read_session,
)
from aivault.scanner.parsers.textutil import first_line_title, nonblank, opens_with
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "hermes"
DB_NAME: Final = "state.db"
PROFILES_DIR: Final = "profiles"
LEGACY_DIR: Final = "sessions"
LEGACY_JSON_PREFIX: Final = "session_"
# Legacy transcript names: <YYYYMMDD_HHMMSS_hex>.jsonl and session_<id>.json.
LEGACY_JSONL_NAME: Final = re.compile(r"^\d{8}_\d{6}_[0-9A-Za-z]+\.jsonl$")
# Structured (multimodal) content is stored as a prefixed JSON string: "\x00json:" before the
# Postgres-safe "\x01json:" (both are read by Hermes).
CONTENT_JSON_PREFIXES: Final = ("\x00json:", "\x01json:")
# In-place edits touch a session's newest rows (presentation kinds, reactions); these many are fingerprinted.
SIGNATURE_TAIL: Final = 3
# display_kind "hidden": model-facing scaffolding Hermes never shows (heartbeats, handoff separators).
HIDDEN_KIND: Final = "hidden"
# User-role rows Hermes writes itself and paints as events: the harness speaking, not the user.
HARNESS_KINDS: Final = frozenset({"async_delegation_complete", "process_complete", "model_switch", "auto_continue",
                                  "mission_callback"})
# The background curator's prompts that older builds persisted into real sessions
# (hermes_state._REVIEW_HARNESS_PREFIXES); the reply right after one is the curator's too.
REVIEW_HARNESS_PREFIXES: Final = ("Review the conversation above and update the skill library",
                                  "Review the conversation above and consider saving to memory")
# Sessions Hermes lists nowhere and that --resume is not for (delegated sub-agents, tool runs).
NO_RESUME_SOURCES: Final = frozenset({"subagent", "tool"})
DEFAULT_PROFILE: Final = "default"

# --- SQL (column names chosen by _schema among our own constants) ---------------------------------
# Every session with the values its signature is made of, then its fields. Each value is an index
# probe (messages(session_id, id), and messages(session_id, active, timestamp) where Hermes made it),
# never a scan of the message bodies: the list is taken again whenever the database commits.
SESSIONS: Final = """
SELECT s.id, {s_title}, {s_started}, {s_last}, {s_ended},
       (SELECT count(*) FROM messages m WHERE m.session_id = s.id),
       (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id),
       {live},
       (SELECT group_concat(tail, ',') FROM (
            SELECT m.id || ':' || coalesce(length(m.content), '') || ':' || coalesce({m_kind}, '') AS tail
            FROM messages m WHERE m.session_id = s.id ORDER BY m.id DESC LIMIT {tail})),
       {s_cwd}, {s_branch}, {s_parent}, {s_source}, {s_profile}
FROM sessions s"""
# Rows still on the live branch: a rewind or a compaction flips active without adding a row.
LIVE_ROWS: Final = "(SELECT count(*) FROM messages m WHERE m.session_id = s.id AND m.active = 1)"
MESSAGES: Final = """SELECT role, content, {tool_calls}, {timestamp}, {reasoning}, {reasoning_content},
       {reasoning_details}, {summary}, {active}, {compacted}, {kind}, {identity}
FROM messages WHERE session_id = ? ORDER BY id"""
# The keys of a message dict, in MESSAGES' column order (legacy files hold the same keys).
MESSAGE_KEYS: Final = ("role", "content", "tool_calls", "timestamp", "reasoning", "reasoning_content",
                       "reasoning_details", "_compressed_summary", "active", "compacted", "display_kind",
                       "display_identity")


def _schema(con: sqlite3.Connection) -> SessionSql:
    s = columns(con, "sessions", ("id",))
    m = columns(con, "messages", ("id", "session_id", "role", "content"))
    sessions = SESSIONS.format(
        s_title=pick(s, "title", alias="s"), s_started=pick(s, "started_at", alias="s"),
        s_last=pick(s, "last_activity_at", alias="s"), s_ended=pick(s, "ended_at", alias="s"),
        live=LIVE_ROWS if "active" in m else "NULL", m_kind=pick(m, "display_kind", alias="m"), tail=SIGNATURE_TAIL,
        s_cwd=pick(s, "cwd", alias="s"), s_branch=pick(s, "git_branch", alias="s"),
        s_parent=pick(s, "parent_session_id", alias="s"), s_source=pick(s, "source", alias="s"),
        s_profile=pick(s, "profile_name", alias="s"))
    return SessionSql(sessions=sessions, messages=MESSAGES.format(
        tool_calls=pick(m, "tool_calls"), timestamp=pick(m, "timestamp"), reasoning=pick(m, "reasoning"),
        reasoning_content=pick(m, "reasoning_content"), reasoning_details=pick(m, "reasoning_details"),
        summary=pick(m, "_compressed_summary"), active=pick(m, "active"), compacted=pick(m, "compacted"),
        kind=pick(m, "display_kind"), identity=pick(m, "display_identity")))


def _signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:9])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_schema(con).sessions):
        yield str(row[0]), _signature(row), int(row[5] or 0)


# --- messages, shared by the database and the legacy files ----------------------------------------
def decode_content(value: object) -> object:
    """A ``content`` column as Hermes wrote it: text, or JSON parts behind a sentinel prefix."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and value.startswith(CONTENT_JSON_PREFIXES):
        parsed = loads_line(value[len(CONTENT_JSON_PREFIXES[0]):].encode("utf-8", "surrogatepass"))
        return parsed if parsed is not None else value
    return value


def _reasoning(msg: dict[str, Any]) -> str | None:
    """``reasoning``, else ``reasoning_content``, else the texts of ``reasoning_details`` (JSON)."""
    for key in ("reasoning", "reasoning_content"):
        text = msg.get(key)
        if isinstance(text, str) and text.strip():
            return text
    details = msg.get("reasoning_details")
    if isinstance(details, str):
        details = loads_line(details.encode("utf-8", "surrogatepass"))
    texts: list[str] = []
    for item in details if isinstance(details, list) else [details] if isinstance(details, dict) else []:
        obj = as_object(item)
        text = next((obj[k] for k in ("text", "summary", "content") if isinstance(obj.get(k), str)), None)
        if text and text.strip():
            texts.append(text)
    return "\n\n".join(texts) or None


@dataclass(slots=True)
class Conversation:
    """The messages of one session, built row by row (a database session or a legacy file)."""

    default_ts: int | None = None  # rows without a time inherit the session's start
    messages: list[Message] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)
    first_user: str | None = None
    first_ts: int | None = None
    last_ts: int | None = None
    identities: set[object] = field(default_factory=set)
    curator_reply: bool = False  # the next assistant row answers a persisted curator prompt

    def add(self, msg: dict[str, Any]) -> None:
        """One message row (a dict with MESSAGE_KEYS, any of them missing)."""
        active, compacted = msg.get("active"), msg.get("compacted")
        if active is not None and not active and not compacted:
            count_skip(self.skips, "rewound")  # taken back by /undo, /retry or an edit: off the live branch
            return
        identity = msg.get("display_identity")
        if identity is not None:
            if identity in self.identities:
                count_skip(self.skips, "duplicate")  # a row in-place compaction cloned into the live tail
                return
            self.identities.add(identity)
        role = msg.get("role")
        kind = msg.get("display_kind")
        curator_reply, self.curator_reply = self.curator_reply, False
        if kind == HIDDEN_KIND:
            count_skip(self.skips, "injected-context" if role == "user" else "hidden")
            return
        if role == "session_meta":
            count_skip(self.skips, "bookkeeping", "session_meta")
            return
        ts = to_epoch_ms(msg.get("timestamp"))
        if ts is not None:
            self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        else:
            ts = self.default_ts
        texts, thinking = content_texts(decode_content(msg.get("content")), self.skips)
        text = joined(texts)
        if msg.get("_compressed_summary"):
            self._emit("system", "text", text, ts)  # what the conversation continues from
        elif role == "user":
            if kind in HARNESS_KINDS:
                self._emit("system", "text", text, ts)
            elif opens_with(text, REVIEW_HARNESS_PREFIXES):
                count_skip(self.skips, "injected-context")
                self.curator_reply = True
            elif text.strip():
                self.messages.append(Message("user", "text", text, ts))
                if self.first_user is None:
                    self.first_user = text
            else:
                count_skip(self.skips, "empty_text")
        elif role == "assistant":
            if curator_reply:
                count_skip(self.skips, "injected-context")
                return
            reasoning = _reasoning(msg)
            for thought in ([reasoning] if reasoning else thinking):
                self._emit("assistant", "thinking", thought, ts)
            self._emit("assistant", "text", text, ts, count_empty=False)
            for call in tool_calls(msg.get("tool_calls"), self.skips):
                self.messages.append(Message("assistant", "tool_call", call, ts))
        elif role == "tool":
            if text.strip():
                self.messages.append(Message("tool", "tool_result", text, ts))
            else:
                count_skip(self.skips, "empty_result")
        elif role == "system":
            self._emit("system", "text", text, ts)
        else:
            count_skip(self.skips, "unknown_role", str(role))

    def _emit(self, role: RoleName, kind: str, text: str, ts: int | None, *, count_empty: bool = True) -> None:
        if text.strip():
            self.messages.append(Message(role, "thinking" if kind == "thinking" else "text", text, ts))
        elif count_empty:
            count_skip(self.skips, f"empty_{kind}")


def resume_command(session_id: str, cwd: str | None, profile: str | None, source: str | None) -> str | None:
    """``hermes --resume <id>`` (``-p <profile>`` for a profile's session) from the session's folder;
    none for delegated sub-agent and tool sessions."""
    if source in NO_RESUME_SOURCES:
        return None
    flag = f"-p {shlex.quote(profile)} " if profile and profile != DEFAULT_PROFILE else ""
    cmd = f"hermes {flag}--resume {shlex.quote(session_id)}"
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd else cmd


# --- state.db -------------------------------------------------------------------------------------
def read_database_session(found: Found) -> Unit:
    """One session of a ``state.db``, read in one transaction."""
    session_id = found.locator[1]
    profile = found.locator[2] if len(found.locator) > 2 else ""
    row, rows = read_session(found, _schema)
    started = to_epoch_ms(row[2])
    conv = Conversation(default_ts=started)
    for values in rows:
        conv.add(dict(zip(MESSAGE_KEYS, values, strict=True)))
    cwd = nonblank(row[9])
    updated = [t for t in (to_epoch_ms(row[3]), to_epoch_ms(row[4]), conv.last_ts, started) if t is not None]
    title = nonblank(row[1]) or (first_line_title(conv.first_user) if conv.first_user else None)
    source = nonblank(row[12])
    info = SessionInfo(agent=AGENT, session_id=session_id, title=title, cwd=cwd, branch=nonblank(row[10]),
                       started_at=started if started is not None else conv.first_ts,
                       updated_at=max(updated) if updated else None, message_count=len(conv.messages),
                       resume_command=resume_command(session_id, cwd, profile or nonblank(row[13]), source),
                       parent_session_id=nonblank(row[11]))
    return Unit(info, conv.messages, _signature(row), conv.skips)


# --- legacy files ---------------------------------------------------------------------------------
def legacy_id(name: str) -> str | None:
    """The session id a legacy file name holds, or None for another file."""
    if name.endswith(".json") and name.startswith(LEGACY_JSON_PREFIX):
        return name[len(LEGACY_JSON_PREFIX):-len(".json")] or None
    if LEGACY_JSONL_NAME.match(name):
        return name[: -len(".jsonl")]
    return None


def read_legacy(found: Found) -> Unit:
    """A ``sessions/<id>.jsonl`` (a ``session_meta`` line, then one message per line) or a
    ``sessions/session_<id>.json`` document (``{session_id, session_start, cwd?, messages}``)."""
    path = found.path
    fb = read_settled(path)
    skips: dict[str, int] = {}
    name = os.path.basename(path)
    meta: dict[str, Any] = {}
    if name.endswith(".jsonl"):
        records = jsonl_records(fb, skips)
        if records and records[0].get("role") == "session_meta":
            meta = records[0]
        started = to_epoch_ms(meta.get("timestamp"))
    else:
        doc = loads_line(fb.data)
        if not isinstance(doc, dict):
            if doc is None and fb.recent:
                raise UnitChanged("the document is still being written")
            raise UnitUnreadable("not a Hermes session document (a JSON object with messages)")
        meta = doc
        raw = doc.get("messages")
        records = raw if isinstance(raw, list) else []
        started = to_epoch_ms(doc.get("session_start"))
    conv = Conversation(default_ts=started, skips=skips)
    for record in records:
        if isinstance(record, dict):
            conv.add(record)
        else:
            count_skip(skips, "malformed-record")
    session_id = nonblank(meta.get("session_id")) or legacy_id(name) or name
    cwd = nonblank(meta.get("cwd"))
    times = [t for t in (started, to_epoch_ms(meta.get("last_updated")), conv.first_ts, conv.last_ts)
             if t is not None]
    info = SessionInfo(agent=AGENT, session_id=session_id,
                       title=first_line_title(conv.first_user) if conv.first_user else None, cwd=cwd,
                       started_at=min(times, default=None), updated_at=max(times, default=None),
                       message_count=len(conv.messages), resume_command=resume_command(session_id, cwd, None, None))
    return Unit(info, conv.messages, fb.signature, skips)


def read_unit(found: Found) -> Unit:
    return read_legacy(found) if len(found.locator) == 1 else read_database_session(found)


# --- discovery and roots --------------------------------------------------------------------------
def _homes(root: Root) -> list[tuple[str, str]]:
    """(folder, profile name) of the root and of each profile under it (``""`` for the root)."""
    homes = [(root.path, "")]
    try:
        with os.scandir(os.path.join(root.path, PROFILES_DIR)) as it:
            homes += sorted((e.path, e.name) for e in it if e.is_dir() and not e.name.startswith("."))
    except OSError:
        pass
    return homes


def _legacy_files(folder: str, held: set[str], root: Root, problems: list[RootProblem]) -> Iterator[Found]:
    """The legacy files in ``folder`` whose id no database holds; a JSONL wins over a JSON of its id."""
    try:
        with os.scandir(folder) as it:
            entries = [(e, legacy_id(e.name)) for e in it]
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {folder}: {exc.strerror or exc}"))
        return
    # .jsonl sorts after .json of another stem; JSONL files are taken first so their ids are held.
    entries.sort(key=lambda pair: (not pair[0].name.endswith(".jsonl"), pair[0].name))
    for entry, sid in entries:
        if sid is None or sid in held:
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if entry.is_file():
            held.add(sid)
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size,
                        signature(st.st_size, st.st_mtime_ns, st.st_ino), "whole", (entry.path,))


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The sessions of the root's ``state.db`` and of each profile's (a database is listed again
    only when its stamp moved; an id listed from an earlier one is not taken again), then the legacy
    files none of them holds."""
    if check_root(root, problems) is None:
        return
    held: set[str] = set()
    homes = _homes(root)
    for home, profile in homes:
        db = os.path.join(home, DB_NAME)
        listing, fresh = list_sessions(db, root, problems, dirs, _list, extra=(profile,))
        if listing is not None:
            yield from due(listing, fresh, full, held)
            held |= listing.ids
        elif os.path.exists(db):
            return  # never listed yet (locked): its ids are unknown, so no legacy copy may stand in for them
    for home, _ in homes:
        yield from _legacy_files(os.path.join(home, LEGACY_DIR), held, root, problems)
    if root.explicit:  # a folder of legacy files named on its own
        yield from _legacy_files(root.path, held, root, problems)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$HERMES_HOME``, else ``~/.hermes`` (macOS too)."""
    base = Path(env["HERMES_HOME"]).expanduser() if env.get("HERMES_HOME") else home / ".hermes"
    return [Root(AGENT, str(base.absolute()))]


SPEC = AgentSpec(
    name=AGENT, label="Hermes Agent", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="state.db (SQLite), profiles/<name>/state.db, or legacy sessions/<id>.jsonl / session_<id>.json",
    shaped=lambda name: name == DB_NAME or legacy_id(name) is not None)
