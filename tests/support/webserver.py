"""``aivault web`` as a subprocess for the web tests: started on a free port, its URL read from stderr.

The printed URL carries the sign-in token; ``WebProcess`` trades it for the session cookie at once,
as a browser opening the URL does, and sends that cookie with every request unless told not to.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aivault.home import Home
from tests.support.common import StderrLog, cli_env, wait_until

NOBODY = 65534


class WebProcess:
    def __init__(self, home: Home, *args: str, env: dict[str, str] | None = None, nofile: int | None = None) -> None:
        self.home = home

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "web", "--port", "0", *args],
                                     env=cli_env(home.path, AIVAULT_LOG_LEVEL="info", **(env or {})),
                                     stderr=subprocess.PIPE, text=True, preexec_fn=limit if nofile else None)
        # Drained for the process's life; the URL is looked for in what it printed, for at most a minute.
        self.log = StderrLog(self.proc)
        self.lines = self.log.lines
        pattern = re.compile(r"serving (http://(127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]+))\n")
        if not wait_until(lambda: pattern.search("".join(self.lines)) is not None or self.proc.poll() is not None,
                          timeout=60) or (m := pattern.search("".join(self.lines))) is None:
            self.stop()
            raise AssertionError(f"aivault web printed no URL: {''.join(self.lines)[-2000:]}")
        self.url, self.authority, self.token = m.group(1), m.group(2), m.group(3)
        self.port = int(self.authority.rpartition(":")[2])
        self.base = f"http://{self.authority}/"
        self.cookie = self.sign_in()
        self.csrf = self.config()["csrf"]

    def sign_in(self) -> str:
        """Open the printed URL as a browser would; the session cookie it sets (``name=value``)."""
        status, headers, _ = self.request("GET", f"/?token={self.token}", signed_in=False)
        assert status == 200, status
        return headers["set-cookie"].split(";")[0]

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines the server wrote so far."""
        return self.log.events()

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                *, signed_in: bool = True) -> tuple[int, dict[str, str], Any]:
        """One request with exactly these headers (Host defaults to the bound authority; the session cookie
        is sent when ``signed_in``)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            hdrs = {"Host": self.authority, **({"Cookie": self.cookie} if signed_in else {}), **(headers or {})}
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
        self.log.stop()


def as_nobody(code: str, *args: str) -> Any:
    """Run Python ``code`` as the user nobody (another local user); the JSON it prints on its last line.

    Skipped unless the tests run as root with setpriv (util-linux), as tests/system/test_home.py's are.
    """
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another local user")
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", code, *args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# What nobody tries: read each file named, then each HTTP request (method, URL, headers, body); printed as JSON.
NOBODY_PROBE = """
import json, sys, urllib.request, urllib.error
files, requests = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"files": {}, "requests": []}
for path in files:
    try:
        with open(path, "rb") as fh:
            out["files"][path] = "read " + str(len(fh.read())) + " bytes"
    except OSError as exc:
        out["files"][path] = type(exc).__name__
for method, url, headers, body in requests:
    req = urllib.request.Request(url, data=body.encode() if body is not None else None, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            out["requests"].append([method, url, res.status, res.read().decode("utf-8", "replace")])
    except urllib.error.HTTPError as exc:
        out["requests"].append([method, url, exc.code, exc.read().decode("utf-8", "replace")])
print(json.dumps(out))
"""


def probe_as_nobody(files: list[Path], requests: list[tuple[str, str, dict[str, str], str | None]]) -> Any:
    """What another local user gets from each file and request (``NOBODY_PROBE``)."""
    return as_nobody(NOBODY_PROBE, json.dumps([str(f) for f in files]), json.dumps(requests))
