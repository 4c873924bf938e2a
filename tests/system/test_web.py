"""``aivault web`` over real HTTP: every trust-guard refusal, the endpoints, and the paired-client rules."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import httpserve, policy
from aivault.home import Home
from tests.builders import ClaudeWriter
from tests.support.allhosts import DEVBOX, HUNG, SHARED_ID, Machines, add_hung, make_machines, remove_hung
from tests.support.common import lexical_only, root_args, run_cli, wait_until
from tests.support.daemons import DaemonProcess
from tests.support.webserver import WebProcess, probe_as_nobody


@pytest.fixture
def web(home: Home) -> Iterator[WebProcess]:
    w = WebProcess(home)
    try:
        yield w
    finally:
        w.stop()


def _index(home: Home, roots: dict[str, Path]) -> list[ClaudeWriter]:
    out = []
    for i in range(3):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{i}")
        c.user(f"the duckdb lock error in project {i}").assistant("closed the reader")
        out.append(c)
    args = ["index", "--no-default-roots"]
    for spec in root_args(roots):
        args += ["--root", spec]
    run_cli(home.path, *args, check=True)
    return out


# --- the guard --------------------------------------------------------------------------------------
def test_a_foreign_host_header_is_refused_everywhere(web: WebProcess) -> None:
    """DNS rebinding: any Host but the bound authority is 403 on the page, its assets and the API."""
    for path in ("/", "/static/app.js", "/api/status", "/api/search?query=x", "/nowhere"):
        status, _, body = web.request("GET", path, headers={"Host": "attacker.example:80"})
        assert status == 403 and body["error"] == "untrusted-host" and "untrusted host authority" in body["message"]
    status, _, body = web.request("GET", "/api/status", headers={"Host": f"127.0.0.2:{web.port}"})
    assert status == 403
    assert web.request("GET", "/api/status", headers={"Host": f"localhost:{web.port}"})[0] == 200


def test_a_change_needs_a_same_origin_request(web: WebProcess) -> None:
    """A POST without Origin or Sec-Fetch-Site, from another origin, or cross-site is refused 403."""
    for headers in ({"Origin": ""}, {"Origin": "http://attacker.example"},
                    {"Origin": f"http://localhost:{web.port + 1}"}, {"Origin": "", "Sec-Fetch-Site": "cross-site"},
                    {"Sec-Fetch-Site": "same-site"}):
        status, _, body = web.post("/api/policy", {"enabled": False}, **headers)
        assert status == 403 and body["error"] == "cross-origin", headers
    assert policy.load(web.home).enabled is True


def test_reading_refuses_cross_site_fetches(web: WebProcess) -> None:
    """A GET a browser marks cross-site (or from a foreign Origin) is refused; a typed URL (none) is served."""
    assert web.request("GET", "/api/status", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert web.request("GET", "/api/status", headers={"Origin": "http://attacker.example"})[0] == 403
    assert web.request("GET", "/", headers={"Sec-Fetch-Site": "none"})[0] == 200


def test_a_change_needs_this_processs_csrf_token(web: WebProcess) -> None:
    """Same-origin but without the token, or with a wrong one, is 403 csrf; with it the change is made."""
    for token in ("", "x" * 43):
        status, _, body = web.post("/api/policy", {"enabled": False}, X_Aivault_Csrf=token)
        assert status == 403 and body["error"] == "csrf"
    status, _, body = web.post("/api/policy", {"enabled": False}, Origin="", Sec_Fetch_Site="same-origin")
    assert status == 200 and body["policy"] == {"enabled": False, "historyDays": None}
    assert policy.load(web.home).enabled is False


def test_bodies_over_4096_bytes_are_413(web: WebProcess) -> None:
    """A body past 4,096 bytes is refused whether it announces its length or comes chunked."""
    big = json.dumps({"enabled": True, "pad": "x" * 5000}).encode()
    headers = {"Origin": f"http://{web.authority}", "Content-Type": "application/json", "X-Aivault-Csrf": web.csrf}
    assert web.request("POST", "/api/policy", big, headers)[0] == 413
    status, _, body = web.request("POST", "/api/policy", big, {**headers, "Transfer-Encoding": "chunked"})
    assert status == 413 and body["error"] == "too-large"
    small = json.dumps({"enabled": True, "pad": "x" * 4000}).encode()
    assert web.request("POST", "/api/policy", small, headers)[0] == 200


def test_a_wrong_method_is_405_with_allow(web: WebProcess) -> None:
    """POST to a reading endpoint, GET to a changing one, DELETE anywhere: 405 naming the methods allowed."""
    status, headers, body = web.request("POST", "/api/search", b"{}", {"Content-Type": "application/json"})
    assert status == 405 and headers["allow"] == "GET, HEAD" and body["error"] == "method-not-allowed"
    status, headers, _ = web.request("GET", "/api/clear")
    assert status == 405 and headers["allow"] == "POST"
    status, headers, _ = web.request("DELETE", "/api/policy")
    assert status == 405 and headers["allow"] == "GET, HEAD, POST"
    assert web.request("GET", "/api/nothing")[0] == 404


def test_a_body_must_be_json(web: WebProcess) -> None:
    """A change sent as form data is 415; JSON that is not an object, or not JSON, is 400."""
    status, _, body = web.post("/api/policy", {"enabled": False}, Content_Type="application/x-www-form-urlencoded")
    assert status == 415 and body["error"] == "unsupported-media-type"
    headers = {"Origin": f"http://{web.authority}", "Content-Type": "application/json", "X-Aivault-Csrf": web.csrf}
    assert web.request("POST", "/api/policy", b"[1, 2]", headers)[0] == 400
    status, _, body = web.request("POST", "/api/policy", b"{nope", headers)
    assert status == 400 and body["error"] == "invalid-params"


def test_each_request_writes_one_log_line(web: WebProcess) -> None:
    """Served and refused requests alike leave one structured line with method, path and status."""
    web.request("GET", "/api/status")
    web.request("GET", "/api/status", headers={"Host": "evil.example"})

    def lines() -> list[dict[str, object]]:
        return [e for e in web.events() if e.get("event") == "request" and e.get("path") == "/api/status"]

    assert wait_until(lambda: len(lines()) >= 2)  # the log is read from the server's stderr as it comes
    assert [e["status"] for e in lines()][-2:] == [200, 403] and lines()[-1]["refused"] == "untrusted-host"


# --- signing in -------------------------------------------------------------------------------------------
API = [("GET", "/api/search?query=lock"), ("GET", "/api/search?query=lock&host=all"), ("GET", "/api/session?id=x"),
       ("GET", "/api/status"), ("GET", "/api/hosts"), ("GET", "/api/policy"), ("POST", "/api/policy"),
       ("POST", "/api/clear")]


def test_the_page_and_every_api_route_need_the_printed_urls_token(web: WebProcess) -> None:
    """Without the session cookie / is a sign-in page (no CSRF token, no data) and every /api route is 401 before
    it reads or changes anything; a wrong token is 401; the printed token sets an HttpOnly, SameSite=Strict
    cookie holding another secret, and the page moves on to / where it works."""
    status, headers, body = web.request("GET", "/", signed_in=False)
    assert status == 401 and "aivault web" in body and "?token=" in body
    assert "aivault-config" not in body and web.csrf not in body and "set-cookie" not in headers
    for method, path in API:
        changing = {"Origin": f"http://{web.authority}", "Content-Type": "application/json",
                    "X-Aivault-Csrf": web.csrf} if method == "POST" else {}
        payload = json.dumps({"enabled": False, "confirm": True}).encode() if method == "POST" else None
        for cookie in ({}, {"Cookie": "aivault_session_1=x"}, {"Cookie": f"{web.cookie.split('=')[0]}={web.token}"}):
            status, _, body = web.request(method, path, payload, {**changing, **cookie}, signed_in=False)
            assert status == 401 and body["error"] == "unauthorized" and "aivault web" in body["message"], path
            assert set(body) == {"ok", "error", "message"}
    assert policy.load(web.home).enabled is True
    assert web.request("GET", "/static/app.js", signed_in=False)[0] == 200  # no data: the installed file
    status, _, body = web.request("GET", "/?token=" + "x" * 43, signed_in=False)
    assert status == 401 and "not this server" in body
    status, headers, body = web.request("GET", f"/?token={web.token}", signed_in=False,
                                        headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 200 and '<meta http-equiv="refresh" content="0; url=/">' in body
    name, _, value = headers["set-cookie"].split(";")[0].partition("=")
    assert name == f"aivault_session_{web.port}" and value != web.token and len(value) >= 43
    assert {a.strip() for a in headers["set-cookie"].split(";")[1:]} == {"HttpOnly", "SameSite=Strict", "Path=/"}
    status, _, page = web.request("GET", "/", headers={"Cookie": f"{name}={value}"}, signed_in=False)
    assert status == 200 and "aivault-config" in page
    assert web.request("GET", "/api/status", headers={"Cookie": f"other=1; {name}={value}"}, signed_in=False)[0] == 200
    refused = [e for e in web.events() if e.get("event") == "request" and e.get("refused") == "unauthorized"]
    assert refused and not any(web.token in line for line in web.lines if line.startswith("{"))  # no log line has it


def test_the_token_file_is_private_and_shared_by_the_owners_servers(home: Home) -> None:
    """web.token is 0600 and kept: a second `aivault web` (another terminal) prints the same token; each server's
    cookie is its own; a token file others can read is refused with what to do."""
    first = WebProcess(home)
    try:
        path = home.path / "web.token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == first.token
        second = WebProcess(home)
        try:
            assert second.token == first.token and second.cookie != first.cookie
            assert second.request("GET", "/api/status", headers={"Cookie": first.cookie}, signed_in=False)[0] == 401
            assert second.request("GET", "/api/status")[0] == 200
        finally:
            second.stop()
    finally:
        first.stop()
    os.chmod(home.path / "web.token", 0o640)
    r = run_cli(home.path, "web", "--port", "0", timeout=30)
    assert r.returncode != 0 and "can be read by other users" in r.stderr and "rm " in r.stderr
    assert "internal error" not in r.stderr


def test_open_gives_the_browser_a_private_file_not_the_token(home: Home, tmp_path: Path) -> None:
    """--open starts the browser on a 0600 file of the data directory that moves on to the tokened URL: the token
    is never in a command line other users can read."""
    record = tmp_path / "argv"
    script = tmp_path / "browser"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {record}\n")
    script.chmod(0o755)
    w = WebProcess(home, "--open", env={"BROWSER": str(script)})
    try:
        assert wait_until(record.exists)
        argv = record.read_text().strip()
        opened = home.path / "web-open.html"
        assert argv == opened.as_uri() and w.token not in argv
        assert stat.S_IMODE(opened.stat().st_mode) == 0o600 and w.url in opened.read_text()
    finally:
        w.stop()


def test_another_local_user_gets_401_and_cannot_read_the_token(roots: dict[str, Path]) -> None:
    """As uid nobody (setpriv): web.token cannot be read, / shows no CSRF token, every /api route is 401 and the
    policy is unchanged; the owner, meanwhile, is served."""
    base = Path(tempfile.mkdtemp(prefix="aivault-uid-"))
    try:
        os.chmod(base, 0o711)  # nobody may pass through to the data directory, not list it
        home = Home.resolve(base / "home").ensure()
        policy.save(home, policy.Policy(True, None))
        lexical_only(home)
        _index(home, roots)
        w = WebProcess(home)
        try:
            os.chmod(home.path, 0o711)  # so that only the token file's own mode keeps nobody out
            origin = {"Origin": w.base.rstrip("/"), "Content-Type": "application/json", "X-Aivault-Csrf": "guess"}
            requests: list[tuple[str, str, dict[str, str], str | None]] = [
                ("GET", w.base, {}, None), ("GET", w.base + "?token=guess", {}, None),
                *((m, w.base + p.lstrip("/"), origin if m == "POST" else {},
                   '{"enabled": false, "confirm": true}' if m == "POST" else None) for m, p in API)]
            seen = probe_as_nobody([home.path / "web.token"], requests)
            assert seen["files"] == {str(home.path / "web.token"): "PermissionError"}
            answers = seen["requests"]
            assert answers[0][2] == 401 and "aivault-config" not in answers[0][3]
            assert answers[1][2] == 401
            for method, url, status, body in answers[2:]:
                assert status == 401 and json.loads(body)["error"] == "unauthorized", (method, url, body)
                assert "duckdb" not in body
            assert policy.load(home).enabled is True
            assert w.request("GET", "/api/search?query=duckdb")[2]["hits"]
        finally:
            w.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- holding connections ------------------------------------------------------------------------------------
READ_TIMEOUT_S = 3  # AIVAULT_HTTP_READ_TIMEOUT_S of these tests' servers (the default, 10 s, is long to wait)


def _closed_by_server(s: socket.socket, within: float) -> bytes:
    """Everything the server sends before it closes ``s`` (a timeout error when it does not close it in time)."""
    s.settimeout(max(0.1, within))
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_idle_and_half_sent_connections_cannot_starve_the_page(home: Home) -> None:
    """With 256 descriptors, 300 idle and half-sent connections neither keep the owner's /api/status from answering
    nor hold more than the bound of descriptors; the server closes them all after the read timeout."""
    w = WebProcess(home, env={"AIVAULT_HTTP_READ_TIMEOUT_S": str(READ_TIMEOUT_S)}, nofile=256)
    held: list[socket.socket] = []
    try:
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", w.port), timeout=10)
            if i % 2:  # a request head that never ends
                s.sendall(f"GET /api/status HTTP/1.1\r\nHost: {w.authority}\r\nX-Slow: 1".encode())
            held.append(s)
        t0 = time.monotonic()
        status, _, body = w.request("GET", "/api/status")
        assert status == 200 and "status" in body and time.monotonic() - t0 < 5
        fds = len(os.listdir(f"/proc/{w.proc.pid}/fd"))
        assert fds < httpserve.MAX_CONNECTIONS + 64, fds
        deadline = time.monotonic() + READ_TIMEOUT_S + 5
        for s in held:
            data = _closed_by_server(s, deadline - time.monotonic())
            assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:80]
        assert any(e.get("why") == "read-timeout" for e in w.events())
    finally:
        for s in held:
            s.close()
        w.stop()


def test_a_body_that_never_ends_is_cut_and_not_acted_on(home: Home) -> None:
    """A signed-in change whose body stops one byte short is closed after the read timeout, unanswered and not
    acted on: the policy is unchanged."""
    w = WebProcess(home, env={"AIVAULT_HTTP_READ_TIMEOUT_S": str(READ_TIMEOUT_S)})
    s = socket.create_connection(("127.0.0.1", w.port), timeout=30)
    try:
        body = b'{"enabled": false}'
        s.sendall(f"POST /api/policy HTTP/1.1\r\nHost: {w.authority}\r\nCookie: {w.cookie}\r\n"
                  f"Origin: http://{w.authority}\r\nContent-Type: application/json\r\n"
                  f"X-Aivault-Csrf: {w.csrf}\r\nContent-Length: {len(body) + 1}\r\n\r\n".encode() + body)
        t0 = time.monotonic()
        data = _closed_by_server(s, READ_TIMEOUT_S + 5)
        assert READ_TIMEOUT_S - 0.5 < time.monotonic() - t0 < READ_TIMEOUT_S + 5
        assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:80]
    finally:
        s.close()
        w.stop()
    assert policy.load(home).enabled is True


def test_when_every_connection_has_a_request_in_hand_a_new_one_is_503(home: Home) -> None:
    """With the bound at 2 and both held by signed-in requests whose bodies are still arriving, a third connection
    is answered 503 busy (never one of the two cut); once they time out the page answers again."""
    w = WebProcess(home, env={"AIVAULT_HTTP_MAX_CONNECTIONS": "2", "AIVAULT_HTTP_READ_TIMEOUT_S": str(READ_TIMEOUT_S)})
    held: list[socket.socket] = []
    try:
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", w.port), timeout=30)
            s.sendall(f"POST /api/policy HTTP/1.1\r\nHost: {w.authority}\r\nCookie: {w.cookie}\r\n"
                      f"Origin: http://{w.authority}\r\nContent-Type: application/json\r\n"
                      f"X-Aivault-Csrf: {w.csrf}\r\nContent-Length: 100\r\n\r\n{{".encode())
            held.append(s)
        time.sleep(0.5)  # both requests reach the app before the third connection comes
        t0 = time.monotonic()
        third = socket.create_connection(("127.0.0.1", w.port), timeout=30)
        try:
            data = _closed_by_server(third, 10)
        finally:
            third.close()
        assert time.monotonic() - t0 < READ_TIMEOUT_S - 1
        assert data.startswith(b"HTTP/1.1 503") and b'"busy"' in data and b"try again" in data, data[:200]
        for s in held:  # cut at the read deadline, unanswered but for the 408
            data = _closed_by_server(s, READ_TIMEOUT_S + 5)
            assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:80]
        assert w.request("GET", "/api/status")[0] == 200
    finally:
        for s in held:
            s.close()
        w.stop()
    assert policy.load(home).enabled is True


# --- the endpoints ------------------------------------------------------------------------------------
def test_search_session_and_status_in_direct_mode(home: Home, roots: dict[str, Path]) -> None:
    """Without a daemon the page searches, pages, reads a session and reports status from the index file."""
    sessions = _index(home, roots)
    w = WebProcess(home)
    try:
        status, _, page1 = w.request("GET", "/api/search?query=duckdb+lock&limit=2")
        assert status == 200 and page1["kind"] == "results" and len(page1["hits"]) == 2
        cursor = page1["page"]["cursor"]
        _, _, page2 = w.request("GET", f"/api/search?query=duckdb+lock&limit=2&cursor={cursor}")
        ids = {h["sessionId"] for h in page1["hits"] + page2["hits"]}
        assert ids == {c.session_id for c in sessions}
        _, _, read = w.request("GET", f"/api/session?id={sessions[0].session_id}&query=duckdb")
        assert [m["role"] for m in read["messages"]] == ["user", "assistant"] and read["anchor"] is not None
        _, _, st = w.request("GET", "/api/status")
        assert st["mode"] == "direct" and st["status"]["filesIndexed"] == 3
        status, _, body = w.request("GET", "/api/search?query=x&limit=lots")
        assert status == 400 and "limit" in body["message"]
        status, _, body = w.request("GET", "/api/session?id=nope")
        assert status == 404 and body["error"] == "session-not-found"
    finally:
        w.stop()


def test_clear_asks_for_confirmation_and_a_daemon(web: WebProcess) -> None:
    """Clear without confirm: true is 400; without a daemon it is 503 needs-daemon and nothing is deleted."""
    status, _, body = web.post("/api/clear", {})
    assert status == 400 and "confirm" in body["message"]
    status, _, body = web.post("/api/clear", {"confirm": True})
    assert status == 503 and body["error"] == "needs-daemon" and "aivault clear" in body["message"]


def test_clear_through_the_daemon_makes_a_new_index(home: Home, roots: dict[str, Path]) -> None:
    """With a daemon, a confirmed clear answers the new identity and the index rebuilds."""
    d = DaemonProcess(home, roots)
    w = WebProcess(home)
    try:
        d.reconcile()
        status, _, body = w.post("/api/clear", {"confirm": True})
        assert status == 200 and body["cleared"] is True and body["rebuilding"] is True
        assert body["identity"] != body["previousIdentity"]
        assert w.request("GET", "/api/status")[2]["mode"] == "daemon"
    finally:
        w.stop()
        d.stop()


def test_retention_is_validated(web: WebProcess) -> None:
    """historyDays takes a positive whole number or null; anything else is 400 and the policy is unchanged."""
    for days in (0, -3, 2.5, "30", True):
        status, _, _ = web.post("/api/policy", {"historyDays": days})
        assert status == 400, days
    assert web.post("/api/policy", {"historyDays": 30})[2]["policy"] == {"enabled": True, "historyDays": 30}
    assert web.post("/api/policy", {"historyDays": None})[2]["policy"]["historyDays"] is None


# --- a page served for another host -----------------------------------------------------------------------
def test_a_page_for_a_remote_host_offers_no_local_controls(home: Home) -> None:
    """For ssh:<target> the page is a paired client: no consent, retention or clear; search says host-unavailable."""
    w = WebProcess(home, "--host", "ssh:devbox")
    try:
        assert w.config()["controls"] is False and w.config()["host"] == "ssh:devbox"
        for path, value in (("/api/policy", {"enabled": False}), ("/api/policy", {"historyDays": 7}),
                            ("/api/clear", {"confirm": True})):
            status, _, body = w.post(path, value)
            assert status == 403 and body["error"] == "paired-client", path
        assert policy.load(home) == policy.Policy(True, None)
        status, _, body = w.request("GET", "/api/search?query=lock")
        assert status == 502 and body["error"] == "host-unavailable"
        assert w.request("GET", "/api/policy")[2]["controls"] is False
    finally:
        w.stop()


def test_an_invalid_host_id_is_refused_at_start(home: Home) -> None:
    """--host all (or a malformed id) stops the command before it serves."""
    r = run_cli(home.path, "web", "--host", "all")
    assert r.returncode != 0 and "one execution host" in r.stderr


def test_malformed_input_is_an_error_value_never_a_500(home: Home, roots: dict[str, Path]) -> None:
    """A body of 4,000 nested [ is 400 invalid-params; query-string numbers past 64 bits are clamped (searches
    and reads answer) and ones past 4,300 digits 400, never a 500."""
    sessions = _index(home, roots)
    w = WebProcess(home)
    try:
        headers = {"Origin": f"http://{w.authority}", "Content-Type": "application/json", "X-Aivault-Csrf": w.csrf}
        status, _, body = w.request("POST", "/api/policy", b"[" * 4000, headers)
        assert status == 400 and body["error"] == "invalid-params" and "nests too deeply" in body["message"]
        huge = "9" * 40
        status, _, page = w.request("GET", f"/api/search?query=duckdb+lock&limit={huge}")
        assert status == 200 and len(page["hits"]) == 3
        status, _, page = w.request("GET", f"/api/search?query=duckdb+lock&limit=-{huge}")
        assert status == 200 and len(page["hits"]) == 1
        for query in (f"count={huge}", f"count={huge}&from={huge}", f"from=-{huge}"):
            status, _, read = w.request("GET", f"/api/session?id={sessions[0].session_id}&{query}")
            assert status == 200 and len(read["messages"]) == 2, query
        status, _, body = w.request("GET", "/api/search?query=x&limit=" + "9" * 5000)
        assert status == 400 and body["error"] == "invalid-params" and "limit" in body["message"]
    finally:
        w.stop()


# --- every machine at once (host=all) ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Machines:
    """This machine's index and ssh:devbox, a real relay behind the stand-in ssh (tests/support/allhosts.py)."""
    return make_machines(tmp_path_factory.mktemp("web-all-hosts"))


def test_the_page_has_a_host_selector_with_every_machine(home: Home) -> None:
    """The page's form has the host selector (this machine, all machines) and its script fills it from /api/hosts,
    sends host= with a search, shows each hit's host and a line per host not searched."""
    w = WebProcess(home)
    try:
        _, _, html = w.request("GET", "/")
        assert '<select id="host" aria-label="Machine"' in html and '<option value="all">All machines</option>' in html
        assert '<option value="local">This machine</option>' in html and 'id="host-report"' in html
        _, _, script = w.request("GET", "/static/app.js")
        for part in ('api("/api/hosts")', 'p.set("host", $("host").value)', "hitHosts(h)", "reportHosts(r)",
                     'p.set("host", reading.host)'):
            assert part in script, part
    finally:
        w.stop()


def test_all_machines_merges_the_hosts_and_lists_a_hung_one(machines: Machines) -> None:
    """Without a daemon: /api/hosts lists this machine and ssh:devbox; host=all answers the merged JSON with every
    hit's host (a session on both names both); a hung relay is a host in state timeout and the page partial."""
    w = WebProcess(machines.client, env={"HOME": str(machines.local.user)})
    try:
        status, _, hosts = w.request("GET", "/api/hosts")
        assert status == 200 and [h["id"] for h in hosts["hosts"]] == ["local", DEVBOX] and hosts["default"] == "local"
        status, _, merged = w.request("GET", "/api/search?query=burrow&host=all&limit=20")
        assert status == 200 and merged["kind"] == "results" and merged["partial"] is False, merged
        assert [(h["id"], h["state"]) for h in merged["hosts"]] == [("local", "ok"), (DEVBOX, "ok")]
        assert sorted(h["executionHostId"] for h in merged["hits"]) == ["local", "local", "local", DEVBOX, DEVBOX]
        _, _, shared = w.request("GET", "/api/search?query=shared+notes&host=all")
        [one] = shared["hits"]
        assert one["sessionId"] == SHARED_ID and one["executionHostIds"] == ["local", DEVBOX]
        status, _, local = w.request("GET", "/api/search?query=burrow&host=local")
        assert status == 200 and len(local["hits"]) == 3 and "hosts" not in local
        status, _, body = w.request("GET", "/api/search?query=burrow&host=nowhere")
        assert status == 400 and body["error"] == "invalid-params"
        status, _, body = w.request("GET", "/api/session?id=x&host=all")
        assert status == 400 and "one execution host" in body["message"]
        add_hung(machines)
        try:
            t0 = time.monotonic()
            status, _, partial = w.request("GET", "/api/search?query=burrow&host=all&limit=20")
            took = time.monotonic() - t0
        finally:
            remove_hung(machines)
        assert status == 200 and partial["partial"] is True and len(partial["hits"]) == 5, partial
        [hung] = [h for h in partial["hosts"] if h["state"] != "ok"]
        assert hung["id"] == HUNG and hung["state"] == "timeout" and "deadline" in hung["reason"]
        assert took < 5.0 + 3.0
    finally:
        w.stop()


def test_with_a_daemon_a_merged_hit_is_read_on_its_host(machines: Machines) -> None:
    """Through the daemon: host=all merges both machines, a hit of ssh:devbox is read with host=ssh:devbox, and the
    selector's single host searches only it."""
    roots = [f"claude={machines.local.claude}", f"codex={machines.local.claude.parent / 'no-codex'}"]
    d = DaemonProcess(machines.client, roots, extra_env={"HOME": str(machines.local.user)})
    w = WebProcess(machines.client, env={"HOME": str(machines.local.user)})
    try:
        status, _, merged = w.request("GET", "/api/search?query=quokka&host=all")
        assert status == 200 and merged["kind"] == "results", merged
        remote = [h for h in merged["hits"] if h["executionHostId"] == DEVBOX]
        assert len(remote) == 2 and len(merged["hits"]) == 2
        status, _, read = w.request("GET", f"/api/session?id={remote[0]['sessionId']}&host={DEVBOX}&query=quokka")
        assert status == 200 and [m["role"] for m in read["messages"]] == ["user", "assistant"], read
        status, _, single = w.request("GET", f"/api/search?query=burrow&host={DEVBOX}")
        assert status == 200 and {h["executionHostId"] for h in single["hits"]} == {DEVBOX}
        assert len(single["hits"]) == 2
        assert w.request("GET", f"/api/session?id={remote[0]['sessionId']}")[0] == 404  # not on this machine
    finally:
        w.stop()
        d.stop()
