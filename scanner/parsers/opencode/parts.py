"""OpenCode messages and parts into normalized messages (docs/formats.md §4), for both stores.

A message row (or legacy ``message/<session>/<id>.json``) carries the role and time; its parts
(``part`` rows, or ``part/<message>/<id>.json``) carry the content, one normalized message per
part: ``text`` → text, ``reasoning`` → thinking, one ``tool`` part → a tool call *and* its result.
Step markers, patches, snapshots, compaction markers, agent mentions, retries and file references
are bookkeeping: counted, never messages. The same object shapes sit in both stores, so the
database reader and the legacy reader share everything here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import as_object, compact_json, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Unit

AGENT: Final = "opencode"
# Upstream isDefaultTitle: the title a session holds until the model has named it.
PLACEHOLDER_TITLE: Final = re.compile(
    r"^(New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
# Parts that record how a turn ran, not what was said. ``file`` parts only point at an attachment:
# its text reaches the model as the synthetic text parts OpenCode adds next to it.
BOOKKEEPING_PARTS: Final = frozenset({"step-start", "step-finish", "patch", "snapshot", "compaction",
                                      "agent", "retry", "file"})
# OpenCode turns a call it cannot dispatch into a completed call of this tool (AV #1255).
INVALID_TOOL: Final = "invalid"
UNFINISHED_TOOL_STATES: Final = frozenset({"pending", "running"})


@dataclass(slots=True)
class SessionRecord:
    """A session's own fields, as either store holds them."""

    session_id: str
    title: str | None = None
    directory: str | None = None
    parent_id: str | None = None
    created: int | None = None  # epoch ms
    updated: int | None = None
    worktree: str | None = None  # the project's, a fallback for a session without directory


@dataclass(slots=True)
class Conversation:
    """The normalized messages of a session, and what was learnt on the way."""

    messages: list[Message] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)
    first_user_text: str | None = None
    assistant_cwd: str | None = None
    earliest: int | None = None
    latest: int | None = None

    def note_time(self, ms: int | None) -> None:
        if ms is None:
            return
        if self.earliest is None or ms < self.earliest:
            self.earliest = ms
        if self.latest is None or ms > self.latest:
            self.latest = ms


def add_message(conv: Conversation, info: object, parts: Iterable[object], fallback_ms: int | None) -> None:
    """One OpenCode message (its ``data`` object) with its parts, in order, into ``conv``."""
    if not isinstance(info, dict):
        count_skip(conv.skips, "malformed-record")
        return
    role = info.get("role")
    if role not in ("user", "assistant"):
        count_skip(conv.skips, f"unknown_role:{str(role)[:40]}")
        return
    times = info.get("time")
    ts = to_epoch_ms(times.get("created")) if isinstance(times, dict) else None
    if ts is None:
        ts = fallback_ms
    conv.note_time(ts)
    if role == "assistant" and conv.assistant_cwd is None:
        conv.assistant_cwd = _assistant_cwd(info.get("path"))
    for part in parts:
        _add_part(conv, role, part, ts)
    error = info.get("error")
    if role == "assistant" and isinstance(error, dict):
        conv.messages.append(Message("system", "text", _error_text(error), ts))


def _assistant_cwd(path: object) -> str | None:
    if isinstance(path, dict):
        cwd = path.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else None
    return path if isinstance(path, str) and path else None  # an older shape: the path itself


def _error_text(error: dict[str, Any]) -> str:
    name = error.get("name") if isinstance(error.get("name"), str) else "error"
    data = error.get("data")
    detail = data.get("message") if isinstance(data, dict) else None
    return f"[{name}] {detail}" if isinstance(detail, str) and detail else f"[{name}]"


