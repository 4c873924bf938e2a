"""``aivault mcp`` as a real subprocess, spoken to with the MCP SDK's own client (stdio and HTTP)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from aivault.home import Home
from aivault.mcp.http_transport import MAX_SESSIONS
from aivault.mcp.tools import SESSION_ENV
from tests.builders import ClaudeWriter
from tests.support.allhosts import DEVBOX, HUNG, SHARED_ID, Machines, add_hung, make_machines, remove_hung
from tests.support.common import cli_env, root_args, run_cli, wait_until
from tests.support.daemons import DaemonProcess
from tests.support.mcphttp import ACCEPT, INITIALIZE, McpHttpProcess
from tests.support.webserver import probe_as_nobody

Body = Callable[[Client], Awaitable[Any]]


def _env(home: Home, **extra: str) -> dict[str, str]:
    env = cli_env(home.path, **extra)
    for name in (*SESSION_ENV, "CLAUDE_PROJECT_DIR"):
        if name not in extra:
            env.pop(name, None)
    return env


def run_mcp(home: Home, body: Body, *, cwd: Path | None = None, **env: str) -> Any:
    """Start `aivault mcp` over stdio, initialize, run ``body`` with the connected client, stop it."""
    async def main() -> Any:
        params = StdioServerParameters(command=sys.executable, args=["-m", "aivault.cli", "mcp"],
                                       env=_env(home, **env), cwd=str(cwd) if cwd else None)
        async with Client(params, read_timeout_seconds=60) as client:
            return await body(client)
    return anyio.run(main)


def answer(result: Any) -> dict[str, Any]:
    [content] = result.content
    value: dict[str, Any] = json.loads(content.text)
    return value


def result_size(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


def _corpus(roots: dict[str, Path], sessions: int = 12, long: bool = False) -> list[ClaudeWriter]:
    out = []
    for i in range(sessions):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{i}", branch=f"b{i}")
        c.title(f"project {i} lock work")
        c.user(f"the duckdb lock error again in project {i}" + (" " + "detail " * 200 if long else ""))
        c.assistant(f"fixed the lock in project {i} by closing the reader")
        out.append(c)
    return out


def _index(home: Home, roots: dict[str, Path]) -> None:
    args = ["index", "--no-default-roots"]
    for spec in root_args(roots):
        args += ["--root", spec]
    run_cli(home.path, *args, check=True)


def test_initialize_and_tools_list_fit_their_budget(home: Home) -> None:
    """initialize names the server; tools/list has the three tools, each described, in at most 7 KB."""
    async def body(c: Client) -> Any:
        return c.server_info, c.instructions, await c.list_tools()

    info, instructions, tools = run_mcp(home, body)
    assert info is not None and info.name == "aivault" and "search_sessions" in (instructions or "")
    assert [t.name for t in tools.tools] == ["search_sessions", "read_session", "index_status"]
    for t in tools.tools:
        assert t.description and t.input_schema["type"] == "object" and t.input_schema["properties"]
    assert len(tools.model_dump_json(by_alias=True, exclude_none=True).encode()) <= 7 * 1024


def test_search_pages_with_the_cursor_through_the_daemon(home: Home, roots: dict[str, Path]) -> None:
    """Compact hits (agent, id, title, cwd, branch, when, snippet, resume) page with the cursor, no repeats."""
    _corpus(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()

        async def body(c: Client) -> list[dict[str, Any]]:
            pages = [answer(await c.call_tool("search_sessions", {"query": "duckdb lock", "limit": 5}))]
            while pages[-1].get("cursor"):
                pages.append(answer(await c.call_tool("search_sessions", {"query": "duckdb lock", "limit": 5,
                                                                          "cursor": pages[-1]["cursor"]})))
            return pages

        pages = run_mcp(home, body)
    finally:
        d.stop()
    hits = [h for p in pages for h in p["hits"]]
    assert len(pages) == 3 and len(hits) == 12 and len({h["id"] for h in hits}) == 12
    h = hits[0]
    assert {"agent", "id", "title", "cwd", "branch", "when", "snippet", "resume"} <= set(h)
    assert "[[lock]]" in h["snippet"] and h["resume"].endswith(h["id"])
    assert pages[0]["summary"].startswith("5 session(s)")


def test_results_stay_within_max_chars_and_the_cursor_follows_the_last_hit(home: Home, roots: dict[str, Path]) -> None:
    """Long hits: the default answer is at most 4 KB; a page cut to fit continues without losing a hit."""
    _corpus(roots, sessions=20, long=True)
    _index(home, roots)

    async def body(c: Client) -> tuple[list[Any], Any, Any]:
        results = [await c.call_tool("search_sessions", {"query": "lock", "limit": 20})]
        while answer(results[-1]).get("cursor"):
            results.append(await c.call_tool("search_sessions", {"query": "lock", "limit": 20,
                                                                 "cursor": answer(results[-1])["cursor"]}))
        wide = await c.call_tool("search_sessions", {"query": "lock", "limit": 20, "max_chars": 16000})
        capped = await c.call_tool("search_sessions", {"query": "lock", "max_chars": 999999})
        return results, wide, capped

    results, wide, capped = run_mcp(home, body)
    assert all(result_size(r) <= 4096 for r in results)
    ids = [h["id"] for r in results for h in answer(r)["hits"]]
    assert len(results) > 1 and len(ids) == len(set(ids)) == 20
    assert result_size(wide) <= 16000 and len(answer(wide)["hits"]) > len(answer(results[0])["hits"])
    assert "max_chars 999999 is outside 1000-16000; used 16000" in answer(capped)["notes"]


def test_numbers_as_strings_are_read_and_wrong_values_refused(home: Home, roots: dict[str, Path]) -> None:
    """"2" is 2, "true" is true, "Claude" is claude; a word for a number or an unknown argument is refused."""
    _corpus(roots, sessions=4)
    _index(home, roots)

    async def body(c: Client) -> list[Any]:
        return [await c.call_tool("search_sessions", {"query": "lock", "limit": "2", "agents": "Claude",
                                                      "include_live": "true"}),
                await c.call_tool("search_sessions", {"query": "lock", "limit": "many"}),
                await c.call_tool("search_sessions", {"query": "lock", "top_k": 3}),
                await c.call_tool("search_sessions", {"query": "lock", "sort": "oldest"}),
                await c.call_tool("search_sessions", {})]

    ok, word, unknown, enum, missing = run_mcp(home, body)
    assert not ok.is_error and len(answer(ok)["hits"]) == 2
    for r, name, says in ((word, "invalid-params", "whole number from 1 to 20"),
                          (unknown, "invalid-params", "its arguments are query, agents"),
                          (enum, "invalid-params", "one of relevance, newest"),
                          (missing, "invalid-params", "needs query")):
        assert r.is_error and answer(r)["error"] == name and says in answer(r)["message"]


def test_read_session_around_the_hit_is_bounded(home: Home, roots: dict[str, Path]) -> None:
    """read_session with the search's query centres on the hit; long messages are cut and flagged."""
    c = ClaudeWriter(roots["claude"], cwd="/home/dev/app")
    for i in range(20):
        c.user(("the faiss sidecar mismatch" if i == 12 else f"step {i}") + " " + "word " * 400)
        c.assistant(f"done {i}")
    _index(home, roots)

    async def body(cl: Client) -> tuple[Any, Any, Any]:
        hit = answer(await cl.call_tool("search_sessions", {"query": "faiss sidecar"}))["hits"][0]
        around = await cl.call_tool("read_session", {"session_id": hit["id"], "query": "faiss sidecar",
                                                     "count": "5"})
        nxt = await cl.call_tool("read_session", {"session_id": hit["id"], "position": answer(around)["after"],
                                                  "direction": "forward"})
        missing = await cl.call_tool("read_session", {"session_id": "no-such-id"})
        return around, nxt, missing

    around, nxt, missing = run_mcp(home, body)
    a = answer(around)
    assert result_size(around) <= 4096 and result_size(nxt) <= 4096
    assert a["hitAt"] in [m["position"] for m in a["messages"]]
    assert any(m["truncated"] for m in a["messages"]) and a["session"]["cwd"] == "/home/dev/app"
    assert answer(nxt)["messages"][0]["position"] == a["after"]
    assert missing.is_error and answer(missing)["error"] == "session-not-found"


