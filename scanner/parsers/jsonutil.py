"""Small JSON and time helpers shared by the transcript parsers.

Everything here sits on the scanner's hot path and must never raise on hostile input: a
transcript is a file written by another program, possibly truncated mid-write or mid-character.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import orjson

from aivault.errors import ParserStateError
from aivault.scanner.model import Message, ParseStats

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
# Below these an epoch number is not a plausible transcript time (docs/formats.md §0 rule 5).
_EPOCH_MS_MIN = 1e12
_EPOCH_S_MIN = 1e9
# ParseStats.extra travels in every saved parser state, and its keys partly come from the file
# (a record type nobody knows yet): cap how many distinct keys and how long a key may get.
EXTRA_KEYS_MAX = 24
REASON_DETAIL_MAX_CHARS = 40

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


def first_line_title(text: str, limit: int = 80) -> str | None:
    """The first non-blank line of ``text``, stripped and cut to ``limit`` characters."""
    start = 0
    end = len(text)
    while start < end:
        newline = text.find("\n", start)
        stop = end if newline < 0 else newline
        # Only the head of a line can end up in the title; avoid stripping a huge pasted line.
        line = text[start : min(stop, start + limit * 4)].strip()
        if line:
            if len(line) > limit:
                return line[: limit - 1].rstrip() + "…"
            return line
        start = stop + 1
    return None


def compact_json(obj: Any) -> str:
    """Compact JSON text for ``obj`` (non-ASCII kept as is)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        # Integers beyond 64 bits and other values orjson refuses.
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def count_reason(stats: ParseStats, reason: str, detail: str | None = None) -> None:
    """Count one skipped record in ``stats.extra`` under ``reason``, or ``"reason:detail"``.

    Once EXTRA_KEYS_MAX distinct keys exist, a new detail is counted under ``"reason:other"``,
    so a file full of made-up record types cannot grow the state without bound.
    """
    extra = stats.extra
    key = reason
    if detail is not None:
        key = f"{reason}:{detail[:REASON_DETAIL_MAX_CHARS]}"
        if key not in extra and len(extra) >= EXTRA_KEYS_MAX:
            key = f"{reason}:other"
    extra[key] = extra.get(key, 0) + 1


def state_str(state: dict[str, Any], key: str) -> str | None:
    """``state[key]`` when it is a str or None; ParserStateError otherwise."""
    value = state.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ParserStateError(f"state field {key!r} is not a string")


def state_int(state: dict[str, Any], key: str) -> int | None:
    """``state[key]`` when it is an int or None; ParserStateError otherwise."""
    value = state.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ParserStateError(f"state field {key!r} is not an integer")


def state_list(state: dict[str, Any], key: str) -> list[Any]:
    """A copy of ``state[key]`` when it is a list (or missing); ParserStateError otherwise."""
    value = state.get(key, [])
    if isinstance(value, list | tuple):
        return list(value)
    raise ParserStateError(f"state field {key!r} is not a list")


def stats_to_state(stats: ParseStats) -> list[Any]:
    """ParseStats as a msgpack-friendly list, for a parser's ``state()``."""
    return [stats.lines, stats.malformed, stats.skipped, dict(stats.extra)]


def stats_from_state(value: object) -> ParseStats:
    """The inverse of :func:`stats_to_state`; ParserStateError on anything else."""
    if not isinstance(value, list | tuple) or len(value) != 4 or not isinstance(value[3], dict):
        raise ParserStateError("state field 'stats' is malformed")
    lines, malformed, skipped, extra = value
    if not all(isinstance(n, int) for n in (lines, malformed, skipped, *extra.values())):
        raise ParserStateError("state field 'stats' holds a non-integer counter")
    return ParseStats(
        lines=lines, malformed=malformed, skipped=skipped, extra={str(k): v for k, v in extra.items()}
    )


class LineParser(ABC):
    """The line loop the JSONL parsers share: decode, dispatch, keep the session's counters.

    A subclass sets ``stats``, ``_started``, ``_updated`` and ``_count`` (restored from its
    state) and implements ``_record``: the messages of one decoded JSON object, or None when the
    object has an unexpected shape (counted as malformed; nothing else of it is kept).
    """

    # Where a record's time is when it has no "timestamp" (some writers use another name).
    fallback_time_key: ClassVar[str | None] = None
    stats: ParseStats
    _started: int | None
    _updated: int | None
    _count: int

    def feed(self, line: bytes) -> list[Message]:
        """Parse one line (without its newline) into zero or more Messages. Never raises."""
        stats = self.stats
        stats.lines += 1
        obj = loads_line(line)
        if type(obj) is not dict:
            if obj is None and not line.strip():
                stats.skipped += 1
            else:
                stats.malformed += 1
            return []
        ts = obj.get("timestamp")
        if ts is None and self.fallback_time_key is not None:
            ts = obj.get(self.fallback_time_key)
        ms = to_epoch_ms(ts) if ts is not None else None
        out = self._record(obj, ms)
        if out is None:
            stats.malformed += 1
            return []
        if ms is not None:
            if self._started is None or ms < self._started:
                self._started = ms
            if self._updated is None or ms > self._updated:
                self._updated = ms
        if out:
            self._count += len(out)
        else:
            stats.skipped += 1
        return out

    @abstractmethod
    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        """The messages of one JSON object (a transcript line), or None if it is malformed."""
