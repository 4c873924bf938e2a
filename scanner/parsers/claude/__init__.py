"""Incremental parser for Claude Code transcripts (docs/formats.md §1).

One ``<session-uuid>.jsonl`` per session, one JSON record per line. Subagents live in their own
files (``<parent-uuid>/subagents/agent-<id>.jsonl`` since 2.1, sibling ``agent-<id>.jsonl``
before) and become sessions of their own, linked to the parent.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, keep_recent, stored_as
from aivault.scanner.parsers.claude.records import (
    BOOKKEEPING_TYPES,
    IDE_WRAPPER,
    INJECTED_PREFIXES,
    MARKUP_TAG,
    SUBAGENT_TITLE_PREFIX,
    assistant_block,
    block_hash,
    blocks_text,
    clean_title,
    find_copied_sibling,
    read_agent_type,
    uuids_of,
)
from aivault.scanner.parsers.jsonutil import compact_json, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, opens_with, text_crc
from aivault.scanner.sources import Mode, Root
from aivault.scanner.spec import AgentSpec, file_discovery

# Summaries may precede the line their leafUuid names; older ones are dropped first.
PENDING_SUMMARIES_MAX = 20
# Summaries written after their leaf usually point at the last lines of the conversation, so a
# window of recent uuids catches them; a summary of a far-back leaf falls back to a weaker title
# rather than trusting a summary that may describe another session.
RECENT_UUIDS_MAX = 256
# One API response holds a handful of blocks; the cap only guards against a runaway message.
BLOCK_HASHES_MAX = 256
SUMMARY_TITLE_MAX_CHARS = 120


@dataclass(slots=True)
class ClaudeState(ParserState):
    """What a Claude Code parser remembers between passes (stored with every batch)."""

    # 2: files indexed by version 1 are read again, to pick up the record shapes it dropped.
    VERSION: ClassVar[int] = 2
    AGENT: ClassVar[str] = "claude"

    first_sid: str | None = stored_as("sid")
    # The parent of a subagent: its lines carry the parent's sessionId (real 2.1 files), some
    # captures carry "agent-<id>" instead, hence the separate field.
    parent_sid: str | None = stored_as("parent")
    decided: bool = stored_as("decided", False)
    agent_id: str | None = stored_as("agent_id")
    cwd: str | None = stored_as("cwd")
    branch: str | None = stored_as("branch")
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    custom_title: str | None = stored_as("custom")
    ai_title: str | None = stored_as("ai")
    summary_title: str | None = stored_as("summary")
    first_user: str | None = stored_as("first_user")
    pending: list[tuple[str, str]] = stored_as("pending", factory=list)  # (leafUuid, summary)
    recent_uuids: list[int] = stored_as("uuids", factory=list)
    msg_id: str | None = stored_as("msg_id")
    block_hashes: list[int] = stored_as("hashes", factory=list)
    # A background session (sessionKind "bg") starts with a copy of the conversation it was
    # forked from; while its records are that sibling's, they are not indexed again.
    bg_checked: bool = stored_as("bg_checked", False)
    bg_sibling: str | None = stored_as("bg_sibling")
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class ClaudeParser(LineParser[ClaudeState]):
    """Turns the lines of one Claude Code transcript into Messages (see scanner.model.Parser)."""

    agent = "claude"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._stem = file_stem(path)
        path_agent_id = self._stem[len("agent-") :] if self._stem.startswith("agent-") else ""
        self._path_agent_id: str | None = path_agent_id or None
        self._path_parent: str | None = None
        self._agent_type: str | None = None
        if self._path_agent_id is not None:
            directory = os.path.dirname(path)
            if os.path.basename(directory) == "subagents":
                self._path_parent = os.path.basename(os.path.dirname(directory)) or None
            self._agent_type = read_agent_type(path)

        self._resume_key: tuple[str | None, str | None] = (None, None)
        self._resume_cache: str | None = None
        self._bg_uuids: set[str] | None = None  # the copied sibling's uuids (a background session)
        self.st = ClaudeState.load(state)
        if self._path_agent_id is not None:  # the file name says whose subagent this is
            self.st.decided = True
            self.st.agent_id = self._path_agent_id

    # -- session ----------------------------------------------------------------------------

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        if self.st.agent_id is not None:
            session_id = "agent-" + self.st.agent_id
            parent = self.st.parent_sid or self._path_parent
            resume_target = parent
        else:
            session_id = self.st.first_sid or self._stem
            parent = None
            resume_target = session_id
        return self._session(session_id, self._title(), self.st.cwd, self.st.branch,
                             self._resume_command(resume_target), parent)

    def _resume_command(self, target: str | None) -> str | None:
        # The scanner reads ``session`` after every line; quoting is the costly part, so the
        # command is rebuilt only when its inputs change.
        key = (target, self.st.cwd)
        if key != self._resume_key:
            self._resume_key = key
            command = None
            if target:
                command = "claude --resume " + shlex.quote(target)
                if self.st.cwd:
                    # Claude looks sessions up per project directory.
                    command = f"cd {shlex.quote(self.st.cwd)} && {command}"
            self._resume_cache = command
        return self._resume_cache

    def _title(self) -> str | None:
        title = self.st.custom_title or self.st.ai_title or self.st.summary_title
        if title or self.st.first_user is None:
            return title
        if self.st.agent_id is None:
            return self.st.first_user
        if self._agent_type:
            return f"subagent ({self._agent_type}): {self.st.first_user}"
        return SUBAGENT_TITLE_PREFIX + self.st.first_user

    # -- lines ------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        out = self._record_messages(obj, ms)
        if out and self._copied_from_sibling(obj):
            extra = self.stats.extra
            extra["replayed_background_copy"] = extra.get("replayed_background_copy", 0) + len(out)
            return []
        return out

    def _copied_from_sibling(self, obj: dict[str, Any]) -> bool:
        """Whether this record of a background copy is still the replayed prefix (its uuid is in the
        sibling transcript it was copied from); the first record that is not ends the prefix."""
        uuid = obj.get("uuid")
        if not self.st.bg_checked:
            if obj.get("type") not in ("user", "assistant"):
                return False
            self.st.bg_checked = True
            if obj.get("sessionKind") == "bg" and isinstance(uuid, str):
                self.st.bg_sibling = find_copied_sibling(self.path, uuid)
        if self.st.bg_sibling is None or not isinstance(uuid, str):
            return False
        if self._bg_uuids is None:
            self._bg_uuids = uuids_of(self.st.bg_sibling)
        if uuid in self._bg_uuids:
            return True
        self.st.bg_sibling, self._bg_uuids = None, None  # past the copy: this session's own records
        return False

    def _record_messages(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            return None
        out: list[Message] | None
        if rtype == "assistant":
            out = self._assistant(obj, ms)
        elif rtype == "user":
            out = self._user(obj, ms)
        elif rtype == "system":
            out = self._system(obj, ms)
        elif rtype == "summary":
            out = self._summary(obj, ms)
        elif rtype == "tool_use" or rtype == "tool_result":
            out = self._bare_tool_record(rtype, obj, ms)
        else:
            out = []
            if rtype == "attachment":
                out = self._attachment(obj, ms)
            elif rtype == "custom-title":
                self.st.custom_title = clean_title(obj.get("customTitle")) or self.st.custom_title
            elif rtype == "ai-title":
                self.st.ai_title = clean_title(obj.get("aiTitle")) or self.st.ai_title
            elif rtype not in BOOKKEEPING_TYPES:
                count_skip(self.stats.extra, "unknown_record", rtype)
        if out is None:
            return None

        if rtype == "assistant" or rtype == "user":
            self._decide_subagent(obj)
        uuid = obj.get("uuid")
        if isinstance(uuid, str):
            self._note_uuid(uuid)
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid:
            if self.st.first_sid is None:
                self.st.first_sid = sid
            if self.st.parent_sid is None and not sid.startswith("agent-"):
                self.st.parent_sid = sid
        cwd = obj.get("relocatedCwd") if rtype == "relocated" else obj.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.st.cwd = cwd
        branch = obj.get("gitBranch")
        if isinstance(branch, str) and branch:
            self.st.branch = branch
        return out

    def _decide_subagent(self, obj: dict[str, Any]) -> None:
        # Only the first conversational line may turn a file into a subagent transcript: a main
        # session never changes identity half-way through.
        if self.st.decided:
            return
        self.st.decided = True
        agent_id = obj.get("agentId")
        if obj.get("isSidechain") is True and isinstance(agent_id, str) and agent_id:
            self.st.agent_id = agent_id

    def _note_uuid(self, uuid: str) -> None:
        recent = self.st.recent_uuids
        recent.append(text_crc(uuid))
        if len(recent) > 2 * RECENT_UUIDS_MAX:
            del recent[:-RECENT_UUIDS_MAX]
        if self.st.pending:
            kept = []
            for leaf, summary in self.st.pending:
                if leaf == uuid:
                    self.st.summary_title = summary
                else:
                    kept.append((leaf, summary))
            self.st.pending = kept

    def _summary(self, obj: dict[str, Any], ms: int | None) -> list[Message]:
        """A summary record: a title candidate, and for the compaction shape also a message.

        Two shapes exist: ``{summary, leafUuid}`` (Claude Code) and a compaction summary written
        as a conversation line, ``{uuid, sessionId, message:{content}}`` (agent-history's
        fixtures). The first is only a title; the second is also the text the conversation
        continues from, indexed like an ``isCompactSummary`` line.
        """
        out: list[Message] = []
        summary = obj.get("summary")
        if not isinstance(summary, str):
            msg = obj.get("message")
            summary = blocks_text(msg.get("content")) if type(msg) is dict else ""
            if summary.strip():
                out.append(Message("system", "text", summary, ms))
        title = first_line_title(summary, SUMMARY_TITLE_MAX_CHARS)
        if title is None:
            count_skip(self.stats.extra, "unparsed_record", "summary")
            return out
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid:
            # The summary says whose it is: trusted for this session only. The first sessionId
            # of the file is this session's id, and this line may be the one that sets it.
            if self.st.first_sid is None or sid == self.st.first_sid:
                self.st.summary_title = title
            return out
        # Otherwise the leaf tells: a summary of a conversation whose last line is not in this
        # file describes another session (docs/formats.md §1).
        leaf = obj.get("leafUuid")
        if not isinstance(leaf, str):
            return out
        if text_crc(leaf) in self.st.recent_uuids:
            self.st.summary_title = title
            return out
        keep_recent(self.st.pending, (leaf, title), PENDING_SUMMARIES_MAX)
        return out

    def _bare_tool_record(self, rtype: str, obj: dict[str, Any], ms: int | None) -> list[Message]:
        """A tool call or result written as a record of its own rather than a content block.

        Seen in agent-sessions' schema_drift fixture: ``{type:"tool_use", name, input}`` and
        ``{type:"tool_result", name, output}``. Anything else of these types is counted as
        unparsed.
        """
        if rtype == "tool_use":
            name = obj.get("name")
            if isinstance(name, str) and name:
                tool_input = obj.get("input")
                text = name if tool_input is None else name + " " + compact_json(tool_input)
                return [Message("assistant", "tool_call", text, ms)]
        else:
            for key in ("output", "content"):
                value = obj.get(key)
                if value is not None:
                    # A structured output is still searchable as JSON; strings and blocks as text.
                    result = blocks_text(value) if isinstance(value, str | list) else compact_json(value)
                    return [Message("tool", "tool_result", result, ms)] if result else []
        count_skip(self.stats.extra, "unparsed_record", rtype)
        return []

    def _attachment(self, obj: dict[str, Any], ms: int | None) -> list[Message]:
        """A ``queued_command`` attachment is a prompt the user typed while a tool ran (it has no
        uuid of its own and arrives out of band); other attachments are hook output and reminders."""
        att = obj.get("attachment")
        if type(att) is not dict or att.get("type") != "queued_command" or att.get("isMeta") is True:
            return []
        prompt = att.get("prompt")
        text = blocks_text(prompt)
        out: list[Message] = []
        if text:
            when = to_epoch_ms(att.get("timestamp"))
            self._emit_user_text(out, text, when if when is not None else ms)
        return out

    def _emit_user_text(self, out: list[Message], text: str, ms: int | None) -> None:
        text = IDE_WRAPPER.sub("", text)
        if not text or text.isspace() or opens_with(text, INJECTED_PREFIXES):
            return
        if self.st.first_user is None:
            self.st.first_user = first_line_title(text)
        out.append(Message("user", "text", text, ms))

    def _user(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        msg = obj.get("message")
        if type(msg) is not dict:
            return None
        content = msg.get("content")
        if obj.get("isCompactSummary") is True:
            text = blocks_text(content)
            return [Message("system", "text", text, ms)] if text.strip() else []
        # isMeta marks injected context; tool_result blocks on such lines are still real tool
        # output (Claude Code 2.1 marks some of them isMeta), so only their text is dropped.
        is_meta = obj.get("isMeta") is True
        out: list[Message] = []
        if isinstance(content, str):
            if not is_meta:
                self._emit_user_text(out, content, ms)
            return out
        if not isinstance(content, list):
            return None
        for block in content:
            if type(block) is not dict:
                continue
            btype = block.get("type")
            if btype == "text":
                block_text = block.get("text")
                if not is_meta and isinstance(block_text, str):
                    self._emit_user_text(out, block_text, ms)
            elif btype == "tool_result":
                result = blocks_text(block.get("content"))
                if result:
                    out.append(Message("tool", "tool_result", result, ms))
        return out

    def _assistant(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        msg = obj.get("message")
        if type(msg) is not dict:
            return None
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        elif not isinstance(content, list):
            return None
        msg_id = msg.get("id")
        if not isinstance(msg_id, str) or not msg_id:
            msg_id = None
        elif msg_id != self.st.msg_id:
            self.st.msg_id = msg_id
            self.st.block_hashes = []
        out: list[Message] = []
        for block in content:
            mapped = assistant_block(block)
            if mapped is None:
                continue
            kind, text, block_id = mapped
            if msg_id is not None:
                digest = block_hash(kind, block_id, text)
                if digest in self.st.block_hashes:
                    extra = self.stats.extra
                    extra["duplicate_blocks"] = extra.get("duplicate_blocks", 0) + 1
                    continue
                if len(self.st.block_hashes) < BLOCK_HASHES_MAX:
                    self.st.block_hashes.append(digest)
            out.append(Message("assistant", kind, text, ms))
        return out

    def _system(self, obj: dict[str, Any], ms: int | None) -> list[Message]:
        if obj.get("subtype") != "local_command":
            return []
        content = obj.get("content")
        if not isinstance(content, str):
            return []
        # Claude Code indents the markup it writes; keep only the inner text, line by line.
        lines = (line.strip() for line in MARKUP_TAG.sub("", content).splitlines())
        text = "\n".join(line for line in lines if line)
        return [Message("system", "text", text, ms)] if text else []


# --- where Claude Code keeps its sessions (docs/formats.md §1) ----------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$CLAUDE_CONFIG_DIR/projects``; else ``~/.claude/projects`` and ``~/.config/claude/projects``."""
    config = env.get("CLAUDE_CONFIG_DIR")
    if config:
        return [Root("claude", str(Path(config).expanduser().absolute() / "projects"))]
    return [Root("claude", str(home / ".claude" / "projects")),
            Root("claude", str(home / ".config" / "claude" / "projects"))]


def _wanted(directory: str, name: str) -> Mode | None:
    # history.jsonl is the global prompt index, not a transcript.
    return "lines" if name.endswith(".jsonl") and name != "history.jsonl" else None


SPEC = AgentSpec(
    name="claude", label="Claude Code", default_roots=default_roots, discover=file_discovery(_wanted),
    line_parser=ClaudeParser, expects="<project>/<session-uuid>.jsonl (JSONL, one record per line)",
    shaped=lambda name: name.endswith(".jsonl"))
