"""Logging policy: structlog, one canonical line per batch or RPC, JSON when not on a terminal.

Logs go to stderr so that stdout stays the command's output (`--json` results, tables).
``AIVAULT_LOG_LEVEL`` (debug|info|warning|error, default warning for CLI commands and info
for the daemon) filters them.

structlog (and the asyncio it pulls in) costs tens of milliseconds to import, more than a CLI call
that only talks to the daemon spends on everything else, so it is imported when the first line
at or above the configured level is written, not before: ``get`` hands out a proxy, and
``configure`` only records the settings until structlog is loaded (at once if it already is).
A line below the level is dropped by the proxy without loading anything, as the filtering
logger would drop it.
"""

from __future__ import annotations

import _thread
import os
import sys
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import structlog

# The stdlib's numeric levels, spelled out: importing logging only for them costs a few ms.
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
# Method name -> level, for the calls the proxy can drop before structlog is loaded.
_METHOD_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40,
                  "critical": 50, "fatal": 50}

_current = "warning"
_process = "aivault"
_configured = False  # configure() was called; structlog gets its settings when it is loaded
_applied = False  # structlog has been loaded and given them
# Held while structlog is given this process's settings: another thread's first line must wait for
# them, or it would be written with structlog's defaults (to stdout, into a command's --json output).
_apply_lock = _thread.allocate_lock()  # _thread: importing threading would cost a client call ~1 ms


def current_level_name() -> str:
    """The level this process logs at, for children that should log alike."""
    return _current


def configure(default_level: str = "warning", *, process: str = "aivault") -> None:
    global _current, _process, _configured
    name = os.environ.get("AIVAULT_LOG_LEVEL", default_level).lower()
    _current = name if name in _LEVELS else "warning"
    _process = process
    _configured = True
    if "structlog" in sys.modules:
        with _apply_lock:
            _apply()


def _add_process(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # A processor rather than contextvars bound at configure time: those would reach only the
    # thread that happened to load structlog.
    event_dict.setdefault("process", _process)
    event_dict.setdefault("pid", os.getpid())
    return event_dict


def _apply() -> None:
    """Give structlog this process's settings (the caller holds ``_apply_lock``)."""
    global _applied
    import structlog

    renderer: structlog.typing.Processor
    if sys.stderr.isatty():
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _add_process,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[_current]),
        # Whatever sys.stderr is when a line is written (a test's capture may replace and close it).
        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
    _applied = True


def _load() -> None:
    """Load structlog for a line about to be written, with this process's settings if it has any
    and nobody configured structlog since (a test's ``capture_logs`` does)."""
    import structlog

    if _applied or not _configured:
        return
    with _apply_lock:
        if not _applied and not structlog.is_configured():
            _apply()


def _drop(*args: Any, **kw: Any) -> None:
    return None


class _Logger:
    """Stands in for ``structlog.get_logger(name)`` until a line is worth loading structlog for."""

    __slots__ = ("_name", "_real")

    def __init__(self, name: str) -> None:
        self._name = name
        self._real: Any = None

    def __getattr__(self, attr: str) -> Any:
        real = self._real
        if real is None:
            level = _METHOD_LEVELS.get(attr)
            if level is not None and _configured and not _applied and "structlog" not in sys.modules \
                    and level < _LEVELS[_current]:
                return _drop
            _load()
            import structlog

            real = self._real = structlog.get_logger(self._name)
        return getattr(real, attr)


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    return cast("structlog.typing.FilteringBoundLogger", _Logger(name))


def debug_enabled() -> bool:
    return os.environ.get("AIVAULT_LOG_LEVEL", "").lower() == "debug"
