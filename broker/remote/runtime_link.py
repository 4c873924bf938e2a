"""``runtime:<environmentId>``: a paired runtime's CurveZMQ listener (docs/protocol.md §5.3).

A DEALER socket with this machine's client key pair and the runtime's public key from the pairing.
The socket monitor tells the outcomes ZeroMQ would otherwise hide behind silent retries: the
handshake done, the runtime refusing our key (ZAP status 400: never paired or revoked), a refused
TCP connection, a lost one. Each ends the opening or the connection at once instead of at a timeout.
"""

from __future__ import annotations

import contextlib
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from aivault.broker.remote.hostconfig import HostEntry, RemoteSettings
from aivault.broker.remote.link import Link, LinkFailed
from aivault.errors import AuthenticationError, HostUnavailable
from aivault.protocol import RPC_MAX_FRAME_BYTES

_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED)
# Messages read per turn of the link's loop.
_READS_PER_TURN = 256


class RuntimeLink(Link):
    transport = "paired"

    def __init__(self, entry: HostEntry, settings: RemoteSettings, client_keys: tuple[bytes, bytes]) -> None:
        super().__init__(entry.id, settings)
        assert entry.address is not None and entry.server_key is not None
        self.address = entry.address
        self.server_key = entry.server_key.encode("ascii")
        self.client_public, self.client_secret = client_keys
        self._sock: zmq.Socket[bytes] | None = None
        self._monitor: zmq.Socket[bytes] | None = None
        self._ready = False
        self._queue: list[list[bytes]] = []

    def _start_transport(self) -> None:
        ctx: zmq.Context[Any] = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, RPC_MAX_FRAME_BYTES)
            # Never queue a request for a connection that is not there: we send only once it is.
            sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.curve_serverkey = self.server_key
            sock.curve_publickey = self.client_public
            sock.curve_secretkey = self.client_secret
            self._monitor = sock.get_monitor_socket(_EVENTS)
            sock.connect(self.address)
        except zmq.ZMQError as exc:
            sock.close(0)
            raise LinkFailed(HostUnavailable(f"cannot connect to {self.host_id} at {self.address}: {exc}")) from exc
        self._sock = sock
        self._ready = False
        self._queue = []

    def _poll_items(self) -> list[tuple[Any, int]]:
        items: list[tuple[Any, int]] = []
        if self._sock is not None:
            items.append((self._sock, zmq.POLLIN | (zmq.POLLOUT if self._queue else 0)))
        if self._monitor is not None:
            items.append((self._monitor, zmq.POLLIN))
        return items

    def _on_events(self, events: dict[Any, int]) -> list[list[bytes]]:
        if self._monitor is not None and events.get(self._monitor):
            self._read_monitor()
        messages: list[list[bytes]] = []
        sock = self._sock
        if sock is not None and events.get(sock, 0) & zmq.POLLIN:
            for _ in range(_READS_PER_TURN):
                try:
                    messages.append(sock.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
        if self._queue:
            self._flush()
        return messages

    def _read_monitor(self) -> None:
        assert self._monitor is not None
        while True:
            try:
                event = parse_monitor_message(self._monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return
            kind = event["event"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._ready = True
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise LinkFailed(AuthenticationError(
                    f"{self.host_id} refused this machine's key (ZAP status {event['value']}): it was never paired "
                    "there or it was revoked. Pair again with a code from `aivault pair` on the runtime, then "
                    f"`aivault hosts pair CODE`"))
            elif kind in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                raise LinkFailed(HostUnavailable(
                    f"the CurveZMQ handshake with {self.host_id} at {self.address} failed: the runtime's key may have "
                    "changed, or something else listens there. Pair again with a new code from `aivault pair`"))
            elif kind == zmq.EVENT_CONNECT_RETRIED:
                raise LinkFailed(HostUnavailable(
                    f"{self.host_id} refuses connections at {self.address}: is `aivault serve --listen` running "
                    "there?"))
            elif kind == zmq.EVENT_DISCONNECTED:
                raise LinkFailed(HostUnavailable(f"the connection to {self.host_id} at {self.address} was closed"))

    def _transport_ready(self) -> bool:
        return self._ready

    def _write(self, frames: list[bytes]) -> None:
        self._queue.append(frames)
        self._flush()

    def _flush(self) -> None:
        sock = self._sock
        while sock is not None and self._queue:
            try:
                sock.send_multipart(self._queue[0], zmq.NOBLOCK)
            except zmq.Again:
                return
            self._queue.pop(0)

    def _teardown(self) -> None:
        sock, self._sock = self._sock, None
        mon, self._monitor = self._monitor, None
        self._queue = []
        self._ready = False
        if sock is not None:
            with contextlib.suppress(zmq.ZMQError):
                sock.disable_monitor()
            sock.close(0)
        if mon is not None:
            mon.close(0)
