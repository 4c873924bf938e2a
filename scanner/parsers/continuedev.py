"""Continue sessions (docs/formats.md §25): the ``cn`` CLI and the VS Code / JetBrains extensions.

All three write ``$CONTINUE_GLOBAL_DIR/sessions/<sessionId>.json`` (``~/.continue/sessions``): one
JSON document per session, rewritten whole on every change, beside the index ``sessions.json``
(``[{sessionId, title, dateCreated, workspaceDirectory}]``). Each document is a ``whole`` unit whose
signature is its file's and its index entry's, so a rename in the index is seen too. The folder is
flat and its files are rewritten in place (the folder's mtime does not move), so every pass lists
it and stats each file.

(The module is ``continuedev``: ``continue`` is a Python keyword. The agent's wire name is ``continue``.)

A session's ``history`` is ``[{message, contextItems, toolCallStates?, reasoning?,
conversationSummary?}]``. Messages carry no time: each inherits the session's (``dateCreated`` from
the index, else the file's mtime), unless a ``timestamp``/``createdAt`` is present. Context items
(files and docs pulled in with @-mentions) are what the agent attached, not what the user said:
counted, not indexed.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.copilot import arguments_text
from aivault.scanner.parsers.jsonutil import as_object, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, read_whole, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "continue"
INDEX: Final = "sessions.json"
SESSIONS: Final = "sessions"
# Continue's title until it generates one.
DEFAULT_TITLE: Final = "New Session"
# A session that does not parse and was written this recently is mid-rewrite: read it next pass.
SETTLE_S: Final = 30
# Sessions hold pasted images as data URLs; a larger document is reported, not held in memory.
MAX_SESSION_BYTES: Final = 256 << 20
MAX_INDEX_BYTES: Final = 64 << 20
RESUME: Final = "cn --fork"


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$CONTINUE_GLOBAL_DIR/sessions``, else ``~/.continue/sessions``."""
    base = Path(env["CONTINUE_GLOBAL_DIR"]).expanduser() if env.get("CONTINUE_GLOBAL_DIR") else home / ".continue"
    return [Root(AGENT, str((base / SESSIONS).absolute()))]


def sessions_dir(root: str) -> str:
    """The sessions folder of a root: the root itself, or its ``sessions/`` (a Continue home named as root)."""
    inner = os.path.join(root, SESSIONS)
    return inner if os.path.basename(root) != SESSIONS and os.path.isdir(inner) else root


# --- the index: sessions.json ----------------------------------------------------------------------
# Per folder: (size, mtime) of the index when read, and its entries by session id.
_INDEXES: dict[str, tuple[tuple[int, int], dict[str, dict[str, Any]]]] = {}


def read_index(folder: str) -> dict[str, dict[str, Any]]:
    """``sessions.json``'s entries by session id (read again only when the file changed)."""
    path = os.path.join(folder, INDEX)
    try:
        st = os.stat(path)
    except OSError:
        _INDEXES.pop(folder, None)
        return {}
    stamp = (st.st_size, st.st_mtime_ns)
    cached = _INDEXES.get(folder)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    entries: dict[str, dict[str, Any]] = {}
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_INDEX_BYTES + 1)
    except OSError:
        data = b""
    doc = loads_line(data) if data and len(data) <= MAX_INDEX_BYTES else None
    for entry in doc if isinstance(doc, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("sessionId"), str) and entry["sessionId"]:
            entries[entry["sessionId"]] = entry
    _INDEXES[folder] = (stamp, entries)
    return entries


def _entry_key(entry: dict[str, Any] | None) -> tuple[object, ...]:
    if not entry:
        return ()
    return tuple(entry.get(k) for k in ("title", "dateCreated", "workspaceDirectory"))


def date_created(value: object) -> int | None:
    """``dateCreated``: epoch milliseconds as a number or a string of digits, or an ISO string."""
    if isinstance(value, str) and value.strip().isdigit():
        return to_epoch_ms(int(value.strip()))
    return to_epoch_ms(value)


# --- discovery -------------------------------------------------------------------------------------
def _wanted(name: str) -> bool:
    return name.endswith(".json") and name != INDEX and not name.startswith(".")


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every session document of the root's sessions folder: one listing and a stat per file, each pass."""
    if check_root(root, problems) is None:
        return
    folder = sessions_dir(root.path)
    try:
        with os.scandir(folder) as it:
            entries = sorted((e for e in it if _wanted(e.name)), key=lambda e: e.name)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {folder}: {exc.strerror or exc}"))
        return
    index = read_index(folder)
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=True):
                continue
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))
            continue
        sig = signature(st.st_size, st.st_mtime_ns, st.st_ino, _entry_key(index.get(entry.name[:-5])))
        yield Found(entry.path, AGENT, st.st_dev, st.st_ino, st.st_size, sig, "whole")