def test_the_callers_live_session_is_left_out(home: Home, roots: dict[str, Path], tmp_path: Path) -> None:
    """The session named by CLAUDE_CODE_SESSION_ID, or active in the caller's folder, is not a hit by default."""
    now = datetime.now(UTC) - timedelta(minutes=1)
    work = tmp_path / "work"
    work.mkdir()
    mine = ClaudeWriter(roots["claude"], cwd=str(work.resolve()), start=now).user("the duckdb lock again")
    other = ClaudeWriter(roots["claude"], cwd="/home/dev/old").user("an old duckdb lock fix")
    named = ClaudeWriter(roots["claude"], cwd="/home/dev/named", start=now).user("duckdb lock in the named one")
    _index(home, roots)

    async def body(c: Client) -> tuple[Any, Any]:
        return (answer(await c.call_tool("search_sessions", {"query": "duckdb lock"})),
                answer(await c.call_tool("search_sessions", {"query": "duckdb lock", "include_live": True})))

    by_folder, kept = run_mcp(home, body, cwd=work)
    assert {h["id"] for h in by_folder["hits"]} == {other.session_id, named.session_id}
    assert mine.session_id in by_folder["leftOut"]
    assert {h["id"] for h in kept["hits"]} == {mine.session_id, other.session_id, named.session_id}
    by_env, _ = run_mcp(home, body, cwd=tmp_path, CLAUDE_CODE_SESSION_ID=named.session_id)
    assert {h["id"] for h in by_env["hits"]} == {mine.session_id, other.session_id}


