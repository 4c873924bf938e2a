"""How the loopback HTTP front ends (``aivault web``, ``aivault mcp --http``) hold connections.

Any local user can connect to 127.0.0.1. Without a token they are refused at once, but a
connection that sends nothing, or trickles a request and never finishes it, is never answered:
uvicorn on its own keeps such connections for ever (its keep-alive timeout starts only after a
response), and a few hundred of them spend the process's file descriptors until the owner's own
requests cannot be accepted. So each connection here (uvicorn's h11 protocol, subclassed):

* must deliver each whole request -- head and body -- within ``REQUEST_READ_TIMEOUT_S`` of the
  moment the server starts waiting for it (the connection is made, or the previous response
  ends); otherwise it is answered ``408`` when nothing of a response was sent, and closed;
* is closed ``IDLE_TIMEOUT_S`` after a response when no next request starts (uvicorn's
  keep-alive timeout);
* counts against ``MAX_CONNECTIONS``: a connection over the bound closes the connection that
  has waited longest with no request in hand (idle, or part of a request head sent), so a flood
  of idle sockets cannot keep the owner out; when every connection has a request in hand, the
  new one is answered ``503`` and closed.

A request being served (a search, an MCP tool call, an MCP event stream) is never cut by these
limits. uvicorn's own ``limit_concurrency`` is not used: it still accepts every connection (its
descriptor spent) and answers the owner ``503`` while strangers' idle connections hold the slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any, Literal

from uvicorn.protocols.http.h11_impl import H11Protocol

from aivault import log
from aivault.envvars import env_int

_log = log.get("http")

# Seconds a whole request (head and body) may take to arrive once the server waits for it.
REQUEST_READ_TIMEOUT_S = env_int("AIVAULT_HTTP_READ_TIMEOUT_S", 10)
# Seconds an idle keep-alive connection is kept after a response.
IDLE_TIMEOUT_S = env_int("AIVAULT_HTTP_IDLE_TIMEOUT_S", 5)
# Connections held at once; also how many the server accepts per wake-up (the listen backlog),
# so that a burst of connections cannot take more descriptors than about twice this.
MAX_CONNECTIONS = env_int("AIVAULT_HTTP_MAX_CONNECTIONS", 64)


def _raw_response(status: int, reason: str, error: str, message: str) -> bytes:
    body = json.dumps({"ok": False, "error": error, "message": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "cache-control: no-store\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request read deadline and a bound on the connections held."""

    _read_timer: asyncio.TimerHandle | None = None
    _waiting_since = 0.0
    _closed_by_us = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._sync_read_timer()
        if len(self.connections) > MAX_CONNECTIONS:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_read_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync_read_timer()

    # --- the read deadline ------------------------------------------------------------------------
    def _serving(self) -> bool:
        """A request has fully arrived and its response is not finished (it may take any time)."""
        return self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body

    def _idle(self) -> bool:
        """No request is in hand: the connection is idle or has sent part of a request head at most."""
        return self.cycle is None or self.cycle.response_complete

    def _sync_read_timer(self) -> None:
        if self.transport is None or self.transport.is_closing() or self._serving():
            self._cancel_read_timer()
        elif self._read_timer is None:
            self._waiting_since = self.loop.time()
            self._read_timer = self.loop.call_later(REQUEST_READ_TIMEOUT_S, self._read_timed_out)

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self._serving() or self.transport.is_closing():
            return
        self._close("read-timeout", _raw_response(408, "Request Timeout", "request-timeout",
                                                  f"the request did not arrive within {REQUEST_READ_TIMEOUT_S} s"))

    # --- the bound ----------------------------------------------------------------------------------
    def _make_room(self) -> None:
        # A request whose body is still arriving is in the app's hands (past the guard's checks): left to
        # the read deadline rather than evicted.
        waiting = [c for c in self.connections
                   if c is not self and isinstance(c, BoundedH11Protocol) and c._idle() and not c._closed_by_us]
        if waiting:
            oldest = min(waiting, key=lambda c: c._waiting_since)
            # An idle connection gets no response (a browser retries on a fresh one); a half-sent one
            # never gets a response anyway.
            oldest._close("evicted", None)
            return
        self._close("over-bound", _raw_response(503, "Service Unavailable", "busy",
                                                f"{MAX_CONNECTIONS} connections are being served: try again"))

    def _close(self, why: str, response: bytes | None) -> None:
        self._closed_by_us = True
        self._cancel_read_timer()
        nothing_sent = self.cycle is None or self.cycle.response_complete or not self.cycle.response_started
        if response is not None and nothing_sent:
            with contextlib.suppress(OSError):
                self.transport.write(response)
        self.transport.close()
        _log.info("connection closed", why=why, connections=len(self.connections),
                  client=f"{self.client[0]}:{self.client[1]}" if self.client else None)


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on a loopback address (port 0: the kernel picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening before the URL is printed: a client that connects at once waits in the backlog
    # until uvicorn accepts, instead of being refused.
    sock.listen(MAX_CONNECTIONS)
    return sock


def run(app: Any, sock: socket.socket, *, lifespan: Literal["on", "off"], **config: Any) -> None:
    """Serve ``app`` on ``sock`` with uvicorn, holding connections as the module says."""
    import uvicorn

    # No WebSocket protocol: neither front end has one, and an upgraded connection would leave these bounds.
    cfg = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan, ws="none",
                         http=BoundedH11Protocol, timeout_keep_alive=IDLE_TIMEOUT_S, backlog=MAX_CONNECTIONS,
                         **config)
    uvicorn.Server(cfg).run(sockets=[sock])
