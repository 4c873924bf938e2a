"""What a relay or paired client may ask, and what it is answered (docs/contract.md §4, §6, §8).

Both ends that serve remote clients -- ``aivault relay --stdio`` and a daemon's paired listener --
go through ``answer_remote``: the client's kind comes from how it authenticated (``Caller``), the
request may only address the machine answering it, only ``REMOTE_CLIENT_METHODS`` are served, and
the sender applies the exposure rules (the receiving client applies them again).
"""

from __future__ import annotations

from typing import Any, Protocol

from aivault import __version__
from aivault.broker.exposure import Caller, redact_read, redact_search, redact_status
from aivault.broker.hosts import parse_host
from aivault.codec import RpcRequest
from aivault.errors import MethodNotFound, NotPermitted, ProtocolError, clip
from aivault.protocol import (
    METHOD_PING,
    METHOD_READ,
    METHOD_SEARCH,
    METHOD_STATUS,
    PROTOCOL_VERSION,
    REMOTE_CLIENT_METHODS,
    RPC_METHODS,
)

_KIND_WORDS = {"relay": "an ssh relay", "paired": "a paired runtime"}


class RemoteAnswerer(Protocol):
    """The machine's own answers, before exposure: what the daemon's service or the relay's connection gives."""

    def has_service(self) -> bool: ...

    def search(self, params: Any) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def read(self, params: Any) -> dict[str, Any]: ...


def check_remote_request(req: RpcRequest, caller: Caller) -> None:
    """Raise unless ``caller`` (a relay or paired client) may make ``req``."""
    who = _KIND_WORDS.get(caller.transport, caller.transport)
    host = parse_host(req.host)  # a malformed id or `all` is invalid-params, as everywhere
    if not host.is_local:
        raise NotPermitted(f"{who} answers for its own machine only and never forwards: it does not reach {host.id}. "
                           "Address that host from your own machine instead.")
    if req.method in REMOTE_CLIENT_METHODS:
        return
    if req.method in RPC_METHODS:
        raise NotPermitted(
            f"{req.method} is not served to {caller.transport} clients: {who} answers search, readSession, status "
            "and ping only. Clearing the index, indexing, consent, retention and relay policy belong to that "
            "machine's owner, on that machine (`aivault clear`, `aivault enable`, `aivault policy` there).")
    raise MethodNotFound(f"unknown method {clip(req.method)!r}")


def answer_remote(req: RpcRequest, caller: Caller, answerer: RemoteAnswerer) -> Any:
    """The reply to a relay or paired client: checked, answered, and exposed for its transport."""
    check_remote_request(req, caller)
    m = req.method
    if m == METHOD_PING:
        # No pid and no data-directory path: those describe the host, not its search service.
        return {"pong": True, "protocol": PROTOCOL_VERSION, "version": __version__, "service": answerer.has_service()}
    if m == METHOD_SEARCH:
        return redact_search(_map(answerer.search(req.params), "searchSessions"), caller.transport)
    if m == METHOD_STATUS:
        return redact_status(_map(answerer.status(), "searchStatus"), caller.transport)
    if m == METHOD_READ:
        return redact_read(_map(answerer.read(req.params), "readSession"), caller.transport)
    raise MethodNotFound(f"unknown method {clip(m)!r}")  # REMOTE_CLIENT_METHODS and this dispatch disagree


def _map(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} answered something that is not a map: {value!r:.200}")
    return value
