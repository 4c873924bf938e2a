"""``aivault mcp``: the tools of ``aivault.mcp.tools`` served over MCP (the official SDK's low-level server).

stdio by default (the agent harness starts it as a child process); ``--http 127.0.0.1:PORT`` serves
the streamable HTTP transport on loopback only, to the holder of the bearer token
(``aivault.mcp.http_transport``). Each tool call runs in a worker thread (answers come from the
daemon or the index file, both blocking) and writes one log line.
"""

from __future__ import annotations

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
