"""Kiro CLI's JSONL transcripts, read line by line (docs/formats.md §24).

Two shapes, one parser each, chosen by the file's name (``make_parser``):

* **2.x** ``sessions/cli/<uuid>.jsonl``: ``{version, kind, data}`` lines (``Prompt``,
  ``AssistantMessage``, ``ToolResults``) beside a ``<uuid>.json`` sidecar rewritten at every turn
  (id, cwd, title, created/updated times, ``parent_session_id``). Only prompts carry a time
  (``data.meta.timestamp``, seconds); the assistant's and the tools' lines inherit it.
* **V3 engine** ``sessions/<hash>/<session dir>/messages.jsonl``: ``{id, timestamp, payload}``
  lines whose ``payload.type`` says what they are, beside ``session.json`` (low confidence: the
  shape comes from peers' parsers and tests, not from a recording).

The sidecar is read once per read of the transcript (as Copilot's ``workspace.yaml`` is), so a
change of it shows the next time the transcript grows. A fork (2.6 ``/rewind``) is a new file whose
sidecar names its parent, and which starts by replaying the parent's lines up to the chosen prompt
under the same message ids: those leading lines are skipped (``fork-replay``), so the fork holds only
what happened after it.
"""

from __future__ import annotations

import os
import shlex
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, file_stem, stored_as
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank

AGENT = "kiro"
V3_FILE = "messages.jsonl"
V3_SIDECAR = "session.json"
# A sidecar holds the per-turn metadata of the whole session; one far larger than this is not one.
SIDECAR_MAX_BYTES = 64 << 20
# The parent of a fork is read once, for its message ids; a larger one is not de-duplicated against.
PARENT_MAX_BYTES = 256 << 20
RESUME = "kiro-cli chat --resume-id"

# 2.x kinds that carry no conversation (``/clear`` writes ``Clear``).
V2_BOOKKEEPING = frozenset({"Clear"})
# V3 payload types that are bookkeeping: turns, usage, metadata, approvals, compaction markers.
V3_BOOKKEEPING = frozenset({"turn_start", "turn_end", "usage_summary", "session_metadata", "session_event",
                            "pending_interaction", "interaction_resolved", "tombstone"})


@dataclass(slots=True)
class KiroState(ParserState):
    """What a Kiro transcript's parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = AGENT

    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    last: int | None = stored_as("ts")  # the latest prompt's time, inherited by the lines after it
    first_user: str | None = stored_as("first_user")
    # The sidecar's cwd and parent as last read: a sidecar caught mid-rewrite does not lose them.
    cwd: str | None = stored_as("cwd")
    parent: str | None = stored_as("parent")
    prefix_done: bool = stored_as("prefix_done", False)  # past a fork's replayed parent lines
    stats: ParseStats = stored_as("stats", factory=ParseStats)


@dataclass(frozen=True, slots=True)
class Sidecar:
    """The metadata file beside a transcript (``<uuid>.json`` or ``session.json``)."""

    session_id: str | None = None
    cwd: str | None = None
    title: str | None = None
    created: int | None = None
    updated: int | None = None
    parent: str | None = None


def read_json_object(path: str, limit: int) -> dict[str, Any]:
    """The JSON object in ``path``, or an empty one when it is missing, too large or not an object."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return {}
    if len(data) > limit:
        return {}
    return as_object(loads_line(data))


def _first_path(value: object) -> str | None:
    if isinstance(value, list):
        return next((nonblank(v) for v in value if nonblank(v)), None)
    return None


def v2_sidecar(path: str) -> Sidecar:
    """``<uuid>.json`` beside ``<uuid>.jsonl`` (2.x)."""
    doc = read_json_object(path[: -len(".jsonl")] + ".json", SIDECAR_MAX_BYTES)
    return Sidecar(nonblank(doc.get("session_id")), nonblank(doc.get("cwd")), nonblank(doc.get("title")),
                   to_epoch_ms(doc.get("created_at")), to_epoch_ms(doc.get("updated_at")),
                   nonblank(doc.get("parent_session_id")))


def v3_sidecar(path: str) -> Sidecar:
    """``session.json`` beside ``messages.jsonl`` (V3 engine)."""
    doc = read_json_object(os.path.join(os.path.dirname(path), V3_SIDECAR), SIDECAR_MAX_BYTES)
    return Sidecar(nonblank(doc.get("id")), _first_path(doc.get("workspacePaths")) or _first_path(doc.get("rootPaths")),
                   nonblank(doc.get("title")), to_epoch_ms(doc.get("createdAt")),
                   to_epoch_ms(doc.get("lastModifiedAt")), nonblank(doc.get("parentSessionId")))


def line_ids(path: str, id_of: Any) -> frozenset[str]:
    """The message ids of a transcript's lines (``id_of(obj)``); empty when it cannot be read."""
    try:
        if os.path.getsize(path) > PARENT_MAX_BYTES:
            return frozenset()
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError:
        return frozenset()
    ids = (id_of(obj) for obj in map(loads_line, lines) if isinstance(obj, dict))
    return frozenset(i for i in ids if isinstance(i, str) and i)