def test_a_refresh_returns_at_once_and_searches_say_the_index_is_catching_up(home: Home,
                                                                            roots: dict[str, Path]) -> None:
    """With the scanners stopped mid-refresh, index_status refresh and searches answer now, from the index as it is."""
    _corpus(roots, sessions=2)
    d = DaemonProcess(home, roots)
    scanners: list[int] = []
    try:
        d.reconcile()
        scanners = d.scanner_pids()
        assert scanners
        for pid in scanners:
            os.kill(pid, signal.SIGSTOP)  # alive, but nothing it is asked to scan gets done
        ClaudeWriter(roots["claude"], cwd="/home/dev/new").user("a brand new zeppelin session")

        async def body(c: Client) -> list[dict[str, Any]]:
            return [answer(await c.call_tool("index_status", {"refresh": "true"})),
                    answer(await c.call_tool("search_sessions", {"query": "lock"})),
                    answer(await c.call_tool("search_sessions", {"query": "zeppelin"})),
                    answer(await c.call_tool("index_status", {"refresh": True}))]

        started, old, new, again = run_mcp(home, body)
        assert started["refresh"] == "started" and started["mode"] == "daemon"
        assert len(old["hits"]) == 2 and "still running" in old["catchingUp"]
        assert new["hits"] == [] and "catchingUp" in new
        assert again["refresh"] == "already running" and "is running" in again["summary"]
        for pid in scanners:
            os.kill(pid, signal.SIGCONT)
        scanners = []

        def found() -> bool:
            # A first page a commit overtook is refused as stale-cursor (docs/contract.md §3): asked again.
            r = d.search("zeppelin")
            assert r["kind"] in ("results", "stale-cursor"), r
            return bool(r["kind"] == "results" and r["hits"])

        assert wait_until(found, timeout=60)
    finally:
        for pid in scanners:
            os.kill(pid, signal.SIGCONT)
        d.stop()


def test_errors_carry_the_contracts_names(home: Home, roots: dict[str, Path]) -> None:
    """host all outside a search is invalid-params, an unconnected host host-unavailable, a refresh without daemon
    needs-daemon."""
    _corpus(roots, sessions=1)
    _index(home, roots)

    async def body(c: Client) -> list[Any]:
        return [await c.call_tool("read_session", {"session_id": "x", "host": "all"}),
                await c.call_tool("search_sessions", {"query": "lock", "host": "ssh:devbox"}),
                await c.call_tool("index_status", {"refresh": True}),
                await c.call_tool("search_sessions", {"query": "lock", "cursor": "bogus"})]

    all_hosts, remote, refresh, cursor = run_mcp(home, body)
    assert answer(all_hosts)["error"] == "invalid-params" and "one execution host" in answer(all_hosts)["message"]
    assert answer(remote)["error"] == "host-unavailable"
    assert answer(refresh)["error"] == "needs-daemon" and "aivault serve" in answer(refresh)["message"]
    assert answer(cursor)["error"] == "malformed-cursor"
    assert all(r.is_error for r in (all_hosts, remote, refresh, cursor))