def _add_part(conv: Conversation, role: RoleName, part: object, ts: int | None) -> None:
    if not isinstance(part, dict):
        count_skip(conv.skips, "malformed-record")
        return
    ptype = part.get("type")
    times = part.get("time")
    start = to_epoch_ms(times.get("start")) if isinstance(times, dict) else None
    at = start if start is not None else ts
    out = conv.messages
    if ptype == "text":
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():
            count_skip(conv.skips, "empty_text")
        elif part.get("synthetic") is True:
            # OpenCode's own additions (attached file contents, "continue" prompts after a
            # compaction): context it sends as the user, never the user's words.
            out.append(Message("system", "text", text, at))
        else:
            out.append(Message(role, "text", text, at))
            if role == "user" and conv.first_user_text is None:
                conv.first_user_text = text
    elif ptype == "reasoning":
        text = part.get("text")
        if isinstance(text, str) and text.strip():
            out.append(Message("assistant", "thinking", text, at))
        else:
            count_skip(conv.skips, "empty_thinking")
    elif ptype == "tool":
        _add_tool(conv, part, at)
    elif ptype == "subtask":
        # A command that hands a prompt to a sub-agent: the call OpenCode makes for the user.
        args = {k: part.get(k) for k in ("agent", "description", "prompt", "command") if part.get(k) is not None}
        out.append(Message("assistant", "tool_call", f"task {compact_json(args)}", at))
    elif isinstance(ptype, str) and ptype in BOOKKEEPING_PARTS:
        count_skip(conv.skips, f"bookkeeping:{ptype}")
    else:
        count_skip(conv.skips, f"unknown_part:{str(ptype)[:40]}")
    conv.note_time(at)


def _add_tool(conv: Conversation, part: dict[str, Any], at: int | None) -> None:
    name = part.get("tool") if isinstance(part.get("tool"), str) and part.get("tool") else "tool"
    state = as_object(part.get("state"))
    args = state.get("input")
    conv.messages.append(Message("assistant", "tool_call", f"{name} {compact_json(args if args is not None else {})}",
                                 at))
    status = state.get("status")
    times = state.get("time")
    end = to_epoch_ms(times.get("end")) if isinstance(times, dict) else None
    when = end if end is not None else at
    conv.note_time(when)
    if status == "completed":
        output = state.get("output")
        text = output if isinstance(output, str) else compact_json(output) if output is not None else ""
        metadata = as_object(state.get("metadata"))
        code = metadata.get("exit")
        # A failed shell command still completes: its exit code is the only trace (AV #1257).
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            text = f"[exit code {code}]\n{text}"
        if name == INVALID_TOOL:
            text = f"[invalid tool call] {text}"
        conv.messages.append(Message("tool", "tool_result", text, when))
    elif status == "error":
        error = state.get("error")
        conv.messages.append(Message("tool", "tool_result", f"[error] {error if isinstance(error, str) else ''}",
                                     when))
    elif status in UNFINISHED_TOOL_STATES:
        count_skip(conv.skips, "tool_unfinished")  # its result lands with a later commit
    else:
        count_skip(conv.skips, f"unknown_tool_status:{str(status)[:40]}")


def clean_title(title: object) -> str | None:
    """A session title, or None for the placeholder OpenCode sets before the model names it."""
    if not isinstance(title, str) or not title.strip() or PLACEHOLDER_TITLE.match(title):
        return None
    return title.strip()


def resume_command(session_id: str, cwd: str | None) -> str:
    """``opencode --session <id>``, from the session's directory (OpenCode works in the cwd)."""
    cmd = f"opencode --session {shlex.quote(session_id)}"
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd else cmd


def build_unit(rec: SessionRecord, conv: Conversation, signature: int) -> Unit:
    """The whole unit: session fields by OpenCode's precedence, messages in order, skips."""
    # session.directory first: the "global" project's worktree is "/" (AV #1237).
    cwd = rec.directory or conv.assistant_cwd or (rec.worktree if rec.worktree not in (None, "", "/") else None)
    title = clean_title(rec.title) or (first_line_title(conv.first_user_text) if conv.first_user_text else None)
    times = [t for t in (rec.created, conv.earliest) if t is not None]
    started = min(times) if times else None
    updates = [t for t in (rec.updated, conv.latest) if t is not None]
    info = SessionInfo(agent=AGENT, session_id=rec.session_id, title=title, cwd=cwd, started_at=started,
                       updated_at=max(updates) if updates else None, message_count=len(conv.messages),
                       resume_command=resume_command(rec.session_id, cwd),
                       parent_session_id=rec.parent_id or None)
    return Unit(info, conv.messages, signature, conv.skips)