def resume_command(session_id: str, cwd: str | None) -> str:
    """``kiro-cli chat --resume-id <id>`` (2.5.1+; it works from any folder, so the ``cd`` only restores
    the session's own one)."""
    command = f"{RESUME} {shlex.quote(session_id)}"
    return f"cd {shlex.quote(cwd)} && {command}" if cwd else command


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


class _KiroParser(LineParser[KiroState]):
    """What the two shapes share: the sidecar, the fork prefix, the session record."""

    agent = AGENT
    sidecar: Sidecar
    file_id: str
    parent_file: str | None = None

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self.st = KiroState.load(state)
        self._load_sidecar()
        self.st.cwd = self.sidecar.cwd or self.st.cwd
        self.st.parent = self.sidecar.parent or self.st.parent
        self._parent_ids: frozenset[str] = frozenset()
        if not self.st.prefix_done and self.sidecar.parent and self.parent_file:
            self._parent_ids = line_ids(self.parent_file, self.message_id)

    @abstractmethod
    def _load_sidecar(self) -> None:
        """Set ``file_id``, ``sidecar`` and, for a fork, ``parent_file``."""

    @staticmethod
    @abstractmethod
    def message_id(obj: dict[str, Any]) -> object:
        """The id a fork's replayed line shares with its parent's."""

    @property
    def session(self) -> SessionInfo:
        side, st = self.sidecar, self.st
        session_id = side.session_id or self.file_id
        title = first_line_title(side.title) if side.title else None
        return SessionInfo(agent=AGENT, session_id=session_id, title=title or st.first_user, cwd=st.cwd,
                           started_at=_earliest(side.created, st.started), updated_at=_latest(side.updated, st.updated),
                           message_count=st.count, resume_command=resume_command(session_id, st.cwd),
                           parent_session_id=st.parent)

    def _replayed(self, obj: dict[str, Any]) -> bool:
        """True for a leading line of a fork that repeats its parent's (same message id)."""
        if self.st.prefix_done:
            return False
        mid = self.message_id(obj)
        if isinstance(mid, str) and mid in self._parent_ids:
            count_skip(self.stats.extra, "fork-replay")
            return True
        self.st.prefix_done = True
        return False

    def _user(self, text: str, ms: int | None) -> list[Message]:
        if not text.strip():
            return []
        if self.st.first_user is None:
            self.st.first_user = first_line_title(text)
        return [Message("user", "text", text, ms)]


def _tool_call(name: object, args: object, ms: int | None) -> Message:
    tool = name if isinstance(name, str) and name else "tool"
    return Message("assistant", "tool_call", f"{tool} {compact_json(args)}" if args is not None else tool, ms)


# --- 2.x: {version, kind, data} --------------------------------------------------------------------
def _result_item(item: object) -> str:
    """One item of a 2.x tool result: shell output as its stdout and stderr, other JSON compact, text as is."""
    if not isinstance(item, dict):
        return ""
    data = item.get("data")
    if item.get("kind") == "text" and isinstance(data, str):
        return data
    if isinstance(data, dict) and ("stdout" in data or "stderr" in data):
        parts = [p for p in (data.get("stdout"), data.get("stderr")) if isinstance(p, str) and p.strip()]
        status = data.get("exit_status")
        if isinstance(status, str) and status.strip() and not status.rstrip().endswith(" 0"):
            parts.insert(0, f"[{status.strip()}]")
        return "\n".join(parts)
    return compact_json(data) if data is not None else ""


