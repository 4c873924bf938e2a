"""DeepSeek Harness sessions, read whole (docs/formats.md §32).

``dsh`` keeps one event log per session: ``$DSH_HOME/sessions/<project slug>/<encoded session
id>/session.jsonl.zstd`` (``session.jsonl`` when raw persistence is configured; later format
generations name it ``session.vN.jsonl[.zstd]``). A ``.zstd`` log is a sequence of zstd frames,
one or more per append, decoded across frames by the streaming decoder Codex's compressed
rollouts use (``sources.LineFile``). The first line is the session header; every other line is an
event ``{type, seq, time, data}`` or a packed run of streaming deltas.

The log is read whole, not by byte offset: events are not always written in ``seq`` order, a
streamed answer counts only when its final ``assistant/message`` never came, a tool call can be
announced twice (a ``tool-call`` block of the answer and a ``tool/call`` event), and a child
session replays its parent's first events. All of that is settled over the whole log.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.copilot import arguments_text
from aivault.scanner.parsers.gemini import (
    MAX_UNIT_BYTES,
    TAIL_SETTLE_S,
    FileBytes,
    chats_discovery,
    jsonl_records,
    read_settled,
)
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, LineFile, Mode, Root, Unit, file_signature
from aivault.scanner.spec import AgentSpec

# session.jsonl / session.jsonl.zstd (generation 0) and session.vN.jsonl[.zstd] (later generations).
_LOG_NAME = re.compile(r"^session(?:\.v(\d+))?\.jsonl(\.zstd)?$")
# The generations peers have seen released (AV reads 0-3); a newer one is read as far as it is
# understood and counted, so drift shows in `aivault doctor`.
KNOWN_VERSIONS = frozenset({0, 1, 2, 3})
_PACKED = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta", "tool-call-chunks": "tool-call-delta"}
# Events that carry a message (the "surface"); the others are structure and bookkeeping.
_SURFACE = frozenset({"user/message", "system/message", "assistant/message", "tool/result"})
# Event types of the released generations that hold no conversation text (AV's inventory).
BOOKKEEPING = frozenset({
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/attempt", "command/done", "command/run", "compaction/end", "compaction/prune", "compaction/start",
    "deliverables/presented", "feedback/message-delete", "feedback/message-put", "feedback/record", "goal/change",
    "hook/invoked", "hook/result", "llm/retry", "llm/retry-started", "model/selection", "permission/preset",
    "plan/mode", "request/context", "request/header", "sandbox/mode", "schedule/change",
    "session-log-deepseek/delivery-accepted", "session/end-seed", "session/title-llm-request", "step/end",
    "step/start", "subagent/catalog", "subagent/descriptor", "subagent/model-selection-policy", "team/member",
    "team/message/delivered", "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end",
    "tool-workflow/agent-start", "tool-workflow/run-end", "tool-workflow/run-start", "tool/code-dispatch",
    "tool/code-dispatch-start", "tool/ptc-dispatch", "tool/ptc-dispatch-start", "turn/end", "turn/start",
    "web/deepseek-search-llm-request", "session/title",
})


@dataclass(slots=True)
class Event:
    seq: int
    time: int | None
    type: str
    data: dict[str, Any]
    surface_op: object  # None (generation 0), "append", or a replacement range
    ignorable: bool = False


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _obj(value: object) -> dict[str, Any]:
    return value if type(value) is dict else {}


def _events(obj: dict[str, Any], skips: dict[str, int]) -> list[Event]:
    """One log line as events: a packed delta row expands into one ``assistant/chunk`` per delta."""
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        count_skip(skips, "malformed-record")
        return []
    data = obj.get("data")
    if kind in _PACKED:
        seq0, time0, packed = _int(obj.get("seq0")), _int(obj.get("time0")), _obj(data)
        values = packed.get("args" if kind == "tool-call-chunks" else "texts")
        if seq0 is None or not isinstance(values, list):
            count_skip(skips, "malformed-record")
            return []
        dt = packed.get("dt")
        deltas: list[Any] = dt if isinstance(dt, list) else []
        out: list[Event] = []
        t = time0
        for i, value in enumerate(values):
            if i > 0 and t is not None:
                step = _int(deltas[i - 1]) if i - 1 < len(deltas) else None
                t = t + step if step is not None else t
            chunk: dict[str, Any] = {"type": _PACKED[kind], "index": packed.get("index", 0)}
            if kind == "tool-call-chunks":
                chunk.update(id=packed.get("id"), name=packed.get("name"), argumentsDelta=value)
            else:
                chunk["text"] = value
            out.append(Event(seq0 + i, t, "assistant/chunk",
                             {"turn": packed.get("turn"), "step": packed.get("step"), "chunk": chunk}, None))
        return out
    seq = _int(obj.get("seq"))
    if seq is None or type(data) is not dict:
        count_skip(skips, "malformed-record")
        return []
    return [Event(seq, _int(obj.get("time")), kind, data, obj.get("surfaceOp"), obj.get("ignorable") is True)]


# --- content blocks -----------------------------------------------------------------------------------
def _block_text(blocks: object) -> str:
    """The text of a tool result's nested content (its text blocks, joined)."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    parts = [b["text"] for b in blocks if type(b) is dict and isinstance(b.get("text"), str) and b["text"]]
    return "\n".join(parts)


