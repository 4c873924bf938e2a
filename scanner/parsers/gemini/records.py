"""Gemini CLI conversation records → normalized messages (docs/formats.md §3).

A Gemini session is a list of message records (``user``, ``gemini``/legacy ``model``, ``info``,
``error``, ``warning``) plus metadata. The legacy ``.json`` file holds them as one document; the
v0.40+ ``.jsonl`` file is a log that has to be *replayed*: message records keyed by ``id`` (a later
record with the same id replaces the earlier one in place), ``{"$set": {...}}`` metadata updates,
``{"$set": {"messages": [...]}}`` checkpoints that replace the whole list, and
``{"$rewindTo": id}`` which drops that message and everything after it. ``Replay`` does that; the
functions below turn the surviving records into messages. Qwen Code's Gemini-fork era files use the
same shapes (docs/formats.md §10).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aivault.scanner.model import Message
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import compact_json, first_text, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, opens_with

# Context Gemini CLI sends as the first "user" turns: the environment block (a directory tree),
# its older untagged form, and the IDE's editor-context JSON. Never user speech, never a title.
INJECTED_PREFIXES: tuple[str, ...] = (
    "<session_context>",
    "This is the Gemini CLI. We are setting up the context for our chat.",
    "Here is the user's editor context",
)
# The canned model reply that follows the injected environment turn.
CONTEXT_ACK = "Got it. Thanks for the context!"
# The model's message types: Gemini CLI's (and its older API-shaped ``model``); a fork names its own
# (Tabnine CLI writes ``tabnine``) and passes its set to ``conversation``.
ASSISTANT_TYPES = frozenset({"gemini", "model"})
_SYSTEM_TYPES = frozenset({"info", "error", "warning"})
# Keys of a message list inside a checkpoint that have no id of their own: cannot collide with an id.
_ANON_KEY = "\x00anon:"


def as_parts(content: object) -> list[Any]:
    """A Gemini ``PartListUnion`` (a string, one part, or a list of parts and strings) as a list."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    return [content]


def parts_text(parts: list[Any], *, thoughts: bool = False) -> str:
    """The text parts joined (Gemini joins a turn's parts without a separator); ``thoughts`` picks
    the parts flagged ``thought: true`` instead of the others."""
    out = [p["text"] for p in parts
           if type(p) is dict and isinstance(p.get("text"), str) and bool(p.get("thought")) is thoughts]
    return "".join(out)


def response_text(response: object) -> str:
    """The text of a functionResponse's ``response``: its ``output`` or ``error``, else compact JSON."""
    if isinstance(response, str):
        return response
    if type(response) is dict:
        return first_text(response, ("output", "error", "content", "llmContent")) or (
            compact_json(response) if response else "")
    if response is None:
        return ""
    return compact_json(response)


def _display_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if type(value) is dict:
        diff = value.get("fileDiff")  # an edit's FileDiff display
        if isinstance(diff, str) and diff:
            return diff
        return compact_json(value) if value else ""
    return ""


def tool_result_text(call: dict[str, Any]) -> str:
    """What a tool call returned: its functionResponse parts, else ``resultDisplay``, else ``error``."""
    texts: list[str] = []
    for part in as_parts(call.get("result")):
        if type(part) is not dict:
            continue
        fr = part.get("functionResponse")
        if type(fr) is dict:
            texts.append(response_text(fr.get("response")))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    text = "\n".join(t for t in texts if t)
    if not text:
        text = _display_text(call.get("resultDisplay"))
    if not text and isinstance(call.get("error"), str):
        text = call["error"]
    return text


def tool_call_text(name: object, args: object) -> str:
    label = name if isinstance(name, str) and name else "tool"
    return f"{label} {compact_json(args)}" if args is not None else label


