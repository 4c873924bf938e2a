"""Antigravity trajectory steps -> normalized messages (docs/formats.md §16).

A conversation is a list of steps, each with a type (``USER_INPUT``, ``PLANNER_RESPONSE``, a tool
step such as ``RUN_COMMAND``, ``CHECKPOINT``, ``EPHEMERAL_MESSAGE``, ...), a source (who produced
it) and a time. ``transcript.jsonl`` writes one step per line; ``conversations/<id>.db`` keeps the
same steps as protobuf rows (scanner/parsers/antigravity/store.py decodes them into the same
:class:`Step`). :func:`step_messages` maps one step onto messages for both, so the two stores index
a conversation alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from aivault.scanner.model import Message
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import compact_json, loads_line
from aivault.scanner.parsers.textutil import first_line_title

USER_INPUT: Final = "USER_INPUT"
PLANNER_RESPONSE: Final = "PLANNER_RESPONSE"
CHECKPOINT: Final = "CHECKPOINT"
EPHEMERAL_MESSAGE: Final = "EPHEMERAL_MESSAGE"
CONVERSATION_HISTORY: Final = "CONVERSATION_HISTORY"
SYSTEM_TEXT_TYPES: Final = frozenset({"SYSTEM_MESSAGE", "ERROR_MESSAGE"})
INVOKE_SUBAGENT: Final = "INVOKE_SUBAGENT"
# Who typed a USER_INPUT step: the CLI writes USER_EXPLICIT; ctx's synthetic fixture says ``user``.
# Any other source (USER_IMPLICIT, SYSTEM) is the agent speaking for the user: system text.
TYPED_SOURCES: Final = frozenset({"USER_EXPLICIT", "USER"})
# The model's own steps: PLANNER_RESPONSE, and every tool step it ran (RUN_COMMAND, VIEW_FILE, ...).
MODEL_SOURCES: Final = frozenset({"MODEL", "PLANNER"})
# Statuses of a step that is not part of the conversation (any more): a cleared step was taken back.
DROPPED_STATUSES: Final = frozenset({"CLEARED"})
ERROR_STATUSES: Final = frozenset({"ERROR", "CANCELED"})

_USER_REQUEST = re.compile(r"<USER_REQUEST>\n?(.*?)\n?</USER_REQUEST>", re.S)
_OBJECTIVE = re.compile(r"#\s*USER Objective:[ \t]*\n+[ \t]*([^\n]+)")
_CONVERSATION_ID = re.compile(r'"conversationId"\s*:\s*"([^"]+)"')


@dataclass(slots=True)
class Step:
    """One trajectory step, whichever store it came from."""

    type: str  # upper case: USER_INPUT, PLANNER_RESPONSE, RUN_COMMAND, ... (STEP_TYPE_<n> when unnamed)
    source: str  # upper case: USER_EXPLICIT, MODEL, SYSTEM, ... ("" when not recorded)
    status: str = ""
    content: str = ""
    thinking: str = ""
    # (tool name, arguments already decoded)
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    objective: str | None = None  # a CHECKPOINT's "USER Objective" line: the agent's title for the conversation
    truncated: list[str] = field(default_factory=list)  # fields the agent clipped


def user_request(content: str) -> str:
    """What the user typed: the inside of ``<USER_REQUEST>`` (the CLI adds ``<ADDITIONAL_METADATA>``
    and ``<USER_SETTINGS_CHANGE>`` blocks after it), or the whole text when it is not wrapped."""
    found = _USER_REQUEST.findall(content)
    if found:
        return "\n\n".join(part.strip() for part in found if part.strip())
    return content.strip()


def objective(content: str) -> str | None:
    """The ``# USER Objective:`` line of a checkpoint summary (Antigravity's name for the conversation)."""
    match = _OBJECTIVE.search(content[:4096])
    return first_line_title(match.group(1)) if match else None


def file_uri_path(uri: str) -> str | None:
    """``file:///home/dev/app`` -> ``/home/dev/app``; a plain absolute path as it is; None otherwise."""
    if uri.startswith("file://"):
        return unquote(urlsplit(uri).path) or None
    return uri if uri.startswith("/") else None


