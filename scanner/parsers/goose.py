"""Goose sessions (docs/formats.md §12): ``sessions.db`` (v1.20+) and the legacy JSONL files.

The root is Goose's sessions folder: ``<data>/sessions`` where ``<data>`` is
``$GOOSE_PATH_ROOT/data`` when that variable holds an absolute path (Goose's ``Paths::get_dir``),
else ``$XDG_DATA_HOME/goose`` (absolute only, as the etcetera XDG strategy reads it), else
``~/.local/share/goose`` (macOS too). Every session in ``sessions.db`` is a ``whole`` unit
(scanner/parsers/sqlite_units.py); each legacy ``<id>.jsonl`` beside it (first line the session's metadata,
every later line one message, appended) is a ``lines`` unit read by ``GooseLineParser``. When Goose
creates ``sessions.db`` it imports those files under the same ids, so a file whose id the database
holds is not indexed again. Older versions kept the files in ``~/.config/goose/sessions`` or
``~/.goose/sessions``, also roots.

Content blocks are camelCase-tagged (``MessageContent``): text, toolRequest (a call), toolResponse (a
result, carried by a user-role message), thinking, systemNotification (system text);
redactedThinking, images, confirmations and prompts for the user are counted, not indexed. Messages
Goose marks ``userVisible: false`` (compaction summaries, instructions it adds for the model) are
indexed as system text: searchable, never the user's words or a title.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from aivault.scanner.model import Message, ParseStats, RoleName, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, stored_as
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

AGENT: Final = "goose"
DB_NAME: Final = "sessions.db"
LEGACY_SUFFIX: Final = ".jsonl"
# Goose rewrites a session's newest rows (metadata of the last messages); these many are fingerprinted.
SIGNATURE_TAIL: Final = 3
BOOKKEEPING_CONTENT: Final = frozenset({"toolConfirmationRequest", "actionRequired", "conversationCompacted",
                                        "summarizationRequested", "contextLengthExceeded"})
ATTACHMENT_CONTENT: Final = frozenset({"image", "audio"})

# --- SQL (column names chosen by _schema among our own constants) ---------------------------------
SESSION_SIGNATURE: Final = """
SELECT s.id, {s_updated}, {s_name}, {s_description},
       (SELECT count(*) FROM messages WHERE messages.session_id = s.id),
       (SELECT min(messages.rowid) FROM messages WHERE messages.session_id = s.id),
       (SELECT max(messages.rowid) FROM messages WHERE messages.session_id = s.id),
       (SELECT group_concat(tail, ',') FROM (
            SELECT messages.rowid || ':' || coalesce(length(messages.content_json), '') || ':'
                   || coalesce(length({m_metadata}), '') AS tail
            FROM messages WHERE messages.session_id = s.id ORDER BY messages.rowid DESC LIMIT {tail})),
       {s_cwd}, {s_created}, {s_parent}
