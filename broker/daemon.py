"""The daemon: broker + indexer + scanner child + query workers in one process.

DuckDB allows one read-write process, so the process that writes the index is the one that
answers queries: query workers are threads here. ``aivault serve`` runs it until SIGINT or
SIGTERM; ``aivault index`` runs the same thing until the index is current, so searches from
other shells keep working while it indexes.

Both of its brokers dispatch through the endpoint table (broker/endpoints.py) with the daemon's
context: its service answers search, status and read, its writer the local controls. Requests
addressed to a remote execution host are routed by ``HostConnections`` (broker/remote/connections.py): the
handler returns a Future, so a slow host holds no query worker. With ``listen``
(``aivault serve --listen tcp://ADDR:PORT``) a second broker serves paired clients over CurveZMQ
(broker/remote/pairing.py): after the listener's gate, the same dispatch, as a paired caller.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from aivault import __version__, log
from aivault.broker.endpoints import ENDPOINTS, Context, dispatch, remote_ping
from aivault.broker.exposure import FULL_DIAGNOSTICS, LOCAL_CALLER, Caller
from aivault.broker.remote.connections import HostConnections
from aivault.broker.remote.pairing import CurveGate
from aivault.broker.router import Broker
from aivault.codec import RpcRequest
from aivault.errors import AivaultError, AuthenticationError, DaemonFailed, IndexingDisabled
from aivault.home import Home
from aivault.protocol import (
    DAEMON_FATAL_EXIT_TIMEOUT_S,
    METHOD_PING,
    PAIRING_METHODS,
    PROTOCOL_VERSION,
    REMOTE_FRAME_KEY,
)
from aivault.vault.endpoints import NULL_SERVICE, ServiceAnswers, SessionSearchService
from aivault.vault.session import WriterSession

_log = log.get("daemon")


_REPLY_CACHE = 64
# Every method Daemon.handle serves (the whole endpoint table); the broker answers any other one itself.
DAEMON_METHODS: frozenset[str] = frozenset(ENDPOINTS)
# How long start() waits for the paired listener to bind before reporting why it could not.
_LISTEN_READY_S = 10.0
# The exit status when the orderly shutdown after a fatal failure hangs (EX_SOFTWARE).
_EXIT_FATAL = 70


class Daemon:
    def __init__(self, home: Home, *, extra_roots: list[str] | None = None, default_roots: bool = True,
                 schedule: bool = True, semantic: bool = True, bulk: bool = False, listen: str | None = None) -> None:
        self.home = home
        # A long-lived process: BM25 over memory-mapped postings sidecars (query/postings.py), unless
        # AIVAULT_POSTINGS_SIDECAR=0 (benchmarks comparing both paths). A one-shot bulk load answers no
        # search: building sidecars there would only compete with the load for CPU and memory (the
        # next `serve` builds them in the background).
        fast = not bulk and os.environ.get("AIVAULT_POSTINGS_SIDECAR", "1") != "0"
        self.session = WriterSession(home, extra_roots=extra_roots, default_roots=default_roots, schedule=schedule,
                                     semantic=semantic, bulk=bulk, fast_postings=fast)
        self.service = self.session.service
        # What the endpoints answer from; the null service once the daemon closes.
        self._endpoint: SessionSearchService = NULL_SERVICE
        # The readiness probe is answered by the broker's loop: `aivault status` then tells a
        # deaf broker from a busy one.
        self.broker = Broker(home.rpc_endpoint, home.key(), self.handle, inline=frozenset({METHOD_PING}),
                             methods=DAEMON_METHODS)
        self._thread: threading.Thread | None = None
        self.failure: str | None = None
        self._stop = threading.Event()
        # State-changing requests answer a repeated request id with the stored reply.
        self._replies: OrderedDict[str, Any] = OrderedDict()
        self._replies_lock = threading.Lock()
        self.hosts = HostConnections(home)
        self.gate: CurveGate | None = None
        self.listener: Broker | None = None
        self._listener_thread: threading.Thread | None = None
        self._listen_error: BaseException | None = None
        if listen is not None:
            self.gate = CurveGate(home)
            # Every method the daemon knows reaches the handler, so that a paired client asking for local
            # control hears not-permitted (broker/endpoints.py), not method-not-found.
            self.listener = Broker(listen, REMOTE_FRAME_KEY, self._handle_paired, workers=2,
                                   inline=frozenset({METHOD_PING}),
                                   methods=DAEMON_METHODS | frozenset(PAIRING_METHODS), gate=self.gate)

    # --- RPC dispatch -------------------------------------------------------------------------
    def handle(self, req: RpcRequest, caller: Caller = LOCAL_CALLER) -> Any:
        if caller.transport not in FULL_DIAGNOSTICS:
            return self._handle_paired(req, caller)
        return dispatch(self._context(caller), req)

    def _context(self, caller: Caller) -> Context:
        """The daemon as the endpoint table sees it, for ``caller``: what its endpoints answer from now (the
        null service until it starts and once it closes), its writer's controls, its host connections."""
        endpoint = self._endpoint
        local = caller.transport in FULL_DIAGNOSTICS
        return Context(caller, ServiceAnswers(endpoint),
                       self._ping if local else lambda: remote_ping(endpoint is not NULL_SERVICE),
                       roots=self.service, hosts=lambda: self.hosts, controls=_Controls(self))

    def _ping(self) -> dict[str, Any]:
        return {"pong": True, "pid": os.getpid(), "protocol": PROTOCOL_VERSION, "version": __version__,
                "home": str(self.home.path), "listen": self.listener.bound if self.listener else None}

    def _handle_paired(self, req: RpcRequest, caller: Caller) -> Any:
        """A request on the paired listener: pairing (the listener's gate), or a paired client's request."""
        if req.method in PAIRING_METHODS:
            assert self.gate is not None
            return self.gate.handle(req, caller)
        if caller.client is None and req.method != METHOD_PING:
            raise AuthenticationError("this connection was admitted only to pair: send aiVault.pair with the "
                                      "secret of a pairing code first")
        return dispatch(self._context(caller), req)

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

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start indexing (if consent is given) and serve RPCs on a background thread."""
        self._endpoint = self.service
        self.session.start()
        self._thread = threading.Thread(target=self._serve, name="broker", daemon=True)
        self._thread.start()
        if self.listener is not None:
            self._listener_thread = threading.Thread(target=self._serve_listener, name="paired-broker", daemon=True)
            self._listener_thread.start()
            if not self.listener.ready.wait(_LISTEN_READY_S) or self._listen_error is not None:
                err = self._listen_error
                self.close()
                raise AivaultError(f"cannot listen on {self.listener.endpoint}: "
                                   f"{err if err is not None else 'the listener did not start'}. Give a free "
                                   "tcp://ADDRESS:PORT to --listen")
        _log.info("daemon started", home=str(self.home.path), endpoint=self.home.rpc_endpoint,
                  listen=self.listener.bound if self.listener else None)

    def _serve_listener(self) -> None:
        assert self.listener is not None
        try:
            self.listener.run()
        except BaseException as exc:
            if not self.listener.ready.is_set():
                self._listen_error = exc  # start() reports it: e.g. the address is in use
                self.listener.ready.set()
                return
            self._fail("the paired listener's broker thread died", exc)
            return
        if not self._stop.is_set():
            self._fail("the paired listener's loop ended while the daemon runs", None)

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

    def close(self) -> None:
        self._stop.set()
        self.broker.stop()
        if self.listener is not None:
            self.listener.stop()
        if self._thread is not None:
            self._thread.join(10)
        if self._listener_thread is not None:
            self._listener_thread.join(10)
        self.hosts.close()
        self._endpoint = NULL_SERVICE
        self.session.close()
        if self.failure is not None:
            raise DaemonFailed(f"the daemon stopped because {self.failure}; its log has the details")
        _log.info("daemon stopped")


class _Controls:
    """What only the daemon does, for the endpoint table: it writes the index."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def stats(self) -> dict[str, Any]:
        return self.daemon.service.stats()

    def reconcile(self, full: bool) -> Future[dict[str, Any]]:
        service = self.daemon.service
        service.apply_policy()
        if not service.policy.enabled:
            raise IndexingDisabled("indexing is disabled for this data directory: run `aivault enable` first")
        return service.reconcile(full)

    def clear(self, request_id: str) -> dict[str, Any]:
        """A repeated request id gets the stored reply: a clear is not asked twice by a retry."""
        value: dict[str, Any] = self.daemon._once(request_id, self.daemon.service.clear)
        return value
