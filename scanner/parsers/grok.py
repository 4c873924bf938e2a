"""Grok Build sessions (docs/formats.md §21), one folder per session, read whole.

Grok Build keeps ``$GROK_HOME/sessions/<url-encoded cwd>/<session id>/``: ``updates.jsonl``, the
authoritative log of ACP session updates (user and agent text arriving as chunks, tool calls and
their updates), ``summary.json`` (title, folder, branch, parent) and ``chat_history.jsonl``, the
model's messages rebuilt from the updates. ``/rewind`` appends a ``rewind_marker`` to the log and
what follows is the new timeline, so the conversation is replayed from the whole file (the prompts
a rewind abandoned are not indexed), and a folder is a ``whole`` unit whose signature covers the
log and the summary. A folder holding only ``chat_history.jsonl`` (older builds, or one whose log
is gone) is read from that, with the session's times: its rows have none.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import KindName, Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank, strip_leading_blocks
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

UPDATES = "updates.jsonl"
HISTORY = "chat_history.jsonl"
SUMMARY = "summary.json"
CWD_FILE = ".cwd"  # in a group folder whose name had to be shortened: the real working directory
RESUME = "grok --resume"
SUMMARY_MAX_BYTES = 4 * 1024 * 1024
# What a call's result is once its update reaches one of these.
TERMINAL_STATUSES = frozenset({"completed", "failed"})
# Updates that carry no message (xAI extensions and ACP's UI state); families by prefix.
BOOKKEEPING_UPDATES = frozenset({
    "turn_completed", "plan", "available_commands_update", "current_mode_update", "session_summary_generated",
    "subagent_spawned", "subagent_progress", "subagent_finished", "model_changed", "task_completed",
    "compaction_checkpoint", "config_option_update", "session_info_update",
})
BOOKKEEPING_PREFIXES = ("auto_compact_", "hook", "status")
# Context blocks Grok puts around what the user typed (chat_history rows).
CONTEXT_TAGS = ("user_info", "git_status", "system-reminder", "agent_skills", "mcp_servers")
# chat_history user rows Grok wrote itself; an interjection is the user typing during a turn.
SPOKEN_REASONS = frozenset({"interjection"})
CHUNKS: dict[str, tuple[RoleName, KindName, str]] = {  # update -> (role, kind, what joins two chunks)
    "user_message_chunk": ("user", "text", "\n"),
    "agent_message_chunk": ("assistant", "text", ""),
    "agent_thought_chunk": ("assistant", "thinking", ""),
}


def _content_text(content: object) -> str:
    """An ACP content block's text, or the text of a list of them (``{type: content, content}``
    wrappers, as tool call updates carry them, included)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_content_text(c) for c in content) if t)
    block = as_object(content)
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    if block.get("type") == "content":
        return _content_text(block.get("content"))
    if block.get("type") == "diff" and isinstance(block.get("path"), str):
        return f"{block['path']}\n{block.get('newText') or ''}".rstrip()
    return ""


