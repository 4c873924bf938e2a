"""Incremental parser for Codex CLI rollouts (docs/formats.md §2).

Every line is ``{"timestamp", "type", "payload"}``. The conversation is written twice, once as
model-visible ``response_item`` records and once as UI ``event_msg`` records; only one stream is
indexed. Early Rust builds wrote bare records without the envelope; those are read too.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import orjson

from aivault import log
from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, keep_recent, stored_as
from aivault.scanner.parsers.jsonutil import compact_json, first_text, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, opens_with, sized_hash, text_crc
from aivault.scanner.sources import Mode, Root, db_change_stamp, open_sqlite
from aivault.scanner.spec import AgentSpec, file_discovery

_log = log.get("scanner.codex")

# Event-stream messages remembered so that the response_item copy of the same text, arriving
# later, is not indexed twice. One turn rarely holds more than a few of them.
RECENT_EVENT_MESSAGES_MAX = 64
# session_index.jsonl is read whole; a bigger one is read up to here (the last entries are lost).
SESSION_INDEX_MAX_BYTES = 64 << 20
# Tool outputs are sometimes wrapped in JSON several levels deep; stop unwrapping after this.
OUTPUT_UNWRAP_DEPTH_MAX = 4

# Context Codex sends as "user" messages; `<user_shell_command>` is real input and stays.
INJECTED_PREFIXES: tuple[str, ...] = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<permissions instructions>",
    "<recommended_plugins>",  # 2026 envelopes (docs/formats.md §2)
    "<codex_internal_context",
)
RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        # The generic call/result pair of agent-sessions' 0.106 and schema_drift fixtures.
        "tool_call",
        "tool_result",
        "function_result",
    }
)
# Items and records that are state, not conversation (docs/formats.md §2); any other unknown type is
# counted by name in ParseStats.extra so that format drift shows up instead of vanishing.
BOOKKEEPING_ITEM_TYPES = frozenset({"compaction", "ghost_snapshot"})
BOOKKEEPING_RECORD_TYPES = frozenset({"world_state", "inter_agent_communication"})
_TOOL_RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "tool_result", "function_result"})
_EVENT_MESSAGE_TYPES = frozenset({"user_message", "agent_message", "agent_reasoning"})
# A replayed parent's turns are recognised by their ids: a child-owned turn id is a UUIDv7 whose
# time is at or after the child's own start (this much earlier still counts, for clock skew).
REPLAY_CLOCK_SKEW_MS = 2000
_UUID7 = re.compile(r"^([0-9a-fA-F]{8})-([0-9a-fA-F]{4})-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$")

_ROLLOUT_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

# Stream-dedupe keys: which of the duplicated message kinds a text belongs to.
_USER, _ASSISTANT, _THINKING = 0, 1, 2


def read_session_index(data: bytes) -> dict[str, str]:
    """Thread names from a Codex ``session_index.jsonl``: id → thread_name, the last line per id wins.

    A later line whose thread_name is empty or null clears the earlier one; malformed lines
    (including lines without a thread_name) are ignored.
    """
    names: dict[str, str] = {}
    for line in data.splitlines():
        obj = loads_line(line)
        if type(obj) is not dict:
            continue
        thread_id = obj.get("id")
        if not isinstance(thread_id, str) or not thread_id or "thread_name" not in obj:
            continue
        name = obj["thread_name"]
        if not (name is None or isinstance(name, str)):
            continue
        name = name.strip() if name else ""
        if name:
            names[thread_id] = name
        else:
            names.pop(thread_id, None)
    return names


def thread_name_sources(session_index: str) -> list[tuple[str, object, Callable[[], dict[str, str]]]]:
    """Where Codex keeps thread names next to ``session_index`` ($CODEX_HOME/session_index.jsonl):
    that file, and the ``threads`` tables of ``state_<N>.sqlite`` / ``thread_history_*.sqlite``
    (where newer Codex writes them instead, docs/formats.md §14). Each is (path, a change stamp,
    a reader); the database names win over the file (they are newer)."""
    home = os.path.dirname(session_index)
    out: list[tuple[str, object, Callable[[], dict[str, str]]]] = []
    try:
        st = os.stat(session_index)
    except OSError:
        pass
    else:
        def read_index(path: str = session_index) -> dict[str, str]:
            with open(path, "rb") as fh:
                return read_session_index(fh.read(SESSION_INDEX_MAX_BYTES))

        out.append((session_index, (st.st_size, st.st_mtime_ns), read_index))
    for folder in (home, os.path.join(home, "sqlite")):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".sqlite") and (name.startswith("state_") or name.startswith("thread_history_")):
                db = os.path.join(folder, name)
                out.append((db, db_change_stamp(db), functools.partial(read_thread_names, db)))
    return out


def read_thread_names(db: str) -> dict[str, str]:
    """id -> name from a Codex state database's ``threads`` table (``name``, formerly ``title``)."""
    con = open_sqlite(db)
    try:
        columns = {row[1] for row in con.execute("PRAGMA table_info(threads)").fetchall()}
        column = "name" if "name" in columns else "title" if "title" in columns else None
        if column is None or "id" not in columns:
            return {}
        rows = con.execute(f"SELECT id, {column} FROM threads WHERE {column} IS NOT NULL").fetchall()
    finally:
        con.close()
    return {str(i): str(n).strip() for i, n in rows if isinstance(i, str) and isinstance(n, str) and n.strip()}


