"""Text conventions of Cursor agent transcripts (docs/formats.md §5.2), shared by the readers.

Cursor wraps what the user typed in ``<user_query>…</user_query>``, often after a
``<timestamp>Wednesday, Sep 9, 2026, 1:36 AM (UTC+8)</timestamp>`` tag (the only time a transcript
carries), and sends context it gathered itself (``<user_info>``, attached files, rules) as "user"
text too: that is injected context, a system message, never user speech or a title. The plain-text
``<id>.txt`` transcripts of builds before the JSONL ones are parsed here as well.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import orjson

from aivault.scanner.model import Message
from aivault.scanner.parsers.jsonutil import compact_json, to_epoch_ms

_TIMESTAMP_TAG = re.compile(r"<timestamp>(.*?)</timestamp>", re.S | re.I)
# The English form Cursor writes, weekday and UTC offset optional (agentsview #1662).
_TIMESTAMP_BODY = re.compile(
    r"\s*(?:[A-Za-z]+,\s*)?([A-Za-z]{3,})\.?\s+(\d{1,2}),\s*(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([AaPp][Mm])"
    r"\s*(?:\(\s*(?:UTC|GMT)\s*(?:([+-])(\d{1,2})(?::?(\d{2}))?)?\s*\))?\s*$")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_USER_QUERY = re.compile(r"<user_query>(.*?)</user_query>", re.S)
_ENVELOPE = re.compile(r"<([a-z][a-z0-9_-]*)(?:\s[^>]*)?>")
_INJECTED_MARK = "<user_info>"
# Offsets beyond this are not time zones (UTC-12 … UTC+14).
_MAX_OFFSET_MIN = 15 * 60


def parse_timestamp_tag(body: str) -> int | None:
    """Epoch ms of a ``<timestamp>`` tag's text (Cursor's English form, or ISO 8601); None otherwise."""
    match = _TIMESTAMP_BODY.match(body)
    if match is None:
        return to_epoch_ms(body.strip()) if body.strip()[:1].isdigit() else None
    month_name, day, year, hour, minute, second, meridiem, sign, off_h, off_m = match.groups()
    month = month_name[:3].lower()
    if month not in _MONTHS:
        return None
    h = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
    offset = (int(off_h or 0) * 60 + int(off_m or 0)) * (-1 if sign == "-" else 1)
    if abs(offset) > _MAX_OFFSET_MIN:
        return None
    try:
        local = datetime(int(year), _MONTHS.index(month) + 1, int(day), h, int(minute), int(second or 0),
                         tzinfo=timezone(timedelta(minutes=offset)))
    except ValueError:
        return None
    return to_epoch_ms(local.astimezone(UTC).isoformat())


def is_injected(text: str) -> bool:
    """Context Cursor gathered and sent as user text: ``<user_info>``, or one ``<tag>…</tag>`` envelope."""
    if _INJECTED_MARK in text:
        return True
    head = text.lstrip()
    match = _ENVELOPE.match(head)
    return match is not None and f"</{match.group(1)}>" in head


def split_user_text(text: str) -> tuple[str | None, str | None, int | None]:
    """(what the user typed, injected context beside it, the ``<timestamp>`` time) of one user text."""
    ts: int | None = None
    tag = _TIMESTAMP_TAG.search(text)
    if tag is not None:
        ts = parse_timestamp_tag(tag.group(1))
        text = _TIMESTAMP_TAG.sub("", text)
    queries = [q.strip() for q in _USER_QUERY.findall(text)]
    queries = [q for q in queries if q]
    if queries:
        rest = _USER_QUERY.sub("", text).strip()
        return "\n\n".join(queries), rest or None, ts
    body = text.strip()
    if not body:
        return None, None, ts
    if is_injected(body):
        return None, body, ts
    return body, None, ts


def user_messages(text: str, ms: int | None) -> tuple[list[Message], str | None, int | None]:
    """The messages of one user text (speech as user, context as system), the speech, and its time."""
    speech, context, ts = split_user_text(text)
    when = ts if ts is not None else ms
    out: list[Message] = []
    if context:
        out.append(Message("system", "text", context, when))
    if speech:
        out.append(Message("user", "text", speech, when))
    return out, speech, ts


def tool_call_text(name: object, tool_input: object) -> str:
    """``<tool name> <compact JSON of its input>`` (docs/formats.md §0 rule 2)."""
    tool = name if isinstance(name, str) and name else "tool"
    if tool_input is None:
        return tool
    if isinstance(tool_input, str):
        try:
            tool_input = orjson.loads(tool_input)
        except orjson.JSONDecodeError:
            return f"{tool} {tool_input}" if tool_input else tool
    return f"{tool} {compact_json(tool_input)}"


def blocks_text(content: object) -> str:
    """A string content as is, or the text of a block list (``text`` blocks, and bare strings)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else compact_json(content)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif type(block) is dict and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