def _tool_call(name: object, arguments: object) -> str:
    label = name if isinstance(name, str) and name else "tool"
    args = arguments_text(arguments)
    return f"{label} {args}" if args else label


def content_messages(content: object, role: RoleName, ts: int | None, skips: dict[str, int],
                     calls: set[str] | None = None) -> list[Message]:
    """The messages of one message's content blocks: text, reasoning, tool-call and tool-result blocks;
    attachments and unknown blocks are counted. ``calls`` collects the ids of the tool calls seen."""
    out: list[Message] = []
    for block in content if isinstance(content, list) else []:
        if type(block) is not dict:
            count_skip(skips, "malformed-block")
            continue
        kind = block.get("type")
        text = block.get("text")
        if kind == "text" and isinstance(text, str):
            if text.strip():
                out.append(Message(role, "text", text, ts))
        elif kind == "reasoning" and isinstance(text, str):
            if text.strip():
                out.append(Message(role, "thinking", text, ts))
        elif kind == "tool-call":
            if calls is not None and isinstance(block.get("id"), str):
                calls.add(block["id"])
            out.append(Message("assistant", "tool_call", _tool_call(block.get("name"), block.get("arguments")), ts))
        elif kind == "tool-result":
            result = _block_text(block.get("content"))
            if block.get("isError") is True:
                result = f"[error] {result}".rstrip()
            if result.strip():
                out.append(Message("tool", "tool_result", result, ts))
        elif kind in ("image", "file"):
            count_skip(skips, "attachment", str(kind))
        else:
            count_skip(skips, "unknown_block", str(kind))
    return out


# --- streamed answers ---------------------------------------------------------------------------------
@dataclass(slots=True)
class _Block:
    kind: str = "text"
    parts: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    done: dict[str, Any] | None = None  # the complete block a block-end carried


@dataclass(slots=True)
class _Stream:
    """The deltas of one (turn, step) answer, kept in case its final message never came."""

    first_seq: int
    time: int | None
    blocks: dict[int, _Block] = field(default_factory=dict)

    def add(self, chunk: dict[str, Any], skips: dict[str, int]) -> None:
        kind = chunk.get("type")
        index = _int(chunk.get("index")) or 0
        block = self.blocks.setdefault(index, _Block())
        if kind in ("text-delta", "reasoning-delta") and isinstance(chunk.get("text"), str):
            block.kind = "text" if kind == "text-delta" else "reasoning"
            block.parts.append(chunk["text"])
        elif kind == "tool-call-delta":
            block.kind = "tool-call"
            block.call_id = chunk["id"] if isinstance(chunk.get("id"), str) else block.call_id
            block.name = chunk["name"] if isinstance(chunk.get("name"), str) and chunk["name"] else block.name
            if isinstance(chunk.get("argumentsDelta"), str):
                block.parts.append(chunk["argumentsDelta"])
        elif kind == "block-start":
            block.kind = chunk["blockType"] if isinstance(chunk.get("blockType"), str) else block.kind
        elif kind == "block-end":
            block.done = chunk["block"] if type(chunk.get("block")) is dict else None
        elif kind not in ("usage", "finish"):
            count_skip(skips, "unknown_chunk", str(kind))

    def messages(self, skips: dict[str, int], calls: set[str]) -> list[Message]:
        """The answer as far as it was streamed, block by block."""
        content: list[dict[str, Any]] = []
        for index in sorted(self.blocks):
            b = self.blocks[index]
            if b.done is not None:
                content.append(b.done)
            elif b.kind == "tool-call":
                content.append({"type": "tool-call", "id": b.call_id, "name": b.name, "arguments": "".join(b.parts)})
            else:
                content.append({"type": b.kind, "text": "".join(b.parts)})
        return content_messages(content, "assistant", self.time, skips, calls)


def _turn_step(data: dict[str, Any]) -> tuple[object, object]:
    return (data.get("turn"), data.get("step"))


# --- one session ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Header:
    id: str | None = None
    version: int | None = None
    created: int | None = None
    cwd: str | None = None
    parent: str | None = None
    seed_length: int = 0