FROM sessions s"""
MESSAGES: Final = """SELECT role, content_json, {m_created}, {m_metadata} FROM messages WHERE session_id = ?
ORDER BY rowid"""


def _schema(con: sqlite3.Connection) -> SessionSql:
    s = columns(con, "sessions", ("id",))
    m = columns(con, "messages", ("session_id", "role", "content_json"))
    sql = SESSION_SIGNATURE.format(
        s_updated=pick(s, "updated_at", alias="s"), s_name=pick(s, "name", alias="s"),
        s_description=pick(s, "description", alias="s"), s_cwd=pick(s, "working_dir", alias="s"),
        s_created=pick(s, "created_at", alias="s"), s_parent=pick(s, "parent_session_id", alias="s"),
        m_metadata=pick(m, "metadata_json", alias="messages"), tail=SIGNATURE_TAIL)
    return SessionSql(sql, MESSAGES.format(m_created=pick(m, "created_timestamp", "timestamp"),
                                        m_metadata=pick(m, "metadata_json")))


def _signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:8])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_schema(con).sessions):
        yield str(row[0]), _signature(row), int(row[4] or 0)


# --- content blocks, shared by both stores --------------------------------------------------------
def _result_text(result: object) -> str:
    """The text of a tool result: ``{status, value: {content: [...], isError}}`` or, in older files,
    ``{status, value: [...]}``; an error result is its message."""
    if not isinstance(result, dict):
        return ""
    if result.get("status") == "error":
        return f"[error] {result.get('error') if isinstance(result.get('error'), str) else ''}"
    value = result.get("value")
    items = value.get("content") if isinstance(value, dict) else value
    texts: list[str] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif isinstance(item.get("resource"), dict) and isinstance(item["resource"].get("text"), str):
            texts.append(item["resource"]["text"])
    text = "\n".join(texts)
    return f"[error] {text}" if isinstance(value, dict) and value.get("isError") is True else text


def _call_text(call: object) -> str:
    if not isinstance(call, dict):
        return "invalid {}"
    if call.get("status") == "error":
        return f"invalid {compact_json({'error': call.get('error')})}"
    value = as_object(call.get("value"))
    name = value.get("name") if isinstance(value.get("name"), str) and value.get("name") else "tool"
    args = value.get("arguments")
    return f"{name} {compact_json(args if args is not None else {})}"


Skip = Callable[[str, "str | None"], None]  # (reason, detail) of a block that is not indexed


def content_messages(role: RoleName, content: object, ts: int | None, visible: bool,
                     skip: Skip) -> list[Message] | None:
    """The messages of one Goose message's content blocks; None when ``content`` is not a list."""
    if not isinstance(content, list):
        return None
    out: list[Message] = []
    for item in content:
        ctype = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(ctype, str):
            skip("malformed-block", None)
        elif ctype == "text":
            text = item.get("text")
            if isinstance(text, str) and text.strip():
                out.append(Message(role if visible else "system", "text", text, ts))
            else:
                skip("empty_text", None)
        elif ctype in ("toolRequest", "frontendToolRequest"):
            out.append(Message("assistant", "tool_call", _call_text(item.get("toolCall")), ts))
        elif ctype == "toolResponse":
            out.append(Message("tool", "tool_result", _result_text(item.get("toolResult")), ts))
        elif ctype == "thinking":
            text = item.get("thinking")
            if isinstance(text, str) and text.strip():
                out.append(Message("assistant", "thinking", text, ts))
            else:
                skip("empty_thinking", None)
        elif ctype == "systemNotification":
            msg = item.get("msg")
            if isinstance(msg, str) and msg.strip():
                out.append(Message("system", "text", msg, ts))
            else:
                skip("empty_text", None)
        elif ctype == "redactedThinking":
            skip("redacted_thinking", None)
        elif ctype in ATTACHMENT_CONTENT:
            skip("attachment", ctype)
        elif ctype in BOOKKEEPING_CONTENT:
            skip("bookkeeping", ctype)
        else:
            skip("unknown_content", ctype)
    return out


def _role(value: object) -> RoleName | None:
    if value == "user":
        return "user"
    return "assistant" if value == "assistant" else None


def _visible(metadata: object) -> bool:
    return not (isinstance(metadata, dict) and metadata.get("userVisible") is False)


def resume_command(session_id: str) -> str:
    return f"goose session -r --session-id {shlex.quote(session_id)}"


