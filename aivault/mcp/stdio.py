"""The stdio transport of ``aivault mcp``: each line checked before the MCP SDK sees it.

The SDK's stdio transport parses a line into a JSON-RPC message or hands the server an exception,
which the server only logs: an invalid line got no answer at all, and a request whose ``id`` was a
fraction, a boolean or null was read as a notification and silently never answered. Here every
line is read (at most ``STDIO_MAX_LINE_BYTES``, the rest of a longer one skipped unread) and
checked first; one that is not a valid message is answered with the error JSON-RPC 2.0 requires:

* not UTF-8, empty, not JSON: ``-32700`` parse error, id null;
* JSON but not one message object (a batch, a number, ...), ``jsonrpc`` not ``"2.0"``, ``method``
  not a string, an id that is not an integer or a string of at most ``RPC_MAX_ID_CHARS``, params
  neither an object nor an array, neither a request nor a response, a line over the limit:
  ``-32600`` invalid request, with the request's id when it has a valid one, else null;
* params an array (MCP's are objects): ``-32602`` invalid params.

An integer literal too long for any JSON parser here (past 4,300 digits) is passed on as a string of
its digits, so that a tool argument given so is refused by name like any other wrong value.

A notification (a request without an id) is never answered (the JSON-RPC 2.0 specification,
section 4.1), unless it is not even a request object (then it is answered with id null, as there);
nor is a response: the server sends no requests, so a response matches none. What is dropped is
logged. Valid lines go on to the SDK unchanged, which answers an unknown method ``-32601``; the
server's error answers have their ``data`` cut to ``RPC_ECHO_MAX_CHARS`` (the SDK repeats the whole
method name there).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from aivault import log
from aivault.errors import clip
from aivault.protocol import RPC_ECHO_MAX_CHARS, RPC_MAX_ID_CHARS

_log = log.get("mcp")

# The longest line read (without its newline). A tool call of these tools is a few hundred bytes;
# a longer line is skipped as it is read, never held, and answered invalid-request.
STDIO_MAX_LINE_BYTES = 4 * 1024 * 1024
_SKIP_CHUNK_BYTES = 64 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
_MESSAGES = {PARSE_ERROR: "Parse error", INVALID_REQUEST: "Invalid Request", INVALID_PARAMS: "Invalid params"}


@dataclass(frozen=True, slots=True)
class Checked:
    """One line's fate: ``forward`` goes to the SDK, ``answer`` is written back, neither is dropped."""

    forward: str | None = None
    answer: dict[str, Any] | None = None
    reason: str | None = None


def _refuse(code: int, rid: int | str | None, reason: str) -> Checked:
    error = {"code": code, "message": _MESSAGES[code], "data": reason}
    return Checked(answer={"jsonrpc": "2.0", "id": rid, "error": error}, reason=reason)


def _drop(reason: str) -> Checked:
    return Checked(reason=reason)


def _valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and len(value) <= RPC_MAX_ID_CHARS)