def _header(objs: list[dict[str, Any]], skips: dict[str, int]) -> tuple[_Header, list[dict[str, Any]]]:
    if not objs or objs[0].get("type") != "session":
        count_skip(skips, "missing-header")
        return _Header(), objs
    head = objs[0]
    h = _Header(id=nonblank(head.get("id")), version=_int(head.get("version")), created=_int(head.get("createdAt")),
                cwd=nonblank(head.get("cwd")), parent=nonblank(head.get("parentSession")),
                seed_length=max(_int(head.get("seedLength")) or 0, 0))
    if h.version not in KNOWN_VERSIONS:
        count_skip(skips, "unknown_version", str(head.get("version")))
    return h, objs[1:]


def session_unit(path: str, fb: FileBytes, skips: dict[str, int]) -> Unit:
    """The Unit of one decoded session log (docs/formats.md §32 field map)."""
    header, rows = _header(jsonl_records(fb, skips), skips)
    events: list[Event] = []
    for obj in rows:
        if obj.get("type") == "session":
            count_skip(skips, "duplicate-header")
            continue
        events += _events(obj, skips)
    events.sort(key=lambda e: e.seq)  # stable: file order among equal seqs
    # A child replays its parent's first ``seedLength`` events; a seeded log of a later generation marks
    # the end of the inherited part with session/end-seed {inherited: true}.
    cut = header.seed_length
    for e in events:
        if e.type == "session/end-seed" and e.data.get("inherited") is True:
            cut = max(cut, e.seq + 1)
    title: str | None = None
    for e in events:  # the latest title wins, an inherited one included (the parent's, until renamed)
        if e.type == "session/title":
            title = nonblank(e.data.get("title")) or title
    owned = [e for e in events if e.seq >= cut]
    if len(owned) < len(events):
        count_skip(skips, "seed-replay", n=len(events) - len(owned))
    # Settled over the whole log first: which answers have a final message, which calls a tool-call block.
    finals: set[tuple[object, object]] = set()
    calls: set[str] = set()
    streams: dict[tuple[object, object], _Stream] = {}
    for e in owned:
        if e.type == "assistant/message" and _appended(e):
            finals.add(_turn_step(e.data))
            for block in _obj(e.data.get("message")).get("content") or []:
                if type(block) is dict and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                    calls.add(block["id"])
        elif e.type == "assistant/chunk":
            key = _turn_step(e.data)
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = _Stream(e.seq, e.time)
            stream.add(_obj(e.data.get("chunk")), skips)
    default_ts = header.created
    messages: list[Message] = []
    first_user: str | None = None
    times = [t for t in (header.created,) if t is not None]
    for e in owned:
        ts = e.time if e.time is not None else default_ts
        if e.time is not None:
            times.append(e.time)
        out = _event_messages(e, ts, finals, calls, streams, skips)
        if first_user is None and e.type == "user/message":
            first_user = next((first_line_title(m.text) for m in out if m.role == "user"), None)
        messages += out
    session_id = header.id or os.path.basename(os.path.dirname(path))
    session = SessionInfo(agent="dsh", session_id=session_id, title=title or first_user, cwd=header.cwd,
                          started_at=min(times) if times else None, updated_at=max(times) if times else None,
                          message_count=len(messages), resume_command=None, parent_session_id=header.parent)
    return Unit(session, messages, fb.signature, skips)


def _appended(e: Event) -> bool:
    """A surface event that adds to the conversation (generation 0 has no surfaceOp: every one does);
    a replacement rewrites what the model sees (compaction) and adds nothing new."""
    return e.surface_op is None or e.surface_op == "append"