# --- sessions.db ----------------------------------------------------------------------------------
def read_unit(found: Found) -> Unit:
    """One session of ``sessions.db``, read in one transaction."""
    session_id = found.locator[1]
    row, rows = read_session(found, _schema)
    out: list[Message] = []
    skips: dict[str, int] = {}

    def skip(reason: str, detail: str | None) -> None:
        count_skip(skips, f"{reason}:{detail[:40]}" if detail else reason)

    first_user: str | None = None
    times: list[int] = []
    for role_name, raw, created, metadata in rows:
        role = _role(role_name)
        if role is None:
            count_skip(skips, f"unknown_role:{str(role_name)[:40]}")
            continue
        ts = to_epoch_ms(created)
        if ts is not None:
            times.append(ts)
        meta = loads_line(metadata.encode("utf-8", "surrogatepass")) if isinstance(metadata, str) else None
        content = loads_line(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else None
        msgs = content_messages(role, content, ts, _visible(meta), skip)
        if msgs is None:
            count_skip(skips, "malformed-record")
            continue
        if first_user is None and role == "user":
            first_user = next((m.text for m in msgs if m.role == "user" and m.kind == "text"), None)
        out += msgs
    title = nonblank(row[2]) or nonblank(row[3]) or (first_line_title(first_user) if first_user else None)
    started = to_epoch_ms(row[9])
    updated = [t for t in (to_epoch_ms(row[1]), *times) if t is not None]
    info = SessionInfo(agent=AGENT, session_id=session_id, title=title, cwd=nonblank(row[8]),
                       started_at=started if started is not None else min(times, default=None),
                       updated_at=max(updated) if updated else None, message_count=len(out),
                       resume_command=resume_command(session_id), parent_session_id=nonblank(row[10]))
    return Unit(info, out, _signature(row), skips)


# --- legacy JSONL ---------------------------------------------------------------------------------
@dataclass(slots=True)
class GooseState(ParserState):
    """What a legacy Goose file's parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = "goose"

    title: str | None = stored_as("title")
    cwd: str | None = stored_as("cwd")
    first_user: str | None = stored_as("first_user")
    started: int | None = stored_as("started")
    updated: int | None = stored_as("updated")
    count: int = stored_as("count", 0)
    lines_seen: int = stored_as("seen", 0)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class GooseLineParser(LineParser[GooseState]):
    """A legacy ``<id>.jsonl``: the first line is the session's metadata, every later line a Message
    (``{id?, role, created, content: [...], metadata?}``); the file stem is the session id."""

    agent = AGENT
    fallback_time_key = "created"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.session_id = file_stem(path, LEGACY_SUFFIX)
        self.st = GooseState.load(state)


    @property
    def session(self) -> SessionInfo:
        title = self.st.title or (first_line_title(self.st.first_user) if self.st.first_user else None)
        return self._session(self.session_id, title, self.st.cwd, resume_command=resume_command(self.session_id))

    def feed(self, line: bytes) -> list[Message]:
        self.st.lines_seen += 1
        return super().feed(line)

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        if "role" not in obj and "content" not in obj:
            if self.st.lines_seen == 1:
                self._metadata(obj)
            else:
                count_skip(self.stats.extra, "unknown_record", "metadata")
            return []
        role = _role(obj.get("role"))
        if role is None:
            return None
        msgs = content_messages(role, obj.get("content"), ms, _visible(obj.get("metadata")), self._skip)
        if msgs and self.st.first_user is None and role == "user":
            self.st.first_user = next((m.text for m in msgs if m.role == "user" and m.kind == "text"), None)
        return msgs

    def _skip(self, reason: str, detail: str | None) -> None:
        count_skip(self.stats.extra, reason, detail)

    def _metadata(self, obj: dict[str, Any]) -> None:
        self.st.cwd = nonblank(obj.get("working_dir"))
        self.st.title = nonblank(obj.get("name")) or nonblank(obj.get("description"))


# --- discovery and roots --------------------------------------------------------------------------
def _legacy_files(folder: str, skip: frozenset[str] | set[str], root: Root,
                  problems: list[RootProblem]) -> Iterator[Found]:
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if e.name.endswith(LEGACY_SUFFIX)), key=lambda e: e.name)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list root: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name[: -len(LEGACY_SUFFIX)] in skip:
            continue  # imported into sessions.db under the same id
        try:
            st = entry.stat()
        except OSError:
            continue
        if entry.is_file():
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, "lines")


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The sessions of ``sessions.db`` (listed again only when its stamp moved), then the legacy
    files it does not hold (a stat each: the folder is flat)."""
    if check_root(root, problems) is None:
        return
    listing, fresh = list_sessions(os.path.join(root.path, DB_NAME), root, problems, dirs, _list)
    held: frozenset[str] = frozenset()
    if listing is not None:
        yield from due(listing, fresh, full)
        held = listing.ids
    yield from _legacy_files(root.path, held, root, problems)


def _absolute(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value) if value and os.path.isabs(value) else None


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$GOOSE_PATH_ROOT/data/sessions``, else ``$XDG_DATA_HOME/goose/sessions``, else
    ``~/.local/share/goose/sessions``; plus the legacy ``~/.config/goose/sessions`` and
    ``~/.goose/sessions``."""
    base = _absolute(env, "GOOSE_PATH_ROOT")
    if base is not None:
        data = base / "data"
    else:
        data = (_absolute(env, "XDG_DATA_HOME") or home / ".local" / "share") / "goose"
    paths = [data / "sessions", home / ".config" / "goose" / "sessions", home / ".goose" / "sessions"]
    return [Root(AGENT, str(p.absolute())) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="Goose", default_roots=default_roots, discover=discover, line_parser=GooseLineParser,
    read_unit=read_unit, expects="sessions.db (SQLite) or <session id>.jsonl (JSONL)",
    shaped=lambda name: name == DB_NAME or name.endswith(LEGACY_SUFFIX))
