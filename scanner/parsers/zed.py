"""Zed agent threads (docs/formats.md §27): ``threads/threads.db`` in Zed's data folder.

Zed keeps every thread of its agent panel as one row of the ``threads`` table: ``data`` is the
serialized thread, a zstd frame (``data_type = 'zstd'``) or, in rows saved before compression,
plain JSON (``'json'``); a store mixes both, and thread documents of the first agent ("agent 1",
version 0.2.0 and older: ``{role, segments}`` messages) beside the current ones (0.3.0: Rust's
externally tagged ``{"User": …}`` / ``{"Agent": …}`` messages). Each thread is a ``whole`` unit
``"<db>#<thread id>"`` (scanner/parsers/sqlite_units.py) signed by its row's ``updated_at``, title,
body size and folder columns: Zed rewrites the whole row on every save. A body that does not decode
makes that thread unreadable, never the others. Messages carry no time: they inherit the thread's.
"""

from __future__ import annotations

import io
import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.sqlite_units import ListedSession, columns, due, list_sessions, pick, snapshot
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "zed"
DB_NAME: Final = "threads.db"
# A decompressed thread is held in memory while it is read; beyond this it is refused.
MAX_BODY_BYTES: Final = 256 * 1024 * 1024
# The title a thread has until the model has summarized it.
PLACEHOLDER_TITLES: Final = frozenset({"New Thread", "New Agent Thread", ""})
# Agent content blocks that carry nothing to search.
REDACTED_BLOCKS: Final = frozenset({"RedactedThinking"})
# The bare marker a thread gets where the user resumed a turn that hit its limit.
CONTROL_MESSAGES: Final = frozenset({"Resume"})

# --- SQL (column names chosen by _schema among our own constants) ---------------------------------
THREADS: Final = """SELECT id, {summary}, {updated}, data_type, length(data), {parent}, {folders}, {order},
       {created} FROM threads"""
ONE_THREAD: Final = " WHERE id = ?"
BODY: Final = "SELECT data FROM threads WHERE id = ?"


def _threads_sql(con: sqlite3.Connection) -> str:
    t = columns(con, "threads", ("id", "data_type", "data"))
    return THREADS.format(summary=pick(t, "summary"), updated=pick(t, "updated_at"), parent=pick(t, "parent_id"),
                          folders=pick(t, "folder_paths"), order=pick(t, "folder_paths_order"),
                          created=pick(t, "created_at"))


def _signature(row: tuple[Any, ...]) -> int:
    return signature(*row[1:9])


def _list(con: sqlite3.Connection) -> Iterator[ListedSession]:
    for row in con.execute(_threads_sql(con)):
        yield str(row[0]), _signature(row), int(row[4] or 0)


# --- the thread document --------------------------------------------------------------------------
def decode_body(data_type: object, data: object) -> object:
    """The thread document of a row (a JSON value); UnitUnreadable naming why it cannot be had."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not isinstance(raw, bytes):
        raise UnitUnreadable("the thread has no body")
    kind = data_type.lower() if isinstance(data_type, str) else ""
    if kind == "zstd":
        import zstandard  # only Zed's and Codex's compressed stores need it

        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as reader:
                raw = reader.read(MAX_BODY_BYTES + 1)
        except zstandard.ZstdError as exc:
            raise UnitUnreadable(f"undecodable zstd body: {exc}") from exc
        if len(raw) > MAX_BODY_BYTES:
            raise UnitUnreadable(f"thread body larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB")
    elif kind not in ("json", ""):
        raise UnitUnreadable(f"unknown data_type {str(data_type)[:40]!r}")
    doc = loads_line(raw)
    if not isinstance(doc, dict):
        raise UnitUnreadable("the thread body is not a JSON object")
    return doc


def _tag(value: object) -> tuple[str | None, object]:
    """(variant, payload) of a Rust externally tagged enum value: ``{"Text": "…"}``, or a bare
    string for a unit variant."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict) and len(value) == 1:
        key, payload = next(iter(value.items()))
        return str(key), payload
    return None, value


def _result_text(result: object) -> str:
    """A tool result's text: its ``content`` (a string, ``{"Text": …}`` or a list of those), else its
    ``output``; ``[error]`` in front when ``is_error``."""
    obj = as_object(result)
    content = obj.get("content")
    parts = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for part in parts:
        variant, payload = _tag(part)
        if isinstance(part, str):
            texts.append(part)
        elif variant == "Text" and isinstance(payload, str):
            texts.append(payload)
    text = "\n".join(t for t in texts if t)
    if not text.strip():
        output = obj.get("output")
        text = output if isinstance(output, str) else compact_json(output) if output is not None else ""
    return f"[error] {text}" if obj.get("is_error") is True else text