def _event_messages(e: Event, ts: int | None, finals: set[tuple[object, object]], calls: set[str],
                    streams: dict[tuple[object, object], _Stream], skips: dict[str, int]) -> list[Message]:
    kind, data = e.type, e.data
    if kind in _SURFACE and not _appended(e):
        count_skip(skips, "surface-replace")
        return []
    if kind == "user/message":
        source = _obj(data.get("source")).get("kind")
        if source != "user":  # plugin-injected context: sandbox policy, skills catalogue, runtime snapshot
            count_skip(skips, "injected-context")
            return []
        return _counted(content_messages(data.get("content"), "user", ts, skips), skips)
    if kind == "assistant/message":
        return _counted(content_messages(_obj(data.get("message")).get("content"), "assistant", ts, skips), skips)
    if kind == "system/message":
        return _counted(content_messages(_obj(data.get("message")).get("content"), "system", ts, skips), skips)
    if kind == "tool/result":
        return _counted(content_messages(_obj(data.get("message")).get("content"), "tool", ts, skips), skips)
    if kind == "tool/call":
        call_id = data.get("callId")
        if isinstance(call_id, str) and call_id in calls:
            count_skip(skips, "duplicate_call")  # the answer's tool-call block already gave it
            return []
        return [Message("assistant", "tool_call", _tool_call(data.get("name"), data.get("arguments")), ts)]
    if kind == "assistant/chunk":
        key = _turn_step(data)
        stream = streams.get(key)
        if key in finals or stream is None:
            count_skip(skips, "duplicate_stream")  # superseded by the final message
            return []
        if stream.first_seq != e.seq:
            return []  # a later piece of the answer the first chunk indexes
        return stream.messages(skips, calls)  # interrupted before its final message: what was streamed
    if kind == "compaction/summary":
        summary = content_messages(data.get("summary"), "system", ts, skips)
        return [Message("system", "text", "\n".join(m.text for m in summary if m.kind == "text"), ts)] \
            if any(m.kind == "text" for m in summary) else []
    if kind in BOOKKEEPING or e.ignorable:
        count_skip(skips, "bookkeeping")
        return []
    count_skip(skips, "unknown_record", kind)
    return []


def _counted(out: list[Message], skips: dict[str, int]) -> list[Message]:
    if not out:
        count_skip(skips, "empty-message")
    return out


# --- reading a log ----------------------------------------------------------------------------------------
def read_log(path: str) -> FileBytes:
    """The decoded bytes of a session log that did not change while it was read (else UnitChanged).

    A ``.zstd`` log is decoded across all its frames; a frame cut off by an append in progress yields
    what was complete, and the cut-off record then waits (jsonl_records) like a plain file's."""
    if not path.endswith(".zstd"):
        return read_settled(path)
    before = file_signature(path)
    if before is None:
        raise UnitChanged(f"{path} disappeared")
    try:
        src = LineFile(path, "zst")
    except FileNotFoundError as exc:
        raise UnitChanged(f"{path} disappeared") from exc
    except OSError as exc:
        raise UnitUnreadable(f"cannot read: {exc.strerror or exc}") from exc
    recent = time.time_ns() - src.stat.st_mtime_ns < TAIL_SETTLE_S * 1_000_000_000
    try:
        data = src.head(MAX_UNIT_BYTES + 1)
    except OSError as exc:  # a corrupt stream (EIO, sources.LineFile) or a failing disk
        if recent:
            raise UnitChanged(f"{path} is being written") from exc
        raise UnitUnreadable(f"cannot decode: {exc.strerror or exc}") from exc
    finally:
        src.close()
    if len(data) > MAX_UNIT_BYTES:
        raise UnitUnreadable(f"decodes to more than {MAX_UNIT_BYTES // (1024 * 1024)} MiB")
    if file_signature(path) != before:
        raise UnitChanged(f"{path} changed while it was read")
    return FileBytes(data, before, recent)


def read_unit(found: Found) -> Unit:
    """One DeepSeek Harness session log, read whole (sources.Unit)."""
    skips: dict[str, int] = {}
    fb = read_log(found.path)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
    return session_unit(found.path, fb, skips)


# --- where dsh keeps its sessions (docs/formats.md §32) -------------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$DSH_HOME/sessions`` (``DSH_HOME`` defaults to ``~/.dsh``), on Linux and macOS alike."""
    dsh_home = Path(env["DSH_HOME"]).expanduser().absolute() if env.get("DSH_HOME") else home / ".dsh"
    return [Root("dsh", str(dsh_home / "sessions"))]


def _log_rank(name: str) -> tuple[int, bool] | None:
    m = _LOG_NAME.match(name)
    return None if m is None else (int(m.group(1) or 0), m.group(2) is not None)


def log_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for the one session log a folder is read from: the newest generation, and of one
    generation the compressed log (a raw log beside its compressed twin is a conflict dsh refuses)."""
    rank = _log_rank(name)
    if rank is None:
        return None
    try:
        siblings = [r for r in (_log_rank(n) for n in os.listdir(directory)) if r is not None]
    except OSError:
        siblings = []
    return "whole" if all(r <= rank for r in siblings) else None


def _session_dir(path: str) -> bool:
    """A session's folder (its encoded id, ``session-<uuid>``): listed again on every recent pass,
    since an append changes the log but not the folder."""
    return os.path.basename(path).startswith("session-")


SPEC = AgentSpec(
    name="dsh", label="DeepSeek Harness", default_roots=default_roots,
    discover=chats_discovery(log_mode, _session_dir), read_unit=read_unit,
    expects="<project slug>/session-<uuid>/session.jsonl.zstd (zstd-framed JSONL events; or raw session.jsonl)",
    shaped=lambda name: _LOG_NAME.match(name) is not None)