class KiroParser(_KiroParser):
    """A 2.x ``sessions/cli/<uuid>.jsonl`` (see the module docstring)."""

    def _load_sidecar(self) -> None:
        self.file_id = file_stem(self.path)
        self.sidecar = v2_sidecar(self.path)
        if self.sidecar.parent:
            self.parent_file = os.path.join(os.path.dirname(self.path), self.sidecar.parent + ".jsonl")

    @staticmethod
    def message_id(obj: dict[str, Any]) -> object:
        data = obj.get("data")
        return data.get("message_id") if isinstance(data, dict) else None

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        kind, data = obj.get("kind"), obj.get("data")
        if not isinstance(kind, str):
            return None
        if not isinstance(data, dict):
            return [] if kind in V2_BOOKKEEPING else None
        if self._replayed(obj):
            return []
        content = data.get("content")
        blocks = content if isinstance(content, list) else []
        if kind == "Prompt":
            return self._prompt(data, blocks)
        if kind == "AssistantMessage":
            return self._assistant(blocks)
        if kind == "ToolResults":
            return self._results(blocks)
        if kind not in V2_BOOKKEEPING:
            count_skip(self.stats.extra, "unknown_record", kind)
        return []

    def _prompt(self, data: dict[str, Any], blocks: list[Any]) -> list[Message]:
        ts = to_epoch_ms(as_object(data.get("meta")).get("timestamp"))
        if ts is not None:
            st = self.st
            st.last = ts
            st.started, st.updated = _earliest(st.started, ts), _latest(st.updated, ts)
        out: list[Message] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("kind") == "text" and isinstance(block.get("data"), str):
                out += self._user(block["data"], self.st.last)
            else:
                self._other_block(block)
        return out

    def _assistant(self, blocks: list[Any]) -> list[Message]:
        out: list[Message] = []
        ms = self.st.last
        for block in blocks:
            kind = block.get("kind") if isinstance(block, dict) else None
            data = block.get("data") if isinstance(block, dict) else None
            if kind == "text" and isinstance(data, str):
                if data.strip():
                    out.append(Message("assistant", "text", data, ms))
            elif kind == "toolUse" and isinstance(data, dict):
                out.append(_tool_call(data.get("name"), data.get("input"), ms))
            else:
                self._other_block(block)
        return out

    def _results(self, blocks: list[Any]) -> list[Message]:
        out: list[Message] = []
        for block in blocks:
            data = block.get("data") if isinstance(block, dict) else None
            if not isinstance(block, dict) or block.get("kind") != "toolResult" or not isinstance(data, dict):
                self._other_block(block)
                continue
            items = data.get("content")
            text = "\n".join(t for t in map(_result_item, items if isinstance(items, list) else []) if t)
            status = data.get("status")
            if isinstance(status, str) and status and status != "success":
                text = f"[{status}] {text}".rstrip()
            if text.strip():
                out.append(Message("tool", "tool_result", text, self.st.last))
            else:
                count_skip(self.stats.extra, "empty_result")
        return out

    def _other_block(self, block: object) -> None:
        kind = block.get("kind") if isinstance(block, dict) else None
        count_skip(self.stats.extra, "unknown_content", kind if isinstance(kind, str) else "(none)")


# --- V3 engine: {id, timestamp, payload} -----------------------------------------------------------
class KiroV3Parser(_KiroParser):
    """A V3 ``sessions/<hash>/<session dir>/messages.jsonl`` (see the module docstring)."""

    def _load_sidecar(self) -> None:
        folder = os.path.dirname(self.path)
        self.file_id = os.path.basename(folder)
        self.sidecar = v3_sidecar(self.path)
        if self.sidecar.parent:
            self.parent_file = os.path.join(os.path.dirname(folder), self.sidecar.parent, V3_FILE)

    @staticmethod
    def message_id(obj: dict[str, Any]) -> object:
        return obj.get("id")

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        payload = obj.get("payload")
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            return None
        if self._replayed(obj):
            return []
        ptype = payload["type"]
        content = payload.get("content")
        if ptype == "user":
            return self._user(content, ms) if isinstance(content, str) else []
        if ptype == "assistant":
            return self._assistant(payload, content, ms)
        if ptype == "tool_call":
            return [_tool_call(payload.get("toolName"), payload.get("args"), ms)]
        if ptype == "tool_result":
            return self._result(content, payload.get("success") is False, ms)
        if ptype == "sub_agent_start":
            args = {k: payload[k] for k in ("subAgentName", "prompt") if k in payload}
            return [_tool_call("sub_agent", args, ms)]
        if ptype == "sub_agent_complete":
            return self._result(payload.get("response"), False, ms)
        if ptype == "session_start":
            count_skip(self.stats.extra, "system-prompt")
        elif ptype == "steering_inclusion":
            count_skip(self.stats.extra, "injected-context")
        elif ptype not in V3_BOOKKEEPING:
            count_skip(self.stats.extra, "unknown_record", ptype)
        return []

    def _assistant(self, payload: dict[str, Any], content: object, ms: int | None) -> list[Message]:
        if not isinstance(content, str) or not content.strip():
            return []
        op = payload.get("operationType")
        if op in (None, "Say"):
            return [Message("assistant", "text", content, ms)]
        if op == "Reasoning":
            return [Message("assistant", "thinking", content, ms)]
        if op == "Summary":  # what the conversation continues from after a compaction
            return [Message("system", "text", content, ms)]
        count_skip(self.stats.extra, "unknown_operation", str(op))
        return []

    def _result(self, content: object, failed: bool, ms: int | None) -> list[Message]:
        text = content if isinstance(content, str) else compact_json(content) if content is not None else ""
        if failed:
            text = f"[error] {text}".rstrip()
        if not text.strip():
            count_skip(self.stats.extra, "empty_result")
            return []
        return [Message("tool", "tool_result", text, ms)]


def make_parser(path: str, state: dict[str, Any] | None = None) -> _KiroParser:
    """The parser for a Kiro transcript: V3's ``messages.jsonl`` or a 2.x ``<uuid>.jsonl``."""
    if os.path.basename(path) == V3_FILE:
        return KiroV3Parser(path, state)
    return KiroParser(path, state)
