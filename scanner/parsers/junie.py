"""Junie CLI sessions, read whole (docs/formats.md §33).

Junie (JetBrains) keeps ``$JUNIE_HOME/sessions/index.jsonl`` (one line per session: its project
folder, task name and times) and one ``session-<yymmdd-hhmmss-xxxx>/events.jsonl`` per session.
The events are the user's prompts and the agent's UI blocks (terminal, file changes, viewed
files, tools, the result), and a block is *updated* in place by repeating its ``stepId`` as its
status changes, so a session is read whole, keeping each block's last state where it first
appeared. The task name is the title, kept in the index beside the events (``side_titles``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import chats_discovery, jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Mode, Root, Unit, size_mtime
from aivault.scanner.spec import AgentSpec

RESUME = "junie --resume"
INDEX_NAME = "index.jsonl"
EVENTS_NAME = "events.jsonl"
SESSION_PREFIX = "session-"
# The index is one short line per session; anything much larger is not what Junie writes.
INDEX_MAX_BYTES = 64 * 1024 * 1024
# Agent events that only feed the session record or carry no text.
_BOOKKEEPING = frozenset({"LlmResponseMetadataEvent", "CurrentDirectoryUpdatedEvent"})
_BLOCKS = frozenset({"TerminalBlockUpdatedEvent", "FileChangesBlockUpdatedEvent", "ViewFilesBlockUpdatedEvent",
                     "ToolBlockUpdatedEvent", "ResultBlockUpdatedEvent", "AgentFailureEvent"})


# --- the session index -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IndexEntry:
    session_id: str
    project_dir: str | None
    task_name: str | None
    created: int | None
    updated: int | None


# index.jsonl per path: the (size, mtime_ns) it was read at, and its entries by session id.
_INDEX_CACHE: dict[str, tuple[tuple[int, int], dict[str, IndexEntry]]] = {}


def read_index(path: str) -> dict[str, IndexEntry]:
    """``index.jsonl`` by session id (a later line for one session wins); {} when absent or unreadable.
    Parsed again only when its size or mtime changed."""
    stamp = size_mtime(path)
    cached = _INDEX_CACHE.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    entries: dict[str, IndexEntry] = {}
    if 0 <= stamp[0] <= INDEX_MAX_BYTES:
        try:
            with open(path, "rb") as f:
                data = f.read(INDEX_MAX_BYTES)
        except OSError:
            data = b""
        for line in data.split(b"\n"):
            obj = loads_line(line) if line.strip() else None
            if type(obj) is not dict:
                continue
            sid = nonblank(obj.get("sessionId"))
            if sid is None or "/" in sid or "\\" in sid:  # the id names a folder: no path in it
                continue
            entries[sid] = IndexEntry(sid, nonblank(obj.get("projectDir")), nonblank(obj.get("taskName")),
                                      to_epoch_ms(obj.get("createdAt")), to_epoch_ms(obj.get("updatedAt")))
    _INDEX_CACHE[path] = (stamp, entries)
    return entries


def side_titles(root: Root, sigs: MutableMapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Task names from ``index.jsonl`` once it changed: Junie names a session there, not in its events."""
    path = os.path.join(root.path, INDEX_NAME)
    stamp = size_mtime(path)
    if sigs.get(path) == stamp:
        return
    sigs[path] = stamp
    for entry in read_index(path).values():
        if entry.task_name:
            yield entry.session_id, entry.task_name


# --- one session ------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Block:
    """The last state of one UI block, and where and when it first appeared."""

    position: int
    kind: str
    first_ts: int | None
    last_ts: int | None
    event: dict[str, Any]