@dataclass(slots=True)
class Replay:
    """The state a Gemini JSONL log replays to: merged metadata and the surviving message records."""

    meta: dict[str, Any] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # insertion-ordered, like JS Map
    skips: dict[str, int] = field(default_factory=dict)

    def load_document(self, doc: dict[str, Any]) -> None:
        """A legacy single-document session (``.json``)."""
        self.meta.update({k: v for k, v in doc.items() if k != "messages"})
        self._checkpoint(doc.get("messages"))

    def record(self, obj: dict[str, Any]) -> None:
        """One line of a v0.40+ log, in the order Gemini CLI's own loader tests its shapes."""
        rewind = obj.get("$rewindTo")
        if isinstance(rewind, str):
            self._rewind(rewind)
        elif isinstance(obj.get("id"), str):
            mid = obj["id"]
            if mid in self.messages:
                count_skip(self.skips, "replaced-record")
            self.messages[mid] = obj  # an update keeps the message's place
        elif type(obj.get("$set")) is dict:
            update = obj["$set"]
            if "messages" in update:
                self._checkpoint(update["messages"])
            self.meta.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(obj.get("sessionId"), str):
            self.meta.update({k: v for k, v in obj.items() if k != "messages"})
            if "messages" in obj:  # a legacy document written into a .jsonl
                self._checkpoint(obj["messages"])
        else:
            count_skip(self.skips, "unknown_record", _shape(obj))

    def _checkpoint(self, messages: object) -> None:
        # An authoritative list: it replaces what was replayed so far; bare records after it apply on top.
        if not isinstance(messages, list):
            if messages is not None:
                count_skip(self.skips, "malformed-record")
            return
        if self.messages:
            count_skip(self.skips, "checkpointed", n=len(self.messages))
        self.messages = {}
        for i, m in enumerate(messages):
            if type(m) is not dict:
                count_skip(self.skips, "malformed-record")
                continue
            mid = m.get("id")
            self.messages[mid if isinstance(mid, str) else f"{_ANON_KEY}{i}"] = m

    def _rewind(self, target: str) -> None:
        keys = list(self.messages)
        # Gemini CLI empties the conversation when the id is unknown; so do we.
        cut = keys.index(target) if target in self.messages else 0
        if len(keys) > cut:
            count_skip(self.skips, "rewound", n=len(keys) - cut)
        for key in keys[cut:]:
            del self.messages[key]


def _shape(obj: dict[str, Any]) -> str:
    kind = obj.get("type")
    return kind if isinstance(kind, str) else "(none)"


@dataclass(slots=True)
class Conversation:
    """Messages of a replayed session and what the session record needs from them."""

    messages: list[Message] = field(default_factory=list)
    first_user: str | None = None
    context: str | None = None  # the injected environment text (it names the workspace directories)
    min_ts: int | None = None
    max_ts: int | None = None


def conversation(records: list[dict[str, Any]], skips: dict[str, int],
                 assistant_types: frozenset[str] = ASSISTANT_TYPES) -> Conversation:
    """The messages of Gemini message records, in order (docs/formats.md §3 mapping)."""
    conv = Conversation()
    # Calls already carried by toolCalls[]: a checkpoint rebuilt from the API history repeats them
    # as functionCall/functionResponse parts, which must not be indexed twice.
    call_ids = {tc["id"] for rec in records for tc in _calls(rec) if isinstance(tc.get("id"), str)}
    # Call id -> whether its result was emitted. A call announced by one record and completed by
    # another under a new message id (Tabnine CLI, docs/formats.md §29) is one call, one result.
    emitted: dict[str, bool] = {}
    after_context = False
    for rec in records:
        ts = to_epoch_ms(rec.get("timestamp"))
        if ts is not None:
            conv.min_ts = ts if conv.min_ts is None else min(conv.min_ts, ts)
            conv.max_ts = ts if conv.max_ts is None else max(conv.max_ts, ts)
        kind = rec.get("type")
        was_context, after_context = after_context, False
        if kind == "user":
            user = _user(rec, ts, call_ids, conv, skips)
            if user is None:
                after_context = True
                continue
            out = user
        elif kind in assistant_types:
            out = _assistant(rec, ts, call_ids, emitted, skips)
            if was_context and [m.text for m in out] == [CONTEXT_ACK]:
                count_skip(skips, "injected-context")
                continue
        elif kind in _SYSTEM_TYPES:
            text = _content_text(rec)
            out = [Message("system", "text", text, ts)] if text.strip() else []
        else:
            count_skip(skips, "unknown_record", kind if isinstance(kind, str) else "(none)")
            continue
        if not out:
            count_skip(skips, "empty-record")
        conv.messages += out
    return conv


