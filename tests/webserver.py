"""``aivault web`` as a subprocess for the web tests: started on a free port, its URL read from stderr."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
from typing import Any

from aivault.home import Home
from tests.conftest import cli_env


class WebProcess:
    def __init__(self, home: Home, *args: str) -> None:
        self.home = home
        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "web", "--port", "0", *args],
                                     env=cli_env(home.path, AIVAULT_LOG_LEVEL="info"), stderr=subprocess.PIPE,
                                     text=True)
        assert self.proc.stderr is not None
        lines: list[str] = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"aivault web exited before serving: {''.join(lines)[-2000:]}")
            lines.append(line)
            m = re.search(r"serving (http://(127\.0\.0\.1:\d+)/)", line)
            if m:
                self.url, self.authority = m.group(1), m.group(2)
                break
        self.port = int(self.authority.rpartition(":")[2])
        # Drained for the process's life: a full pipe would stop the server mid-line.
        self.lines = lines
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()
        self.csrf = self.config()["csrf"]

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines the server wrote so far."""
        out = []
        for line in list(self.lines):
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
        """One request with exactly these headers (Host defaults to the bound authority)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            hdrs = {"Host": self.authority, **(headers or {})}
            if body is not None and "Content-Length" not in hdrs and "Transfer-Encoding" not in hdrs:
                hdrs["Content-Length"] = str(len(body))
            for k, v in hdrs.items():
                conn.putheader(k, v)
            conn.endheaders()
            if body is not None:
                if hdrs.get("Transfer-Encoding") == "chunked":
                    for i in range(0, len(body), 1000):
                        part = body[i : i + 1000]
                        conn.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    conn.send(b"0\r\n\r\n")
                else:
                    conn.send(body)
            res = conn.getresponse()
            data = res.read()
            try:
                value: Any = json.loads(data)
            except ValueError:
                value = data.decode("utf-8", "replace")
            return res.status, {k.lower(): v for k, v in res.getheaders()}, value
        finally:
            conn.close()

    def post(self, path: str, value: Any, **headers: str) -> tuple[int, dict[str, str], Any]:
        """A same-origin JSON POST with the CSRF token (each header can be overridden or removed with '')."""
        hdrs = {"Origin": f"http://{self.authority}", "Content-Type": "application/json", "X-Aivault-Csrf": self.csrf}
        hdrs.update({k.replace("_", "-"): v for k, v in headers.items()})
        return self.request("POST", path, json.dumps(value).encode(), {k: v for k, v in hdrs.items() if v})

    def config(self) -> dict[str, Any]:
        status, _, html = self.request("GET", "/")
        assert status == 200, html
        m = re.search(r'name="aivault-config" content="([^"]+)"', html)
        assert m
        value: dict[str, Any] = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        return value

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._drain.join(10)
