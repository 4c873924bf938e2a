"""The scanner children of one indexer: shards, slots, reconcile requests.

Parsing and tokenizing are the CPU-heavy half of indexing and run in Python, so the indexer
runs one scanner per core (``AIVAULT_SCANNERS``, default: the CPU count, at most 4). Each owns
the files whose ``(device, inode)`` hash falls in its shard: a renamed file keeps its shard,
and a file belongs to exactly one scanner at a time, so per-file offsets stay contiguous.
A reconcile request is done when every shard has reported its pass.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from aivault.protocol import shard_of

__all__ = ["MAX_SCANNERS", "Progress", "Request", "Slot", "default_scanners", "shard_of"]

MAX_SCANNERS = 4


def default_scanners() -> int:
    env = os.environ.get("AIVAULT_SCANNERS")
    if env:
        return max(1, min(MAX_SCANNERS, int(env)))
    return max(1, min(MAX_SCANNERS, os.cpu_count() or 1))


@dataclass(slots=True)
class Progress:
    """What a pass reported, for status and progress bars."""

    running: bool = False
    full: bool = False
    files_seen: int = 0
    files_changed: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    messages_read: int = 0
    messages_committed: int = 0

    def add(self, other: Progress) -> None:
        self.running = self.running or other.running
        self.full = self.full or other.full
        self.files_seen += other.files_seen
        self.files_changed += other.files_changed
        self.files_done += other.files_done
        self.bytes_total += other.bytes_total
        self.bytes_done += other.bytes_done
        self.messages_read += other.messages_read
        self.messages_committed += other.messages_committed


@dataclass(slots=True)
class Slot:
    """One scanner child and what the indexer knows of it."""

    shard: int
    proc: subprocess.Popen[bytes] | None = None
    ident: bytes | None = None
    epoch: int = 0
    respawn_at: float = 0.0
    respawn_delay: float = 1.0
    sent: set[int] = field(default_factory=set)
    progress: Progress = field(default_factory=Progress)
    failed: list[dict[str, str]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)
    peak_rss_kb: int = 0

    def reap(self, *, block: bool) -> int | None:
        """The child's exit code once it has exited (recording its peak RSS), else None."""
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is not None:
            return proc.returncode
        try:
            pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return proc.poll()
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.peak_rss_kb = max(self.peak_rss_kb, int(usage.ru_maxrss))
        return proc.returncode


SUMMED = ("files_seen", "files_changed", "messages", "malformed", "oversized", "record_cut", "too_old")


@dataclass(slots=True)
class Request:
    """A reconcile request: done when every shard has reported a pass that started after it."""

    full: bool
    futures: list[Future[dict[str, Any]]]
    remaining: set[int]
    summary: dict[str, Any] = field(default_factory=lambda: {k: 0 for k in SUMMED})

    def absorb(self, shard: int, header: dict[str, Any]) -> bool:
        """Count one shard's pass; True when the request is complete."""
        if shard in self.remaining:
            self.remaining.discard(shard)
            for k in SUMMED:
                self.summary[k] += int(header.get(k) or 0)
        return not self.remaining