def _calls(rec: dict[str, Any]) -> list[dict[str, Any]]:
    calls = rec.get("toolCalls")
    return [c for c in calls if type(c) is dict] if isinstance(calls, list) else []


def _content_parts(rec: dict[str, Any]) -> list[Any]:
    # Old builds wrote model turns as API contents: {"type": "model", "parts": [...]}.
    return as_parts(rec["content"] if "content" in rec else rec.get("parts"))


def _content_text(rec: dict[str, Any]) -> str:
    return parts_text(_content_parts(rec))


def _user(rec: dict[str, Any], ts: int | None, call_ids: set[str], conv: Conversation,
          skips: dict[str, int]) -> list[Message] | None:
    """A user record's messages; None when it is injected context (dropped, counted)."""
    parts = _content_parts(rec)
    # displayContent is what the user typed; content adds the expanded @file contents.
    text = parts_text(as_parts(rec.get("displayContent"))) or parts_text(parts)
    out: list[Message] = []
    if text.strip():
        if opens_with(text, INJECTED_PREFIXES, head=160):
            count_skip(skips, "injected-context")
            if conv.context is None:
                conv.context = text
            return None
        out.append(Message("user", "text", text, ts))
        if conv.first_user is None:
            conv.first_user = first_line_title(text)
    for part in parts:  # tool results a history checkpoint recorded as user turns
        fr = part.get("functionResponse") if type(part) is dict else None
        if type(fr) is dict and fr.get("id") not in call_ids:
            result = response_text(fr.get("response"))
            if result:
                out.append(Message("tool", "tool_result", result, ts))
    return out


def _assistant(rec: dict[str, Any], ts: int | None, call_ids: set[str], emitted: dict[str, bool],
               skips: dict[str, int]) -> list[Message]:
    out: list[Message] = []
    thoughts = rec.get("thoughts")
    for th in thoughts if isinstance(thoughts, list) else []:
        if type(th) is not dict:
            continue
        pieces = [th.get(k) for k in ("subject", "description")]
        text = "\n".join(p.strip() for p in pieces if isinstance(p, str) and p.strip())
        if text:
            out.append(Message("assistant", "thinking", text, to_epoch_ms(th.get("timestamp")) or ts))
    parts = _content_parts(rec)
    thinking = parts_text(parts, thoughts=True)
    if thinking.strip():
        out.append(Message("assistant", "thinking", thinking, ts))
    text = parts_text(parts)
    if text.strip():
        out.append(Message("assistant", "text", text, ts))
    for part in parts:  # calls a history checkpoint kept only as content parts
        fc = part.get("functionCall") if type(part) is dict else None
        if type(fc) is dict and fc.get("id") not in call_ids:
            out.append(Message("assistant", "tool_call", tool_call_text(fc.get("name"), fc.get("args")), ts))
    for call in _calls(rec):
        when = to_epoch_ms(call.get("timestamp")) or ts
        cid = call.get("id")
        result = tool_result_text(call)
        if isinstance(cid, str) and cid in emitted:
            count_skip(skips, "repeated-call")
            if result and not emitted[cid]:
                out.append(Message("tool", "tool_result", result, when))
                emitted[cid] = True
            continue
        out.append(Message("assistant", "tool_call", tool_call_text(call.get("name"), call.get("args")), when))
        if result:
            out.append(Message("tool", "tool_result", result, when))
        if isinstance(cid, str):
            emitted[cid] = bool(result)
    return out