def check_line(line: bytes | None) -> Checked:
    """What to do with one line of stdin (``None``: a line over ``STDIO_MAX_LINE_BYTES``)."""
    if line is None:
        return _refuse(INVALID_REQUEST, None, f"the line is over {STDIO_MAX_LINE_BYTES:,} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _refuse(PARSE_ERROR, None, "the line is not UTF-8")
    if not text.strip():
        return _refuse(PARSE_ERROR, None, "the line is empty")
    unread: list[str] = []

    def integer(literal: str) -> int | str:
        try:
            return int(literal)
        except ValueError:  # past Python's 4,300 digits, as past the SDK parser's: passed on as its digits
            unread.append(literal)
            return literal

    try:
        message = json.loads(text, parse_int=integer)
    except RecursionError:
        return _refuse(PARSE_ERROR, None, "the line nests deeper than the parser reads")
    except ValueError:
        return _refuse(PARSE_ERROR, None, "the line is not JSON")
    if not isinstance(message, dict):
        return _refuse(INVALID_REQUEST, None, "a message is one JSON object (MCP has no batches)")
    if unread:
        text = json.dumps(message, ensure_ascii=False)
    has_id = "id" in message
    rid = message.get("id") if has_id and _valid_id(message.get("id")) else None
    if message.get("jsonrpc") != "2.0":
        return _refuse(INVALID_REQUEST, rid, 'jsonrpc must be "2.0"')
    if "method" in message:
        return _check_request(text, message, has_id, rid)
    if "result" in message or "error" in message:
        try:
            types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError:
            return _drop("a malformed response")
        return Checked(forward=text)  # the SDK drops a response to none of its requests
    return _refuse(INVALID_REQUEST, rid, "neither a request (method) nor a response (result or error)")


def _check_request(text: str, message: dict[str, Any], has_id: bool, rid: int | str | None) -> Checked:
    if not isinstance(message["method"], str):
        return _refuse(INVALID_REQUEST, rid, "method must be a string")
    if has_id and rid is None:
        return _refuse(INVALID_REQUEST, None, f"id must be an integer or a string of at most {RPC_MAX_ID_CHARS} "
                                              "characters")
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return _refuse(INVALID_REQUEST, rid, "params must be an object")
    if isinstance(params, list):
        if has_id:
            return _refuse(INVALID_PARAMS, rid, "params must be an object")
        return _drop("a notification whose params are not an object")
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:
        return _refuse(INVALID_REQUEST, rid, "not an MCP message") if has_id else _drop("a malformed notification")
    return Checked(forward=text)


def read_line(stream: IO[bytes]) -> bytes | None:
    """The next line (``b""`` at the end), or None for one past the limit, skipped to its end."""
    line = stream.readline(STDIO_MAX_LINE_BYTES + 1)
    if len(line) <= STDIO_MAX_LINE_BYTES or line.endswith(b"\n"):
        return line
    while True:
        rest = stream.readline(_SKIP_CHUNK_BYTES)
        if not rest or rest.endswith(b"\n"):
            return None


class CheckedLines:
    """The lines the SDK's stdio transport reads: only valid ones; the others are answered through ``answer``."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self._answer: Callable[[SessionMessage], Awaitable[None]] | None = None
        self._ready = anyio.Event()

    def answer_with(self, send: Callable[[SessionMessage], Awaitable[None]]) -> None:
        self._answer = send
        self._ready.set()

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await anyio.to_thread.run_sync(read_line, self.stream)
            if raw == b"":
                raise StopAsyncIteration
            checked = check_line(raw)
            if checked.forward is not None:
                return checked.forward
            _log.warning("mcp line refused", reason=checked.reason, answered=checked.answer is not None,
                         bytes=len(raw) if raw is not None else f">{STDIO_MAX_LINE_BYTES}")
            if checked.answer is not None:
                await self._ready.wait()
                assert self._answer is not None
                message = types.jsonrpc_message_adapter.validate_python(checked.answer, by_name=False)
                try:
                    await self._answer(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    raise StopAsyncIteration from None


class ClippedErrors:
    """The server's write stream, with an error answer's ``data`` cut to ``RPC_ECHO_MAX_CHARS``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCError) and isinstance(message.error.data, str) \
                and len(message.error.data) > RPC_ECHO_MAX_CHARS:
            error = message.error.model_copy(update={"data": clip(message.error.data)})
            item = SessionMessage(message.model_copy(update={"error": error}), metadata=item.metadata)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> ClippedErrors:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


def _claim_stdin() -> tuple[IO[bytes], Callable[[], None]]:
    """fd 0 moved to a private descriptor, fd 0 itself the null device (as the SDK does when it reads
    stdin itself): a tool's child process must never read the agent's messages."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)

    def restore() -> None:
        os.dup2(private, 0)

    # closefd=False: a worker thread may still block reading it after the transport exits.
    return os.fdopen(private, "rb", closefd=False), restore


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[tuple[Any, ClippedErrors]]:
    """The SDK's stdio transport reading ``CheckedLines`` of the process's stdin."""
    stream, restore = _claim_stdin()
    lines = CheckedLines(stream)
    try:
        # stdio_server only iterates its stdin by lines (``async for line in stdin``).
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read, write):
            lines.answer_with(write.send)
            yield read, ClippedErrors(write)
    finally:
        restore()
