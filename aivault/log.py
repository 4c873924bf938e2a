"""Logging policy: structlog, one canonical line per batch or RPC, JSON when not on a terminal.

Logs go to stderr so that stdout stays the command's output (`--json` results, tables).
``AIVAULT_LOG_LEVEL`` (debug|info|warning|error, default warning for CLI commands and info
for the daemon) filters them.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


_current = "warning"


def current_level_name() -> str:
    """The level this process logs at, for children that should log alike."""
    return _current


def configure(default_level: str = "warning", *, process: str = "aivault") -> None:
    global _current
    name = os.environ.get("AIVAULT_LOG_LEVEL", default_level).lower()
    _current = name if name in _LEVELS else "warning"
    level = _LEVELS[_current]
    renderer: structlog.typing.Processor
    if sys.stderr.isatty():
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Whatever sys.stderr is when a line is written (a test's capture may replace and close it).
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(process=process, pid=os.getpid())


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]


def debug_enabled() -> bool:
    return os.environ.get("AIVAULT_LOG_LEVEL", "").lower() == "debug"
