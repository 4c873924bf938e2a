"""The endpoint table: every RPC method once, with its handler, and the one dispatch (docs/protocol.md §1.2).

``protocol.METHODS`` holds what is fixed about a method -- idempotent, open to remote clients, needs a
daemon, what an older peer's method-not-found means -- and is all a thin client imports. ``ENDPOINTS``
pairs each entry with the handler that answers it and, for what a remote client may ask, what of the
answer that client's transport may see. Every end that serves requests goes through ``dispatch``:

* the daemon's ipc socket (``Daemon.handle``), for its own machine's callers;
* the daemon's paired listener, for paired clients (``Daemon.handle`` after the listener's gate);
* the ssh relay (broker/remote/relay.py), for its relay client;
* a client process answering from its own index, with no daemon (direct mode, aivault/thin/client.py).

They differ only in the ``Context`` they hand it: who asks, what answers search, status and read, the
ping facts, and which of the daemon's controls and host connections exist there. A request the table
refuses is refused the same way everywhere: a local-control method from a remote client is
``not-permitted``, a daemon's method asked without one ``needs-daemon`` with the table's message. A
merged search over several hosts is one more caller with a context of its own.

The table lives in the broker, not in ``aivault.vault``: a context holds the caller's authenticated
transport and the host connections, both broker things. The vault's endpoints (``search_sessions``,
``search_status``, ``ServiceAnswers``) are what a context's answers call. This module imports neither
the vault nor the query layer, so the relay and the brokers load it without DuckDB.

``error_reply`` is the one place an exception becomes an error reply (the brokers' ``_reply``, the relay's
``_answer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aivault import __version__
from aivault.broker.exposure import (
    FULL_DIAGNOSTICS,
    Caller,
    Transport,
    redact_read,
    redact_search,
    redact_shard,
    redact_status,
)
from aivault.broker.remote.hosts import Host, parse_host, remote_unavailable
from aivault.codec import RpcReply, RpcRequest, encode_reply
from aivault.errors import (
    AivaultError,
    InvalidParams,
    MethodNotFound,
    NeedsDaemon,
    NotPermitted,
    ProtocolError,
    clip,
    error_value,
)
from aivault.home import Home
from aivault.protocol import (
    METHOD_CLEAR,
    METHOD_HOSTS,
    METHOD_PING,
    METHOD_READ,
    METHOD_RECONCILE,
    METHOD_ROOTS,
    METHOD_SEARCH,
    METHOD_SEARCH_HOSTS,
    METHOD_SHARD,
    METHOD_STATS,
    METHOD_STATUS,
    METHODS,
    PROTOCOL_VERSION,
    Method,
)


# --- what a handler is called with ------------------------------------------------------------------
class Answers(Protocol):
    """What answers search, status and read where a request is served: a vault service through its endpoints
    (``aivault.vault.endpoints.ServiceAnswers``; ``NULL_SERVICE`` where there is none), or, in the relay, the
    machine's own client asking its daemon or index. The values are the contract's (aivault/protocol.py's
    SearchResult, Status, ReadResult), or a client's decoded copies of them: read-only mappings here."""

    def search(self, params: Any) -> Mapping[str, Any]: ...

    def status(self) -> Mapping[str, Any]: ...

    def read(self, params: Any) -> Mapping[str, Any]: ...

    def shard(self, params: Any) -> Mapping[str, Any]: ...


class RootReporter(Protocol):
    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]: ...


class Controls(Protocol):
    """What only a running daemon does: it writes the index (docs/contract.md §8)."""

    def stats(self) -> dict[str, Any]: ...

    def reconcile(self, full: bool) -> Future[dict[str, Any]]: ...

    def clear(self, request_id: str) -> dict[str, Any]: ...


class Hosts(Protocol):
    """The connections to remote execution hosts (``HostConnections``, broker/remote/connections.py)."""

    def request(self, host: Host, method: str, params: Any) -> Future[Any]: ...

    def states(self, check: bool = False) -> Future[dict[str, Any]]: ...

    @property
    def home(self) -> Home: ...