def _file_changes(changes: object) -> tuple[str, str]:
    """(call text, result text) of a file-changes block: the paths, then each new content under its path."""
    paths: list[str] = []
    bodies: list[str] = []
    for change in changes if isinstance(changes, list) else []:
        if type(change) is not dict:
            continue
        before, after = nonblank(change.get("beforeRelativePath")), nonblank(change.get("afterRelativePath"))
        path = after or before
        if path is None:
            continue
        paths.append(f"{before} -> {after}" if before and after and before != after else path)
        content = change.get("afterContent")
        text = content.get("text") if type(content) is dict else content
        if isinstance(text, str) and text.strip():
            bodies.append(f"{path}\n{text}")
        elif after is None:
            bodies.append(f"{path} (deleted)")
    return compact_json({"files": paths}), "\n\n".join(bodies)


def _block_messages(block: _Block, skips: dict[str, int]) -> list[Message]:
    ev, kind = block.event, block.kind
    call_ts, result_ts = block.first_ts, block.last_ts
    if kind == "ResultBlockUpdatedEvent":
        text = ev.get("result")
        return [Message("assistant", "text", text, result_ts)] if isinstance(text, str) and text.strip() else []
    if kind == "AgentFailureEvent":
        text = nonblank(ev.get("message"))
        code = nonblank(ev.get("errorCode"))
        if text is None:
            return []
        return [Message("system", "text", f"[{code}] {text}" if code else text, result_ts)]
    out: list[Message] = []
    if kind == "TerminalBlockUpdatedEvent":
        command = compact_json({"command": ev.get("command")})
        out.append(Message("assistant", "tool_call", f"terminal {command}", call_ts))
        details = ev.get("details")
        output = details if isinstance(details, str) else ""
        code = ev.get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            output = f"[exit {code}] {output}".rstrip()
        if output.strip():
            out.append(Message("tool", "tool_result", output, result_ts))
    elif kind == "FileChangesBlockUpdatedEvent":
        call, result = _file_changes(ev.get("changes"))
        out.append(Message("assistant", "tool_call", f"file_changes {call}", call_ts))
        if result.strip():
            out.append(Message("tool", "tool_result", result, result_ts))
    elif kind == "ViewFilesBlockUpdatedEvent":
        out.append(Message("assistant", "tool_call", f"view_files {compact_json({'files': ev.get('files')})}", call_ts))
    else:  # ToolBlockUpdatedEvent: the tool's name and whatever else the block holds
        name = nonblank(ev.get("tool")) or nonblank(ev.get("name")) or "tool"
        args = {k: v for k, v in ev.items() if k not in ("kind", "stepId", "status", "tool", "name", "details",
                                                         "output", "result")}
        out.append(Message("assistant", "tool_call", f"{name} {compact_json(args)}" if args else name, call_ts))
        output = next((ev[k] for k in ("details", "output", "result") if isinstance(ev.get(k), str)), "")
        if output.strip():
            out.append(Message("tool", "tool_result", output, result_ts))
    return out


