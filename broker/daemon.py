"""The daemon: broker + indexer + scanner child + query workers in one process.

DuckDB allows one read-write process, so the process that writes the index is the one that
answers queries: query workers are threads here. ``aivault serve`` runs it until SIGINT or
SIGTERM; ``aivault index`` runs the same thing until the index is current, so searches from
other shells keep working while it indexes.
"""

from __future__ import annotations

import _thread
import fcntl
import os
import signal
import threading
from collections import OrderedDict
from typing import Any

from aivault import __version__, log
from aivault.codec import RpcRequest
from aivault.errors import AivaultError, DaemonFailed, InvalidParams, MethodNotFound
from aivault.home import Home
from aivault.protocol import (
    DAEMON_FATAL_EXIT_TIMEOUT_S,
    METHOD_CLEAR,
    METHOD_PING,
    METHOD_RECONCILE,
    METHOD_SEARCH,
    METHOD_STATS,
    METHOD_STATUS,
    PROTOCOL_VERSION,
)
from broker.hosts import parse_host, remote_unavailable
from broker.router import Broker, clip
from indexer.store import open_writer
from query.local import LocalService
from query.service import search_sessions, search_status, set_session_search_service

_log = log.get("daemon")


POLICY_POLL_S = 1.0
_REPLY_CACHE = 64
# The exit status when the orderly shutdown after a fatal failure hangs (EX_SOFTWARE).
_EXIT_FATAL = 70


class AlreadyRunning(AivaultError):
    pass


def configured_roots(home: Home, extra: list[str]) -> list[str]:
    roots = list(home.config().get("roots") or [])
    if not all(isinstance(r, str) for r in roots):
        raise ValueError(f"{home.config_path}: 'roots' must be a list of AGENT=PATH strings")
    return [*roots, *extra]


class Daemon:
    def __init__(self, home: Home, *, extra_roots: list[str] | None = None, default_roots: bool = True,
                 schedule: bool = True, semantic: bool = True, bulk: bool = False) -> None:
        self.home = home.ensure()
        # Everything this process writes in the data directory (DuckDB creates its WAL lazily)
        # is the user's private data.
        os.umask(0o077)
        self._pid_fd = self._lock_pidfile()
        try:
            con, meta = open_writer(home)
        except BaseException:
            os.close(self._pid_fd)
            raise
        self.service = LocalService(home, con, meta, extra_roots=configured_roots(home, extra_roots or []),
                                    default_roots=default_roots, schedule=schedule, semantic=semantic, bulk=bulk)
        # The readiness probe is answered by the broker's loop: `aivault status` then tells a
        # deaf broker from a busy one.
        self.broker = Broker(home.rpc_endpoint, home.key(), self.handle, inline=frozenset({METHOD_PING}))
        self._thread: threading.Thread | None = None
        self.failure: str | None = None
        self._watch: threading.Thread | None = None
        self._stop = threading.Event()
        # State-changing requests answer a repeated request id with the stored reply.
        self._replies: OrderedDict[str, Any] = OrderedDict()
        self._replies_lock = threading.Lock()

    def _lock_pidfile(self) -> int:
        fd = os.open(self.home.pid_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise AlreadyRunning(
                f"an aivault daemon (pid {other}) already serves {self.home.path}; use it, or stop it first "
                "(kill -TERM " + other + ")") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    # --- RPC dispatch -------------------------------------------------------------------------
    def handle(self, req: RpcRequest) -> Any:
        host = parse_host(req.host)
        if not host.is_local:
            raise remote_unavailable(host)
        m = req.method
        if m == METHOD_SEARCH:
            return search_sessions(req.params)
        if m == METHOD_STATUS:
            return search_status()
        if m == METHOD_PING:
            return {"pong": True, "pid": os.getpid(), "protocol": PROTOCOL_VERSION, "version": __version__,
                    "home": str(self.home.path)}
        if m == METHOD_STATS:
            return self.service.stats()
        if m == METHOD_RECONCILE:
            return self._reconcile(req.params)
        if m == METHOD_CLEAR:
            return self._once(req.id, self.service.clear)
        raise MethodNotFound(f"unknown method {clip(m)!r}")

    def _once(self, request_id: str, action: Any) -> Any:
        with self._replies_lock:
            if request_id in self._replies:
                return self._replies[request_id]
        value = action()
        with self._replies_lock:
            self._replies[request_id] = value
            while len(self._replies) > _REPLY_CACHE:
                self._replies.popitem(last=False)
        return value

    def _reconcile(self, params: Any) -> Any:
        if not isinstance(params, dict) or not isinstance(params.get("full", False), bool):
            raise InvalidParams("aiVault.reconcile takes {full: bool}")
        self.service.apply_policy()
        if not self.service.policy.enabled:
            raise AivaultError("indexing is disabled for this data directory: run `aivault enable` first")
        # The future itself: the broker answers when it resolves, without a worker waiting on a scan.
        return self.service.indexer.reconcile(bool(params.get("full", False)))

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start indexing (if consent is given) and serve RPCs on a background thread."""
        set_session_search_service(self.service)
        self.service.start()
        self._thread = threading.Thread(target=self._serve, name="broker", daemon=True)
        self._thread.start()
        self._watch = threading.Thread(target=self._watch_policy, name="policy", daemon=True)
        self._watch.start()
        _log.info("daemon started", home=str(self.home.path), endpoint=self.home.rpc_endpoint)

    def _serve(self) -> None:
        """The broker thread. If its loop ends while the daemon runs, the daemon is deaf but still
        holds the index: it shuts down (exit non-zero) so that a supervisor or the next CLI call
        can take over."""
        try:
            self.broker.run()
        except BaseException as exc:  # whatever it is, nobody can reach this daemon any more
            self._fail("the broker thread died", exc)
            return
        if not self._stop.is_set():
            self._fail("the broker loop ended while the daemon runs", None)

    def _fail(self, what: str, exc: BaseException | None) -> None:
        self.failure = f"{what}: {exc.__class__.__name__}: {exc}" if exc is not None else what
        _log.critical("daemon failing, shutting down", failure=self.failure, exc_info=exc)
        # The main thread's shutdown path (`aivault serve` handles SIGINT) closes the index; if
        # it is not done in time, the process ends anyway.
        watchdog = threading.Timer(DAEMON_FATAL_EXIT_TIMEOUT_S, os._exit, args=(_EXIT_FATAL,))
        watchdog.daemon = True
        watchdog.start()
        _thread.interrupt_main(signal.SIGINT)

    def _watch_policy(self) -> None:
        """Follow `aivault enable/disable/policy` (or a hand edit) within POLICY_POLL_S."""
        while not self._stop.wait(POLICY_POLL_S):
            try:
                self.service.apply_policy()
            except Exception:
                _log.exception("applying the policy failed")

    def close(self) -> None:
        self._stop.set()
        self.broker.stop()
        for t in (self._thread, self._watch):
            if t is not None:
                t.join(10)
        set_session_search_service(None)
        try:
            self.service.stop()
        finally:
            try:
                os.ftruncate(self._pid_fd, 0)
            finally:
                os.close(self._pid_fd)
        if self.failure is not None:
            raise DaemonFailed(f"the daemon stopped because {self.failure}; its log has the details")
        _log.info("daemon stopped")