def _text_hash(code: int, text: str) -> int:
    """A message of the event stream, told apart by its kind (user, assistant, thinking) as well."""
    return sized_hash(text) | (code << 62)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for item in content:
        if type(item) is dict:
            text = item.get("text")
            # input_text / output_text (and "text" in early builds); images carry no text.
            if isinstance(text, str) and item.get("type") != "input_image":
                parts.append(text)
        elif isinstance(item, str):
            parts.append(item)
    return "\n".join(parts)


def _output_text(output: object, depth: int = 0) -> str:
    if isinstance(output, str):
        # Older builds stored {"output": "...", "metadata": {...}} as a JSON string.
        if output.startswith('{"output"') and depth < OUTPUT_UNWRAP_DEPTH_MAX:
            try:
                decoded = orjson.loads(output)
            except orjson.JSONDecodeError:
                return output
            if type(decoded) is dict and "output" in decoded:
                return _output_text(decoded["output"], depth + 1)
        return output
    if output is None:
        return ""
    if isinstance(output, list):
        return _content_text(output)
    if type(output) is dict and depth < OUTPUT_UNWRAP_DEPTH_MAX:
        text = output.get("text")
        if isinstance(text, str):
            return text
        for key in ("output", "content"):
            if key in output:
                return _output_text(output[key], depth + 1)
        # A process result ({stdout, stderr, exitCode}): the streams are what gets searched;
        # JSON would turn their newlines into escapes.
        streams = [output.get(key) for key in ("stdout", "stderr")]
        joined = "\n".join(s for s in streams if isinstance(s, str) and s)
        if joined:
            return joined
    return compact_json(output)


def _arguments_text(arguments: object) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        if not arguments:
            return ""
        try:
            decoded = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
        return compact_json(decoded)
    return compact_json(arguments)


def _tool_name(payload: dict[str, Any], default: str) -> str:
    name = payload.get("name")
    if isinstance(name, str) and name:
        return name
    function = payload.get("function")
    if type(function) is dict and isinstance(function.get("name"), str) and function["name"]:
        return str(function["name"])
    return default