def events_unit(path: str, signature: int, objs: list[dict[str, Any]], entry: IndexEntry | None,
                skips: dict[str, int]) -> Unit:
    """The Unit of one ``events.jsonl`` and its index entry (docs/formats.md §33 field map)."""
    # Items in file order: a prompt (its text) or a block (last state per stepId, at its first place).
    items: list[tuple[str, Any, int | None]] = []  # ("prompt", text, ts) / ("block", _Block, None)
    blocks: dict[tuple[str, str], _Block] = {}
    cwd_seen: str | None = None
    times: list[int] = []
    pending: list[int] = []  # indices of prompts still waiting for a time
    last_ts: int | None = None
    for obj in objs:
        kind = obj.get("kind")
        if kind == "UserPromptEvent":
            prompt = obj.get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                pending.append(len(items))
                items.append(("prompt", prompt, None))
            else:
                count_skip(skips, "empty-prompt")
            continue
        if kind != "SessionA2uxEvent":
            count_skip(skips, "unknown_record", str(kind))
            continue
        ts = to_epoch_ms(obj.get("timestampMs"))
        if ts is not None:
            times.append(ts)
            last_ts = ts
            # A prompt carries no time: it takes the time of the first event after it.
            for i in pending:
                items[i] = (items[i][0], items[i][1], ts)
            pending.clear()
        event = obj.get("event")
        agent = event.get("agentEvent") if type(event) is dict else None
        if type(agent) is not dict:
            count_skip(skips, "malformed-record")
            continue
        akind = agent.get("kind")
        if akind == "CurrentDirectoryUpdatedEvent":
            cwd_seen = nonblank(agent.get("currentDirectory")) or cwd_seen
        if akind in _BOOKKEEPING:
            count_skip(skips, "bookkeeping")
            continue
        if akind not in _BLOCKS:
            count_skip(skips, "unknown_event", str(akind))
            continue
        step = agent.get("stepId")
        key = (str(akind), step) if isinstance(step, str) and step else None
        block = blocks.get(key) if key is not None else None
        if block is None:
            block = _Block(len(items), str(akind), ts, ts, agent)
            items.append(("block", block, None))
            if key is not None:
                blocks[key] = block
        else:
            count_skip(skips, "duplicate_update")  # an earlier state of the same block, superseded
            block.event = agent
            block.last_ts = ts if ts is not None else block.last_ts
    created = entry.created if entry else None
    # Prompts after the last timed event borrow the one before them, else the session's creation.
    for i in pending:
        items[i] = (items[i][0], items[i][1], last_ts if last_ts is not None else created)
    messages: list[Message] = []
    first_user: str | None = None
    for what, value, ts in items:
        if what == "prompt":
            messages.append(Message("user", "text", value, ts if ts is not None else created))
            first_user = first_user or first_line_title(value)
        else:
            for m in _block_messages(value, skips):
                if m.ts is None:
                    m.ts = created
                messages.append(m)
    session_id = entry.session_id if entry else os.path.basename(os.path.dirname(path))
    cwd = (entry.project_dir if entry else None) or cwd_seen
    bounds = times + [t for t in (created, entry.updated if entry else None) if t is not None]
    resume = f"{RESUME} {shlex.quote(session_id)}"
    if cwd:
        resume = f"cd {shlex.quote(cwd)} && {resume}"
    title = (entry.task_name if entry else None) or first_user
    session = SessionInfo(agent="junie", session_id=session_id, title=title, cwd=cwd,
                          started_at=min(bounds) if bounds else None, updated_at=max(bounds) if bounds else None,
                          message_count=len(messages), resume_command=resume)
    return Unit(session, messages, signature, skips)


def read_unit(found: Found) -> Unit:
    """One Junie session's ``events.jsonl``, read whole with its index entry (sources.Unit)."""
    fb = read_settled(found.path)
    skips: dict[str, int] = {}
    objs = jsonl_records(fb, skips)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
    session_dir = os.path.dirname(found.path)
    entry = read_index(os.path.join(os.path.dirname(session_dir), INDEX_NAME)).get(os.path.basename(session_dir))
    return events_unit(found.path, fb.signature, objs, entry, skips)


# --- where Junie keeps its sessions (docs/formats.md §33) -------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$JUNIE_SESSIONS_DIR`` when set, else ``$JUNIE_HOME/sessions`` (``JUNIE_HOME`` defaults to
    ``~/.junie``), on Linux and macOS alike."""
    if env.get("JUNIE_SESSIONS_DIR"):
        return [Root("junie", str(Path(env["JUNIE_SESSIONS_DIR"]).expanduser().absolute()))]
    junie_home = Path(env["JUNIE_HOME"]).expanduser().absolute() if env.get("JUNIE_HOME") else home / ".junie"
    return [Root("junie", str(junie_home / "sessions"))]


def events_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for ``session-*/events.jsonl``."""
    return "whole" if name == EVENTS_NAME and _session_dir(directory) else None


def _session_dir(path: str) -> bool:
    return os.path.basename(path).startswith(SESSION_PREFIX)


SPEC = AgentSpec(
    name="junie", label="Junie", default_roots=default_roots,
    discover=chats_discovery(events_mode, _session_dir), read_unit=read_unit, side_titles=side_titles,
    expects="index.jsonl + session-<yymmdd-hhmmss-xxxx>/events.jsonl (JSONL events)",
    shaped=lambda name: name == EVENTS_NAME)