@dataclass(frozen=True, slots=True)
class Context:
    """Where a request is answered: one per serving end (or per request, where what answers changes)."""

    caller: Caller
    answers: Answers
    # This end's readiness facts (aiVault.ping): the daemon's, direct mode's, or a remote client's.
    ping: Callable[[], dict[str, Any]]
    # aiVault.rootReport and aiVault.listHosts (the host connections, made on first use). None only where
    # no local caller asks (the relay): remote clients never reach these methods.
    roots: RootReporter | None = None
    hosts: Callable[[], Hosts] | None = None
    # The daemon's own controls; None: no daemon here, and the methods that need one are refused.
    controls: Controls | None = None


def remote_ping(service: bool) -> dict[str, Any]:
    """aiVault.ping as a relay or paired client sees it: no pid and no data-directory path (those describe the
    host, not its search service); ``service`` says whether a search service answers there."""
    return {"pong": True, "protocol": PROTOCOL_VERSION, "version": __version__, "service": service}


# --- the handlers -----------------------------------------------------------------------------------
Handler = Callable[[Context, RpcRequest], Any]


def _search(ctx: Context, req: RpcRequest) -> Any:
    return ctx.answers.search(req.params)


def _status(ctx: Context, req: RpcRequest) -> Any:
    return ctx.answers.status()


def _read(ctx: Context, req: RpcRequest) -> Any:
    return ctx.answers.read(req.params)


def _ping(ctx: Context, req: RpcRequest) -> Any:
    return ctx.ping()


def _roots(ctx: Context, req: RpcRequest) -> Any:
    roots = req.params.get("roots") if isinstance(req.params, dict) else None
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots) or len(roots) > 256:
        raise InvalidParams("aiVault.rootReport takes {roots: [path, ...]} (at most 256)")
    assert ctx.roots is not None
    return ctx.roots.root_report(roots)


def _controls(ctx: Context) -> Controls:
    assert ctx.controls is not None  # dispatch refused the request as needs-daemon
    return ctx.controls


def _stats(ctx: Context, req: RpcRequest) -> Any:
    return _controls(ctx).stats()


def _reconcile(ctx: Context, req: RpcRequest) -> Any:
    params = req.params
    if not isinstance(params, dict) or not isinstance(params.get("full", False), bool):
        raise InvalidParams("aiVault.reconcile takes {full: bool}")
    # The future itself: the broker answers when it resolves, without a worker waiting on a scan.
    return _controls(ctx).reconcile(bool(params.get("full", False)))


def _clear(ctx: Context, req: RpcRequest) -> Any:
    return _controls(ctx).clear(req.id)


def _shard(ctx: Context, req: RpcRequest) -> Any:
    return ctx.answers.shard(req.params)


def _search_hosts(ctx: Context, req: RpcRequest) -> Any:
    """The merged search (broker/merged.py): this machine's steps answered here, the other hosts' through the
    host connections; it waits for them all within its deadline."""
    from aivault.broker import merged

    if ctx.hosts is None:
        raise NotPermitted(f"{METHOD_SEARCH_HOSTS} is asked of the machine you sit at: it never forwards")
    conns = ctx.hosts()
    return merged.search_hosts(req.params, home=conns.home, ask_local=ctx.answers.shard,
                               ask_remote=lambda host, body: conns.request(host, METHOD_SHARD, body))


def _hosts(ctx: Context, req: RpcRequest) -> Any:
    check = req.params.get("check", False) if isinstance(req.params, dict) else None
    if not isinstance(check, bool):
        raise InvalidParams("aiVault.listHosts takes {check: bool}")
    assert ctx.hosts is not None
    return ctx.hosts().states(check)


# --- what a remote client may see of an answer ------------------------------------------------------
Expose = Callable[[Any, Transport], Any]


def _exposed(redact: Callable[[dict[str, Any], Transport], dict[str, Any]], what: str) -> Expose:
    def expose(value: Any, transport: Transport) -> Any:
        if not isinstance(value, dict):
            raise ProtocolError(f"{what} answered something that is not a map: {value!r:.200}")
        return redact(value, transport)
    return expose


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: Method
    handler: Handler
    # For a method remote clients may ask: the answer as their transport may see it (the sender applies the
    # exposure rules; the receiving client applies them again). None: answered as it is.
    expose: Expose | None = None


def _table(handlers: Mapping[str, tuple[Handler, Expose | None]]) -> dict[str, Endpoint]:
    assert set(handlers) == set(METHODS), "every method of protocol.METHODS has exactly one handler"
    assert all((e is not None) == (METHODS[m].remote and m != METHOD_PING) for m, (_, e) in handlers.items())
    return {name: Endpoint(METHODS[name], *handlers[name]) for name in METHODS}