@dataclass(slots=True)
class CodexState(ParserState):
    """What a Codex parser remembers between passes (stored with every batch)."""

    # 2: files indexed by version 1 are read again, to pick up the record shapes it dropped.
    VERSION: ClassVar[int] = 2
    AGENT: ClassVar[str] = "codex"

    meta_seen: bool = stored_as("meta", False)
    sid: str | None = stored_as("sid")
    parent: str | None = stored_as("parent")
    meta_cwd: str | None = stored_as("meta_cwd")
    turn_cwd: str | None = stored_as("turn_cwd")
    branch: str | None = stored_as("branch")
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    thread_name: str | None = stored_as("thread_name")
    first_user: str | None = stored_as("first_user")
    # A response_item message/reasoning was seen: events are ignored.
    items_seen: bool = stored_as("items", False)
    recent: list[int] = stored_as("recent", factory=list)  # _text_hash of event-stream messages not yet matched
    # A fork or sub-agent rollout starts by replaying its parent (after a copy of the parent's
    # session_meta); those turns are the parent's, already indexed there.
    child_start: int | None = stored_as("child_start")  # set for a fork/sub-agent: its own start, epoch ms
    replaying: bool = stored_as("replaying", False)
    # Hashes of recent shell commands (CommandExecution dedupe).
    commands: list[int] = stored_as("commands", factory=list)
    # The last reasoning item carried no readable text (only encrypted content): the raw reasoning
    # event that follows it (agent_reasoning_raw_content) is its only readable copy.
    raw_wanted: bool = stored_as("raw_wanted", False)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class CodexParser(LineParser[CodexState]):
    """Turns the lines of one Codex rollout into Messages (see scanner.model.Parser).

    Forks of Codex that write its rollouts (TraeX, scanner/parsers/traex.py) subclass it with their
    own wire name and resume command.
    """

    agent = "codex"
    fallback_time_key = "created_at"  # the envelope-less records of schema_drift.jsonl
    resume_program: ClassVar[str] = "codex resume"
    # Whether the resume command starts with a `cd` into the session's folder (Codex's own resume
    # finds the folder itself; a fork whose behaviour is unverified is resumed from where it ran).
    resume_in_cwd: ClassVar[bool] = False

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        stem = file_stem(path)
        match = _ROLLOUT_UUID.search(stem)
        self._file_id = match.group(0) if match else stem

        self._resume_key: tuple[str, str | None] = ("", None)
        self._resume_cache = ""
        self.st = CodexState.load(state)

    # -- session ----------------------------------------------------------------------------

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        session_id = self.st.sid or self._file_id
        cwd = self.st.turn_cwd or self.st.meta_cwd
        return self._session(session_id, self.st.thread_name or self.st.first_user, cwd, self.st.branch,
                             self._resume_command(session_id, cwd), self.st.parent)

    def _resume_command(self, session_id: str, cwd: str | None) -> str:
        # The scanner reads ``session`` after every line; avoid re-quoting an unchanged id.
        folder = cwd if self.resume_in_cwd else None
        if (session_id, folder) != self._resume_key:
            self._resume_key = (session_id, folder)
            command = f"{self.resume_program} {shlex.quote(session_id)}"
            self._resume_cache = f"cd {shlex.quote(folder)} && {command}" if folder else command
        return self._resume_cache

    # -- lines ------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        out = self._record_messages(obj, ms)
        if self.st.replaying and out:
            # The parent's turns, copied into this fork: the parent's own file holds them.
            extra = self.stats.extra
            extra["replayed_parent"] = extra.get("replayed_parent", 0) + len(out)
            return []
        return out

    def _turn_started(self, turn_id: object, ms: int | None) -> None:
        """A record carrying a turn id: the first child-owned one ends a replayed parent prefix."""
        if not self.st.replaying or self.st.child_start is None:
            return
        owned: bool
        m = _UUID7.match(turn_id) if isinstance(turn_id, str) else None
        if m is not None:
            owned = int(m.group(1) + m.group(2), 16) >= self.st.child_start - REPLAY_CLOCK_SKEW_MS
        else:
            owned = ms is not None and ms >= self.st.child_start
        if owned:
            self.st.replaying = False

    def _record_messages(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        rtype = obj.get("type")
        payload = obj.get("payload")

        out: list[Message] | None
        if type(payload) is dict and isinstance(rtype, str):
            if rtype == "response_item":
                out = self._response_item(payload, ms)
            elif rtype == "event_msg":
                out = self._event(payload, ms)
            elif rtype == "session_meta":
                self._session_meta(payload, ms)
                out = []
            elif rtype == "turn_context":
                self._turn_started(payload.get("turn_id"), ms)
                cwd = payload.get("cwd")
                if isinstance(cwd, str) and cwd and not self.st.replaying:
                    self.st.turn_cwd = cwd
                out = []
            elif rtype == "compacted":
                summary = payload.get("message")
                if isinstance(summary, str) and summary and not summary.isspace():
                    out = [Message("system", "text", summary, ms)]
                else:
                    out = []
            else:
                out = []
                if rtype not in BOOKKEEPING_RECORD_TYPES:
                    count_skip(self.stats.extra, "unknown_record", rtype)
        elif "record_type" in obj:
            out = []
        elif isinstance(rtype, str) and rtype in RESPONSE_ITEM_TYPES:
            out = self._response_item(obj, ms)
        elif rtype is None and isinstance(obj.get("role"), str):
            # A bare chat message, {role, content} or {role, message} (schema_drift.jsonl).
            text = obj["content"] if "content" in obj else obj.get("message")
            out = self._response_item({"type": "message", "role": obj["role"], "content": text}, ms)
        elif rtype is None and not self.st.meta_seen and isinstance(obj.get("id"), str) and "timestamp" in obj:
            # The bare SessionMeta header of early Rust rollouts.
            self._session_meta(obj, ms)
            out = []
        else:
            out = None
        return out

    def _session_meta(self, payload: dict[str, Any], ms: int | None) -> None:
        # Forks and sub-agent rollouts repeat other threads' meta records later in the file;
        # the first one is this file's own. A later one in a fork starts the replayed parent.
        if self.st.meta_seen:
            other = payload.get("id") or payload.get("session_id")
            if self.st.child_start is not None and isinstance(other, str) and other != self.st.sid:
                self.st.replaying = True
            return
        self.st.meta_seen = True
        self.st.sid = first_text(payload, ("id", "session_id")) or self.st.sid
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.st.meta_cwd = cwd
        git = payload.get("git")
        if type(git) is dict:
            branch = git.get("branch")
            if isinstance(branch, str) and branch:
                self.st.branch = branch
        self.st.parent = first_text(payload, ("forked_from_id", "parent_thread_id")) or self.st.parent
        source = payload.get("source")
        spawn = source.get("subagent") if type(source) is dict else None
        spawn = spawn.get("thread_spawn") if type(spawn) is dict else None
        if type(spawn) is dict and isinstance(spawn.get("parent_thread_id"), str) and spawn["parent_thread_id"]:
            self.st.parent = spawn["parent_thread_id"]
        if self.st.parent is not None or payload.get("thread_source") == "subagent":
            started = to_epoch_ms(payload.get("timestamp"))
            self.st.child_start = started if started is not None else ms

    def _note_user_text(self, text: str) -> None:
        if self.st.first_user is None and not self.st.replaying:
            self.st.first_user = first_line_title(text)

    def _seen_in_events(self, code: int, text: str) -> bool:
        """Consume the event-stream copy of ``text`` if there is one (stream dedupe)."""
        if not self.st.recent:
            return False
        digest = _text_hash(code, text)
        if digest in self.st.recent:
            self.st.recent.remove(digest)
            return True
        return False

    def _count_duplicate(self) -> None:
        extra = self.stats.extra
        extra["duplicate_stream"] = extra.get("duplicate_stream", 0) + 1

    def _response_item(self, payload: dict[str, Any], ms: int | None) -> list[Message] | None:
        ptype = payload.get("type")
        self.st.raw_wanted = False  # a raw reasoning event belongs to the item right before it
        if ptype == "message":
            self.st.items_seen = True
            role = payload.get("role")
            text = _content_text(payload.get("content"))
            if not text or text.isspace():
                return []
            if role == "user":
                if opens_with(text, INJECTED_PREFIXES):
                    return []
                if self._seen_in_events(_USER, text):
                    self._count_duplicate()
                    return []
                self._note_user_text(text)
                return [Message("user", "text", text, ms)]
            if role == "assistant":
                if self._seen_in_events(_ASSISTANT, text):
                    self._count_duplicate()
                    return []
                return [Message("assistant", "text", text, ms)]
            return []  # developer / system prompts
        if ptype == "reasoning":
            self.st.items_seen = True
            return self._reasoning(payload, ms)
        if ptype == "function_call" or ptype == "tool_call":
            name = _tool_name(payload, "function")
            args = _arguments_text(payload.get("arguments"))
            if args:
                self._note_command(args)
            return [Message("assistant", "tool_call", f"{name} {args}" if args else name, ms)]
        if ptype == "custom_tool_call":
            name = _tool_name(payload, "custom_tool")
            # The input of a custom tool is free text (an apply_patch body), not JSON.
            raw = payload.get("input")
            args = raw if isinstance(raw, str) else _arguments_text(raw)
            return [Message("assistant", "tool_call", f"{name} {args}" if args else name, ms)]
        if ptype == "local_shell_call" or ptype == "web_search_call":
            name = "local_shell" if ptype == "local_shell_call" else "web_search"
            action = payload.get("action")
            args = compact_json(action) if action is not None else ""
            if args:
                self._note_command(args)
            return [Message("assistant", "tool_call", f"{name} {args}" if args else name, ms)]
        if ptype in _TOOL_RESULT_TYPES:
            output = _output_text(payload["output"] if "output" in payload else payload.get("result"))
            return [Message("tool", "tool_result", output, ms)] if output else []
        if ptype not in BOOKKEEPING_ITEM_TYPES:
            count_skip(self.stats.extra, "unknown_item", ptype if isinstance(ptype, str) else "(none)")
        return []

    def _reasoning(self, payload: dict[str, Any], ms: int | None) -> list[Message]:
        summary = payload.get("summary")
        parts = [
            item["text"]
            for item in (summary if isinstance(summary, list) else ())
            if type(item) is dict and isinstance(item.get("text"), str) and item["text"]
        ]
        text = "\n".join(parts)
        if not text or text.isspace():
            # No summary: the raw reasoning text when the item carries it (reasoning_text items),
            # else the raw reasoning event that follows (TraeX writes only that, docs/formats.md §28).
            raw = _content_text(payload.get("content"))
            if raw and not raw.isspace():
                return [Message("assistant", "thinking", raw, ms)]
            self.st.raw_wanted = True
            return []
        if self.st.recent:
            if self._seen_in_events(_THINKING, text):
                self._count_duplicate()
                return []
            # Some builds emit one agent_reasoning event per summary part.
            digests = [_text_hash(_THINKING, part) for part in parts]
            if all(d in self.st.recent for d in digests):
                for d in digests:
                    self.st.recent.remove(d)
                self._count_duplicate()
                return []
        return [Message("assistant", "thinking", text, ms)]

    def _event(self, payload: dict[str, Any], ms: int | None) -> list[Message]:
        etype = payload.get("type")
        if "turn_id" in payload:
            self._turn_started(payload.get("turn_id"), ms)
        if etype == "thread_settings_applied" and self.st.replaying:
            self.st.replaying = False  # the child's own settings: what follows is its work
            return []
        if etype == "item_completed":
            return self._item_completed(payload, ms)
        if etype == "agent_reasoning_raw_content":
            raw = payload.get("text")
            if not self.st.raw_wanted or not isinstance(raw, str) or not raw.strip():
                return []
            self.st.raw_wanted = False
            return [Message("assistant", "thinking", raw, ms)]
        if etype == "thread_name_updated":
            name = payload.get("thread_name")
            if isinstance(name, str) and name.strip():
                self.st.thread_name = name.strip()
            return []
        if etype not in _EVENT_MESSAGE_TYPES or self.st.items_seen:
            return []
        text = payload.get("text" if etype == "agent_reasoning" else "message")
        if not isinstance(text, str) or not text or text.isspace():
            return []
        if etype == "user_message":
            if opens_with(text, INJECTED_PREFIXES):
                return []
            code = _USER
            message = Message("user", "text", text, ms)
            self._note_user_text(text)
        elif etype == "agent_message":
            code = _ASSISTANT
            message = Message("assistant", "text", text, ms)
        else:
            code = _THINKING
            message = Message("assistant", "thinking", text, ms)
        keep_recent(self.st.recent, _text_hash(code, text), RECENT_EVENT_MESSAGES_MAX)
        return [message]

    def _item_completed(self, payload: dict[str, Any], ms: int | None) -> list[Message]:
        """An ``item_completed`` event (0.149+): messages and the commands that really ran.

        User and agent messages repeat the response items (or stand in for the event stream where
        there are none); a CommandExecution is indexed as a tool call with its output unless the
        same command was just indexed from a shell call (in "code mode" the response item holds a
        JS program, and this is the only place the real command appears).
        """
        item = payload.get("item")
        if type(item) is not dict:
            return []
        itype = str(item.get("type") or item.get("item_type") or "").replace("_", "").lower()
        if itype in ("usermessage", "agentmessage"):
            text = _content_text(item.get("content")) or item.get("text") or item.get("message")
            if not isinstance(text, str):
                return []
            kind = "user_message" if itype == "usermessage" else "agent_message"
            return self._event({"type": kind, "message": text}, ms)
        if itype == "commandexecution":
            command = item.get("command")
            if isinstance(command, list):
                command = " ".join(str(c) for c in command)
            if not isinstance(command, str) or not command:
                return []
            digest = text_crc(command)
            if digest in self.st.commands:
                self._count_duplicate()
                return []
            out = [Message("assistant", "tool_call", f"shell {command}", ms)]
            parts = [p for p in (item.get("aggregated_output"), item.get("stdout"), item.get("stderr"),
                                 item.get("output")) if isinstance(p, str) and p]
            code = item.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                parts.append(f"exit code {code}")
            if parts:
                out.append(Message("tool", "tool_result", "\n".join(parts), ms))
            return out
        if itype == "filechange":
            changes = item.get("changes")
            paths = [c.get("path") for c in changes if type(c) is dict and isinstance(c.get("path"), str)] \
                if isinstance(changes, list) else []
            return [Message("assistant", "tool_call", "apply_patch " + compact_json(paths), ms)] if paths else []
        count_skip(self.stats.extra, "unknown_item", itype or "item_completed")
        return []

    def _note_command(self, args: str) -> None:
        """Remember a shell call's command, so its CommandExecution item is not indexed again."""
        try:
            decoded = orjson.loads(args)
        except orjson.JSONDecodeError:
            return
        command = decoded.get("command") if type(decoded) is dict else None
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str) and command:
            keep_recent(self.st.commands, text_crc(command), RECENT_EVENT_MESSAGES_MAX)