# --- the plain-text transcripts of older builds (<id>.txt) ------------------------------------------
# "user:" / "assistant:" alone on a line start a turn; inside an assistant turn "[Thinking]",
# "[Tool call] <name>" and "[Tool result] <name>" start blocks whose body is the marker line's rest
# plus the indented (or blank) lines that follow (the grammar agentsview's reader uses).
_ROLE_LINE = re.compile(r"^(user|assistant):\s*$")
_MARKERS = ("[Thinking]", "[Tool call]", "[Tool result]")


def parse_txt(text: str) -> tuple[list[Message], str | None, int | None, int | None]:
    """(messages, first user speech, earliest and latest ``<timestamp>``) of a ``.txt`` transcript."""
    turns: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        marker = _ROLE_LINE.match(line.strip())
        if marker is not None:
            turns.append((marker.group(1), []))
        elif turns:
            turns[-1][1].append(line)
    messages: list[Message] = []
    first_user: str | None = None
    t0: int | None = None
    t1: int | None = None
    for role, lines in turns:
        if role == "user":
            out, speech, ts = user_messages("\n".join(lines), None)
            messages += out
            first_user = first_user or speech
            if ts is not None:
                t0 = ts if t0 is None else min(t0, ts)
                t1 = ts if t1 is None else max(t1, ts)
        else:
            messages += _assistant_txt(lines)
    return messages, first_user, t0, t1


def _assistant_txt(lines: list[str]) -> list[Message]:
    out: list[Message] = []
    prose: list[str] = []

    def flush_prose() -> None:
        body = "\n".join(prose).strip()
        if body:
            out.append(Message("assistant", "text", body, None))
        prose.clear()

    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        marker = next((m for m in _MARKERS if stripped.startswith(m)), None)
        if marker is None:
            prose.append(lines[i])
            i += 1
            continue
        flush_prose()
        head = stripped[len(marker):].strip()
        i += 1
        body: list[str] = []
        while i < len(lines) and not _ends_block(lines[i]):
            body.append(lines[i])
            i += 1
        text = "\n".join(_dedent(body)).strip()
        if marker == "[Thinking]":
            thought = "\n".join(p for p in (head, text) if p)
            if thought:
                out.append(Message("assistant", "thinking", thought, None))
        elif marker == "[Tool call]":
            out.append(Message("assistant", "tool_call", tool_call_text(head, _txt_params(text)), None))
        elif text:
            out.append(Message("tool", "tool_result", text, None))
    flush_prose()
    return out


def _ends_block(line: str) -> bool:
    stripped = line.strip()
    if any(stripped.startswith(m) for m in _MARKERS):
        return True
    return bool(stripped) and line[:1] not in (" ", "\t")


def _dedent(lines: list[str]) -> list[str]:
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    return [line[cut:] for line in lines]


def _txt_params(body: str) -> object:
    """A tool call's parameters: its JSON when the body is JSON, else ``key: value`` lines, else the text."""
    if not body:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    params: dict[str, str] = {}
    for line in body.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            key, sep, value = line.partition("=")
        if not sep or not key.strip() or line[:1].isspace():
            return {"input": body}
        params[key.strip()] = value.strip()
    return params
