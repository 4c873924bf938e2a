"""``aivault mcp --http`` as a subprocess for the tests: its URL and bearer token read from what it prints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aivault.home import Home
from aivault.mcp.tools import SESSION_ENV
from tests.support.common import StderrLog, cli_env, wait_until

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "aivault-tests", "version": "1"}}}
ACCEPT = "application/json, text/event-stream"


class McpHttpProcess:
    def __init__(self, home: Home, address: str = "127.0.0.1:0", **env: str) -> None:
        e = cli_env(home.path, AIVAULT_LOG_LEVEL="info", **env)
        for name in (*SESSION_ENV, "CLAUDE_PROJECT_DIR"):
            e.pop(name, None)
        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "mcp", "--http", address], env=e,
                                     stderr=subprocess.PIPE, text=True)
        # Drained for the process's life; the URL and the token are looked for in what it printed, for at
        # most a minute.
        self.log = StderrLog(self.proc)
        self.lines = self.log.lines
        found: dict[str, str] = {}

        def printed() -> bool:
            text = "".join(self.lines)
            if m := re.search(r"serving (http://\S+/mcp)\n", text):
                found["url"] = m.group(1)
            if m := re.search(r"'Authorization: Bearer ([A-Za-z0-9_-]+)'", text):
                found["token"] = m.group(1)
            return len(found) == 2 or self.proc.poll() is not None

        if not wait_until(printed, timeout=60) or len(found) != 2:
            self.stop()
            raise AssertionError(f"aivault mcp --http printed no URL and token: {''.join(self.lines)[-2000:]}")
        self.url, self.token = found["url"], found["token"]

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines the server wrote so far."""
        return self.log.events()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @asynccontextmanager
    async def client(self, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
        """The SDK's client over HTTP, sending ``headers`` (by default the bearer token) with every request."""
        async with (httpx.AsyncClient(headers=self.auth if headers is None else headers,
                                      timeout=httpx.Timeout(30, read=300)) as http,
                    Client(streamable_http_client(self.url, http_client=http)) as c):
            yield c

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        """One JSON-RPC POST with the bearer token unless ``headers`` says otherwise."""
        hdrs = {"Accept": ACCEPT, "Content-Type": "application/json", **(self.auth if headers is None else headers)}
        return httpx.post(self.url, headers=hdrs, content=json.dumps(body).encode(), timeout=30)

    def stop(self) -> None:
        self.log.stop()
