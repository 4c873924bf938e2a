"""``aivault mcp --http 127.0.0.1:PORT``: the MCP tools over streamable HTTP, for the data directory's owner only.

Every local user can connect to a loopback port, so every request must carry
``Authorization: Bearer <token>``, the token of ``mcp.token`` (a 0600 file of the data directory,
``aivault.tokens``): the server prints it for the owner's agent configuration, and
``aivault agent install AGENT --http 127.0.0.1:PORT`` writes it where the agent reads its headers.
Without it a request is 401 before the SDK sees it (no session is made, nothing is read).

Then the SDK's own guards: ``Host`` (and ``Origin``, when sent) must be the bound authority (DNS
rebinding), bodies are at most ``HTTP_MAX_BODY_BYTES``. Sessions are bounded: at most
``MAX_SESSIONS`` at once, each closed after ``SESSION_IDLE_TIMEOUT_S`` without a request in flight
(an agent's open event stream counts as one, so a connected agent's session lives as long as it
does; a client that comes back after the timeout gets 404 and, as the protocol says, initializes
again). A new session over the bound is refused (503, with what to do) rather than an idle one
evicted: with the token only the owner's agents open sessions, and ending one of theirs between two
tool calls to make room for another would break it silently; the refusal lasts at most the idle
timeout. Connections are held as ``aivault.httpserve`` says. One log line per request.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aivault import log, tokens
from aivault.envvars import env_int
from aivault.errors import InvalidParams
from aivault.home import Home

_log = log.get("mcp")

# Request bodies the HTTP transport accepts; MCP requests of these tools are a few hundred bytes.
HTTP_MAX_BODY_BYTES = 65_536
# Sessions open at once (each holds a server task and its streams, some 40 KB).
MAX_SESSIONS = env_int("AIVAULT_MCP_MAX_SESSIONS", 32)
# Seconds a session may go without a request in flight before it is closed.
SESSION_IDLE_TIMEOUT_S = env_int("AIVAULT_MCP_SESSION_IDLE_TIMEOUT_S", 900)
SESSION_HEADER = "mcp-session-id"
# JSON-RPC error codes of the refusals (the server-defined range).
UNAUTHORIZED_CODE = -32001
TOO_MANY_SESSIONS_CODE = -32002

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def parse_http_address(value: str) -> tuple[str, int]:
    """``127.0.0.1:PORT`` (or ``[::1]:PORT``, ``localhost:PORT``); anything not loopback is refused."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidParams(f"--http takes 127.0.0.1:PORT (PORT 0 picks a free one), got {value!r}")
    host = host.strip("[]")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise InvalidParams(f"--http serves loopback only (127.0.0.1, ::1): {host!r} would expose the user's "
                                "session history to the network")
    return ("127.0.0.1" if host == "localhost" else host), int(port)


def url_for(host: str, port: int) -> str:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"http://{authority}/mcp"


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers") or []:
        if k.lower() == name:
            return bytes(v).decode("latin-1")
    return None


class BearerGuard:
    """The SDK's app behind the bearer token and the session bound; one log line per request."""

    def __init__(self, app: App, token: str, sessions: Callable[[], int], token_file: str) -> None:
        self.app = app
        self.token = token.encode()
        self.sessions = sessions
        self.token_file = token_file

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan: the SDK's session manager starts and stops
            await self.app(scope, receive, send)
            return
        t0 = time.monotonic()
        auth = _header(scope, b"authorization") or ""
        scheme, _, presented = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self.token):
            await _refuse(send, 401, UNAUTHORIZED_CODE,
                          "unauthorized: send the header 'Authorization: Bearer <token>' with the token in "
                          f"{self.token_file} (`aivault agent install AGENT --http ADDRESS` writes it into the "
                          "agent's configuration)", (("www-authenticate", 'Bearer realm="aivault"'),))
            self._log(scope, 401, t0, refused="unauthorized")
            return
        opening = scope["method"] == "POST" and _header(scope, SESSION_HEADER.encode()) is None
        if opening and self.sessions() >= MAX_SESSIONS:
            await _refuse(send, 503, TOO_MANY_SESSIONS_CODE,
                          f"{MAX_SESSIONS} MCP sessions are open, the most this server keeps: an idle one closes "
                          f"{SESSION_IDLE_TIMEOUT_S} s after its last request (an agent that exits frees its own); "
                          "restart `aivault mcp --http` to close them all now")
            self._log(scope, 503, t0, refused="too-many-sessions")
            return
        status: list[int] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._log(scope, status[0] if status else None, t0)

    def _log(self, scope: Scope, status: int | None, t0: float, **extra: Any) -> None:
        _log.info("request", method=scope["method"], path=scope["path"], status=status, sessions=self.sessions(),
                  ms=round((time.monotonic() - t0) * 1000, 1), **extra)


async def _refuse(send: Send, status: int, code: int, message: str,
                  headers: tuple[tuple[str, str], ...] = ()) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), *((k.encode(), v.encode()) for k, v in headers)]})
    await send({"type": "http.response.body", "body": body})


def serve_http(home: Home, address: str, *, announce: Callable[[str, str], None] | None = None) -> None:
    """Streamable HTTP on a loopback address; ``announce(url, token)`` is called once the port is bound."""
    from mcp.server.transport_security import TransportSecuritySettings

    from aivault import httpserve  # uvicorn: only to serve (agent install parses addresses with this module)
    from aivault.mcp.server import build_server

    host, port = parse_http_address(address)
    token = tokens.load_or_create(home, tokens.MCP_TOKEN)
    sock = httpserve.listening_socket(host, port)
    port = sock.getsockname()[1]
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    names = [authority] + ([f"localhost:{port}"] if host in ("127.0.0.1", "::1") else [])
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=names,
                                         allowed_origins=[f"http://{n}" for n in names])
    server = build_server(home)
    app = server.streamable_http_app(host=host, transport_security=security, max_request_body_size=HTTP_MAX_BODY_BYTES,
                                     session_idle_timeout=SESSION_IDLE_TIMEOUT_S, max_sessions=MAX_SESSIONS)
    manager = server.session_manager

    def sessions() -> int:
        # The SDK keeps no public count; its table of live sessions is what MAX_SESSIONS bounds.
        return len(manager._server_instances)

    guarded = BearerGuard(app, token, sessions, str(tokens.token_path(home, tokens.MCP_TOKEN)))
    url = url_for(host, port)
    _log.info("mcp server started", transport="http", url=url, home=str(home.path), max_sessions=MAX_SESSIONS,
              session_idle_timeout_s=SESSION_IDLE_TIMEOUT_S)
    if announce is not None:
        announce(url, token)
    httpserve.run(guarded, sock, lifespan="on")
