"""File-system events for the scanner: a transcript that changes is read within a second.

A thread runs ``watchfiles`` (inotify on Linux, FSEvents on macOS) over the roots that exist and
collects the paths that changed; the scanner's loop wakes on them and runs a pass over just those
files and the folders whose listing changed (``Scanner.run_pass(hints=...)``). The polling passes
the indexer asks for stay as the safety net: whatever the watcher misses (an event queue that
overflowed, a root created after the watch started, a file system without events) the next
recent or full pass finds.

Watching is given up, visibly, rather than allowed to hurt: a root whose tree holds more folders
than the watch budget (inotify needs one watch per folder and the user's limit is shared with
every other program) is left to polling, as is everything when the watcher cannot start or dies;
``state()`` says which and why, and ``aivault status`` shows it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aivault import log
from aivault.scanner.sources import Root

_log = log.get("scanner.watch")

# Folders one scanner may ask inotify to watch, at most; also at most a quarter of the user's
# limit (``fs.inotify.max_user_watches``, 8,192 on some distributions), which editors, build
# tools and the other scanner shards need too.
WATCH_MAX_DIRS = 20_000
# How long the watcher lets a burst of writes settle before it reports them (an agent writes a
# record in a few system calls), and how often the event thread checks for a stop.
WATCH_DEBOUNCE_MS = 30
WATCH_STEP_MS = 10
_STOP_CHECK_MS = 500
# Agents whose roots are the user's own project trees (Aider's history lives in each repository), or
# a home that also holds the agent's installation and busy logs (Hermes: ~/.hermes/hermes-agent with
# its virtualenv, logs/): watching them would spend the budget on folders that hold no transcript
# and wake the scanner on every log line, so they are polled.
UNWATCHED_AGENTS = frozenset({"aider", "hermes"})
# SQLite's shared-memory index changes on every read, ours included: never a reason to look again.
_IGNORED_SUFFIXES = ("-shm",)


def inotify_limit() -> int | None:
    """The user's inotify watch limit, or None where there is none to read (not Linux)."""
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip())
    except (OSError, ValueError):
        return None


def watch_budget() -> int:
    """How many folders one scanner watches at most (``AIVAULT_WATCH_MAX_DIRS`` overrides)."""
    env = os.environ.get("AIVAULT_WATCH_MAX_DIRS")
    if env and env.strip().isdigit():
        return int(env)
    limit = inotify_limit()
    return min(WATCH_MAX_DIRS, limit // 4) if limit else WATCH_MAX_DIRS


def count_dirs(path: str, cap: int) -> int:
    """Folders under ``path`` (itself included, symlinks not followed), counting stops past ``cap``."""
    n, stack = 0, [path]
    while stack and n <= cap:
        top = stack.pop()
        n += 1
        try:
            with os.scandir(top) as it:
                stack.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return n


class Watcher:
    """Changed paths under the watched roots, collected by a background thread.

    ``fileno()`` becomes readable when changes are waiting, so the scanner's loop can sleep on it
    together with its socket; ``take()`` returns them and re-arms.
    """

    def __init__(self, roots: Iterable[Root], *, enabled: bool = True, budget: int | None = None) -> None:
        self.roots = [r for r in roots]
        self.asked = enabled  # the indexer wants changes as they happen (the daemon, not a one-shot index)
        self.enabled = enabled and os.environ.get("AIVAULT_WATCH", "on").lower() not in ("off", "0", "no")
        self.budget = watch_budget() if budget is None else budget
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self._overflow = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._signalled = False
        self.watched: list[str] = []
        self.polled: list[dict[str, str]] = []  # {"root", "reason"}: roots left to the polling passes
        self.failure: str | None = None

    # --- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Watch every existing root that fits the budget (a no-op when watching is off)."""
        if not self.enabled:
            self.failure = ("file watching is off (AIVAULT_WATCH=off): changes are found by the polling passes"
                            if self.asked else "a one-shot run: files are read when the indexer asks")
            return
        self.watched, self.polled = self._plan()
        if not self.watched:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(list(self.watched),), name="watch", daemon=True)
        self._thread.start()
        _log.info("watching", roots=len(self.watched), polled=len(self.polled))

    def restart_if_roots_changed(self) -> None:
        """After a full pass: start watching roots created since (an agent installed meanwhile)."""
        if not self.enabled:
            return
        if self._thread is not None and not self._thread.is_alive():
            self.failure = None  # it stopped (an error, the inotify limit): try again, once per full pass
        watched, polled = self._plan()
        if watched != self.watched or self._thread is None or not self._thread.is_alive():
            self.stop()
            self.start()
        else:
            self.polled = polled

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _STOP_CHECK_MS / 1000)
            self._thread = None

    def close(self) -> None:
        self.stop()
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _plan(self) -> tuple[list[str], list[dict[str, str]]]:
        watched: list[str] = []
        polled: list[dict[str, str]] = []
        left = self.budget
        for root in sorted({r.path: r for r in self.roots}.values(), key=lambda r: r.path):
            if root.agent in UNWATCHED_AGENTS:
                polled.append({"root": root.path, "reason": "a folder of projects: polled, not watched"})
                continue
            if not os.path.isdir(root.path):
                continue  # absent: a full pass notices when it appears
            if any(root.path == w or root.path.startswith(w + os.sep) for w in watched):
                continue  # inside a root watched already
            n = count_dirs(root.path, left)
            if n > left:
                polled.append({"root": root.path, "reason": f"more than {left:,} folders to watch: polled"})
                continue
            left -= n
            watched.append(root.path)
        return watched, polled

    # --- the event thread ---------------------------------------------------------------------
    def _run(self, paths: list[str]) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(*paths, watch_filter=None, debounce=WATCH_DEBOUNCE_MS,
                                            step=WATCH_STEP_MS, stop_event=self._stop, rust_timeout=_STOP_CHECK_MS,
                                            yield_on_timeout=True, raise_interrupt=False,
                                            ignore_permission_denied=True):
                if changes:
                    self._note(path for _, path in changes)
        except Exception as exc:  # ENOSPC (the inotify limit), a root removed, ...: fall back to polling
            self.failure = f"file watching stopped ({exc.__class__.__name__}: {exc}); the polling passes continue"
            _log.warning("file watching stopped, polling continues", error=str(exc)[:300])
            with self._lock:
                self._overflow = True  # whatever happened meanwhile is for a pass to find
            self._wake()

    def _note(self, paths: Iterable[str]) -> None:
        with self._lock:
            for p in paths:
                if not p.endswith(_IGNORED_SUFFIXES):
                    self._changed.add(p)
            if not self._changed:
                return
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._signalled:
                return
            self._signalled = True
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"!")

    # --- the scanner's side ---------------------------------------------------------------------
    def fileno(self) -> int:
        return self._read_fd

    def take(self) -> set[str] | None:
        """The paths changed since the last call (an empty set: look anyway, events were lost),
        or None when nothing happened."""
        with self._lock:
            try:
                while os.read(self._read_fd, 4096):
                    pass
            except (BlockingIOError, OSError):
                pass
            self._signalled = False
            if not self._changed and not self._overflow:
                return None
            changed, self._changed, self._overflow = self._changed, set(), False
            return changed

    def state(self) -> dict[str, Any]:
        """For status: ``events`` when any root is watched, else ``polling``; the roots polled and why."""
        alive = self._thread is not None and self._thread.is_alive()
        return {"mode": "events" if alive and self.failure is None else "polling", "watched": len(self.watched),
                "polled": self.polled, **({"reason": self.failure} if self.failure else {})}
