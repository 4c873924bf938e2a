"""What every transcript format shares: RFC 3339 timestamps, Claude's project-directory names, UUIDs.

The helpers are pure and cheap because ``bench.gen_corpus`` calls them once per record.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

# The default start of a test transcript; tests that filter by time count from it.
BASE_TIME = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000
_DAY_PREFIX: dict[int, str] = {}


def iso_ms(ms: int) -> str:
    """RFC 3339 in UTC with milliseconds and a Z, as both Claude Code and Codex write it."""
    day_n, rem = divmod(ms, _DAY_MS)
    # Formatting the date is the slow part and a corpus has few distinct days, so each is formatted once.
    day = _DAY_PREFIX.get(day_n)
    if day is None:
        day = _DAY_PREFIX[day_n] = time.strftime("%Y-%m-%d", time.gmtime(day_n * 86_400))
    sec, milli = divmod(rem, 1000)
    hour, sec = divmod(sec, 3600)
    minute, sec = divmod(sec, 60)
    return f"{day}T{hour:02d}:{minute:02d}:{sec:02d}.{milli:03d}Z"


def epoch_ms(t: datetime) -> int:
    """Whole milliseconds since the epoch (truncated, as agents print them); ``t`` must be aware."""
    return (t - _EPOCH) // timedelta(milliseconds=1)


def iso(t: datetime) -> str:
    """``iso_ms`` of an aware datetime."""
    return iso_ms(epoch_ms(t))


def munge(cwd: str) -> str:
    """Claude Code's project directory name: every character but ASCII letters and digits becomes '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)


def uuid_layout(hex32: str, version: int) -> str:
    """32 hex digits laid out as a UUID of ``version`` with the RFC 4122 variant."""
    h = hex32
    return f"{h[:8]}-{h[8:12]}-{version}{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def uuid4(r: random.Random) -> str:
    """A version-4 UUID drawn from ``r`` (one 128-bit draw), so seeded corpora get stable ids."""
    return uuid_layout(f"{r.getrandbits(128):032x}", 4)


def uuid7(ms: int, r: random.Random) -> str:
    """A version-7 UUID (Codex session ids): the first 48 bits are the creation time in milliseconds."""
    return uuid_layout(f"{ms & 0xFFFF_FFFF_FFFF:012x}{r.getrandbits(80):020x}", 7)