# --- where Codex keeps its rollouts (docs/formats.md §2) ---------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$CODEX_HOME/sessions`` and ``$CODEX_HOME/archived_sessions`` (``CODEX_HOME`` defaults to ``~/.codex``)."""
    codex_home = Path(env["CODEX_HOME"]).expanduser().absolute() if env.get("CODEX_HOME") else home / ".codex"
    return [Root("codex", str(codex_home / "sessions")), Root("codex", str(codex_home / "archived_sessions"))]


def side_titles(root: Root, sigs: MutableMapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Thread names (``/rename``) that changed since ``sigs`` last saw their source: the
    ``session_index.jsonl`` and state databases of the Codex home holding ``root`` (its
    ``sessions`` or ``archived_sessions`` folder, or a folder named with ``--root codex=PATH``).
    Both roots of one home share the sources, read once a pass; an unreadable one is logged and
    tried again next pass, the other sources still read (titles then fall back to the first prompt)."""
    index = os.path.join(os.path.dirname(root.path), "session_index.jsonl")
    for source, stamp, read in thread_name_sources(index):
        if sigs.get(source) == stamp:
            continue
        try:
            names = read()
        except Exception as exc:  # an unreadable index or database: titles fall back
            _log.warning("cannot read Codex thread names", path=source, error=str(exc)[:200])
            continue
        sigs[source] = stamp
        yield from names.items()


def _wanted(directory: str, name: str) -> Mode | None:
    if name.endswith(".jsonl.zst") and name.startswith("rollout-"):
        # While Codex compresses an idle rollout both copies exist for a moment: the plain one is
        # the session until it is deleted (then the .zst continues it, see predecessor).
        return None if os.path.exists(os.path.join(directory, name[: -len(".zst")])) else "zst"
    if not name.endswith(".jsonl"):
        return None
    # session_index.jsonl and history.jsonl are indexes, not transcripts.
    return "lines" if name.startswith("rollout-") or name not in ("session_index.jsonl", "history.jsonl") else None


def _predecessor(path: str) -> str | None:
    """A compressed rollout continues the plain rollout it replaced (same bytes once decompressed)."""
    return path[: -len(".zst")] if path.endswith(".jsonl.zst") else None


SPEC = AgentSpec(
    name="codex", label="Codex CLI", default_roots=default_roots, discover=file_discovery(_wanted),
    line_parser=CodexParser, predecessor=_predecessor, side_titles=side_titles,
    expects="YYYY/MM/DD/rollout-<time>-<uuid>.jsonl (or .jsonl.zst, JSONL)",
    shaped=lambda name: name.startswith("rollout-") and (name.endswith(".jsonl") or name.endswith(".jsonl.zst")))