# --- the update log -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Replay:
    """The conversation as the log's updates build it, the current timeline only."""

    skips: dict[str, int]
    messages: list[Message] = field(default_factory=list)
    turns: list[tuple[int, int]] = field(default_factory=list)  # (prompt index, first message) per prompt
    calls: dict[str, int] = field(default_factory=dict)  # tool call id -> its message
    bare: set[str] = field(default_factory=set)  # calls announced before their input was known
    results: dict[str, int] = field(default_factory=dict)  # tool call id -> its result's message
    stream: tuple[str, object] | None = None  # the chunk kind and id the last message is still receiving
    times: list[int] = field(default_factory=list)

    def update(self, obj: dict[str, Any]) -> None:
        params = as_object(obj.get("params"))
        update = params.get("update") if "update" in params else obj.get("update")
        if type(update) is not dict or not isinstance(update.get("sessionUpdate"), str):
            count_skip(self.skips, "malformed-record")
            return
        meta = {**as_object(params.get("_meta")), **as_object(update.get("_meta"))}
        ts = to_epoch_ms(meta.get("agentTimestampMs")) or to_epoch_ms(obj.get("timestamp"))
        if ts is not None:
            self.times.append(ts)
        kind = update["sessionUpdate"]
        if kind in CHUNKS:
            self._chunk(kind, update, meta, ts)
        elif kind == "tool_call":
            self._call(update, ts)
        elif kind == "tool_call_update":
            self._call_update(update, ts)
        elif kind == "rewind_marker":
            self._rewind(update.get("target_prompt_index", update.get("targetPromptIndex")))
        elif kind not in BOOKKEEPING_UPDATES and not kind.startswith(BOOKKEEPING_PREFIXES):
            count_skip(self.skips, "unknown_update", kind)

    def _chunk(self, kind: str, update: dict[str, Any], meta: dict[str, Any], ts: int | None) -> None:
        if meta.get("hostTurn") is True:  # a turn the host ran on its own, not the conversation
            count_skip(self.skips, "host-turn")
            self.stream = None
            return
        text = _content_text(update.get("content"))
        if not text:
            count_skip(self.skips, "unparsed_content")
            return
        role, msg_kind, joiner = CHUNKS[kind]
        key = meta.get("promptIndex") if role == "user" else meta.get("promptId")
        if self.stream == (kind, key) and self.messages:
            self.messages[-1].text += joiner + text
            return
        if role == "user":
            index = key if isinstance(key, int) and not isinstance(key, bool) else len(self.turns)
            self.turns.append((index, len(self.messages)))
        self.messages.append(Message(role, msg_kind, text, ts))
        self.stream = (kind, key)

    def _call(self, update: dict[str, Any], ts: int | None) -> None:
        self.stream = None
        call_id = nonblank(update.get("toolCallId"))
        if call_id is not None and call_id in self.calls:
            count_skip(self.skips, "duplicate_tool_call")
            self._call_update(update, ts)
            return
        if call_id is not None:
            self.calls[call_id] = len(self.messages)
            if update.get("rawInput") in (None, {}):
                self.bare.add(call_id)
        self.messages.append(Message("assistant", "tool_call", self._call_text(update), ts))
        if nonblank(update.get("status")) in TERMINAL_STATUSES:
            self._call_update(update, ts)

    @staticmethod
    def _call_text(update: dict[str, Any]) -> str:
        name = first_line_title(nonblank(update.get("title")) or "", 120) or nonblank(update.get("kind")) or "tool"
        raw = update.get("rawInput")
        return name if raw is None or raw == {} else f"{name} {compact_json(raw)}"

    def _call_update(self, update: dict[str, Any], ts: int | None) -> None:
        call_id = nonblank(update.get("toolCallId"))
        if call_id in self.bare and update.get("rawInput") not in (None, {}):
            # The input streamed in after the call was announced: the call gets it.
            self.bare.discard(call_id)
            at = self.calls[call_id]
            self.messages[at].text = self._call_text({**update, "title": update.get("title") or self.messages[at].text})
        if nonblank(update.get("status")) not in TERMINAL_STATUSES:
            return
        if call_id is not None and call_id in self.results:
            return
        self.stream = None
        text = _content_text(update.get("content"))
        if not text.strip() and update.get("rawOutput") is not None:
            raw = update["rawOutput"]
            text = raw if isinstance(raw, str) else compact_json(raw)
        if not text.strip() and update.get("status") == "failed":
            text = "[failed]"
        if text.strip():
            if call_id is not None:
                self.results[call_id] = len(self.messages)
            self.messages.append(Message("tool", "tool_result", text, ts))

    def _rewind(self, target: object) -> None:
        """Back to before prompt ``target``: it and every later prompt leave the timeline."""
        self.stream = None
        if not isinstance(target, int) or isinstance(target, bool) or target < 0:
            count_skip(self.skips, "malformed-record")
            return
        cut = next((pos for index, pos in self.turns if index >= target), None)
        if cut is None:
            return
        count_skip(self.skips, "rewound", n=len(self.messages) - cut)
        del self.messages[cut:]
        self.turns = [t for t in self.turns if t[1] < cut]
        self.calls = {k: v for k, v in self.calls.items() if v < cut}
        self.bare &= set(self.calls)
        self.results = {k: v for k, v in self.results.items() if v < cut}


