"""The scanner children of one indexer: shards, slots, reconcile requests.

Parsing and tokenizing are the CPU-heavy half of indexing and run in Python, so the indexer
runs one scanner per core (``AIVAULT_SCANNERS``, default: the CPU count, at most 4). Each owns
the files whose ``(device, inode)`` hash falls in its shard: a renamed file keeps its shard,
and a file belongs to exactly one scanner at a time, so per-file offsets stay contiguous.
A reconcile request is done when every shard has reported its pass.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aivault
from aivault import log
from aivault.home import Home
from aivault.ingest import Progress as ProgressHeader
from aivault.ingest import shard_of

__all__ = ["EXIT_USAGE", "MAX_SCANNERS", "Progress", "ScannerPool", "Slot", "default_scanners", "shard_of"]

_log = log.get("indexer.scanners")

MAX_SCANNERS = 4
SCANNER_RESPAWN_MAX_S = 30.0
# The exit code of a scanner whose command line is invalid (argparse's): never restarted.
EXIT_USAGE = 2


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

    def report(self, header: ProgressHeader) -> None:
        """A PROGRESS message from the scanner: the first of a pass starts counting commits again."""
        if not self.running:
            self.running = True
            self.messages_committed = 0
        self.files_seen = header["files_seen"]
        self.files_changed = header["files_changed"]
        self.files_done = header["files_done"]
        self.bytes_total = header["bytes_total"]
        self.bytes_done = header["bytes_done"]
        self.messages_read = header["messages"]


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
    watch: dict[str, Any] = field(default_factory=dict)  # the scanner's file watcher (scanner/watch.py state())
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


class ScannerPool:
    """The scanner children: their command line, start, restart with backoff, and stop.

    Each is started with this process's pid (``--parent``: it exits the moment this process is
    gone) and a token only this pool knows (``--token``: its HELLO proves it is ours), in a
    session of its own so that a Ctrl-C meant for the daemon does not kill it mid-pass.
    """

    def __init__(self, home: Home, extra_roots: list[str], default_roots: bool, count: int, *,
                 watch: bool = False, bulk: bool = False) -> None:
        self.home = home
        self.bulk = bulk  # a one-shot bulk load: the scanners batch BULK_BATCH_SCALE times more
        self.extra_roots = extra_roots
        self.default_roots = default_roots
        self.watch = watch  # scanners watch their roots for changes (scanner/watch.py)
        self.slots = [Slot(i) for i in range(count)]
        self.token = secrets.token_hex(16)
        from aivault.config import redact_settings

        if not redact_settings(home).enabled:
            _log.warning("secret redaction is off (config.json redact.enabled false): tokens, passwords and keys "
                         "in transcripts are indexed as they are; answers to remote clients are still redacted")

    def command(self, shard: int = 0) -> list[str]:
        cmd = [sys.executable, "-m", "aivault.scanner", "--connect", self.home.ingest_endpoint,
               "--shard", f"{shard}/{len(self.slots)}", "--parent", str(os.getpid()), "--token", self.token]
        for spec in self.extra_roots:
            cmd += ["--root", spec]
        if not self.default_roots:
            cmd.append("--no-default-roots")
        if self.watch:
            cmd.append("--watch")
        if self.bulk:
            cmd.append("--bulk")
        from aivault.config import redact_settings

        redact = redact_settings(self.home)
        if not redact.enabled:
            cmd.append("--no-redact")
        for pattern in redact.allow:
            cmd += ["--redact-allow", pattern]
        return cmd

    def spawn(self, slot: Slot) -> None:
        env = dict(os.environ)
        env.setdefault("AIVAULT_LOG_LEVEL", log.current_level_name())
        # The child imports the same aivault as this process, installed or not.
        root = str(Path(aivault.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        slot.proc = subprocess.Popen(self.command(slot.shard), env=env, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        _log.info("scanner started", shard=slot.shard, pid=slot.proc.pid)

    def supervise(self, now: float, *, stopping: bool) -> Iterator[tuple[Slot, int]]:
        """Start the scanners due, and reap the ones that exited (yielded with their exit code)."""
        for slot in self.slots:
            if slot.proc is None:
                if now >= slot.respawn_at and not stopping:
                    self.spawn(slot)
                continue
            code = slot.reap(block=False)
            if code is None:
                continue
            slot.proc = None
            slot.ident = None
            slot.sent.clear()
            slot.progress.running = False
            if code == EXIT_USAGE:
                # Its command line is wrong (a bad root): a restart would fail the same way, for ever.
                _log.error("scanner refused its command line; not restarting it", shard=slot.shard, code=code)
                slot.respawn_at = float("inf")
            else:
                _log.warning("scanner exited; restarting", shard=slot.shard, code=code, delay_s=slot.respawn_delay)
                slot.respawn_at = now + slot.respawn_delay
                slot.respawn_delay = min(slot.respawn_delay * 2, SCANNER_RESPAWN_MAX_S)
            yield slot, code

    def reap_all(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for the scanners (told to STOP) to exit; kill the rest."""
        deadline = time.monotonic() + grace_s
        for slot in self.slots:
            if slot.proc is None:
                continue
            while slot.reap(block=False) is None:
                if time.monotonic() > deadline:
                    slot.proc.kill()
                    slot.reap(block=True)
                    break
                time.sleep(0.02)
            slot.proc = None
            slot.ident = None

    def pids(self) -> list[int]:
        return [slot.proc.pid for slot in self.slots if slot.proc is not None and slot.proc.returncode is None]

    def peak_rss_kb(self) -> int:
        return max(slot.peak_rss_kb for slot in self.slots)
