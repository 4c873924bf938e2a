"""The daemon: broker + indexer + scanner child + query workers in one process.

DuckDB allows one read-write process, so the process that writes the index is the one that
answers queries: query workers are threads here. ``aivault serve`` runs it until SIGINT or
SIGTERM; ``aivault index`` runs the same thing until the index is current, so searches from
other shells keep working while it indexes.
"""

from __future__ import annotations

import fcntl
import os
import threading
from typing import Any

from aivault import __version__, log
from aivault import policy as policy_mod
from aivault.codec import RpcRequest
from aivault.errors import AivaultError, InvalidParams, MethodNotFound
from aivault.home import Home
from aivault.protocol import (
    METHOD_PING,
    METHOD_RECONCILE,
    METHOD_SEARCH,
    METHOD_STATS,
    METHOD_STATUS,
    PROTOCOL_VERSION,
)
from broker.hosts import parse_host, remote_unavailable
from broker.router import Broker
from indexer.store import open_writer
from query.local import LocalService
from query.service import search_sessions, search_status, set_session_search_service

_log = log.get("daemon")


class AlreadyRunning(AivaultError):
    pass


def configured_roots(home: Home, extra: list[str]) -> list[str]:
    roots = list(home.config().get("roots") or [])
    if not all(isinstance(r, str) for r in roots):
        raise ValueError(f"{home.config_path}: 'roots' must be a list of AGENT=PATH strings")
    return [*roots, *extra]


class Daemon:
    def __init__(self, home: Home, *, extra_roots: list[str] | None = None, default_roots: bool = True,
                 schedule: bool = True) -> None:
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
        self.con = con
        self.service = LocalService(home, con, meta, extra_roots=configured_roots(home, extra_roots or []),
                                    default_roots=default_roots, schedule=schedule)
        self.broker = Broker(home.rpc_endpoint, home.key(), self.handle)
        self._thread: threading.Thread | None = None

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
        raise MethodNotFound(f"unknown method {m!r}")

    def _reconcile(self, params: Any) -> Any:
        if not isinstance(params, dict) or not isinstance(params.get("full", False), bool):
            raise InvalidParams("aiVault.reconcile takes {full: bool}")
        if not policy_mod.load(self.home).enabled:
            raise AivaultError("indexing is disabled for this data directory: run `aivault enable` first")
        return self.service.indexer.reconcile(bool(params.get("full", False))).result()

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start indexing (if consent is given) and serve RPCs on a background thread."""
        set_session_search_service(self.service)
        self.service.start()
        self._thread = threading.Thread(target=self.broker.run, name="broker", daemon=True)
        self._thread.start()
        _log.info("daemon started", home=str(self.home.path), endpoint=self.home.rpc_endpoint)

    def close(self) -> None:
        self.broker.stop()
        if self._thread is not None:
            self._thread.join(10)
        set_session_search_service(None)
        self.service.stop()
        try:
            self.con.close()
        finally:
            try:
                os.ftruncate(self._pid_fd, 0)
            finally:
                os.close(self._pid_fd)
        _log.info("daemon stopped")