# --- the derived chat history (a folder without a log) ------------------------------------------------
def history_messages(rows: list[dict[str, Any]], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """``chat_history.jsonl`` rows: ``chat_format_version`` 1 (typed) and 0 (OpenAI-style)."""
    out: list[Message] = []
    for row in rows:
        kind = row.get("type") or {"tool": "tool_result"}.get(str(row.get("role")), row.get("role"))
        if kind == "user":
            reason = nonblank(row.get("synthetic_reason"))
            text = strip_leading_blocks(_content_text(row.get("content")), CONTEXT_TAGS)
            if (reason is not None and reason not in SPOKEN_REASONS) or not text.strip():
                count_skip(skips, "injected-context")
            else:
                out.append(Message("user", "text", text, ts))
        elif kind == "reasoning":
            summary = row.get("summary")
            parts = [as_object(p).get("text") for p in summary] if isinstance(summary, list) else []
            text = "\n\n".join(p for p in parts if isinstance(p, str) and p.strip())
            text = text or _content_text(row.get("content"))
            if text.strip():
                out.append(Message("assistant", "thinking", text, ts))
        elif kind == "assistant":
            out += _history_assistant(row, ts)
        elif kind == "tool_result":
            text = _content_text(row.get("content"))
            if text.strip():
                out.append(Message("tool", "tool_result", text, ts))
        elif kind == "backend_tool_call":
            call = as_object(row.get("kind"))
            name = nonblank(call.get("tool_type")) or "backend_tool"
            action = call.get("action")
            out.append(Message("assistant", "tool_call", name if action is None else f"{name} {compact_json(action)}",
                               ts))
        elif kind != "system":
            count_skip(skips, "unknown_row", kind if isinstance(kind, str) else "(none)")
    return out


def _history_assistant(row: dict[str, Any], ts: int | None) -> list[Message]:
    out: list[Message] = []
    thinking = nonblank(row.get("reasoning_content"))
    if thinking:
        out.append(Message("assistant", "thinking", thinking, ts))
    text = _content_text(row.get("content"))
    if text.strip():
        out.append(Message("assistant", "text", text, ts))
    calls = row.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        call = as_object(call)
        function = as_object(call.get("function"))
        name = nonblank(call.get("name")) or nonblank(function.get("name")) or "tool"
        args = call.get("arguments", function.get("arguments"))
        if isinstance(args, str):
            parsed = loads_line(args.encode("utf-8", "surrogatepass")) if args.strip() else None
            args = parsed if parsed is not None else args
        text = name if args in (None, "", {}) else f"{name} {args if isinstance(args, str) else compact_json(args)}"
        out.append(Message("assistant", "tool_call", text, ts))
    return out


# --- one session folder -------------------------------------------------------------------------------
Stamps = tuple[tuple[str, int, int, int], ...]


def session_stamps(folder: str) -> Stamps | None:
    """(file, size, mtime, inode) of what a read of the folder uses: the log (else the chat
    history) and the summary; None when the folder holds neither log."""
    out: list[tuple[str, int, int, int]] = []
    for name in (UPDATES, HISTORY, SUMMARY):
        if name == HISTORY and out:
            continue  # the log is there: the history is rebuilt from it
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
    if not out or out[0][0] == SUMMARY:
        return None
    return tuple(out)


def _summary(folder: str, skips: dict[str, int]) -> dict[str, Any]:
    path = os.path.join(folder, SUMMARY)
    try:
        with open(path, "rb") as fh:
            data = fh.read(SUMMARY_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UnitUnreadable(f"cannot read {SUMMARY}: {exc.strerror or exc}") from exc
    doc = loads_line(data) if len(data) <= SUMMARY_MAX_BYTES else None
    if type(doc) is not dict:
        count_skip(skips, "unreadable-summary")
        return {}
    return doc


def _cwd(folder: str, summary: dict[str, Any]) -> str | None:
    """``summary.json``'s ``info.cwd``, else the group's ``.cwd`` file, else its decoded name."""
    cwd = nonblank(as_object(summary.get("info")).get("cwd"))
    if cwd and os.path.isabs(cwd):
        return cwd
    group = os.path.dirname(folder)
    try:
        with open(os.path.join(group, CWD_FILE), encoding="utf-8", errors="replace") as fh:
            cwd = fh.read(8192).strip()
    except OSError:
        cwd = unquote(os.path.basename(group))
    return cwd if cwd and os.path.isabs(cwd) else None


def read_unit(found: Found) -> Unit:
    """One Grok Build session folder, read whole (sources.Unit)."""
    folder = found.path
    before = session_stamps(folder)
    if before is None:
        if not os.path.isdir(folder):
            raise UnitChanged("the session folder is gone")
        raise UnitUnreadable(f"the session folder holds neither {UPDATES} nor {HISTORY}")
    skips: dict[str, int] = {}
    summary = _summary(folder, skips)
    created = to_epoch_ms(summary.get("created_at"))
    last = max((t for t in (to_epoch_ms(summary.get(k)) for k in ("updated_at", "last_active_at")) if t is not None),
               default=None)
    log = before[0][0]
    fb = read_settled(os.path.join(folder, log))
    rows = jsonl_records(fb, skips)
    times: list[int] = []
    if log == UPDATES:
        replay = Replay(skips)
        for row in rows:
            replay.update(row)
        messages, times = replay.messages, replay.times
    else:
        messages = history_messages(rows, created or last, skips)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
    if session_stamps(folder) != before:
        raise UnitChanged("the session was written while being read")
    times += [t for t in (created, last) if t is not None]
    sid = nonblank(as_object(summary.get("info")).get("id")) or os.path.basename(folder)
    cwd = _cwd(folder, summary)
    title = next((t for t in (first_line_title(nonblank(summary.get(k)) or "", 120)
                              for k in ("generated_title", "session_summary")) if t), None)
    if title is None:
        title = next((first_line_title(m.text) for m in messages if m.role == "user"), None)
    resume = f"{RESUME} {shlex.quote(sid)}"
    if cwd:
        resume = f"cd {shlex.quote(cwd)} && {resume}"
    session = SessionInfo(
        agent="grok", session_id=sid, title=title, cwd=cwd, branch=nonblank(summary.get("head_branch")),
        started_at=min(times) if times else None, updated_at=max(times) if times else None,
        message_count=len(messages), resume_command=resume,
        parent_session_id=nonblank(summary.get("parent_session_id")))
    return Unit(session, messages, signature(before), skips)


# --- discovery and roots (docs/formats.md §21) ---------------------------------------------------------
def _folders(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted((e for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=True)),
                      key=lambda e: e.name)


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every session folder (``<group>/<id>/`` holding a log) under the root. The log is appended in
    place (its folder's mtime does not move), so every pass stats each session's files: a few stats
    per session, nothing read."""
    if check_root(root, problems) is None:
        return
    try:
        groups = _folders(root.path)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list root: {exc.strerror or exc}"))
        return
    for group in groups:
        try:
            sessions = _folders(group.path)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot list {group.path}: {exc.strerror or exc}"))
            continue
        for entry in sessions:
            stamps = session_stamps(entry.path)
            if stamps is None:
                continue
            try:
                st = entry.stat(follow_symlinks=True)
            except OSError:
                continue
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, stamps[0][1], signature(stamps), "whole")


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$GROK_HOME/sessions`` (``GROK_HOME`` only when absolute), else ``~/.grok/sessions``."""
    value = env.get("GROK_HOME", "")
    base = Path(value) if value and os.path.isabs(value) else home / ".grok"
    return [Root("grok", str(base / "sessions"))]


SPEC = AgentSpec(
    name="grok", label="Grok Build", default_roots=default_roots, discover=discover, read_unit=read_unit,
    expects="<url-encoded cwd>/<session-id>/updates.jsonl (+ summary.json; or chat_history.jsonl)",
    shaped=lambda name: name in (UPDATES, HISTORY))