# --- reading one session ---------------------------------------------------------------------------
def read_session(found: Found) -> Unit:
    """One session document, read whole."""
    data, _, st = read_whole(found.path, MAX_SESSION_BYTES,
                             lambda size: f"the session is {size} bytes, over the {MAX_SESSION_BYTES}-byte limit")
    doc = loads_line(data) if data.strip() else None
    if not isinstance(doc, dict):
        # A document cut short is being rewritten; one that parses but is no object never will be one.
        if doc is None and time.time_ns() - st.st_mtime_ns < SETTLE_S * 1_000_000_000:
            raise UnitChanged("the session is not complete JSON yet")
        raise UnitUnreadable("the session is not a JSON object" if doc is not None else "the session is not valid JSON")
    entry = read_index(os.path.dirname(found.path)).get(Path(found.path).stem)
    sig = signature(st.st_size, st.st_mtime_ns, st.st_ino, _entry_key(entry))
    return session_unit(doc, found.path, entry or {}, st.st_mtime_ns // 1_000_000, sig)


def content_text(content: object, skips: dict[str, int]) -> str:
    """A message's ``content``: a string, or parts of which the text ones are kept (images counted)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content if isinstance(content, list) else []:
        part = as_object(part)
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part:
            count_skip(skips, "attachment", str(part.get("type")))
    return "\n".join(t for t in texts if t)


def _call_text(call: object) -> str | None:
    function = as_object(as_object(call).get("function"))
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = arguments_text(function.get("arguments"))
    return f"{name} {args}" if args else name


def _output_text(output: object) -> str:
    """A tool call state's ``output``: context items, whose ``content`` is the result."""
    texts = [item.get("content") for item in output if isinstance(item, dict)] if isinstance(output, list) else []
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def _cwd(value: object) -> str | None:
    """``workspaceDirectory``: a path or a ``file://`` URI (an IDE's); other URIs are kept as they are."""
    text = nonblank(value)
    if text is None:
        return None
    parsed = urlparse(text)
    return unquote(parsed.path) if parsed.scheme == "file" else text


def _title(value: object) -> str | None:
    title = nonblank(value)
    return first_line_title(title) if title and title != DEFAULT_TITLE else None


def session_unit(doc: dict[str, Any], path: str, entry: dict[str, Any], mtime_ms: int, sig: int) -> Unit:
    """The Unit of one session document (docs/formats.md §25 field map)."""
    skips: dict[str, int] = {}
    started = date_created(doc.get("dateCreated")) or date_created(entry.get("dateCreated"))
    base = started if started is not None else mtime_ms
    history = doc.get("history")
    items = [i for i in history if isinstance(i, dict)] if isinstance(history, list) else []
    if isinstance(history, list) and len(items) != len(history):
        count_skip(skips, "malformed-record", n=len(history) - len(items))
    # Results that arrive as role "tool" messages; toolCallStates' copies of them are not repeated.
    answered = {as_object(i.get("message")).get("toolCallId") for i in items
                if as_object(i.get("message")).get("role") == "tool"}
    messages: list[Message] = []
    first_user: str | None = None
    times: list[int] = [base, mtime_ms]
    for item in items:
        message = as_object(item.get("message"))
        stamp = to_epoch_ms(message.get("timestamp") or message.get("createdAt") or item.get("timestamp"))
        ts = stamp if stamp is not None else base
        if stamp is not None:
            times.append(stamp)
        context = item.get("contextItems")
        if isinstance(context, list) and context:
            count_skip(skips, "context-item", n=len(context))
        out = _item_messages(item, message, ts, answered, skips)
        if first_user is None:
            first_user = next((first_line_title(m.text) for m in out if m.role == "user"), None)
        messages += out
    session_id = nonblank(doc.get("sessionId")) or Path(path).stem
    cwd = _cwd(doc.get("workspaceDirectory")) or _cwd(entry.get("workspaceDirectory"))
    command = f"{RESUME} {shlex.quote(session_id)}"
    session = SessionInfo(agent=AGENT, session_id=session_id,
                          title=_title(doc.get("title")) or _title(entry.get("title")) or first_user, cwd=cwd,
                          started_at=min(times), updated_at=max(times), message_count=len(messages),
                          resume_command=f"cd {shlex.quote(cwd)} && {command}" if cwd else command)
    return Unit(session, messages, sig, skips)


def _item_messages(item: dict[str, Any], message: dict[str, Any], ts: int, answered: set[object],
                   skips: dict[str, int]) -> list[Message]:
    out: list[Message] = []
    role = message.get("role")
    reasoning = as_object(item.get("reasoning")).get("text")
    if isinstance(reasoning, str) and reasoning.strip():
        out.append(Message("assistant", "thinking", reasoning, ts))
    text = content_text(message.get("content"), skips)
    states = [s for s in item.get("toolCallStates") or [] if isinstance(s, dict)] \
        if isinstance(item.get("toolCallStates"), list) else []
    if role == "user":
        if text.strip():
            out.append(Message("user", "text", text, ts))
    elif role == "assistant":
        if text.strip():
            out.append(Message("assistant", "text", text, ts))
        calls = message.get("toolCalls")
        sources = calls if isinstance(calls, list) and calls else [s.get("toolCall") for s in states]
        out += [Message("assistant", "tool_call", t, ts) for t in map(_call_text, sources) if t]
        for state in states:
            result = _output_text(state.get("output"))
            if state.get("toolCallId") in answered or not result.strip():
                continue
            status = state.get("status")
            if status in ("errored", "canceled"):
                result = f"[{status}] {result}"
            out.append(Message("tool", "tool_result", result, ts))
    elif role == "thinking":
        if text.strip():
            out.append(Message("assistant", "thinking", text, ts))
    elif role == "tool":
        if text.strip():
            out.append(Message("tool", "tool_result", text, ts))
    elif role == "system":
        count_skip(skips, "system-prompt")
    else:
        count_skip(skips, "unknown_role", str(role))
    summary = item.get("conversationSummary")
    if isinstance(summary, str) and summary.strip():  # what the conversation continues from after compaction
        out.append(Message("system", "text", summary, ts))
    return out


SPEC = AgentSpec(
    name=AGENT, label="Continue", default_roots=default_roots, discover=discover, read_unit=read_session,
    expects="sessions/<sessionId>.json (one JSON document per session) and sessions/sessions.json",
    shaped=_wanted)