def spawned(content: str) -> list[tuple[str, str | None]]:
    """The sub-agents an INVOKE_SUBAGENT result names, each its own conversation: (conversation id,
    its workspace). The result is prose around a JSON object (or a list of them) per sub-agent."""
    decoder = json.JSONDecoder()
    out: list[tuple[str, str | None]] = []
    pos = 0
    while True:
        starts = [i for i in (content.find("{", pos), content.find("[", pos)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        try:
            value, pos = decoder.raw_decode(content, start)
        except ValueError:
            pos = start + 1
            continue
        for item in value if isinstance(value, list) else [value]:
            cid = item.get("conversationId") if isinstance(item, dict) else None
            if not isinstance(cid, str) or not cid:
                continue
            uris = item.get("workspaceUris")
            paths = [file_uri_path(u) for u in uris if isinstance(u, str)] if isinstance(uris, list) else []
            out.append((cid, next((p for p in paths if p), None)))
    if not out:  # a result cut by the CLI: the ids alone
        out = [(cid, None) for cid in _CONVERSATION_ID.findall(content)]
    return out


def decode_args(args: object) -> object:
    """A transcript's tool arguments: every value is itself JSON text (``"\\"echo hello\\""``); decoded
    one by one, a value that does not parse (cut by the CLI) kept as written."""
    if not isinstance(args, dict):
        return args
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, str):
            parsed = loads_line(value.encode("utf-8", "surrogatepass"))
            out[key] = value if parsed is None and value.strip() not in ("null",) else parsed
        else:
            out[key] = value
    return out


def from_json(obj: dict[str, Any]) -> Step | None:
    """A ``transcript.jsonl`` line as a Step; None when it has no step type (a malformed record)."""
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return None
    source = obj.get("source")
    status = obj.get("status")
    content = obj.get("content")
    thinking = obj.get("thinking")
    calls: list[tuple[str, Any]] = []
    raw_calls = obj.get("tool_calls")
    for call in raw_calls if isinstance(raw_calls, list) else []:
        if isinstance(call, dict):
            name = call.get("name")
            calls.append((name if isinstance(name, str) and name else "tool", decode_args(call.get("args"))))
    truncated = obj.get("truncated_fields")
    text = content if isinstance(content, str) else ""
    return Step(type=kind.upper(), source=source.upper() if isinstance(source, str) else "",
                status=status.upper() if isinstance(status, str) else "", content=text,
                thinking=thinking if isinstance(thinking, str) else "", tool_calls=calls,
                objective=objective(text) if kind.upper() == CHECKPOINT else None,
                truncated=[t for t in truncated if isinstance(t, str)] if isinstance(truncated, list) else [])


def tool_call_text(name: str, args: Any) -> str:
    """``<tool name> <arguments as compact JSON>`` (docs/formats.md §0.2 rule 2)."""
    return f"{name} {compact_json(args)}" if args is not None else name


def step_messages(step: Step, ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of one step (docs/formats.md §16.3); skipped steps are counted in ``skips``."""
    for name in step.truncated:
        count_skip(skips, "truncated-by-agent", name)
    if step.status in DROPPED_STATUSES:
        count_skip(skips, "cleared-step")
        return []
    kind = step.type
    if kind == USER_INPUT:
        text = user_request(step.content)
        if not text:
            return []
        return [Message("user" if step.source in TYPED_SOURCES or not step.source else "system", "text", text, ts)]
    if kind == PLANNER_RESPONSE:
        out: list[Message] = []
        if step.thinking.strip():
            out.append(Message("assistant", "thinking", step.thinking, ts))
        if step.content.strip():
            out.append(Message("assistant", "text", step.content, ts))
        out += [Message("assistant", "tool_call", tool_call_text(name, args), ts) for name, args in step.tool_calls]
        return out
    if kind == EPHEMERAL_MESSAGE:
        count_skip(skips, "injected-context")
        return []
    if kind == CONVERSATION_HISTORY:
        return []  # a marker without content: bookkeeping
    if kind == CHECKPOINT or kind in SYSTEM_TEXT_TYPES:
        return [Message("system", "text", step.content, ts)] if step.content.strip() else []
    if step.source in MODEL_SOURCES:
        if not step.content.strip():
            count_skip(skips, "empty-tool-result", kind)
            return []
        text = f"[error] {step.content}" if step.status in ERROR_STATUSES else step.content
        return [Message("tool", "tool_result", text, ts)]
    count_skip(skips, "unknown_record", kind)
    return []
