"""GitHub Copilot CLI sessions (docs/formats.md §8).

One event log per session: ``$COPILOT_HOME/session-state/<id>/events.jsonl`` (CLI 1.0.11 and
later, with a ``workspace.yaml`` beside it), the flat ``session-state/<id>.jsonl`` of earlier
builds, and the single-document ``history-session-state/session_<id>_<ts>.json`` of the oldest
ones. Every line of an event log is ``{type, data, id, timestamp, parentId}``; the type says what
``data`` holds. The title lives in ``workspace.yaml`` and changes without the log changing, so it
is also sent on its own (``side_titles``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import orjson

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, keep_recent, stored_as
from aivault.scanner.parsers.copilot.workspace import (
    HISTORY_STATE,
    SESSION_STATE,
    read_workspace,
    side_titles,
    workspace_fields,
    workspace_title,
)
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, sized_hash, text_crc
from aivault.scanner.sources import Found, Mode, Root, Unit, read_whole
from aivault.scanner.spec import AgentSpec, file_discovery

__all__ = ["SPEC", "CopilotParser", "default_roots", "read_history_unit", "side_titles", "workspace_fields"]

# Tool calls are announced twice (assistant.message toolRequests, then tool.execution_start, or the
# other way round); the ids of recent calls tell the second announcement apart. A turn rarely
# holds more than a few dozen calls.
RECENT_CALLS_MAX = 128
# assistant.reasoning and assistant.message.reasoningText can carry the same reasoning.
RECENT_REASONING_MAX = 16
# The legacy history documents are read whole.
HISTORY_DOCUMENT_MAX_BYTES = 256 * 1024 * 1024

EVENTS_FILE = "events.jsonl"

# Event types docs/formats.md §8 (and the corpus) names that carry no conversation. Any other
# unknown type is counted by name ("unknown_record:<type>"): Copilot changes its events often
# (1.0.35 rejected its own legacy compaction events), so drift must show, never crash.
BOOKKEEPING_TYPES = frozenset(
    {
        "session.model_change",
        "session.info",
        "session.error",
        "session.warning",
        "session.truncation",
        "session.shutdown",
        "session.usage_checkpoint",
        "session.auto_mode_resolved",
        "session.compaction_start",
        "session.mode_changed",
        "session.context_changed",
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.usage",
        "tool.execution_progress",
        "hook.start",
        "hook.end",
        "abort",
        # A subagent's own messages are assistant.message / tool.execution_* events of this file
        # (with a parentToolCallId); these two carry only its name and totals.
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "subagent.selected",
        # The system prompt (the same long text in every session) and CLI notices.
        "system.message",
        "system.notification",
    }
)
# Skills inject their definition as a user.message (Copilot 1.0.25+, agentsview #395).
SKILL_SOURCE_PREFIX = "skill-"
SKILL_CONTENT_PREFIX = "<skill-context"

_HISTORY_NAME = re.compile(r"session_(.+?)(?:_(\d+))?\.json$")
_WINDOWS_ABS = re.compile(r"[A-Za-z]:[\\/]")


def _is_abs_path(value: object) -> bool:
    return isinstance(value, str) and (value.startswith("/") or _WINDOWS_ABS.match(value) is not None)


def arguments_text(arguments: object) -> str:
    """Tool arguments as compact JSON: an object, or a JSON string of one (both occur)."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        if not arguments.strip():
            return ""
        try:
            return compact_json(orjson.loads(arguments))
        except orjson.JSONDecodeError:
            return arguments
    return compact_json(arguments)


def _tool_call_text(name: object, arguments: object) -> str:
    tool = name if isinstance(name, str) and name else "tool"
    args = arguments_text(arguments)
    return f"{tool} {args}" if args else tool


def result_text(result: object) -> str:
    """A tool result's text: ``result.content`` (string or text blocks), else its detailed content."""
    if isinstance(result, str):
        return result
    if type(result) is dict:
        for key in ("content", "detailedContent"):
            value = result.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list):
                parts = [b["text"] for b in value if type(b) is dict and isinstance(b.get("text"), str)]
                if parts:
                    return "\n".join(parts)
        return ""
    if result is None:
        return ""
    return compact_json(result)


def is_skill_message(data: Mapping[str, Any], content: str) -> bool:
    """True for the user.message a skill injects (its definition), which the user never typed."""
    source = data.get("source")
    if isinstance(source, str) and source.startswith(SKILL_SOURCE_PREFIX):
        return True
    return content.lstrip().startswith(SKILL_CONTENT_PREFIX)


def resume_command(session_id: str) -> str:
    # Copilot finds a session by id from any directory (docs/formats.md §8).
    return "copilot --resume=" + shlex.quote(session_id)


