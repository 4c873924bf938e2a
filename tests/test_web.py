"""``aivault web`` over real HTTP: every trust-guard refusal, the endpoints, and the paired-client rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import policy
from aivault.home import Home
from tests.builders import ClaudeWriter
from tests.conftest import DaemonProcess, root_args, run_cli, wait_until
from tests.webserver import WebProcess


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
