"""``aivault mcp``: the tools of ``aivault.mcp.tools`` served over MCP (the official SDK's low-level server).

stdio by default (the agent harness starts it as a child process); ``--http 127.0.0.1:PORT`` serves
the streamable HTTP transport on loopback only, with the SDK's DNS-rebinding guard set to exactly
the bound authority. Each tool call runs in a worker thread (answers come from the daemon or the
index file, both blocking) and writes one log line.
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from aivault import __version__, log
from aivault.broker.asker import Asker
from aivault.errors import AivaultError, InvalidParams, clip
from aivault.home import Home
from aivault.mcp.stdio import checked_stdio
from aivault.mcp.tools import DEFAULT_MAX_CHARS, TOOLS, Caller, ToolFailed, Tools, dump, result_bytes
from aivault.protocol import ERROR_CODES

_log = log.get("mcp")

INSTRUCTIONS = ("Search the user's past AI coding-agent sessions on this machine with search_sessions before "
                "redoing work or guessing at earlier decisions; read_session shows the messages around a hit.")
# An error message past the result's bound is cut to this many characters (each at most 4 bytes).
_ERROR_MESSAGE_CHARS = 800
# Request bodies the HTTP transport accepts; MCP requests of these tools are a few hundred bytes.
HTTP_MAX_BODY_BYTES = 65_536


def tool_list() -> list[types.Tool]:
    return [types.Tool(name=t.name, description=t.description, input_schema=t.schema()) for t in TOOLS]


def tools_list_bytes() -> int:
    """The size of the tools/list result as it travels (JSON, UTF-8)."""
    result = types.ListToolsResult(tools=tool_list())
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


def error_text(exc: Exception) -> str:
    """An MCP tool error: the contract's error name and a message that says what to do, the whole
    result within DEFAULT_MAX_CHARS bytes (a message that would not fit is cut, saying how long it was)."""
    if isinstance(exc, ToolFailed):
        payload = {"error": exc.name, "message": str(exc), **exc.extra}
    elif isinstance(exc, AivaultError):
        payload = {"error": ERROR_CODES.get(exc.code, "internal-error"), "message": str(exc)}
    else:
        payload = {"error": "internal-error", "message": f"{exc.__class__.__name__}: {exc}. The server's log "
                                                         "(stderr) has the details."}
    text = dump(payload)
    if result_bytes(text) > DEFAULT_MAX_CHARS:
        payload = {"error": payload["error"], "message": clip(str(payload["message"]), _ERROR_MESSAGE_CHARS)}
        text = dump(payload)
    return text


def build_server(home: Home, *, caller: Caller | None = None) -> Server[Any]:
    askers: dict[str | None, Asker] = {}

    def asker_for(host: str | None) -> Asker:
        key = host if host not in ("", "local") else None
        if key not in askers:
            askers[key] = Asker(home, key)
        return askers[key]

    tools = Tools(asker_for, caller or Caller.from_environment())

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        t0 = time.monotonic()
        ok = True
        error = None
        try:
            text = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments)
        except (AivaultError, InvalidParams) as exc:
            ok, error, text = False, exc.__class__.__name__, error_text(exc)
        except Exception as exc:  # a bug: the agent gets an error value, the log the traceback
            _log.exception("tool failed", tool=clip(params.name))
            ok, error, text = False, exc.__class__.__name__, error_text(exc)
        _log.info("tool", tool=clip(params.name), ok=ok, error=error, bytes=len(text.encode("utf-8")),
                  ms=round((time.monotonic() - t0) * 1000, 1))
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=not ok)

    return Server("aivault", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def serve_stdio(home: Home) -> None:
    server = build_server(home)

    async def main() -> None:
        async with checked_stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    _log.info("mcp server started", transport="stdio", home=str(home.path))
    anyio.run(main)


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


def serve_http(home: Home, address: str, *, announce: Any = None) -> None:
    """Streamable HTTP on a loopback address; ``announce(url)`` is called once the port is bound."""
    import socket

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    host, port = parse_http_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # before the URL is announced, so that a client connecting at once is not refused
    port = sock.getsockname()[1]
    authority = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    names = [authority] + ([f"localhost:{port}"] if host in ("127.0.0.1", "::1") else [])
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=names,
                                         allowed_origins=[f"http://{n}" for n in names])
    app = build_server(home).streamable_http_app(host=host, transport_security=security,
                                                 max_request_body_size=HTTP_MAX_BODY_BYTES)
    url = f"http://{authority}/mcp"
    _log.info("mcp server started", transport="http", url=url, home=str(home.path))
    if announce is not None:
        announce(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
