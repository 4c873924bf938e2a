"""Whole-number tuning settings read from the environment (``AIVAULT_DUCKDB_THREADS`` and the like).

A value that is not a whole number, or is below its minimum, is a ``ConfigInvalid`` error naming
the variable and what it must be, rather than an interpreter error from ``int()`` at start-up.
"""

from __future__ import annotations

import os

from aivault.errors import ConfigInvalid


def env_int(name: str, default: int, *, minimum: int = 1) -> int:
    """``name``'s value from the environment, or ``default`` when it is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigInvalid(f"{name}={raw!r} is not a whole number: set it to one (at least {minimum}) "
                            "or unset it") from None
    if value < minimum:
        raise ConfigInvalid(f"{name}={value} is below its minimum of {minimum}: raise it or unset it")
    return value
