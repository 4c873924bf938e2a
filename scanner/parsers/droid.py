"""Factory Droid sessions (docs/formats.md §22): one append-only JSONL file per session.

Droid writes ``~/.factory/sessions/<cwd slug>/<session id>.jsonl`` (flat ``sessions/<id>.jsonl``
before the per-project folders, late 2025), beside a ``<id>.settings.json`` of model and token
totals that holds nothing to search. The first line is ``session_start`` (id, title, cwd, the
calling session of a sub-agent); then ``message`` records carrying Anthropic-style content blocks,
which are mapped with Claude Code's block helpers (scanner/parsers/claude/records.py).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, stored_as
from aivault.scanner.parsers.claude.records import assistant_block, blocks_text
from aivault.scanner.parsers.textutil import first_line_title, nonblank, strip_leading_blocks
from aivault.scanner.sources import Mode, Root
from aivault.scanner.spec import AgentSpec, file_discovery

RESUME = "droid --resume"
# Records that carry no message: the todo list, and the session header (read for its fields).
BOOKKEEPING_TYPES = frozenset({"todo_state", "session_start"})
# What Droid puts in front of the typed prompt in a user text block.
INJECTED_TAGS = ("system-reminder",)
# The first line of the prompt a Task-tool sub-agent session starts with (not a title).
TASK_HEADER = "# Task Tool Invocation"


def _text_of(value: object) -> str:
    """A string, or the text blocks of a block list, joined."""
    return blocks_text(value) if isinstance(value, str | list) else ""


def _title_line(text: str) -> str | None:
    """The title a prompt gives: its first line, past a sub-agent's ``# Task Tool Invocation`` header."""
    head = text.lstrip()
    if head.startswith(TASK_HEADER):
        head = head[len(TASK_HEADER):]
    return first_line_title(head)


@dataclass(slots=True)
class DroidState(ParserState):
    """What a Droid parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = "droid"

    sid: str | None = stored_as("sid")
    title: str | None = stored_as("title")
    cwd: str | None = stored_as("cwd")
    parent: str | None = stored_as("parent")
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    first_user: str | None = stored_as("first_user")
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class DroidParser(LineParser[DroidState]):
    """Turns the lines of one Droid session file into Messages (see scanner.model.Parser)."""

    agent = "droid"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._stem = file_stem(path)
        self.st = DroidState.load(state)

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        st = self.st
        session_id = st.sid or self._stem
        resume = f"{RESUME} {shlex.quote(session_id)}"
        if st.cwd:
            resume = f"cd {shlex.quote(st.cwd)} && {resume}"
        return self._session(session_id, st.title or st.first_user, st.cwd, None, resume, st.parent)

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            return None
        if rtype == "message":
            msg = obj.get("message")
            if type(msg) is not dict:
                return None
            return self._message(msg, ms)
        if rtype == "session_start":
            self._start(obj)
        elif rtype == "compaction_state":
            summary = _text_of(obj.get("summary")) or _text_of(obj.get("content"))
            if summary.strip():
                return [Message("system", "text", summary, ms)]
        elif rtype not in BOOKKEEPING_TYPES:
            count_skip(self.stats.extra, "unknown_record", rtype)
        return []

    def _start(self, obj: dict[str, Any]) -> None:
        st = self.st
        sid = nonblank(obj.get("id"))
        if st.sid is None and sid:
            st.sid = sid
        st.title = nonblank(obj.get("sessionTitle")) or nonblank(obj.get("title")) or st.title
        cwd = obj.get("cwd")
        if isinstance(cwd, str) and os.path.isabs(cwd):
            st.cwd = cwd
        st.parent = nonblank(obj.get("parent")) or nonblank(obj.get("callingSessionId")) or st.parent

    def _message(self, msg: dict[str, Any], ms: int | None) -> list[Message] | None:
        role, content = msg.get("role"), msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return None
        out: list[Message] = []
        if role == "assistant":
            for block in content:
                mapped = assistant_block(block)
                if mapped is not None:
                    out.append(Message("assistant", mapped[0], mapped[1], ms))
            return out
        if role != "user":
            count_skip(self.stats.extra, "unknown_role", role if isinstance(role, str) else "(none)")
            return out
        for block in content:
            if type(block) is not dict:
                continue
            btype = block.get("type")
            if btype == "tool_result":
                result = _text_of(block.get("content"))
                if result.strip():
                    out.append(Message("tool", "tool_result", result, ms))
            elif btype == "text" and isinstance(block.get("text"), str):
                self._user_text(out, block["text"], ms)
        return out

    def _user_text(self, out: list[Message], raw: str, ms: int | None) -> None:
        text = strip_leading_blocks(raw, INJECTED_TAGS)
        if not text.strip():
            if raw.strip():
                count_skip(self.stats.extra, "injected-context")
            return
        if self.st.first_user is None:
            self.st.first_user = _title_line(text)
        out.append(Message("user", "text", text, ms))


# --- where Droid keeps its sessions (docs/formats.md §22) ---------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.factory/sessions`` on Linux and macOS. Droid documents no override; ``FACTORY_HOME`` (or
    ``FACTORY_DIR``), which third-party readers honour, replaces ``~/.factory`` when set."""
    value = env.get("FACTORY_HOME") or env.get("FACTORY_DIR")
    base = Path(value).expanduser().absolute() if value else home / ".factory"
    return [Root("droid", str(base / "sessions"))]


def _wanted(directory: str, name: str) -> Mode | None:
    return "lines" if name.endswith(".jsonl") else None


SPEC = AgentSpec(
    # <cwd slug>/<id>.jsonl, or <id>.jsonl directly under sessions/ (the flat layout of late 2025).
    name="droid", label="Factory Droid", default_roots=default_roots, discover=file_discovery(_wanted, max_depth=1),
    line_parser=DroidParser, expects="<cwd slug>/<session-id>.jsonl (JSONL: session_start, then messages)",
    shaped=lambda name: name.endswith(".jsonl"))
