"""How the last one-shot ``aivault index`` ended, for a later ``aivault status`` without a daemon.

A daemon reports its own failures while it runs (status ``degraded``, ``writeError``); a one-shot
index that stopped on a full disk has no one to tell afterwards but the user who ran it. So it keeps
``index-run.json`` in the data directory: ``running`` when it starts (with its pid), ``done`` or
``failed`` with the reason when it ends. The record is rewritten in place, within bytes the file
already holds, so that the disk that just filled up can still take the word that it did.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from aivault import log
from aivault.home import Home

_log = log.get("lastrun")

RECORD_NAME = "index-run.json"
# The file's fixed size: a record is padded with spaces to it, so rewriting it needs no new block.
RECORD_BYTES = 2048
REASON_MAX_CHARS = 1200


@dataclass(frozen=True, slots=True)
class LastRun:
    state: str  # running | done | failed
    pid: int
    started_at: int  # epoch ms
    ended_at: int | None
    reason: str | None

    def stale(self) -> bool:
        """A run recorded as running whose process is gone: it was killed (or the machine stopped)."""
        if self.state != "running":
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def _path(home: Home) -> str:
    return str(home.path / RECORD_NAME)


def _write(home: Home, record: dict[str, Any]) -> None:
    data = json.dumps(record, ensure_ascii=True).encode()
    if len(data) > RECORD_BYTES:
        record = {**record, "reason": str(record.get("reason") or "")[:200]}
        data = json.dumps(record, ensure_ascii=True).encode()[:RECORD_BYTES]
    fd = os.open(_path(home), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data.ljust(RECORD_BYTES, b" "), 0)
    finally:
        os.close(fd)


def _record(home: Home, record: dict[str, Any]) -> None:
    try:
        _write(home, record)
    except OSError as exc:  # a data directory it cannot write fails the run itself, with its own message
        _log.warning("could not record how this index run went; a later `aivault status` cannot say it",
                     file=_path(home), error=exc.strerror or str(exc))


def started(home: Home, now_ms: int) -> None:
    """Record a one-shot index as running."""
    _record(home, {"state": "running", "pid": os.getpid(), "startedAt": now_ms, "endedAt": None, "reason": None})


def ended(home: Home, started_ms: int, now_ms: int, reason: str | None = None) -> None:
    """Record how it ended: ``reason`` None for success, else what the user was told."""
    record = {"state": "failed" if reason else "done", "pid": os.getpid(), "startedAt": started_ms,
              "endedAt": now_ms, "reason": reason[:REASON_MAX_CHARS] if reason else None}
    _record(home, record)


def read(home: Home) -> LastRun | None:
    try:
        with open(_path(home), "rb") as fh:
            raw = json.loads(fh.read(RECORD_BYTES * 2).decode("utf-8", "replace").strip() or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("state") not in ("running", "done", "failed"):
        return None
    try:
        return LastRun(str(raw["state"]), int(raw.get("pid") or 0), int(raw.get("startedAt") or 0),
                       int(raw["endedAt"]) if raw.get("endedAt") is not None else None,
                       str(raw["reason"]) if raw.get("reason") else None)
    except (TypeError, ValueError):
        return None


__all__ = ["RECORD_NAME", "LastRun", "ended", "read", "started"]
