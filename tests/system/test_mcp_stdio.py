"""``aivault mcp`` over stdio spoken to line by line: every invalid line gets the JSON-RPC 2.0 answer it calls for.

The MCP SDK's client only sends valid messages, so these tests write the raw lines themselves to the
real server process and read its raw answers.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aivault.home import Home
from aivault.mcp.stdio import STDIO_MAX_LINE_BYTES
from aivault.mcp.tools import SESSION_ENV
from aivault.protocol import RPC_ECHO_MAX_CHARS
from tests.support.common import cli_env

PARSE = {"code": -32700, "message": "Parse error"}
INVALID = {"code": -32600, "message": "Invalid Request"}
NOT_OBJECT = "a message is one JSON object (MCP has no batches)"
VERSION = 'jsonrpc must be "2.0"'
BAD_ID = "id must be an integer or a string of at most 128 characters"


class RawServer:
    """`aivault mcp` as a child process, its stdout read line by line on a thread."""

    def __init__(self, home: Home) -> None:
        env = cli_env(home.path, AIVAULT_LOG_LEVEL="info")
        for name in (*SESSION_ENV, "CLAUDE_PROJECT_DIR"):
            env.pop(name, None)
        self.log = home.path / "mcp-stderr.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "mcp"], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.pings = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def next(self, timeout: float = 30) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.lines.get(timeout=timeout))
        return value

    def request(self, method: str, params: dict[str, Any] | None = None, rid: int | str = "r") -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode() + b"\n")
        return self.next()

    def answers_to(self, line: bytes) -> list[dict[str, Any]]:
        """What the server answers to ``line``: everything it writes before answering a ping sent after it."""
        self.pings += 1
        ping = f"ping-{self.pings}"
        self.send(line)
        self.send(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode() + b"\n")
        out: list[dict[str, Any]] = []
        while True:
            message = self.next()
            if message.get("id") == ping:
                assert message == {"jsonrpc": "2.0", "id": ping, "result": {}}
                return out
            out.append(message)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def server(home: Home) -> Iterator[RawServer]:
    s = RawServer(home)
    try:
        init = s.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "raw", "version": "1"}}, rid=0)
        assert init["result"]["serverInfo"]["name"] == "aivault"
        s.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        yield s
    finally:
        s.stop()


def _error(rid: Any, kind: dict[str, Any], data: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {**kind, "data": data}}


def _still_answers(s: RawServer) -> None:
    status = s.request("tools/call", {"name": "index_status", "arguments": {}}, rid="after")
    assert status["id"] == "after" and status["result"]["isError"] is False
    assert json.loads(status["result"]["content"][0]["text"])["summary"]


# Each line, and the one answer it must get (the JSON-RPC 2.0 specification, sections 4.2 and 5.1): id null
# when the line's id cannot be read.
INVALID_LINES: list[tuple[str, bytes, dict[str, Any] | None]] = [
    ("empty line", b"\n", _error(None, PARSE, "the line is empty")),
    ("blank line", b"  \t \r\n", _error(None, PARSE, "the line is empty")),
    ("not JSON", b"hello\n", _error(None, PARSE, "the line is not JSON")),
    ("truncated JSON", b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', _error(None, PARSE, "the line is not JSON")),
    ("invalid UTF-8", b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"x":"\xff\xfe"}}}\n',
     _error(None, PARSE, "the line is not UTF-8")),
    ("nested past the parser", b"[" * 100_000 + b"]" * 100_000 + b"\n",
     _error(None, PARSE, "the line nests deeper than the parser reads")),
    ("an id of 5,000 digits", b'{"jsonrpc":"2.0","id":' + b"7" * 5000 + b',"method":"ping"}\n',
     _error(None, INVALID, BAD_ID)),
    ("batch", b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]\n', _error(None, INVALID, NOT_OBJECT)),
    ("empty array", b"[]\n", _error(None, INVALID, NOT_OBJECT)),
    ("number", b"42\n", _error(None, INVALID, NOT_OBJECT)),
    ("string", b'"ping"\n', _error(None, INVALID, NOT_OBJECT)),
    ("null", b"null\n", _error(None, INVALID, NOT_OBJECT)),
    ("no jsonrpc member", b'{"id":4,"method":"ping"}\n', _error(4, INVALID, VERSION)),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":"v1","method":"ping"}\n', _error("v1", INVALID, VERSION)),
    ("method not a string", b'{"jsonrpc":"2.0","id":5,"method":7}\n', _error(5, INVALID, "method must be a string")),
    ("method not a string, no id", b'{"jsonrpc":"2.0","method":["ping"]}\n',
     _error(None, INVALID, "method must be a string")),
    ("id an object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', _error(None, INVALID, BAD_ID)),
    ("id an array", b'{"jsonrpc":"2.0","id":[6],"method":"ping"}\n', _error(None, INVALID, BAD_ID)),
    ("id a fraction", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n', _error(None, INVALID, BAD_ID)),
    ("id a boolean", b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', _error(None, INVALID, BAD_ID)),
    ("id null", b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', _error(None, INVALID, BAD_ID)),
    ("id of 1,000 characters", b'{"jsonrpc":"2.0","id":"' + b"i" * 1000 + b'","method":"ping"}\n',
     _error(None, INVALID, BAD_ID)),
    ("params a string", b'{"jsonrpc":"2.0","id":8,"method":"ping","params":"x"}\n',
     _error(8, INVALID, "params must be an object")),
    ("params an array", b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[1]}\n',
     _error(9, {"code": -32602, "message": "Invalid params"}, "params must be an object")),
    ("neither request nor response", b'{"jsonrpc":"2.0","id":10}\n',
     _error(10, INVALID, "neither a request (method) nor a response (result or error)")),
    ("unknown method", b'{"jsonrpc":"2.0","id":11,"method":"nope/nope"}\n',
     _error(11, {"code": -32601, "message": "Method not found"}, "nope/nope")),
    # Notifications are never answered (section 4.1), nor are responses (the server asked nothing).
    ("unknown notification", b'{"jsonrpc":"2.0","method":"nope/nope"}\n', None),
    ("a cancel of no request", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}\n',
     None),
    ("notification with array params", b'{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}\n', None),
    ("response to no request", b'{"jsonrpc":"2.0","id":99,"result":{}}\n', None),
    ("error response to no request", b'{"jsonrpc":"2.0","id":98,"error":{"code":-32000,"message":"no"}}\n', None),
    ("malformed response", b'{"jsonrpc":"2.0","id":97,"result":5}\n', None),
]


def test_every_invalid_line_gets_its_json_rpc_error_and_the_server_goes_on(server: RawServer) -> None:
    """Each kind of invalid line gets exactly its JSON-RPC 2.0 error (notifications and responses none); a
    tools/call is answered after them all."""
    for name, line, expected in INVALID_LINES:
        assert server.answers_to(line) == ([expected] if expected else []), name
    _still_answers(server)


def test_a_long_method_name_and_a_line_over_the_limit_are_answered_briefly(server: RawServer) -> None:
    """A 1 MB method or tool name is echoed at most 64 characters, in the answer and the log; a line past 4 MiB
    is refused unread, and nothing is lost."""
    name = "m" * 1_000_000
    [unknown] = server.answers_to(json.dumps({"jsonrpc": "2.0", "id": 12, "method": name}).encode() + b"\n")
    assert unknown["id"] == 12 and unknown["error"]["code"] == -32601
    assert unknown["error"]["data"] == "m" * RPC_ECHO_MAX_CHARS + "… (1000000 characters)"
    tool = server.request("tools/call", {"name": "t" * 1_000_000, "arguments": {}}, rid="tool")
    assert tool["result"]["isError"] is True and len(json.dumps(tool)) < 4000
    assert "t" * RPC_ECHO_MAX_CHARS + "… (1000000 characters)" in tool["result"]["content"][0]["text"]
    huge = json.dumps({"jsonrpc": "2.0", "id": 13, "method": "ping", "params": {"x": "x" * STDIO_MAX_LINE_BYTES}})
    t0 = time.monotonic()
    assert server.answers_to(huge.encode() + b"\n") == [
        _error(None, INVALID, f"the line is over {STDIO_MAX_LINE_BYTES:,} bytes")]
    assert time.monotonic() - t0 < 30
    just = json.dumps({"jsonrpc": "2.0", "id": 14, "method": "ping", "params": {"_meta": {"x": ""}}})
    pad = STDIO_MAX_LINE_BYTES - len(just)
    line = just.replace('"x": ""', '"x": "' + "y" * pad + '"').encode() + b"\n"
    assert len(line) == STDIO_MAX_LINE_BYTES + 1  # exactly at the limit with its newline
    assert server.answers_to(line) == [{"jsonrpc": "2.0", "id": 14, "result": {}}]
    _still_answers(server)
    server.stop()
    log = server.log.read_text()
    assert '"event": "tool"' in log and "mcp line refused" in log
    assert "m" * (RPC_ECHO_MAX_CHARS + 1) not in log and "t" * (RPC_ECHO_MAX_CHARS + 1) not in log