def test_streamable_http_on_loopback_with_a_host_guard(home: Home, roots: dict[str, Path]) -> None:
    """--http 127.0.0.1:0 serves the same tools to the SDK's HTTP client with the bearer token; another Host header
    is refused even with it."""
    _corpus(roots, sessions=3)
    _index(home, roots)
    server = McpHttpProcess(home)
    try:
        async def main() -> Any:
            async with server.client() as c:
                return answer(await c.call_tool("search_sessions", {"query": "lock"}))

        assert len(anyio.run(main)["hits"]) == 3
        rebound = server.post({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                              {**server.auth, "Host": "evil.example:80"})
        assert rebound.status_code in (400, 403, 421)
    finally:
        server.stop()


def test_http_needs_the_bearer_token(home: Home, roots: dict[str, Path]) -> None:
    """Without the token of mcp.token (0600, kept across restarts), with a wrong one or another scheme, every
    request is 401 with a JSON-RPC error saying where the token is, and no session is opened."""
    _corpus(roots, sessions=2)
    _index(home, roots)
    server = McpHttpProcess(home)
    try:
        path = home.path / "mcp.token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == server.token
        for headers in ({}, {"Authorization": "Bearer " + "x" * 43}, {"Authorization": f"Basic {server.token}"},
                        {"Authorization": server.token}):
            r = server.post(INITIALIZE, headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert "mcp-session-id" not in r.headers
            error = r.json()["error"]
            assert "Authorization: Bearer" in error["message"] and str(path) in error["message"]
        assert httpx.get(server.url, timeout=10).status_code == 401
        assert httpx.delete(server.url, timeout=10).status_code == 401

        async def without() -> None:
            async with server.client(headers={}) as c:
                await c.list_tools()

        with pytest.raises(Exception):  # noqa: B017 - the SDK's client fails however it reports a 401
            anyio.run(without)
        assert all(e["sessions"] == 0 for e in server.events() if e.get("event") == "request")
    finally:
        server.stop()
    again = McpHttpProcess(home)
    try:
        assert again.token == server.token  # an agent configured once keeps working after a restart
    finally:
        again.stop()


def test_http_sessions_are_bounded_and_idle_ones_expire(home: Home) -> None:
    """200 initializes open at most MAX_SESSIONS (32) sessions, the rest refused 503 with what to do; with a short
    idle timeout, idle sessions close (their ids then 404) and make room for new ones."""
    server = McpHttpProcess(home)
    try:
        answers = [server.post(INITIALIZE) for _ in range(200)]
        opened = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        refused = [r for r in answers if r.status_code != 200]
        assert len(opened) == MAX_SESSIONS == 32 and len(set(opened)) == 32
        assert {r.status_code for r in refused} == {503}
        message = refused[0].json()["error"]["message"]
        assert "32 MCP sessions are open" in message and "restart `aivault mcp --http`" in message
        requests = [e["sessions"] for e in server.events() if e.get("event") == "request"]
        assert wait_until(lambda: len([e for e in server.events() if e.get("event") == "request"]) >= 200)
        assert max(e["sessions"] for e in server.events() if e.get("event") == "request") == 32, requests
    finally:
        server.stop()
    server = McpHttpProcess(home, AIVAULT_MCP_SESSION_IDLE_TIMEOUT_S="2")
    try:
        opened = [server.post(INITIALIZE).headers["mcp-session-id"] for _ in range(5)]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        version = {"mcp-protocol-version": "2025-06-18"}
        time.sleep(4)  # idle: a request now (even this test's check) would restart the session's countdown
        for sid in opened:
            assert server.post(ping, {**server.auth, **version, "mcp-session-id": sid}).status_code == 404
        r = server.post(INITIALIZE)
        assert r.status_code == 200
        last = [e for e in server.events() if e.get("event") == "request"][-1]
        assert last["sessions"] <= 2, last  # the five idle ones are gone
    finally:
        server.stop()


def test_another_local_user_gets_401_from_mcp_http(home: Home, roots: dict[str, Path]) -> None:
    """As uid nobody (setpriv): mcp.token cannot be read, and initialize, a tool call and a guessed token are 401
    with no answer from the index."""
    _corpus(roots, sessions=2)
    _index(home, roots)
    server = McpHttpProcess(home)
    try:
        post = {"Accept": ACCEPT, "Content-Type": "application/json"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "search_sessions", "arguments": {"query": "lock"}}}
        seen = probe_as_nobody([home.path / "mcp.token"], [
            ("POST", server.url, post, json.dumps(INITIALIZE)), ("POST", server.url, post, json.dumps(call)),
            ("POST", server.url, {**post, "Authorization": "Bearer guess"}, json.dumps(call)),
            ("GET", server.url, {"Accept": "text/event-stream"}, None)])
        assert seen["files"] == {str(home.path / "mcp.token"): "PermissionError"}
        for method, _, status, body in seen["requests"]:
            assert status == 401 and "lock" not in body and json.loads(body)["error"]["code"] == -32001, method
    finally:
        server.stop()


def test_http_refuses_a_non_loopback_address(home: Home) -> None:
    """--http 0.0.0.0:PORT is refused before anything is bound."""
    r = run_cli(home.path, "mcp", "--http", "0.0.0.0:8123")
    assert r.returncode != 0 and "loopback only" in r.stderr


@pytest.fixture(autouse=True)
def _no_harness_session(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*SESSION_ENV, "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_a_cleared_index_and_consent_off_are_error_values(home: Home, roots: dict[str, Path]) -> None:
    """After a clear the old cursor is stale-cursor; with consent off search is unavailable/disabled and a
    refresh indexing-disabled, each with what to do."""
    from aivault import policy

    _corpus(roots, sessions=8)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()

        async def body(c: Client) -> list[Any]:
            first = answer(await c.call_tool("search_sessions", {"query": "lock", "limit": 2}))
            d.call("aiVault.clearSearchIndex")
            d.reconcile()  # the rebuilt index answers again: the cursor is from the old one
            stale = await c.call_tool("search_sessions", {"query": "lock", "cursor": first["cursor"]})
            policy.save(home, policy.Policy(False, None))
            off = await c.call_tool("search_sessions", {"query": "lock"})
            while not off.is_error:  # the daemon follows policy.json within a second
                await anyio.sleep(0.1)
                off = await c.call_tool("search_sessions", {"query": "lock"})
            return [stale, off, await c.call_tool("index_status", {"refresh": True})]

        stale, off, refresh = run_mcp(home, body)
    finally:
        d.stop()
    assert stale.is_error and answer(stale)["error"] == "stale-cursor" and "without cursor" in answer(stale)["message"]
    assert answer(off) == {"error": "unavailable", "reason": "disabled", "message": answer(off)["message"]}
    assert "aivault enable" in answer(off)["message"]
    assert refresh.is_error and answer(refresh)["error"] == "indexing-disabled"


def _refused(r: Any, argument: str, sent: str) -> None:
    """``r`` is an invalid-params error value naming ``argument``, within the default bound, echoing
    at most 64 characters of what was sent."""
    assert r.is_error and result_size(r) <= 4000, (argument, result_size(r))
    value = answer(r)
    assert value["error"] == "invalid-params" and argument in value["message"], value
    assert sent * 65 not in r.content[0].text


def test_huge_and_malformed_arguments_are_refused_by_name_within_the_bound(home: Home, roots: dict[str, Path]) -> None:
    """1 MB host ids, dates, argument and tool names, and numbers of 5,000 digits or past 64 bits are each
    an invalid-params value naming what was wrong, at most 4,000 bytes, the value cut to 64 characters."""
    _corpus(roots, sessions=2)
    _index(home, roots)
    mb = 1_000_000

    async def body(c: Client) -> dict[str, Any]:
        async def search(**args: Any) -> Any:
            return await c.call_tool("search_sessions", {"query": "lock", **args})

        return {
            "host": await search(host="h" * mb),
            "since": await search(since="s" * mb),
            "name": await search(**{"k" * mb: 1}),
            "names": await search(**{f"{i}" + "n" * 100: 1 for i in range(1000)}),
            "tool": await c.call_tool("t" * mb, {}),
            "limit digits": await search(limit="9" * 5000),
            "limit 5,000-digit number": await search(limit=10**4999),
            "limit past 64 bits": await search(limit=2**64),
            "limit 1e300": await search(limit=1e300),
            "max_chars digits": await search(max_chars="9" * 5000),
            "count digits": await c.call_tool("read_session", {"session_id": "x", "count": "9" * 5000}),
            "position past 64 bits": await c.call_tool("read_session", {"session_id": "x", "position": 10**30}),
            "clamped": await search(limit="25"),
        }

    r = run_mcp(home, body)
    _refused(r["host"], "host id", "h")
    _refused(r["since"], "since", "s")
    _refused(r["name"], "no argument", "k")
    assert "997 more" in answer(r["names"])["message"] and result_size(r["names"]) <= 4000
    _refused(r["tool"], "no tool", "t")
    for key, argument in (("limit digits", "limit"), ("limit 5,000-digit number", "limit"),
                          ("limit past 64 bits", "limit"), ("limit 1e300", "limit"),
                          ("max_chars digits", "max_chars"), ("count digits", "count"),
                          ("position past 64 bits", "position")):
        _refused(r[key], argument, "9")
    assert not r["clamped"].is_error and "limit 25 is outside 1-20; used 20" in answer(r["clamped"])["notes"]


def test_a_long_query_is_not_repeated_and_its_hits_come_back(home: Home, roots: dict[str, Path]) -> None:
    """A 3,500-character query: the summary quotes 64 characters of it, a note says it was cut, and the
    hits fit the default 4,000 bytes."""
    _corpus(roots, sessions=12)
    _index(home, roots)
    query = ("duckdb lock " * 300)[:3500]

    async def body(c: Client) -> Any:
        return await c.call_tool("search_sessions", {"query": query})

    r = run_mcp(home, body)
    value = answer(r)
    assert not r.is_error and result_size(r) <= 4000
    assert len(value["hits"]) == 5 and value["summary"].startswith("5 session(s) for 'duckdb lock")
    assert "(3500 characters)" in value["summary"] and query[:100] not in r.content[0].text
    assert any("first 512 characters" in n for n in value["notes"])


def test_a_session_in_a_6000_character_folder_is_found_and_read_within_the_bound(home: Home,
                                                                                 roots: dict[str, Path]) -> None:
    """Its hit and its window's header cut the folder and resume command in their middle (truncated: true)
    and the messages still fit: 4,000 bytes by default, 1,000 at the smallest max_chars."""
    from tests.builders.claude import session_fields

    folder = "/home/dev/" + "deep-folder/" * 500 + "the-project"
    assert len(folder) > 6000
    c = ClaudeWriter(roots["claude"], cwd="/home/dev/short")
    c.fields = session_fields(c.session_id, folder, "main")  # the records say the long folder
    c.title("zeppelin work")
    for i in range(8):
        c.user(f"the zeppelin hangar step {i} " + "word " * 60).assistant(f"done step {i} " + "word " * 60)
    _index(home, roots)

    async def body(cl: Client) -> tuple[Any, Any, Any]:
        found = await cl.call_tool("search_sessions", {"query": "zeppelin hangar"})
        read = await cl.call_tool("read_session", {"session_id": c.session_id, "query": "zeppelin hangar step 3"})
        small = await cl.call_tool("read_session", {"session_id": c.session_id, "count": 20, "max_chars": 1000})
        return found, read, small

    found, read, small = run_mcp(home, body)
    [hit] = answer(found)["hits"]
    assert result_size(found) <= 4000 and hit["truncated"] is True and hit["id"] == c.session_id
    assert hit["cwd"].startswith("/home/dev/deep-folder/") and hit["cwd"].endswith("/the-project")
    assert "…" in hit["cwd"] and len(hit["cwd"]) <= 300 and c.session_id in hit["resume"]
    window = answer(read)
    assert not read.is_error and result_size(read) <= 4000, result_size(read)
    assert window["session"]["truncated"] is True and window["session"]["cwd"].endswith("/the-project")
    assert len(window["messages"]) >= 2 and window["hitAt"] in [m["position"] for m in window["messages"]]
    assert not small.is_error and result_size(small) <= 1000 and answer(small)["messages"]


# --- search_sessions over every host (host: "all") -------------------------------------------------------------
@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Machines:
    """This machine's index and ssh:devbox, a real relay behind the stand-in ssh (tests/support/allhosts.py)."""
    return make_machines(tmp_path_factory.mktemp("mcp-all-hosts"))


def _run_all(m: Machines, body: Body) -> Any:
    return run_mcp(m.client, body, HOME=str(m.local.user))


def test_host_all_finds_every_hosts_sessions_and_names_their_hosts(machines: Machines) -> None:
    """host "all" lists both machines' sessions, each naming its host, pages with the cursor without repeats; a
    session on both machines is one hit naming both; the schema documents "all"."""
    async def body(c: Client) -> tuple[Any, ...]:
        pages = [answer(await c.call_tool("search_sessions", {"query": "burrow", "host": "all", "limit": 2}))]
        while pages[-1].get("cursor"):
            pages.append(answer(await c.call_tool("search_sessions", {"query": "burrow", "host": "ALL", "limit": 2,
                                                                      "cursor": pages[-1]["cursor"]})))
        shared = answer(await c.call_tool("search_sessions", {"query": "shared notes", "host": "all"}))
        local = answer(await c.call_tool("search_sessions", {"query": "burrow"}))
        tools = await c.list_tools()
        return pages, shared, local, tools

    pages, shared, local, tools = _run_all(machines, body)
    hits = [h for p in pages for h in p["hits"]]
    assert len(pages) == 3 and [len(p["hits"]) for p in pages] == [2, 2, 1], pages
    assert len({h["id"] for h in hits}) == 5
    assert sorted(h["executionHostId"] for h in hits) == ["local", "local", "local", DEVBOX, DEVBOX]
    assert all("hostsNotSearched" not in p and "notes" not in p for p in pages)
    assert all(("quokka" if h["executionHostId"] == DEVBOX else "wombat") in h["snippet"] for h in hits), hits
    [one] = shared["hits"]
    assert one["id"] == SHARED_ID and one["executionHostIds"] == ["local", DEVBOX], shared
    assert len(local["hits"]) == 3 and all("executionHostId" not in h for h in local["hits"])
    [search] = [t for t in tools.tools if t.name == "search_sessions"]
    assert "all" in search.input_schema["properties"]["host"]["description"] and "all" in (search.description or "")


def test_host_all_lists_a_hung_host_as_timeout_and_answers_with_the_others(machines: Machines) -> None:
    """A relay that never answers is a line "ssh:hung: timeout (...)" with a partial note; the other hosts'
    sessions come back within the merged deadline."""
    add_hung(machines)
    try:
        async def body(c: Client) -> tuple[Any, float]:
            t0 = time.monotonic()
            result = await c.call_tool("search_sessions", {"query": "burrow", "host": "all", "limit": 10})
            return result, time.monotonic() - t0

        result, took = _run_all(machines, body)
    finally:
        remove_hung(machines)
    value = answer(result)
    assert not result.is_error and len(value["hits"]) == 5, value
    assert value["hostsNotSearched"] == [line for line in value["hostsNotSearched"] if line.startswith(HUNG)]
    [line] = value["hostsNotSearched"]
    assert line.startswith(f"{HUNG}: timeout (no answer within the 5 s deadline")
    assert any(n.startswith("partial: 1 of 3 host(s)") for n in value["notes"])
    assert took < 5.0 + 3.0 and result_size(result) <= 4096


def test_host_all_refuses_an_edited_cursor_and_a_stale_one_names_the_host(machines: Machines) -> None:
    """An edited or foreign cursor is malformed-cursor; after ssh:devbox's index changed, page 2 is stale-cursor
    naming ssh:devbox."""
    async def first(c: Client) -> tuple[Any, ...]:
        page = answer(await c.call_tool("search_sessions", {"query": "burrow", "host": "all", "limit": 2}))
        edited = await c.call_tool("search_sessions", {"query": "burrow", "host": "all", "limit": 2,
                                                       "cursor": page["cursor"][:-2] + "AA"})
        other = await c.call_tool("search_sessions", {"query": "wombat", "host": "all", "limit": 2,
                                                      "cursor": page["cursor"]})
        single = await c.call_tool("search_sessions", {"query": "burrow", "limit": 2, "cursor": page["cursor"]})
        return page, edited, other, single

    page, edited, other, single = _run_all(machines, first)
    for r in (edited, other, single):
        assert r.is_error and answer(r)["error"] == "malformed-cursor", answer(r)
    ClaudeWriter(machines.devbox.claude, cwd="/srv/devbox/new").user("an unrelated otter").assistant("noted")
    machines.devbox.cli("index", "--no-default-roots")

    async def second(c: Client) -> Any:
        return await c.call_tool("search_sessions", {"query": "burrow", "host": "all", "limit": 2,
                                                     "cursor": page["cursor"]})

    stale = _run_all(machines, second)
    assert stale.is_error and answer(stale)["error"] == "stale-cursor", answer(stale)
    assert answer(stale)["hosts"] == [DEVBOX] and DEVBOX in answer(stale)["message"]
