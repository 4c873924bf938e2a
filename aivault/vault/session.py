"""The writer of a data directory: the one process that opens the index read-write.

Both ``aivault serve`` (the daemon, with its broker on top) and a one-shot ``aivault index`` or
``clear`` need the same thing: hold ``daemon.pid`` (an exclusive flock, so a second writer is told
who holds it), open the database, run the ``LocalService`` (indexer, scanners, engine) and follow
the consent policy file. DuckDB allows one read-write process, so whoever holds this session is
also the one that answers searches.
"""

from __future__ import annotations

import fcntl
import os
import threading

from aivault import config, log
from aivault.errors import AlreadyRunning
from aivault.home import Home, unusable
from aivault.indexer.opening import open_writer
from aivault.vault.live import LocalService

_log = log.get("session")

# How soon `aivault enable/disable/policy` (or a hand edit of policy.json) takes effect.
POLICY_POLL_S = 1.0


class WriterSession:
    def __init__(self, home: Home, *, extra_roots: list[str] | None = None, default_roots: bool = True,
                 schedule: bool = True, semantic: bool = True, bulk: bool = False, fast_postings: bool = False) -> None:
        self.home = home.ensure()
        # Everything this process writes in the data directory (DuckDB creates its WAL lazily)
        # is the user's private data.
        os.umask(0o077)
        roots = config.roots(home, extra_roots or [])
        self._pid_fd = self._lock_pidfile()
        try:
            con, meta = open_writer(home)
            self.service = LocalService(home, con, meta, extra_roots=roots, default_roots=default_roots,
                                        schedule=schedule, semantic=semantic, bulk=bulk, fast_postings=fast_postings)
        except BaseException:
            os.close(self._pid_fd)
            raise
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    def _lock_pidfile(self) -> int:
        try:
            fd = os.open(self.home.pid_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only file system, another user's directory
            raise unusable(self.home.pid_path, exc, "write") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise AlreadyRunning(
                f"an aivault daemon (pid {other}) already serves {self.home.path}; use it, or stop it first "
                f"(kill -TERM {other})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def start(self) -> None:
        """Start indexing (if consent is given) and follow the policy file."""
        self.service.start()
        if self._watch is None:
            self._watch = threading.Thread(target=self._watch_policy, name="policy", daemon=True)
            self._watch.start()

    def _watch_policy(self) -> None:
        while not self._stop.wait(POLICY_POLL_S):
            try:
                self.service.apply_policy()
            except Exception:
                _log.exception("applying the policy failed")

    def close(self) -> None:
        """Stop following the policy, close the service and the database, release daemon.pid."""
        self._stop.set()
        if self._watch is not None:
            self._watch.join(10)
        try:
            self.service.stop()
        finally:
            try:
                os.ftruncate(self._pid_fd, 0)
            finally:
                os.close(self._pid_fd)
