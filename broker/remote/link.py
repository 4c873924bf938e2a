"""One connection to a remote execution host, run by a thread of its own (docs/protocol.md §5.2).

A link is opened on its first request, greeted with a ping (which also tells the host's protocol and
version), kept alive by heartbeats, closed when no request has used it for the idle timeout, and
re-opened on the next request -- after a pause that doubles with each failed opening. Every request
is answered within the request timeout: a dead or hung transport fails its requests with
``host-unavailable`` (an authentication or protocol failure with its own typed error), never a hang.

Callers only ``submit``; everything else happens on the link's thread, which owns the transport (a
ZeroMQ socket must stay on one thread), so a request never blocks the broker loop or a query worker:
its Future resolves on the link's thread. The thread ends when the link is closed and idle. Subclasses
provide the transport: ``SshLink`` (broker/remote/ssh_link.py) and ``RuntimeLink`` (broker/remote/runtime_link.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import zmq

from aivault import log
from aivault.broker.exposure import Transport
from aivault.broker.remote.hostconfig import RemoteSettings
from aivault.codec import RpcRequest, decode_reply, encode_request
from aivault.errors import AivaultError, AuthenticationError, Busy, HostUnavailable, ProtocolError, from_error_value
from aivault.protocol import (
    ERR_AUTH,
    HOST_BACKOFF_MAX_S,
    HOST_BACKOFF_S,
    HOST_HEARTBEAT_INTERVAL_S,
    HOST_HEARTBEAT_TIMEOUT_S,
    HOST_MAX_PENDING,
    METHOD_PING,
    REMOTE_FRAME_KEY,
)

_log = log.get("link")

# The longest the link's thread sleeps between looks at its timers.
_TICK_S = 0.5
# How long close() waits for the link's thread to tear its transport down.
_CLOSE_JOIN_S = 5.0


class LinkFailed(Exception):
    """Raised by a transport hook: the connection is unusable; ``error`` is what its requests fail with."""

    def __init__(self, error: AivaultError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _Pending:
    rid: str
    method: str
    frames: list[bytes]
    future: Future[Any]
    deadline: float
    internal: bool  # the link's own greeting or heartbeat ping, not a caller's request


class Link(ABC):
    """The transport-independent half: requests, their deadlines, liveness, backoff."""

    transport: Transport = "relay"

    def __init__(self, host_id: str, settings: RemoteSettings) -> None:
        self.host_id = host_id
        self.settings = settings
        self._lock = threading.Lock()
        self._inbox: deque[_Pending] = deque()
        self._outstanding = 0  # callers' requests submitted and not settled (under _lock)
        self._thread: threading.Thread | None = None
        self._closing = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # The rest belongs to the link's thread; other threads only read it (snapshot).
        self.state = "closed"  # closed | opening | greeting | open
        self._sent: dict[str, _Pending] = {}
        self._waiting: list[_Pending] = []
        self._failures = 0
        self._retry_at = 0.0
        self._open_deadline = 0.0
        self._last_rx = 0.0
        self._last_use = 0.0
        self._heartbeat: str | None = None
        self.last_error: str | None = None
        self.protocol: int | None = None
        self.version: str | None = None
        self.last_seen_ms: int | None = None
        self.connected_since_ms: int | None = None

    # --- any thread -------------------------------------------------------------------------
    def submit(self, method: str, params: Any) -> Future[Any]:
        """Send ``method`` to the host; the Future resolves with its result or typed error within the
        request timeout. Raises at once when the host is backing off after failures, or too busy."""
        return self._submit(method, params, internal=False)

    def _submit(self, method: str, params: Any, *, internal: bool) -> Future[Any]:
        rid = uuid.uuid4().hex
        frames = encode_request(REMOTE_FRAME_KEY, RpcRequest(rid, method, params, None))
        now = time.monotonic()
        timeout = HOST_HEARTBEAT_TIMEOUT_S if internal else self.settings.request_timeout_s
        fut: Future[Any] = Future()
        with self._lock:
            if self._closing:
                raise HostUnavailable(f"the connection to {self.host_id} is closed (aivault is shutting down)")
            if not internal:
                if self.state == "closed" and now < self._retry_at:
                    raise HostUnavailable(
                        f"{self.host_id} is unavailable: {self.last_error}. aivault tries again in "
                        f"{self._retry_at - now:.0f} s; it never answers for a remote host from the local index.")
                if self._outstanding >= HOST_MAX_PENDING:
                    raise Busy(f"{self._outstanding} requests are waiting for {self.host_id}; retry after a pause")
                self._outstanding += 1
            self._inbox.append(_Pending(rid, method, frames, fut, now + timeout, internal))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"link {self.host_id}", daemon=True)
                self._thread.start()
        self._wake()
        return fut

    def snapshot(self) -> dict[str, Any]:
        """What ``aivault hosts`` shows: connected, the last error, the peer's protocol and version."""
        return {"connected": self.state == "open", "state": self.state, "lastError": self.last_error,
                "protocol": self.protocol, "version": self.version, "lastSeenAt": self.last_seen_ms,
                "connectedSince": self.connected_since_ms}

    def close(self) -> None:
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_CLOSE_JOIN_S)
        with self._lock:
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    def _wake(self) -> None:
        with self._lock, contextlib.suppress(BlockingIOError):  # a full pipe already wakes the thread
            if self._wake_w >= 0:
                os.write(self._wake_w, b"\0")

    # --- the link's thread ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    new = list(self._inbox)
                    self._inbox.clear()
                    closing = self._closing
                    if not closing and not new and self.state == "closed" and not self._waiting and not self._sent:
                        self._thread = None  # idle: a later submit starts a new thread
                        return
                if closing:
                    self._fail_all(HostUnavailable(f"the connection to {self.host_id} was closed (aivault is "
                                                   "shutting down)"), new)
                    self._stop_transport()
                    return
                now = time.monotonic()
                for p in new:
                    self._admit(p, now)
                self._turn(now)
        except BaseException as exc:  # a bug: never leave callers waiting for a dead thread
            _log.exception("host link thread failed", host=self.host_id)
            with self._lock:
                left = list(self._inbox)
                self._inbox.clear()
                self._thread = None
            self._fail_all(HostUnavailable(f"the connection to {self.host_id} failed: {exc.__class__.__name__}: "
                                           f"{exc}"), left)
            self._stop_transport()
            if not isinstance(exc, Exception):
                raise

    def _admit(self, p: _Pending, now: float) -> None:
        if not p.internal:
            self._last_use = now
        if self.state == "open":
            self._send(p)
            return
        self._waiting.append(p)
        if self.state == "closed":
            self.state = "opening"
            self._open_deadline = now + self.settings.connect_timeout_s
            try:
                self._start_transport()
            except LinkFailed as exc:
                self._lost(exc.error)

    def _turn(self, now: float) -> None:
        poller = zmq.Poller()
        items = self._poll_items() if self.state != "closed" else []
        for what, flags in items:
            poller.register(what, flags)
        poller.register(self._wake_r, zmq.POLLIN)
        events = dict(poller.poll(int(self._sleep_s(now) * 1000)))
        if self._wake_r in events:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 4096):
                    pass
        try:
            if self.state != "closed":
                for frames in self._on_events(events):
                    self._on_message(frames)
                if self.state == "opening" and self._transport_ready():
                    self.state = "greeting"
                    self._send(self._internal_ping(time.monotonic() + self.settings.connect_timeout_s))
            self._timers(time.monotonic())
        except LinkFailed as exc:
            self._lost(exc.error)

    def _sleep_s(self, now: float) -> float:
        due = [now + _TICK_S]
        if self.state in ("opening", "greeting"):
            due.append(self._open_deadline)
        due += [p.deadline for p in self._waiting] + [p.deadline for p in self._sent.values()]
        return max(0.0, min(due) - now)

    def _internal_ping(self, deadline: float) -> _Pending:
        rid = uuid.uuid4().hex
        frames = encode_request(REMOTE_FRAME_KEY, RpcRequest(rid, METHOD_PING, {}, None))
        return _Pending(rid, METHOD_PING, frames, Future(), deadline, True)

    def _send(self, p: _Pending) -> None:
        self._sent[p.rid] = p
        self._write(p.frames)

    def _on_message(self, frames: list[bytes]) -> None:
        self._last_rx = time.monotonic()
        self.last_seen_ms = int(time.time() * 1000)
        try:
            rep = decode_reply(REMOTE_FRAME_KEY, frames)
        except AivaultError as exc:
            if isinstance(exc, ProtocolError) and exc.code != ProtocolError.code:  # protocol-version: as it is
                raise LinkFailed(exc) from exc
            raise LinkFailed(ProtocolError(f"{self.host_id} sent a reply that cannot be read ({exc}): is the "
                                           "same aivault installed on both ends?")) from exc
        p = self._sent.pop(rep.id, None)
        if p is None:
            return  # a late reply to a request that already timed out
        if p.internal:
            self._on_ping(p, rep.value if rep.ok else None)
        if rep.ok:
            self._settle(p, rep.value, None)
            return
        err = from_error_value(rep.value)
        self._settle(p, None, err)
        if err.code == ERR_AUTH:
            # The host no longer accepts this client (a revoked key): nothing else will get through.
            raise LinkFailed(AuthenticationError(f"{self.host_id} refused this client: {err}"))

    def _on_ping(self, p: _Pending, value: Any) -> None:
        if isinstance(value, dict):
            self.protocol = value.get("protocol") if isinstance(value.get("protocol"), int) else None
            self.version = value.get("version") if isinstance(value.get("version"), str) else None
        if p.rid == self._heartbeat:
            self._heartbeat = None
        if self.state == "greeting":
            self.state = "open"
            self._failures = 0
            self.last_error = None
            self.connected_since_ms = int(time.time() * 1000)
            _log.info("host connected", host=self.host_id, transport=self.transport, protocol=self.protocol,
                      version=self.version)
            waiting, self._waiting = self._waiting, []
            for w in waiting:
                self._send(w)

    def _timers(self, now: float) -> None:
        if self.state in ("opening", "greeting") and now > self._open_deadline:
            raise LinkFailed(HostUnavailable(
                f"{self.host_id} did not answer within {self.settings.connect_timeout_s:g} s of opening the "
                f"connection{self._failure_detail()}"))
        for p in [p for p in self._waiting if now > p.deadline] + [p for p in self._sent.values() if now > p.deadline]:
            if p in self._waiting:
                self._waiting.remove(p)
            self._sent.pop(p.rid, None)
            if p.rid == self._heartbeat:
                self._heartbeat = None
            self._settle(p, None, HostUnavailable(
                f"no answer from {self.host_id} within {self.settings.request_timeout_s:g} s; aivault never answers "
                "for a remote host from the local index"))
        if self.state != "open":
            return
        silent = now - self._last_rx
        if silent > HOST_HEARTBEAT_TIMEOUT_S:
            raise LinkFailed(HostUnavailable(f"{self.host_id} stopped answering: nothing received for {silent:.0f} s, "
                                             f"heartbeats included{self._failure_detail()}"))
        if silent > HOST_HEARTBEAT_INTERVAL_S and self._heartbeat is None:
            hb = self._internal_ping(self._last_rx + HOST_HEARTBEAT_TIMEOUT_S)
            self._heartbeat = hb.rid
            self._send(hb)
        busy = any(not p.internal for p in self._sent.values()) or self._waiting
        if not busy and now - self._last_use > self.settings.idle_timeout_s:
            _log.info("host connection closed: idle", host=self.host_id, idle_s=round(now - self._last_use))
            self._stop_transport()

    def _settle(self, p: _Pending, value: Any, error: AivaultError | None) -> None:
        if not p.internal:
            with self._lock:
                self._outstanding -= 1
        if p.future.done():
            return
        if error is not None:
            p.future.set_exception(error)
        else:
            p.future.set_result(value)

    def _lost(self, error: AivaultError) -> None:
        was_open = self.state == "open"
        self._stop_transport()
        if was_open:
            self._failures, self._retry_at = 0, 0.0  # it worked: the next request re-opens at once
        else:
            self._failures += 1
            self._retry_at = time.monotonic() + min(HOST_BACKOFF_S * 2 ** (self._failures - 1), HOST_BACKOFF_MAX_S)
        self.last_error = str(error)
        # info, not warning: the request that failed carries the same sentence to its caller, and a CLI
        # (whose default level is warning) must print it once, as a sentence, not also as a log record.
        _log.info("host connection failed" if not was_open else "host connection lost", host=self.host_id,
                  error=self.last_error, failures=self._failures)
        if isinstance(error, HostUnavailable) and self._sent and was_open:
            error = HostUnavailable(f"the connection to {self.host_id} was lost mid-request: {self.last_error}")
        elif isinstance(error, HostUnavailable):
            error = HostUnavailable(self.last_error)
        self._fail_all(error, [])

    def _fail_all(self, error: AivaultError, extra: list[_Pending]) -> None:
        victims = [*self._waiting, *self._sent.values(), *extra]
        self._waiting, self._sent, self._heartbeat = [], {}, None
        for p in victims:
            self._settle(p, None, error)

    def _stop_transport(self) -> None:
        if self.state != "closed":
            with contextlib.suppress(Exception):
                self._teardown()
        self.state = "closed"
        self.connected_since_ms = None

    # --- the transport (subclasses) ---------------------------------------------------------------
    @abstractmethod
    def _start_transport(self) -> None:
        """Begin opening (never block): spawn, connect. Raise LinkFailed when that fails at once."""

    @abstractmethod
    def _poll_items(self) -> list[tuple[Any, int]]:
        """The sockets or file descriptors to poll, with their ZeroMQ poll flags."""

    @abstractmethod
    def _on_events(self, events: dict[Any, int]) -> list[list[bytes]]:
        """Handle what the poll reported; the complete messages received. Raise LinkFailed when broken."""

    @abstractmethod
    def _transport_ready(self) -> bool:
        """Whether the transport can carry the greeting ping (the relay started, the handshake is done)."""

    @abstractmethod
    def _write(self, frames: list[bytes]) -> None:
        """Queue one message; it is sent as the transport can take it."""

    @abstractmethod
    def _teardown(self) -> None:
        """Close the transport and everything it holds (processes, sockets)."""

    def _failure_detail(self) -> str:
        """A sentence on what the transport saw, appended to failure messages (ssh's stderr, an event)."""
        return ""