def _session_id_from_path(path: str) -> tuple[str, str | None]:
    """(session id from the file name, the session folder holding workspace.yaml if any)."""
    base = os.path.basename(path)
    if base == EVENTS_FILE:
        folder = os.path.dirname(path)
        return os.path.basename(folder) or base, folder
    return file_stem(path), None


@dataclass(slots=True)
class CopilotState(ParserState):
    """What a Copilot parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = "copilot"

    sid: str | None = stored_as("sid")
    cwd: str | None = stored_as("cwd")
    branch: str | None = stored_as("branch")
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    first_user: str | None = stored_as("first_user")
    calls: list[int] = stored_as("calls", factory=list)
    reasoning: list[int] = stored_as("reasoning", factory=list)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class CopilotParser(LineParser[CopilotState]):
    """Turns the events of one Copilot CLI session log into Messages (see scanner.model.Parser)."""

    agent = "copilot"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._file_id, folder = _session_id_from_path(path)
        # Read once per read of the log: a rename between two reads shows on the next one (and
        # through side_titles when only the yaml changed).
        fields = read_workspace(folder) if folder else {}
        self._yaml_title = workspace_title(fields)
        self._yaml_cwd = fields.get("cwd") if _is_abs_path(fields.get("cwd")) else None
        self._yaml_branch = fields.get("branch") or None

        self.st = CopilotState.load(state)

    # -- session ----------------------------------------------------------------------------

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        session_id = self.st.sid or self._file_id
        return self._session(session_id, self._yaml_title or self.st.first_user, self.st.cwd or self._yaml_cwd,
                             self.st.branch or self._yaml_branch, resume_command(session_id))

    # -- lines ------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        etype = obj.get("type")
        data = obj.get("data")
        if not isinstance(etype, str):
            return None
        if type(data) is not dict:
            if etype in BOOKKEEPING_TYPES:
                return []
            return None
        if etype == "user.message":
            return self._user(data, ms)
        if etype == "assistant.message":
            return self._assistant(data, ms)
        if etype == "assistant.reasoning":
            return self._reasoning_text(data.get("content"), ms)
        if etype == "tool.execution_start":
            return self._tool_call(data.get("toolCallId"), data.get("toolName"), _args(data), ms)
        if etype == "tool.execution_complete":
            return self._tool_result(data, ms)
        if etype in ("session.start", "session.resume"):
            self._context(data, first=etype == "session.start")
            return []
        if etype == "session.compaction_complete":
            summary = data.get("summaryContent")
            if isinstance(summary, str) and summary.strip() and data.get("success") is not False:
                return [Message("system", "text", summary, ms)]
            return []
        if etype not in BOOKKEEPING_TYPES:
            count_skip(self.stats.extra, "unknown_record", etype)
        return []

    def _context(self, data: dict[str, Any], *, first: bool) -> None:
        sid = data.get("sessionId")
        if first and self.st.sid is None and isinstance(sid, str) and sid:
            self.st.sid = sid
        context = data.get("context")
        if type(context) is not dict:
            return
        # A resumed session may run from another directory or branch: the latest one is kept.
        cwd = context.get("cwd")
        if _is_abs_path(cwd):
            self.st.cwd = cwd
        branch = context.get("branch")
        if isinstance(branch, str) and branch:
            self.st.branch = branch

    def _user(self, data: dict[str, Any], ms: int | None) -> list[Message]:
        content = data.get("content")
        if not isinstance(content, str) or not content.strip():
            return []
        if is_skill_message(data, content):
            count_skip(self.stats.extra, "skill_context")
            return []
        if self.st.first_user is None:
            self.st.first_user = first_line_title(content)
        return [Message("user", "text", content, ms)]

    def _assistant(self, data: dict[str, Any], ms: int | None) -> list[Message]:
        out: list[Message] = []
        out += self._reasoning_text(data.get("reasoningText"), ms)
        content = data.get("content")
        if isinstance(content, str) and content.strip():
            out.append(Message("assistant", "text", content, ms))
        requests = data.get("toolRequests")
        if isinstance(requests, list):
            for request in requests:
                if type(request) is dict:
                    out += self._tool_call(request.get("toolCallId"), request.get("name"), _args(request), ms)
        return out

    def _reasoning_text(self, text: object, ms: int | None) -> list[Message]:
        if not isinstance(text, str) or not text.strip():
            return []
        digest = sized_hash(text)
        if digest in self.st.reasoning:
            count_skip(self.stats.extra, "duplicate_reasoning")
            return []
        keep_recent(self.st.reasoning, digest, RECENT_REASONING_MAX)
        return [Message("assistant", "thinking", text, ms)]

    def _tool_call(self, call_id: object, name: object, arguments: object, ms: int | None) -> list[Message]:
        if isinstance(call_id, str) and call_id:
            digest = text_crc(call_id)
            if digest in self.st.calls:
                count_skip(self.stats.extra, "duplicate_tool_call")
                return []
            keep_recent(self.st.calls, digest, RECENT_CALLS_MAX)
        return [Message("assistant", "tool_call", _tool_call_text(name, arguments), ms)]

    def _tool_result(self, data: dict[str, Any], ms: int | None) -> list[Message]:
        text = result_text(data.get("result"))
        if not text:
            error = data.get("error")
            if type(error) is dict:
                error = error.get("message")
            text = error if isinstance(error, str) else ""
        return [Message("tool", "tool_result", text, ms)] if text.strip() else []


def _args(data: Mapping[str, Any]) -> object:
    # Requests carry ``arguments``; some lifecycle stages write ``args`` (cli-continues #47).
    return data["arguments"] if "arguments" in data else data.get("args")


# --- the oldest layout: history-session-state/session_<id>_<ts>.json --------------------------------
def read_history_unit(found: Found) -> Unit:
    """A legacy session document, read whole: ``{sessionId, startTime, chatMessages, timeline}``."""
    path = found.path
    data, before, st = read_whole(path, HISTORY_DOCUMENT_MAX_BYTES,
                                  lambda size: f"larger than {HISTORY_DOCUMENT_MAX_BYTES} bytes")
    doc = loads_line(data)
    if type(doc) is not dict:
        # A document cut short is being written; one that parses but is no object never will be.
        if doc is None:
            raise UnitChanged(f"{path} is not complete JSON yet")
        raise UnitUnreadable("not a JSON object")
    match = _HISTORY_NAME.search(os.path.basename(path))
    sid = doc.get("sessionId")
    session_id = sid if isinstance(sid, str) and sid else (match.group(1) if match else Path(path).stem)
    started = to_epoch_ms(doc.get("startTime"))
    updated = started
    skips: dict[str, int] = {}
    messages: list[Message] = []
    first_user: str | None = None
    timeline = doc.get("timeline")
    for event in timeline if isinstance(timeline, list) else []:
        ts = to_epoch_ms(event.get("timestamp")) if type(event) is dict else None
        if ts is not None:
            started = ts if started is None else min(started, ts)
            updated = ts if updated is None else max(updated, ts)
    chat = doc.get("chatMessages")
    for entry in chat if isinstance(chat, list) else []:
        if type(entry) is not dict:
            count_skip(skips, "malformed-record")
            continue
        role = entry.get("role")
        content = entry.get("content")
        text = content if isinstance(content, str) else ""
        if role == "user":
            if text.strip():
                first_user = first_user or first_line_title(text)
                messages.append(Message("user", "text", text, None))
        elif role == "assistant":
            if text.strip():
                messages.append(Message("assistant", "text", text, None))
            calls = entry.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                function = call.get("function") if type(call) is dict else None
                if type(function) is dict:
                    messages.append(Message("assistant", "tool_call",
                                            _tool_call_text(function.get("name"), function.get("arguments")), None))
        elif role == "tool":
            if text.strip():
                messages.append(Message("tool", "tool_result", text, None))
        elif role == "system":
            count_skip(skips, "system_prompt")
        else:
            count_skip(skips, f"unknown_role:{str(role)[:40]}")
    if updated is None:
        updated = st.st_mtime_ns // 1_000_000
    started = updated if started is None else started
    session = SessionInfo(agent="copilot", session_id=session_id, title=first_user, started_at=started,
                          updated_at=updated, message_count=len(messages),
                          resume_command=resume_command(session_id))
    return Unit(session, messages, before, skips)


# --- where Copilot keeps its sessions (docs/formats.md §8.1) ------------------------------------------
def copilot_home(env: Mapping[str, str], home: Path) -> Path:
    value = env.get("COPILOT_HOME")
    return Path(value).expanduser().absolute() if value else home / ".copilot"


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$COPILOT_HOME/session-state`` and ``$COPILOT_HOME/history-session-state`` (``~/.copilot``)."""
    base = copilot_home(env, home)
    return [Root("copilot", str(base / SESSION_STATE)), Root("copilot", str(base / HISTORY_STATE))]


def _wanted(directory: str, name: str) -> Mode | None:
    if name == EVENTS_FILE:
        return "lines"
    if name.endswith(".jsonl") and os.path.basename(directory) == SESSION_STATE:
        return "lines"  # the flat layout of builds before 1.0.11
    if name.startswith("session_") and name.endswith(".json"):
        return "whole"
    return None


SPEC = AgentSpec(
    # <id>/events.jsonl sits two levels below a Copilot home; deeper folders (checkpoints, files) hold no log.
    name="copilot", label="GitHub Copilot CLI", default_roots=default_roots,
    discover=file_discovery(_wanted, max_depth=2),
    line_parser=CopilotParser, read_unit=read_history_unit, side_titles=side_titles,
    expects="session-state/<session-id>/events.jsonl (JSONL events), or history-session-state/session_*.json",
    shaped=lambda name: name == EVENTS_FILE or (name.startswith("session_") and name.endswith(".json")))
