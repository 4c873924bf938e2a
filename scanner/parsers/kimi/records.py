"""What the records of Kimi's two wire formats mean, apart from the parser's state (docs/formats.md §20).

Kimi Code writes one event per line with a dotted ``type`` and an epoch-ms ``time``; the Python
Kimi CLI wraps each wire message as ``{"timestamp": <s>, "message": {"type", "payload"}}``. Both
record what entered the conversation as whole blocks (a thinking part, a text part, a tool call),
not the token stream: the CLI's recorder writes merged messages, and the captured Kimi Code logs
hold one part per block.
"""

from __future__ import annotations

from typing import Any

from aivault.scanner.model import KindName
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line
from aivault.scanner.parsers.textutil import first_line_title, opens_with, strip_leading_blocks

# Kimi Code record types that carry no message (some are read for the session's fields).
CODE_BOOKKEEPING = frozenset({
    "metadata", "config.update", "usage.record", "llm.request", "llm.tools_snapshot", "tools.set_active_tools",
    "turn.cancel", "turn.ended", "plugin.session_start", "profile.bind", "runtime.set_binding",
    "full_compaction.begin", "full_compaction.complete",
})
# Families of bookkeeping records, by the prefix of their type.
CODE_BOOKKEEPING_PREFIXES = ("permission.", "plan_mode.", "token_counting.")
CODE_PROMPTS = frozenset({"turn.prompt", "turn.steer"})
# Loop events that carry no message: the step frame and its usage.
CODE_LOOP_BOOKKEEPING = frozenset({"step.begin", "step.end"})

# Kimi CLI wire message types that carry no message (wire/types.py; ApprovalRequestResolved is v1's
# name of ApprovalResponse). ToolCallPart is a streamed fragment the recorder merges away.
LEGACY_BOOKKEEPING = frozenset({
    "TurnEnd", "StepBegin", "StepInterrupted", "HookTriggered", "HookResolved", "CompactionBegin", "CompactionEnd",
    "MCPLoadingBegin", "MCPLoadingEnd", "StatusUpdate", "Notification", "ToolCallPart", "ApprovalResponse",
    "ApprovalRequestResolved", "ApprovalRequest", "ToolCallRequest", "QuestionRequest", "PlanDisplay",
})
LEGACY_PROMPTS = frozenset({"TurnBegin", "SteerInput"})
LEGACY_PARTS = frozenset({"ContentPart", "TextPart", "ThinkPart"})

# Context blocks Kimi puts in front of a prompt: not what anyone typed, never a title.
CONTEXT_TAGS = ("git-context", "system-reminder")
_CONTEXT_OPENINGS = tuple(f"<{tag}>" for tag in CONTEXT_TAGS)


def prompt_title(text: str) -> str | None:
    """The title a prompt gives: its first line past the context blocks in front of it; None when
    it is all context (a block cut off before its end included)."""
    body = strip_leading_blocks(text, CONTEXT_TAGS)
    return None if opens_with(body, _CONTEXT_OPENINGS) else first_line_title(body)


def parts_text(value: object) -> str:
    """A string, or the ``text`` parts of a content list joined by newlines (images and other media
    parts carry nothing to search)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    return "\n".join(p["text"] for p in value
                     if type(p) is dict and p.get("type") == "text" and isinstance(p.get("text"), str) and p["text"])


def part_message(part: dict[str, Any]) -> tuple[KindName, str] | None:
    """(kind, text) of a content part: ``text`` is text, ``think`` thinking (its text under
    ``think``, or ``text`` in some writers); None for media and empty parts."""
    ptype = part.get("type")
    if ptype == "text":
        text = part.get("text")
        return ("text", text) if isinstance(text, str) and text.strip() else None
    if ptype == "think":
        text = part.get("think")
        if not isinstance(text, str) or not text.strip():
            text = part.get("text")
        return ("thinking", text) if isinstance(text, str) and text.strip() else None
    return None


def call_text(name: object, args: object) -> str:
    """``<tool> <arguments as compact JSON>``; arguments sent as a JSON string are parsed first."""
    tool = name if isinstance(name, str) and name else "tool"
    if isinstance(args, str):
        parsed = loads_line(args.encode("utf-8", "surrogatepass")) if args.strip() else None
        args = parsed if parsed is not None else args
    if args is None or args == "":
        return tool
    return tool + " " + (args if isinstance(args, str) else compact_json(args))


def output_text(result: dict[str, Any]) -> str:
    """A tool result's text: its ``output`` (a string, or content parts), else its ``message``."""
    output = result.get("output")
    text = parts_text(output) if isinstance(output, str | list) else (compact_json(output) if output else "")
    if not text.strip():
        message = result.get("message")
        text = message if isinstance(message, str) else ""
    return text


def legacy_call(payload: dict[str, Any]) -> str:
    """A Kimi CLI ``ToolCall``: ``{id, function: {name, arguments (a JSON string)}}``."""
    function = as_object(payload.get("function"))
    return call_text(function.get("name") or payload.get("name"), function.get("arguments"))


def code_call(call: dict[str, Any]) -> str:
    """A Kimi Code tool call (``{name, args}``), or an OpenAI-shaped one in an appended message."""
    function = as_object(call.get("function"))
    name = call.get("name") or function.get("name")
    args = call["args"] if "args" in call else call.get("arguments", function.get("arguments"))
    return call_text(name, args)


def is_person(origin: object) -> bool:
    """Whether a prompt's ``origin`` says a person wrote it: kind ``user`` (or ``user-…``), a slash
    command the person typed (trigger ``user-slash``), or no origin at all (older protocols)."""
    if type(origin) is not dict:
        return True
    kind, trigger = origin.get("kind"), origin.get("trigger")
    return kind is None or kind == "" or (isinstance(kind, str) and kind.startswith("user")) or trigger == "user-slash"
