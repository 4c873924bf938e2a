"""Talking to a daemon: the raw RPC client and the session search client over it.

``RpcClient.call`` returns a contract value or raises the typed error the daemon sent.
``SessionSearchClient`` adds the compatibility rule of SPEC §7: an older peer that does not
know the method (-32601) means ``unavailable/no-service`` for search and the status sentinel
for status; transport failures, authentication errors and invalid payloads stay errors. It
also retries page 1 once or twice when the index moved while the page was assembled.
"""

from __future__ import annotations

import uuid
from typing import Any

import zmq

from aivault.codec import RpcRequest, decode_reply, encode_request
from aivault.errors import AivaultError, DaemonUnreachable, MethodNotFound, ProtocolError, from_error_value
from aivault.home import Home
from aivault.protocol import METHOD_PING, METHOD_SEARCH, METHOD_STATUS, PING_TIMEOUT_S, RPC_TIMEOUT_S
from query.service import STATUS_SENTINEL


class RpcClient:
    def __init__(self, endpoint: str, key: bytes, *, timeout_s: float = RPC_TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.key = key
        self.timeout_s = timeout_s
        self.ctx: zmq.Context[Any] = zmq.Context.instance()
        self.sock: zmq.Socket[bytes] | None = None

    @classmethod
    def for_home(cls, home: Home, *, timeout_s: float = RPC_TIMEOUT_S) -> RpcClient:
        return cls(home.rpc_endpoint, home.key(), timeout_s=timeout_s)

    def _socket(self) -> zmq.Socket[bytes]:
        if self.sock is None:
            s = self.ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(self.endpoint)
            self.sock = s
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(linger=0)
            self.sock = None

    def call(self, method: str, params: Any = None, *, host: str | None = None, timeout_s: float | None = None) -> Any:
        rid = uuid.uuid4().hex
        sock = self._socket()
        sock.send_multipart(encode_request(self.key, RpcRequest(rid, method, params, host)))
        wait_ms = int((self.timeout_s if timeout_s is None else timeout_s) * 1000)
        while True:
            if not sock.poll(wait_ms, zmq.POLLIN):
                # The socket may hold a late reply now; a fresh one keeps later calls clean.
                self.close()
                raise DaemonUnreachable(
                    f"no answer from the aivault daemon at {self.endpoint} within {wait_ms / 1000:.1f} s. "
                    "Is `aivault serve` running? Without it, commands open the index directly.")
            rep = decode_reply(self.key, sock.recv_multipart())
            if rep.id != rid:
                continue  # a late reply to an earlier, timed-out call
            if rep.ok:
                return rep.value
            raise from_error_value(rep.value)

    def ping(self) -> dict[str, Any] | None:
        """The daemon's readiness, or None when nothing answers quickly."""
        try:
            value = self.call(METHOD_PING, {}, timeout_s=PING_TIMEOUT_S)
        except (AivaultError, ProtocolError):
            return None
        return value if isinstance(value, dict) else None


class SessionSearchClient:
    def __init__(self, rpc: RpcClient, host: str | None = None) -> None:
        self.rpc = rpc
        self.host = host

    def search(self, request: dict[str, Any], *, retries: int = 2) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for attempt in range(retries + 1):
            try:
                value = self.rpc.call(METHOD_SEARCH, request, host=self.host)
            except MethodNotFound:
                return {"kind": "unavailable", "reason": "no-service"}
            if not isinstance(value, dict) or "kind" not in value:
                raise ProtocolError(f"searchSessions answered something that is not a result: {value!r:.200}")
            # Page 1 has no cursor to drop: asking again is what SPEC §3 tells the client to do.
            if value["kind"] == "stale-cursor" and not request.get("cursor") and attempt < retries:
                continue
            return value
        return value

    def status(self) -> dict[str, Any]:
        try:
            value = self.rpc.call(METHOD_STATUS, {}, host=self.host)
        except MethodNotFound:
            return dict(STATUS_SENTINEL)
        if not isinstance(value, dict):
            raise ProtocolError(f"searchStatus answered something that is not a status: {value!r:.200}")
        return value
