"""OpenHands conversations (docs/formats.md §26): a folder per conversation, one JSON file per event.

The CLI writes ``~/.openhands/conversations/<hex id>/`` (``$OPENHANDS_CONVERSATIONS_DIR``, else
``$OPENHANDS_PERSISTENCE_DIR/conversations``); the server's file store
``<persistence>/<user id>/v1_conversations/<hex id>/`` (``$OH_PERSISTENCE_DIR``, else
``$FILE_STORE_PATH``, else ``~/.openhands``). A conversation folder holds ``base_state.json``
(id, agent and LLM, workspace, metrics) and ``events/event-<index>-<event id>.json``, one file per
event, written once and never changed.

A folder is one ``whole`` unit. Its signature is the ``events/`` folder's mtime (every new event
file moves it) and ``base_state.json``'s size and mtime, so a pass costs three stats per
conversation and only a conversation with new events is read again.

Events are the SDK's ``Event`` union, told apart by ``kind``: ``MessageEvent`` (a prompt or reply),
``ActionEvent`` (the agent's visible ``thought``, its reasoning, and a tool call),
``ObservationEvent`` / ``AgentErrorEvent`` / ``UserRejectObservation`` (a tool's result, an error, a
refusal), condensation summaries (kept as system text) and bookkeeping. Newer SDKs link events into
a tree (``parent_id``; an event without one follows the previous event): the active branch is the
chain from the last event back to the root, and events off it are counted ``dead-branch``.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from aivault.errors import UnitChanged
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.copilot import arguments_text
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "openhands"
BASE_STATE: Final = "base_state.json"
EVENTS: Final = "events"
SERVER_DIR: Final = "v1_conversations"
EVENT_NAME: Final = re.compile(r"event-(\d+)-.+\.json")
MAX_EVENT_BYTES: Final = 64 << 20
MAX_STATE_BYTES: Final = 64 << 20
# An event file that does not parse and was written this recently is being written: read next pass.
SETTLE_S: Final = 30
# A conversation read within this long of its last change is read again by the next pass (read_conversation).
SETTLE_NS: Final = 2_000_000_000
RESUME: Final = "openhands --resume"
# Where base_state.json's workspace keeps the folder, by workspace kind (AV tries the same keys).
WORKSPACE_KEYS: Final = ("working_dir", "cwd", "path", "mount_path", "root", "repo_path", "repo_root")

# Event kinds that hold no conversation: control, state, telemetry.
BOOKKEEPING: Final = frozenset({
    "CondensationRequest", "PauseEvent", "InterruptEvent", "ConversationStateUpdateEvent", "TokenEvent",
    "HookExecutionEvent", "LLMCompletionLogEvent", "ConversationErrorEvent", "ConversationIterationLimitEvent",
    "SecurityAnalyzerConfigurationEvent", "StreamingDeltaEvent", "WarningEvent",
})


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """The CLI's conversations folder and the server's file store (see the module docstring)."""
    def path(name: str, default: Path) -> Path:
        return Path(env[name]).expanduser() if env.get(name) else default

    persistence = path("OPENHANDS_PERSISTENCE_DIR", home / ".openhands")
    cli = path("OPENHANDS_CONVERSATIONS_DIR", persistence / "conversations")
    server = path("OH_PERSISTENCE_DIR", path("FILE_STORE_PATH", home / ".openhands"))
    return [Root(AGENT, str(p.absolute())) for p in dict.fromkeys([cli, server])]


# --- discovery -------------------------------------------------------------------------------------
def is_conversation(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, BASE_STATE)) or os.path.isdir(os.path.join(folder, EVENTS))


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as it:
            return sorted(e.path for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=True))
    except OSError:
        return []


def conversation_dirs(root: str) -> Iterator[str]:
    """The conversation folders of a root: the root itself, its children (the CLI's layout), and
    ``<user id>/v1_conversations/<id>`` (the server's)."""
    if is_conversation(root):
        yield root
        return
    for child in _subfolders(root):
        if is_conversation(child):
            yield child
        elif os.path.isdir(os.path.join(child, SERVER_DIR)):
            yield from (c for c in _subfolders(os.path.join(child, SERVER_DIR)) if is_conversation(c))


def _stamp_parts(folder: str) -> tuple[int, ...]:
    parts: list[int] = []
    for name in (EVENTS, BASE_STATE):
        try:
            st = os.stat(os.path.join(folder, name))
            parts += [st.st_size if name == BASE_STATE else 0, st.st_mtime_ns]
        except OSError:
            parts += [-1, -1]
    return tuple(parts)


def stamp(folder: str) -> int:
    """The change signature of a conversation folder (see the module docstring)."""
    return signature(*_stamp_parts(folder))


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every conversation folder under the root, each pass (a few stats per conversation)."""
    if check_root(root, problems) is None:
        return
    for folder in conversation_dirs(root.path):
        try:
            st = os.stat(folder)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {folder}: {exc.strerror or exc}"))
            continue
        yield Found(folder, AGENT, st.st_dev, st.st_ino, 0, stamp(folder), "whole")


# --- reading one conversation ----------------------------------------------------------------------
def _read(path: str, limit: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def event_files(folder: str) -> list[str]:
    """The event files of a conversation, in the order they were written (by index, 5 digits or more)."""
    try:
        names = [n for n in os.listdir(os.path.join(folder, EVENTS)) if not n.startswith(".")]
    except OSError:
        return []
    indexed = sorted((int(m.group(1)), n) for n in names if (m := EVENT_NAME.fullmatch(n)) is not None)
    return [os.path.join(folder, EVENTS, n) for _, n in indexed]


def read_events(folder: str, skips: dict[str, int]) -> list[dict[str, Any]]:
    """Every event of a conversation. The newest file not parsing yet means it is being written."""
    files = event_files(folder)
    events: list[dict[str, Any]] = []
    for i, path in enumerate(files):
        data = _read(path, MAX_EVENT_BYTES)
        event = loads_line(data) if data else None
        if isinstance(event, dict):
            events.append(event)
            continue
        if i == len(files) - 1 and _fresh(path):
            raise UnitChanged(f"{path} is not complete JSON yet")
        count_skip(skips, "malformed-record")
    return events


def _fresh(path: str) -> bool:
    try:
        return time.time_ns() - os.stat(path).st_mtime_ns < SETTLE_S * 1_000_000_000
    except OSError:
        return True


def active_branch(events: list[dict[str, Any]], skips: dict[str, int]) -> list[dict[str, Any]]:
    """The events on the chain from the last one back to the root (all of them without ``parent_id``s)."""
    if not any(isinstance(e.get("parent_id"), str) for e in events):
        return events
    by_id = {e["id"]: i for i, e in enumerate(events) if isinstance(e.get("id"), str)}
    chain: list[int] = []
    seen: set[int] = set()
    i: int | None = len(events) - 1 if events else None
    while i is not None and i not in seen:
        seen.add(i)
        chain.append(i)
        parent = events[i].get("parent_id")
        i = by_id.get(parent) if isinstance(parent, str) else (i - 1 if i > 0 else None)
    if len(chain) < len(events):
        count_skip(skips, "dead-branch", n=len(events) - len(chain))
    return [events[j] for j in reversed(chain)]


def read_conversation(found: Found) -> Unit:
    """One conversation folder, read whole; UnitChanged when it changed while it was read."""
    folder = found.path
    parts = _stamp_parts(folder)
    skips: dict[str, int] = {}
    base = loads_line(_read(os.path.join(folder, BASE_STATE), MAX_STATE_BYTES) or b"")
    events = read_events(folder, skips)
    if _stamp_parts(folder) != parts:
        raise UnitChanged(f"{folder} changed while it was read")
    sig = signature(*parts)
    if max(parts[1], parts[3]) > time.time_ns() - SETTLE_NS:
        # A file system's clock ticks coarsely: an event written in the same tick as the one just read leaves
        # the folder's mtime where it was. A signature read this soon after a change is marked, so that it
        # never matches the folder's and the next pass reads the conversation again, until it settled.
        sig = signature(sig, "settling")
    return conversation_unit(folder, as_object(base), events, sig, skips)


def dashed(hex_id: str) -> str:
    """A 32-digit hex id in the UUID form the CLI prints and resumes by."""
    if len(hex_id) == 32 and all(c in "0123456789abcdefABCDEF" for c in hex_id):
        return f"{hex_id[:8]}-{hex_id[8:12]}-{hex_id[12:16]}-{hex_id[16:20]}-{hex_id[20:]}"
    return hex_id


def conversation_unit(folder: str, base: dict[str, Any], events: list[dict[str, Any]], sig: int,
                      skips: dict[str, int]) -> Unit:
    """The Unit of one conversation (docs/formats.md §26 field map)."""
    workspace = as_object(base.get("workspace"))
    cwd = next((nonblank(workspace.get(k)) for k in WORKSPACE_KEYS if nonblank(workspace.get(k))), None)
    reader = _Events(skips)
    messages: list[Message] = []
    times: list[int] = []
    for event in active_branch(events, skips):
        ts = to_epoch_ms(event.get("timestamp"))
        if ts is not None:
            times.append(ts)
        messages += reader.messages(event, ts)
    session_id = nonblank(base.get("id")) or dashed(os.path.basename(folder))
    cwd = cwd or reader.cwd
    server = os.path.basename(os.path.dirname(folder)) == SERVER_DIR
    command = None if server else f"{RESUME} {shlex.quote(session_id)}"
    if command and cwd:
        command = f"cd {shlex.quote(cwd)} && {command}"
    title = nonblank(base.get("title"))
    session = SessionInfo(agent=AGENT, session_id=session_id,
                          title=first_line_title(title) if title else reader.first_user, cwd=cwd,
                          started_at=min(times, default=None), updated_at=max(times, default=None),
                          message_count=len(messages), resume_command=command)
    return Unit(session, messages, sig, skips)


def _texts(content: object) -> str:
    """The text parts of an LLM message's content (images and other parts are not text)."""
    parts = content if isinstance(content, list) else []
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"])


class _Events:
    """Turns events into messages, remembering what spans events (the first prompt, ACP calls)."""

    def __init__(self, skips: dict[str, int]) -> None:
        self.skips = skips
        self.first_user: str | None = None
        self.cwd: str | None = None
        self.acp_calls: set[str] = set()
        self.acp_results: set[str] = set()

    def messages(self, event: dict[str, Any], ts: int | None) -> list[Message]:
        kind = event.get("kind")
        if kind == "MessageEvent":
            return self._message(event, ts)
        if kind == "ActionEvent":
            return self._action(event, ts)
        if kind == "ObservationEvent":
            return self._observation(as_object(event.get("observation")), ts)
        if kind == "AgentErrorEvent":
            return _result(f"[error] {event.get('error') or ''}", ts)
        if kind == "UserRejectObservation":
            return _result(f"[rejected] {event.get('rejection_reason') or ''}", ts)
        if kind in ("CondensationSummaryEvent", "Condensation"):
            summary = event.get("summary")  # what the conversation continues from
            return [Message("system", "text", summary, ts)] if isinstance(summary, str) and summary.strip() else []
        if kind == "ACPToolCallEvent":
            return self._acp(event, ts)
        if kind == "SystemPromptEvent":
            count_skip(self.skips, "system-prompt")
        elif kind not in BOOKKEEPING:
            count_skip(self.skips, "unknown_record", str(kind))
        return []

    def _message(self, event: dict[str, Any], ts: int | None) -> list[Message]:
        llm = as_object(event.get("llm_message"))
        role = llm.get("role")
        if event.get("extended_content"):
            count_skip(self.skips, "injected-context")
        text = _texts(llm.get("content"))
        if role == "user":
            if not text.strip():
                return []
            if event.get("source") != "user":  # a message the runtime sent on the user's side
                return [Message("system", "text", text, ts)]
            self.first_user = self.first_user or first_line_title(text)
            return [Message("user", "text", text, ts)]
        if role == "assistant":
            out = _thinking(llm, ts) or _thinking(event, ts)
            return out + ([Message("assistant", "text", text, ts)] if text.strip() else [])
        if role == "system":
            count_skip(self.skips, "system-prompt")
        else:
            count_skip(self.skips, "unknown_role", str(role))
        return []

    def _action(self, event: dict[str, Any], ts: int | None) -> list[Message]:
        out = _thinking(event, ts)
        thought = _texts(event.get("thought"))
        if thought.strip():
            out.append(Message("assistant", "text", thought, ts))
        call = as_object(event.get("tool_call"))
        name = call.get("name") or event.get("tool_name") or "tool"
        args = arguments_text(call.get("arguments"))
        if not args and isinstance(event.get("action"), dict):
            args = compact_json({k: v for k, v in event["action"].items() if k != "kind"})
        out.append(Message("assistant", "tool_call", f"{name} {args}" if args else str(name), ts))
        return out

    def _observation(self, observation: dict[str, Any], ts: int | None) -> list[Message]:
        text = _texts(observation.get("content"))
        if not text:
            text = "\n".join(p for p in (observation.get("command"), observation.get("detail"))
                             if isinstance(p, str) and p)
        working = as_object(observation.get("metadata")).get("working_dir")
        self.cwd = self.cwd or nonblank(working)
        if observation.get("is_error") is True:
            text = f"[error] {text}"
        return _result(text, ts)

    def _acp(self, event: dict[str, Any], ts: int | None) -> list[Message]:
        """An ACP agent's tool call, reported again as it progresses: the call once, its output once."""
        call_id = str(event.get("tool_call_id"))
        out: list[Message] = []
        if call_id not in self.acp_calls:
            self.acp_calls.add(call_id)
            args = event.get("raw_input")
            title = event.get("title") or "tool"
            out.append(Message("assistant", "tool_call", f"{title} {compact_json(args)}" if args else str(title), ts))
        output = event.get("raw_output")
        if output and call_id not in self.acp_results:
            self.acp_results.add(call_id)
            text = output if isinstance(output, str) else compact_json(output)
            out += _result(f"[error] {text}" if event.get("is_error") is True else text, ts)
        return out


def _thinking(obj: dict[str, Any], ts: int | None) -> list[Message]:
    """Anthropic thinking blocks, else the reasoning text (the same thought is never both)."""
    blocks = obj.get("thinking_blocks")
    texts = [b["thinking"] for b in blocks if isinstance(b, dict) and isinstance(b.get("thinking"), str)
             and b["thinking"].strip()] if isinstance(blocks, list) else []
    if not texts and isinstance(obj.get("reasoning_content"), str) and obj["reasoning_content"].strip():
        texts = [obj["reasoning_content"]]
    return [Message("assistant", "thinking", t, ts) for t in texts]


def _result(text: str, ts: int | None) -> list[Message]:
    return [Message("tool", "tool_result", text, ts)] if text.strip() else []


SPEC = AgentSpec(
    name=AGENT, label="OpenHands", default_roots=default_roots, discover=discover, read_unit=read_conversation,
    expects="conversations/<id>/base_state.json + events/event-*.json (one JSON file per event)",
    shaped=lambda name: name == BASE_STATE)