def mention_label(uri: object) -> str | None:
    """What a mention points at: Zed's ``MentionUri`` enum (``{"File": {"abs_path": …}}``,
    ``{"Symbol": {"abs_path", "name", …}}``, ``{"Thread": {"id", "name"}}``, ``{"Fetch": {"url"}}``, …) as
    ``<path or url>[#<name>]``, else its name or variant; a URI string as it is."""
    if isinstance(uri, str):
        return uri or None
    variant, payload = _tag(uri)
    fields = as_object(payload)
    where = next((fields[k] for k in ("abs_path", "path", "file_path", "url") if isinstance(fields.get(k), str)), None)
    name = fields.get("name") if isinstance(fields.get("name"), str) else None
    if where and name:
        return f"{where}#{name}"
    return where or name or variant


def _tool_use_text(payload: dict[str, Any]) -> str:
    name = payload.get("name") if isinstance(payload.get("name"), str) and payload.get("name") else "tool"
    args: object = payload.get("input")
    if args is None and isinstance(payload.get("raw_input"), str):
        raw = payload["raw_input"]
        args = loads_line(raw.encode("utf-8", "surrogatepass"))
        if args is None:
            return f"{name} {raw}"
    return f"{name} {compact_json(args if args is not None else {})}"


@dataclass(slots=True)
class Thread:
    """The messages of one thread document (both generations), all at the thread's time."""

    ts: int | None
    messages: list[Message] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)
    first_user: str | None = None

    def _text(self, role: str, text: str) -> None:
        if not text.strip():
            count_skip(self.skips, "empty_text")
        elif role == "user":
            self.messages.append(Message("user", "text", text, self.ts))
            if self.first_user is None:
                self.first_user = text
        else:
            self.messages.append(Message("assistant", "text", text, self.ts))

    def message(self, item: object) -> None:
        variant, payload = _tag(item)
        if isinstance(item, dict) and "role" in item:
            self._legacy(item)
        elif variant == "User" and isinstance(payload, dict):
            self._user(payload)
        elif variant == "Agent" and isinstance(payload, dict):
            self._agent(payload)
        elif variant in CONTROL_MESSAGES:
            count_skip(self.skips, "bookkeeping", variant)
        else:
            count_skip(self.skips, "unknown_message", variant or "(none)")

    def _user(self, payload: dict[str, Any]) -> None:
        """``{id, content: [Text | Mention | Image]}``: the typed text with each mention in place as
        ``@<path>`` (the mentioned file's content is context Zed adds for the model, not indexed)."""
        pieces: list[str] = []
        content = payload.get("content")
        for block in content if isinstance(content, list) else []:
            variant, value = _tag(block)
            if variant == "Text" and isinstance(value, str):
                pieces.append(value)
            elif variant == "Mention":
                label = mention_label(as_object(value).get("uri"))
                if label:
                    pieces.append(f"@{label}")
                count_skip(self.skips, "mention")
            elif variant == "Image":
                count_skip(self.skips, "attachment", "Image")
            else:
                count_skip(self.skips, "unknown_block", variant or "(none)")
        self._text("user", "".join(pieces))

    def _agent(self, payload: dict[str, Any]) -> None:
        """``{content: [Text | Thinking | RedactedThinking | ToolUse], tool_results: {id: result}}``:
        each tool use is followed by its result."""
        results = dict(as_object(payload.get("tool_results")))
        content = payload.get("content")
        for block in content if isinstance(content, list) else []:
            variant, value = _tag(block)
            if variant == "Text" and isinstance(value, str):
                self._text("assistant", value)
            elif variant == "Thinking":
                text = as_object(value).get("text")
                if isinstance(text, str) and text.strip():
                    self.messages.append(Message("assistant", "thinking", text, self.ts))
            elif variant in REDACTED_BLOCKS:
                count_skip(self.skips, "redacted_thinking")
            elif variant == "ToolUse" and isinstance(value, dict):
                self.messages.append(Message("assistant", "tool_call", _tool_use_text(value), self.ts))
                if value.get("id") in results:
                    self._result(results.pop(value["id"]))
            else:
                count_skip(self.skips, "unknown_block", variant or "(none)")
        for result in results.values():  # results whose call is not in this message
            self._result(result)

    def _result(self, result: object) -> None:
        text = _result_text(result)
        if text.strip():
            self.messages.append(Message("tool", "tool_result", text, self.ts))
        else:
            count_skip(self.skips, "empty_result")

    def _legacy(self, item: dict[str, Any]) -> None:
        """Agent 1: ``{id, role, segments: [{type, text}], tool_uses?, tool_results?}``."""
        role = item.get("role")
        if role == "system":  # harness-authored context, never what the user typed
            count_skip(self.skips, "injected-context")
            return
        if role not in ("user", "assistant"):
            count_skip(self.skips, "unknown_role", str(role))
            return
        segments = item.get("segments")
        for segment in segments if isinstance(segments, list) else []:
            seg = as_object(segment)
            stype, text = seg.get("type"), seg.get("text")
            if stype == "text" and isinstance(text, str):
                self._text(str(role), text)
            elif stype == "thinking" and isinstance(text, str) and text.strip():
                self.messages.append(Message("assistant", "thinking", text, self.ts))
            elif stype == "redacted_thinking":
                count_skip(self.skips, "redacted_thinking")
            else:
                count_skip(self.skips, "unknown_block", str(stype))
        for use in item.get("tool_uses") or []:
            if isinstance(use, dict):
                self.messages.append(Message("assistant", "tool_call", _tool_use_text(use), self.ts))
        for result in item.get("tool_results") or []:
            self._result(result)


