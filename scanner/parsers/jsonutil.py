"""Small JSON and time helpers shared by the transcript parsers (text ones are in textutil).

Everything here sits on the scanner's hot path and must never raise on hostile input: a
transcript is a file written by another program, possibly truncated mid-write or mid-character.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
# Below these an epoch number is not a plausible transcript time (docs/formats.md §0 rule 5).
_EPOCH_MS_MIN = 1e12
_EPOCH_S_MIN = 1e9

# Node's JSON.stringify writes an unpaired UTF-16 surrogate as a backslash-u D800..DFFF escape (a tool output
# cut in the middle of an emoji); orjson rejects those, and Python's json would let them through
# into strings that cannot be encoded as UTF-8 later. Only used on lines orjson already refused.
_SURROGATE_ESCAPE = re.compile(
    r"(\\+)u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?|(\\+)u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def _replace_lone_surrogate(match: re.Match[str]) -> str:
    backslashes = match.group(1) if match.group(1) is not None else match.group(4)
    # An even run of backslashes is an escaped backslash followed by literal text "uD..."; a
    # high surrogate followed by its low half is a valid pair.
    if len(backslashes) % 2 == 0 or match.group(3):
        return match.group(0)
    return backslashes[:-1] + "\\ufffd"


def loads_line(line: bytes) -> object | None:
    """Parse one JSONL line; None when it is not JSON. Never raises.

    Lines that are not valid UTF-8 (or carry a byte-order mark or unpaired surrogate escapes)
    are repaired with U+FFFD replacement characters and parsed again, so one bad byte in a long
    tool output does not cost the whole record.
    """
    value: object
    try:
        value = orjson.loads(line)
        return value
    except orjson.JSONDecodeError:
        pass
    text = line.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\\u" in text:
        text = _SURROGATE_ESCAPE.sub(_replace_lone_surrogate, text)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value


def to_epoch_ms(value: object) -> int | None:
    """Epoch milliseconds from an ISO-8601 string or an epoch number (ms or s); None otherwise."""
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        # Integer arithmetic: float timestamps lose a millisecond on some values.
        return (dt - _EPOCH) // _ONE_MS
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if value != value:  # NaN
            return None
        if value > _EPOCH_MS_MIN:
            return int(value) if value < 1e15 else None
        if value > _EPOCH_S_MIN:
            return int(value * 1000)
    return None


def compact_json(obj: Any) -> str:
    """Compact JSON text for ``obj`` (non-ASCII kept as is)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        # Integers beyond 64 bits and other values orjson refuses.
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def as_object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a field of an unexpected shape)."""
    return value if isinstance(value, dict) else {}


def first_text(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The value of the first of ``keys`` that holds a non-empty string (writers renamed fields)."""
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None
