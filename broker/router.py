"""The broker: one loop over a ROUTER socket, dispatching RPCs to worker threads.

Requests are verified and decoded here (codec) and queued for a few worker threads (DuckDB runs
queries without the GIL, so searches overlap). Only this loop touches the ROUTER: workers hand
their encoded replies over a queue and wake the loop through a pipe, so answering a request
never creates a socket or a file descriptor. Every exception a handler raises becomes an error
reply in exactly one place (``_reply``, through broker/endpoints.py's ``error_reply``, which the relay
uses too), which also writes the one log line of the RPC.

Flow control (docs/protocol.md §1.7): at most ``RPC_MAX_QUEUED_REQUESTS`` requests wait for a
worker and ``RPC_PEER_MAX_INFLIGHT`` per client; past that a request is answered ``busy`` at
once. The socket is ``ROUTER_MANDATORY``, so a reply to a client whose buffer is full is not
dropped by ZeroMQ: it waits in that client's backlog until the client reads.

Who asks is the socket's business, never the request's: the daemon's ipc socket hands every handler
call ``LOCAL_CALLER``; a broker given a ``Gate`` (a paired runtime's CurveZMQ listener,
broker/remote/pairing.py) runs in a ZeroMQ context of its own with the gate's ZAP handler polled by this
loop, and asks the gate, for every message, who the connection authenticated as -- a key revoked
since the handshake is refused from its next message on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import zmq

from aivault import log
from aivault.broker.endpoints import error_frames, error_reply, reply_frames
from aivault.broker.exposure import LOCAL_CALLER, Caller
from aivault.codec import RpcRequest, decode_request, peek_request_id
from aivault.errors import AivaultError, AuthenticationError, Busy, MethodNotFound, clip
from aivault.protocol import (
    RPC_BACKLOG_MAX_BYTES,
    RPC_MAX_FRAME_BYTES,
    RPC_MAX_QUEUED_REQUESTS,
    RPC_PEER_BACKLOG_MAX_BYTES,
    RPC_PEER_MAX_INFLIGHT,
    RPC_RECV_HWM_MESSAGES,
)

_log = log.get("broker")

WORKERS = 4
_TICK_MS = 100
# While some client has a backlog, the loop retries it this often (ROUTER has no per-peer POLLOUT).
_BACKLOG_RETRY_MS = 10
# Requests read per turn of the loop, so that replies keep flowing during a burst.
_READ_BATCH = 256
# Warnings about refused frames per second; a flood of garbage must not fill the disk.
_REFUSALS_LOGGED_PER_S = 10
# How long shutdown waits for the workers' running requests.
_WORKER_JOIN_S = 5.0

Handler = Callable[[RpcRequest, Caller], Any]


class Gate(Protocol):
    """Authentication of a listener other than the same-machine ipc socket (broker/remote/pairing.py)."""

    def secure(self, sock: zmq.Socket[bytes]) -> None: ...

    def bind_zap(self, ctx: zmq.Context[Any]) -> zmq.Socket[bytes]: ...

    def answer(self, zap: zmq.Socket[bytes]) -> None: ...

    def caller(self, user_id: str | None) -> Caller | None: ...


@dataclass(slots=True)
class _Peer:
    """What the broker holds for one connected client (one DEALER socket)."""

    inflight: int = 0  # requests queued, running or awaiting a future, with no reply handed to the socket
    backlog: deque[list[bytes]] = field(default_factory=deque)  # replies the socket refused (buffer full)
    backlog_bytes: int = 0


@dataclass(frozen=True, slots=True)
class _Job:
    ident: bytes
    req: RpcRequest
    t0: float
    caller: Caller


class _Throttle:
    """At most ``per_s`` events a second pass; the others are counted and reported with the next."""

    def __init__(self, per_s: int) -> None:
        self.per_s = per_s
        self.window = 0
        self.count = 0
        self.suppressed = 0

    def allow(self) -> tuple[bool, int]:
        now = int(time.monotonic())
        if now != self.window:
            self.window, self.count = now, 0
        if self.count >= self.per_s:
            self.suppressed += 1
            return False, 0
        self.count += 1
        suppressed, self.suppressed = self.suppressed, 0
        return True, suppressed


class Broker:
    def __init__(self, endpoint: str, key: bytes, handler: Handler, *, workers: int = WORKERS,
                 inline: frozenset[str] = frozenset(), methods: frozenset[str] | None = None,
                 max_queued: int = RPC_MAX_QUEUED_REQUESTS, peer_max_inflight: int = RPC_PEER_MAX_INFLIGHT,
                 gate: Gate | None = None) -> None:
        """``inline`` methods are answered by the loop itself (the readiness probe): they must be
        instant, and they then measure the broker, not the depth of the workers' queue. With
        ``methods`` (every method the handler serves), any other method is answered
        method-not-found by the loop at once: it never waits behind real work, nor is refused busy.
        With a ``gate``, callers are who the gate says their connection authenticated as."""
        self.endpoint = endpoint
        self.gate = gate
        # Set once the socket is bound, with the endpoint it is bound to (a tcp port 0 made concrete).
        self.ready = threading.Event()
        self.bound: str | None = None
        self.key = key
        self.handler = handler
        self.workers = workers
        self.inline = inline
        self.methods = methods
        self.max_queued = max_queued
        self.peer_max_inflight = peer_max_inflight
        # A context of its own for a gated listener: a context has one ZAP endpoint, which would
        # otherwise also judge the ipc socket's connections.
        self.ctx: zmq.Context[Any] = zmq.Context() if gate is not None else zmq.Context.instance()
        self._stop = threading.Event()
        # Unbounded as a queue; the loop (its only producer) refuses past max_queued, so the
        # shutdown sentinels can always be put.
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._queued = 0  # jobs put and not yet taken by a worker (loop: +1, worker: -1 under _lock)
        self._lock = threading.Lock()
        self._done: deque[tuple[bytes, list[bytes]]] = deque()
        self._wake_w = -1  # the pipe's write end while the loop runs; -1 once closed (under _lock)
        self._peers: dict[bytes, _Peer] = {}
        self._backlogged: set[bytes] = set()
        self._backlog_bytes = 0
        self._dropped = 0
        self._worker_failure: BaseException | None = None
        self._refusals = _Throttle(_REFUSALS_LOGGED_PER_S)
        self._drops = _Throttle(_REFUSALS_LOGGED_PER_S)

    def stop(self) -> None:
        self._stop.set()

    # --- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Serve until ``stop()``; raises (after cleaning up) if the loop or a worker fails."""
        path = Path(self.endpoint.removeprefix("ipc://")) if self.endpoint.startswith("ipc://") else None
        front = self.ctx.socket(zmq.ROUTER)
        zap: zmq.Socket[bytes] | None = None
        threads: list[threading.Thread] = []
        wake_r = wake_w = -1
        try:
            wake_r, wake_w = os.pipe()
            os.set_blocking(wake_r, False)
            os.set_blocking(wake_w, False)
            self._wake_w = wake_w
            front.setsockopt(zmq.LINGER, 0)
            # A reply to a client whose buffer is full raises EAGAIN instead of vanishing; one
            # to a client that left raises EHOSTUNREACH.
            front.setsockopt(zmq.ROUTER_MANDATORY, 1)
            front.setsockopt(zmq.MAXMSGSIZE, RPC_MAX_FRAME_BYTES)
            front.setsockopt(zmq.RCVHWM, RPC_RECV_HWM_MESSAGES)
            if self.gate is not None:
                zap = self.gate.bind_zap(self.ctx)
                self.gate.secure(front)
            if path is not None:
                path.unlink(missing_ok=True)
            front.bind(self.endpoint)
            if path is not None:
                os.chmod(path, 0o600)
            self.bound = front.last_endpoint.decode() if front.last_endpoint else self.endpoint
            self.ready.set()
            for i in range(self.workers):
                t = threading.Thread(target=self._work, name=f"query-{i}", daemon=True)
                t.start()
                threads.append(t)
            poller = zmq.Poller()
            poller.register(front, zmq.POLLIN)
            poller.register(wake_r, zmq.POLLIN)
            if zap is not None:
                poller.register(zap, zmq.POLLIN)
            while not self._stop.is_set():
                events = dict(poller.poll(_BACKLOG_RETRY_MS if self._backlogged else _TICK_MS))
                if self._worker_failure is not None:
                    raise RuntimeError("a query worker thread died") from self._worker_failure
                if wake_r in events:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                # The pipe is drained before the queue: a reply posted after this drain also
                # writes to the pipe, so it is never left waiting for the next tick.
                self._send_done(front)
                if self._backlogged:
                    self._retry_backlogs(front)
                if zap is not None and zap in events:
                    self.gate.answer(zap)  # type: ignore[union-attr]  # zap exists only with a gate
                if front in events:
                    self._read(front)
        finally:
            self._shutdown(front, threads)
            if zap is not None:
                zap.close(0)
            with self._lock:
                self._wake_w = -1
            for fd in (wake_r, wake_w):
                if fd >= 0:
                    os.close(fd)
            if path is not None and path.is_socket():
                path.unlink(missing_ok=True)
            if self.gate is not None:
                self.ctx.term()

    def _shutdown(self, front: zmq.Socket[bytes], threads: list[threading.Thread]) -> None:
        # Requests still queued will not run: `busy` sends their clients back to try again (and
        # find the daemon gone).
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                self._done.append((job.ident, self._error_frames(job.req.id, Busy("the daemon is shutting down"))))
        for _ in threads:
            self._jobs.put(None)
        deadline = time.monotonic() + _WORKER_JOIN_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(zmq.ZMQError):
            self._send_done(front)
            self._retry_backlogs(front)
        front.close(linger=200)

    def _read(self, front: zmq.Socket[bytes]) -> None:
        for _ in range(_READ_BATCH):
            try:
                if self.gate is None:
                    self._accept(front, front.recv_multipart(zmq.NOBLOCK), LOCAL_CALLER)
                    continue
                parts = front.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            # The ZAP handler named the connection's key as its user id at the handshake.
            user = parts[-1].get("User-Id") if len(parts) > 1 else None
            caller = self.gate.caller(user if isinstance(user, str) else None)
            frames = [p.bytes for p in parts]
            if caller is None:
                if len(frames) >= 2:
                    self._refuse(front, frames[0], peek_request_id(frames[1:]) or "?", AuthenticationError(
                        "this client's key is not registered here (any more): it was revoked, or it was admitted "
                        "only to pair. Pair again with a new code from `aivault pair` on the runtime"))
                continue
            self._accept(front, frames, caller)

    def _accept(self, front: zmq.Socket[bytes], frames: list[bytes], caller: Caller) -> None:
        t0 = time.perf_counter()
        if len(frames) < 2:
            return  # ROUTER always prefixes the peer's identity: an empty message has no content to answer
        ident, body = frames[0], frames[1:]
        try:
            req = decode_request(self.key, body)
        except AivaultError as exc:  # parse-error, authentication-failed, invalid-request
            self._refuse(front, ident, peek_request_id(body) or "?", exc)
            return
        if self.methods is not None and req.method not in self.methods and req.method not in self.inline:
            self._refuse(front, ident, req.id, MethodNotFound(f"unknown method {clip(req.method)!r}"))
            return
        # Only the local host's probe is instant; one addressed to a remote host goes to a worker.
        if req.method in self.inline and req.host in (None, "local"):
            self._reply(ident, req, t0, functools.partial(self.handler, req, caller),
                        functools.partial(self._send, front, ident))
            return
        peer = self._peers.get(ident)
        if peer is not None and peer.inflight >= self.peer_max_inflight:
            self._refuse(front, ident, req.id, Busy(
                f"this client has {peer.inflight} requests waiting or running (at most {self.peer_max_inflight}); "
                "read the replies, then send more"))
            return
        with self._lock:
            queued = self._queued
            if queued < self.max_queued:
                self._queued += 1
        if queued >= self.max_queued:
            self._refuse(front, ident, req.id, Busy(
                f"{queued} requests are waiting for the daemon's query workers; retry after a pause"))
            return
        if peer is None:
            peer = self._peers[ident] = _Peer()
        peer.inflight += 1
        self._jobs.put(_Job(ident, req, t0, caller))

    def _refuse(self, front: zmq.Socket[bytes], ident: bytes, rid: str, exc: AivaultError) -> None:
        ok, suppressed = self._refusals.allow()
        if ok:
            _log.warning("rpc refused", id=clip(rid), error=clip(str(exc), 200), code=exc.code,
                         **({"suppressed": suppressed} if suppressed else {}))
        self._send(front, ident, self._error_frames(rid, exc))

    def _error_frames(self, rid: str, exc: AivaultError) -> list[bytes]:
        return error_frames(self.key, rid, exc)

    # --- replies --------------------------------------------------------------------------------
    def _send_done(self, front: zmq.Socket[bytes]) -> None:
        while self._done:
            ident, frames = self._done.popleft()
            peer = self._peers.get(ident)
            if peer is not None:
                peer.inflight -= 1
            self._send(front, ident, frames)

    def _send(self, front: zmq.Socket[bytes], ident: bytes, frames: list[bytes]) -> None:
        """Hand a reply to the socket, or hold it (in order) while the client's buffer is full."""
        peer = self._peers.get(ident)
        if peer is not None and peer.backlog:
            self._hold(ident, peer, frames)
            return
        try:
            front.send_multipart([ident, *frames], zmq.NOBLOCK)
        except zmq.Again:
            self._hold(ident, peer if peer is not None else self._peers.setdefault(ident, _Peer()), frames)
            return
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            self._gone(ident)
            return
        self._forget_if_idle(ident)

    def _hold(self, ident: bytes, peer: _Peer, frames: list[bytes]) -> None:
        size = sum(len(f) for f in frames)
        if peer.backlog_bytes + size > RPC_PEER_BACKLOG_MAX_BYTES or self._backlog_bytes + size > RPC_BACKLOG_MAX_BYTES:
            self._dropped += 1
            ok, suppressed = self._drops.allow()
            if ok:
                _log.warning("reply dropped: the client reads none of its replies", held=len(peer.backlog),
                             held_bytes=peer.backlog_bytes, dropped_total=self._dropped,
                             **({"suppressed": suppressed} if suppressed else {}))
            self._forget_if_idle(ident)
            return
        peer.backlog.append(frames)
        peer.backlog_bytes += size
        self._backlog_bytes += size
        self._backlogged.add(ident)

    def _retry_backlogs(self, front: zmq.Socket[bytes]) -> None:
        for ident in list(self._backlogged):
            peer = self._peers[ident]
            while peer.backlog:
                frames = peer.backlog[0]
                try:
                    front.send_multipart([ident, *frames], zmq.NOBLOCK)
                except zmq.Again:
                    break
                except zmq.ZMQError as exc:
                    if exc.errno != zmq.EHOSTUNREACH:
                        raise
                    self._gone(ident)
                    break
                peer.backlog.popleft()
                size = sum(len(f) for f in frames)
                peer.backlog_bytes -= size
                self._backlog_bytes -= size
            if not peer.backlog:
                self._backlogged.discard(ident)
                self._forget_if_idle(ident)

    def _gone(self, ident: bytes) -> None:
        """The client disconnected: nobody is left to read its replies."""
        peer = self._peers.get(ident)
        if peer is None:
            return
        self._backlog_bytes -= peer.backlog_bytes
        peer.backlog.clear()
        peer.backlog_bytes = 0
        self._backlogged.discard(ident)
        self._forget_if_idle(ident)

    def _forget_if_idle(self, ident: bytes) -> None:
        # Records exist only for clients with work or replies pending, so their number stays bounded.
        peer = self._peers.get(ident)
        if peer is not None and peer.inflight <= 0 and not peer.backlog:
            del self._peers[ident]

    def _post(self, ident: bytes, frames: list[bytes]) -> None:
        """A worker's (or a future's) reply, for the loop to send; any thread."""
        self._done.append((ident, frames))
        self._wake()

    def _wake(self) -> None:
        # Under the lock: once the loop has closed the pipe, its fd number may belong to a new file.
        with self._lock:
            if self._wake_w >= 0:
                with contextlib.suppress(BlockingIOError):  # a full pipe already wakes the loop
                    os.write(self._wake_w, b"\0")

    # --- workers --------------------------------------------------------------------------------
    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                with self._lock:
                    self._queued -= 1
                self._reply(job.ident, job.req, job.t0, functools.partial(self.handler, job.req, job.caller),
                            functools.partial(self._post, job.ident))
        except BaseException as exc:  # _reply catches Exception: this is SystemExit and the like
            self._worker_failure = exc
            self._wake()
            raise

    def _reply(self, ident: bytes, req: RpcRequest, t0: float, produce: Callable[[], Any],
               deliver: Callable[[list[bytes]], None]) -> None:
        """Encode the reply to ``req`` and hand it to ``deliver``: the one place an exception becomes
        an error reply. The RPC's log line is written after the hand-over, off the caller's wait.

        A handler may return a Future (a reconcile, which lasts as long as the scan): the reply is
        then posted when it resolves, and no worker waits for it meanwhile.
        """
        try:
            value = produce()
            if isinstance(value, Future):
                value.add_done_callback(lambda fut: self._reply(ident, req, t0, fut.result,
                                                                functools.partial(self._post, ident)))
                return
            frames, outcome = reply_frames(self.key, req.id, value)
        except Exception as exc:
            if not isinstance(exc, AivaultError):  # a bug: an internal error, its traceback logged here
                _log.exception("rpc failed", id=clip(req.id), method=clip(req.method))
            frames, outcome = error_reply(self.key, req.id, exc)
        ms = round((time.perf_counter() - t0) * 1000, 2)
        deliver(frames)
        _log.info("rpc", id=clip(req.id), method=clip(req.method), host=clip(req.host or "local"), outcome=outcome,
                  ms=ms)