ENDPOINTS: Final = _table({
    METHOD_SEARCH: (_search, _exposed(redact_search, "searchSessions")),
    METHOD_STATUS: (_status, _exposed(redact_status, "searchStatus")),
    METHOD_READ: (_read, _exposed(redact_read, "readSession")),
    METHOD_PING: (_ping, None),  # the context's ping facts are already a remote client's
    METHOD_ROOTS: (_roots, None),
    METHOD_STATS: (_stats, None),
    METHOD_RECONCILE: (_reconcile, None),
    METHOD_CLEAR: (_clear, None),
    METHOD_HOSTS: (_hosts, None),
    METHOD_SEARCH_HOSTS: (_search_hosts, None),
    METHOD_SHARD: (_shard, _exposed(redact_shard, "searchShard")),
})


# --- the dispatch -----------------------------------------------------------------------------------
_KIND_WORDS = {"relay": "an ssh relay", "paired": "a paired runtime"}


def check_remote_request(req: RpcRequest, caller: Caller) -> Endpoint:
    """The endpoint a relay or paired client asks for, or why it may not (docs/contract.md §6, §8): it may
    address the machine answering it only, and only the methods the table opens to remote clients."""
    who = _KIND_WORDS.get(caller.transport, caller.transport)
    host = parse_host(req.host)  # a malformed id or `all` is invalid-params, as everywhere
    if not host.is_local:
        raise NotPermitted(f"{who} answers for its own machine only and never forwards: it does not reach {host.id}. "
                           "Address that host from your own machine instead.")
    endpoint = ENDPOINTS.get(req.method)
    if endpoint is None:
        raise MethodNotFound(f"unknown method {clip(req.method)!r}")
    if not endpoint.method.remote:
        raise NotPermitted(
            f"{req.method} is not served to {caller.transport} clients: {who} answers search, readSession, status "
            "and ping only. Clearing the index, indexing, consent, retention and relay policy belong to that "
            "machine's owner, on that machine (`aivault clear`, `aivault enable`, `aivault policy` there).")
    return endpoint


def dispatch(ctx: Context, req: RpcRequest) -> Any:
    """The answer to ``req`` where ``ctx`` is: a contract value, or a Future of one (a reconcile, a remote host,
    the host list) that the caller waits for. Raises the typed error the request is refused with."""
    if ctx.caller.transport not in FULL_DIAGNOSTICS:
        asked = check_remote_request(req, ctx.caller)
        value = asked.handler(ctx, req)
        return asked.expose(value, ctx.caller.transport) if asked.expose is not None else value
    endpoint = ENDPOINTS.get(req.method)
    if endpoint is None:
        raise MethodNotFound(f"unknown method {clip(req.method)!r}")
    host = parse_host(req.host)
    if not host.is_local:
        # Answered by the host, never by the local index; local control is refused there (not-permitted).
        if ctx.hosts is None:
            raise remote_unavailable(host)
        return ctx.hosts().request(host, req.method, req.params)
    if endpoint.method.without_daemon is not None and ctx.controls is None:
        raise NeedsDaemon(endpoint.method.needs_daemon_message())
    return endpoint.handler(ctx, req)


# --- replies ----------------------------------------------------------------------------------------
def reply_frames(key: bytes, request_id: str, value: Any) -> tuple[list[bytes], str]:
    """An answer's reply frames, and its outcome for the RPC's log line (a result's kind, else ``ok``)."""
    return encode_reply(key, RpcReply(request_id, True, value)), \
        value.get("kind", "ok") if isinstance(value, dict) else "ok"


def error_frames(key: bytes, request_id: str, exc: AivaultError) -> list[bytes]:
    return encode_reply(key, RpcReply(request_id, False, error_value(exc)))


def error_reply(key: bytes, request_id: str, exc: Exception, *, internal: str = "internal error"
                ) -> tuple[list[bytes], str]:
    """The one place an exception becomes an error reply, with its outcome for the RPC's log line. A typed
    error is sent as it is; anything else is a bug, sent as an internal error (``internal`` says whose) --
    the caller logs its traceback."""
    if isinstance(exc, AivaultError):
        return error_frames(key, request_id, exc), f"error:{exc.code}"
    return error_frames(key, request_id, AivaultError(f"{internal}: {exc.__class__.__name__}: {exc}")), \
        "error:internal"