def project_folder(paths: object, order: object) -> str | None:
    """The thread's first workspace folder: ``folder_paths`` holds them sorted, one per line, and
    ``folder_paths_order`` the position each had in the workspace (comma-joined)."""
    folders = [p for p in paths.split("\n") if p.strip()] if isinstance(paths, str) else []
    if not folders:
        return None
    try:
        positions = [int(p) for p in order.split(",")] if isinstance(order, str) and order.strip() else []
    except ValueError:
        positions = []
    if sorted(positions) == list(range(len(folders))):
        return folders[positions.index(0)]
    return folders[0]


def read_unit(found: Found) -> Unit:
    """One thread of ``threads.db``, its row and body read in one transaction."""
    db, thread_id = found.locator[:2]
    with snapshot(db, found.path) as con:
        row = con.execute(_threads_sql(con) + ONE_THREAD, (thread_id,)).fetchone()
        body = con.execute(BODY, (thread_id,)).fetchone()
    if row is None or body is None:
        raise UnitChanged(f"thread {thread_id} is no longer in {os.path.basename(db)}")
    doc = as_object(decode_body(row[3], body[0]))
    created, updated = to_epoch_ms(row[8]), to_epoch_ms(row[2])
    started = created if created is not None else updated
    thread = Thread(ts=started)
    messages = doc.get("messages")
    if not isinstance(messages, list):
        count_skip(thread.skips, "malformed-record")
        messages = []
    for item in messages:
        thread.message(item)
    title = next((t for t in (nonblank(doc.get("title")), nonblank(doc.get("summary")), nonblank(row[1]))
                  if t is not None and t not in PLACEHOLDER_TITLES), None)
    if title is None and thread.first_user:
        title = first_line_title(thread.first_user)
    times = [t for t in (started, updated, to_epoch_ms(doc.get("updated_at"))) if t is not None]
    info = SessionInfo(agent=AGENT, session_id=thread_id, title=title, cwd=project_folder(row[6], row[7]),
                       started_at=started, updated_at=max(times, default=None),
                       message_count=len(thread.messages), parent_session_id=nonblank(row[5]))
    return Unit(info, thread.messages, _signature(row), thread.skips)


# --- discovery and roots --------------------------------------------------------------------------
def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The threads of ``threads.db`` under the root (listed again only when its stamp moved)."""
    if check_root(root, problems) is None:
        return
    listing, fresh = list_sessions(os.path.join(root.path, DB_NAME), root, problems, dirs, _list)
    if listing is not None:
        yield from due(listing, fresh, full)


def _absolute(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value) if value and os.path.isabs(value) else None


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$XDG_DATA_HOME/zed/threads`` (``~/.local/share/zed/threads``), ``$FLATPAK_XDG_DATA_HOME/zed/threads``
    under Flatpak, and macOS's ``~/Library/Application Support/Zed/threads``."""
    data = _absolute(env, "XDG_DATA_HOME") or home / ".local" / "share"
    paths = [data / "zed" / "threads"]
    flatpak = _absolute(env, "FLATPAK_XDG_DATA_HOME")
    if flatpak is not None:
        paths.append(flatpak / "zed" / "threads")
    paths.append(home / "Library" / "Application Support" / "Zed" / "threads")
    return [Root(AGENT, str(p.absolute())) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="Zed", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="threads.db (SQLite: threads, zstd or JSON bodies)", shaped=lambda name: name == DB_NAME)
