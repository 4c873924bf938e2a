"""The search contract (docs/contract.md §2–3, §7), table-driven, through the daemon over ZeroMQ and in-process.

One corpus serves the module: 120 sessions that all mention "paging" (so limits and pages can
be counted), plus sessions made for snippets, routes, operators and sources.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from aivault import policy
from aivault.errors import InvalidParams
from aivault.home import Home
from aivault.protocol import METHOD_SEARCH
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import answer, lexical_only
from tests.support.daemons import DaemonProcess, InprocDaemon

N_PAGING = 120


def _write_corpus(roots: dict[str, Path]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for i in range(N_PAGING):
        start = datetime(2026, 1, 1, tzinfo=UTC).replace(day=1 + i % 28, hour=i % 24)
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{i % 7}", start=start)
        w.user(f"paging session number{i} " + "filler " * (i % 5))
    for i in range(25):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/q{i % 3}", start=datetime(2026, 2, 1 + i % 3, tzinfo=UTC))
        w.user("quarterly " * (1 + i % 4) + "report")  # equal scores and times: ties must break stably
    s = ClaudeWriter(roots["claude"], cwd="/home/dev/snippets")
    s.user("test with bash: if [[ -f x ]]; then echo ok; fi and numpy [[1, 2]] arrays, marker zanzibar")
    s.user("blobby words before " + "longtok" + "q" * 3993 + " blobby words after the giant token")
    ids["snippets"] = s.session_id
    p = ClaudeWriter(roots["claude"], cwd="/home/dev/phrases", branch="feat/phrase")
    p.user("we saw could not set lock on file again")
    ids["phrase"] = p.session_id
    q = ClaudeWriter(roots["claude"], cwd="/home/dev/phrases2")
    q.user("set the lock flag; it could not be done on that file")
    ids["allterms"] = q.session_id
    x = CodexWriter(roots["codex"], cwd="/home/dev/api/sub", branch="release")
    x.user("codex talks about the migration of widgets")
    ids["codex"] = x.session_id
    return ids


class Client:
    """searchSessions / searchStatus either over ZeroMQ (daemon) or in this process."""

    def __init__(self, search: Callable[[Any], dict[str, Any]], status: Callable[[], dict[str, Any]],
                 mode: str, home: Home, reconcile: Callable[[], Any]) -> None:
        self.search_raw = search
        self.status = status
        self.mode = mode
        self.home = home
        self.reconcile = reconcile

    def search(self, query: str, **params: Any) -> dict[str, Any]:
        return self.search_raw({"query": query, **params})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Home, dict[str, Path], dict[str, str]]]:
    base = tmp_path_factory.mktemp("contract")
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    ids = _write_corpus(roots)
    home = Home.resolve(base / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    yield home, roots, ids


@pytest.fixture(scope="module", params=["daemon", "inproc"])
def client(request: pytest.FixtureRequest, world: tuple[Home, dict[str, Path], dict[str, str]]) -> Iterator[Client]:
    home, roots, _ = world
    if request.param == "daemon":
        d = DaemonProcess(home, roots)
        d.reconcile()
        try:
            yield Client(lambda p: d.call(METHOD_SEARCH, p), d.status, "daemon", home, lambda: d.reconcile())
        finally:
            d.stop()
    else:
        from aivault.vault.endpoints import search_sessions, search_status

        inproc = InprocDaemon(home, roots)
        inproc.reconcile()
        try:
            yield Client(lambda p: answer(search_sessions(inproc.service, p)),
                         lambda: answer(search_status(inproc.service)), "inproc", home, inproc.reconcile)
        finally:
            inproc.close()


def _err(client: Client, params: Any) -> int:
    """The error code a bad request produces (through the daemon: the RPC error; in-process: raised)."""
    from aivault.errors import AivaultError

    try:
        client.search_raw(params)
    except AivaultError as exc:
        return exc.code
    raise AssertionError(f"{params!r} was accepted")


# --- request parsing (docs/contract.md §2) ------------------------------------------------------------------
LIMIT_CASES = [({}, 20), ({"limit": 0}, 1), ({"limit": -4}, 1), ({"limit": 200}, 100), ({"limit": 2.5}, 20),
               ({"limit": "7"}, 20), ({"limit": 7}, 7), ({"limit": None}, 20), ({"limit": True}, 20),
               ({"limit": 100.0}, 100)]


@pytest.mark.parametrize(("params", "expected"), LIMIT_CASES)
def test_limit_is_parsed_by_the_engine_rules(client: Client, params: dict[str, Any], expected: int) -> None:
    """limit: missing 20, 0→1, −4→1, 200→100, 2.5→20, "7"→20; integers clamp to 1..100."""
    r = client.search("paging", **params)
    assert r["kind"] == "results" and len(r["hits"]) == expected


def test_unknown_and_legacy_fields_are_accepted_and_change_nothing(client: Client) -> None:
    """Unknown fields are stripped; tier and refresh are accepted and dropped."""
    base = client.search("paging", limit=5)
    for extra in ({"tier": "fast"}, {"refresh": True}, {"somethingNew": {"x": 1}}, {"tier": None, "refresh": 3}):
        r = client.search("paging", limit=5, **extra)
        assert [h["sessionId"] for h in r["hits"]] == [h["sessionId"] for h in base["hits"]]
        assert r["generation"] == base["generation"]


@pytest.mark.parametrize(("query", "cut"), [("paging " * 100, True), ("x" * 600, True), ("paging", False),
                                            ("é" * 511 + "e\u0301" + "x", True), ("w " * 48, False)])
def test_long_queries_are_cut_not_refused(client: Client, query: str, cut: bool) -> None:
    """A long query is searched after a cut and reports truncated.query; one that fits does not."""
    r = client.search(query)
    assert r["kind"] == "results"
    assert r["truncated"]["query"] is cut


@pytest.mark.parametrize("query", ["", " ", "\t\n  "])
def test_a_whitespace_only_query_gives_no_hits(client: Client, query: str) -> None:
    """Whitespace is a valid query with no hits, not an error."""
    r = client.search(query)
    assert r["kind"] == "results" and r["hits"] == [] and r["page"] == {"cursor": None, "hasMore": False}


BAD_PAYLOADS: list[Any] = [
    {"query": 42}, {"query": None}, {}, {"query": ["a"]}, {"query": "x", "filters": "nope"},
    {"query": "x", "filters": {"agents": "claude"}}, {"query": "x", "scope": "everything"},
    {"query": "x", "scope": 3}, {"query": "x", "filters": {"sort": "oldest"}},
    {"query": "x", "filters": {"scopePaths": ["relative/dir"]}}, {"query": "x", "cursor": 7},
    {"query": "x", "freshness": "eventually"}, {"query": "x", "debug": "yes"},
    {"query": "x", "filters": {"since": "last tuesday"}}, "a string", [1, 2],
]


@pytest.mark.parametrize("params", BAD_PAYLOADS)
def test_invalid_payloads_are_errors_not_results(client: Client, params: Any) -> None:
    """Wrong types for query, filters, scope and friends are invalid-params errors."""
    assert _err(client, params) == InvalidParams.code


# --- results and hits (docs/contract.md §2) -----------------------------------------------------------------
def test_result_and_hit_shapes_are_exact(client: Client, world: tuple[Home, dict[str, Path], dict[str, str]]) -> None:
    """A result has exactly the contract's keys, no debug unless asked, and hits every field."""
    r = client.search("migration widgets")
    assert set(r) == {"kind", "hits", "page", "generation", "truncated", "durationMs"}
    assert isinstance(r["durationMs"], float | int) and r["durationMs"] >= 0
    [hit] = r["hits"]
    assert set(hit) == {"agent", "sessionId", "title", "cwd", "branch", "updatedAt", "messageCount", "score",
                        "source", "evidence", "resumeCommand"}
    assert hit["sessionId"] == world[2]["codex"] and hit["agent"] == "codex" and hit["branch"] == "release"
    assert set(hit["evidence"]) == {"snippet", "role", "timestamp"}


def test_snippets_mark_only_matches_and_never_cut_inside_a_mark(client: Client) -> None:
    """Transcript [[ ]] stays readable text, never a mark; a 4,000-character match gives a short snippet."""
    r = client.search("zanzibar")
    snip = r["hits"][0]["evidence"]["snippet"]
    marks = _marks(snip)
    assert marks == ["zanzibar"]
    assert "[\u200b[ -f x ]\u200b]" in snip and "[\u200b[1, 2]\u200b]" in snip
    r = client.search("blobby")
    assert r["truncated"]["snippets"] == 1
    snip = r["hits"][0]["evidence"]["snippet"]
    assert len(snip) < 600
    assert _marks(snip) and all(m.lower() == "blobby" for m in _marks(snip))
    assert snip.count("[[") == snip.count("]]")


def _marks(snippet: str) -> list[str]:
    out = []
    pos = 0
    while (a := snippet.find("[[", pos)) != -1:
        b = snippet.index("]]", a + 2)
        out.append(snippet[a + 2 : b])
        pos = b + 2
    return out


# --- cursors (docs/contract.md §3) ----------------------------------------------------------------------------
def _walk(client: Client, query: str, sizes: list[int], **params: Any) -> list[str]:
    seen: list[str] = []
    cursor = None
    for i in range(100):
        size = sizes[min(i, len(sizes) - 1)]
        r = client.search(query, limit=size, **({"cursor": cursor} if cursor else {}), **params)
        assert r["kind"] == "results", r
        seen += [h["sessionId"] for h in r["hits"]]
        if not r["page"]["hasMore"]:
            assert r["page"]["cursor"] is None
            return seen
        cursor = r["page"]["cursor"]
        assert isinstance(cursor, str)
    raise AssertionError("paging never ended")


def test_paging_visits_every_session_once_in_a_stable_order(client: Client) -> None:
    """25 matches at limit 10: pages of 10, 10, 5; every session once; same order again; sizes may change."""
    sizes = []
    seen: list[str] = []
    cursor = None
    while True:
        r = client.search("quarterly", limit=10, **({"cursor": cursor} if cursor else {}))
        sizes.append(len(r["hits"]))
        seen += [h["sessionId"] for h in r["hits"]]
        cursor = r["page"]["cursor"]
        if cursor is None:
            assert r["page"]["hasMore"] is False
            break
        assert r["page"]["hasMore"] is True
    assert sizes == [10, 10, 5]
    assert len(seen) == len(set(seen)) == 25
    assert _walk(client, "quarterly", [10]) == seen
    assert _walk(client, "quarterly", [5, 20]) == seen
    assert _walk(client, "quarterly", [7, 1, 25]) == seen
    big = _walk(client, "paging", [30], filters={"scopePaths": ["/home/dev/p0", "/home/dev/p1"]})
    assert len(big) == len(set(big)) == 35  # 18 sessions in p0, 17 in p1


def _a_cursor(client: Client, query: str = "paging", **params: Any) -> str:
    r = client.search(query, limit=3, **params)
    assert r["page"]["hasMore"]
    cursor: str = r["page"]["cursor"]
    return cursor


def test_every_edited_cursor_is_malformed(client: Client) -> None:
    """Changing any single character of a cursor makes it malformed (it is signed)."""
    cursor = _a_cursor(client)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    for i, ch in enumerate(cursor):
        other = alphabet[(alphabet.index(ch) + 1) % len(alphabet)]
        edited = cursor[:i] + other + cursor[i + 1 :]
        r = client.search("paging", limit=3, cursor=edited)
        assert r == {"kind": "malformed-cursor"}, (i, edited)


@pytest.mark.parametrize("cursor", ["", "%%%not-base64%%%", "abc", "YWJj.ZGVm", "....", "a" * 5000])
def test_garbage_cursors_are_malformed(client: Client, cursor: str) -> None:
    """Empty, non-base64 or unsigned cursors are malformed-cursor, never an error."""
    assert client.search("paging", cursor=cursor) == {"kind": "malformed-cursor"}


@pytest.mark.parametrize("change", [
    {"query": "paging filler"}, {"scope": "conversation"}, {"filters": {"agents": ["codex"]}},
    {"filters": {"scopePaths": ["/home/dev"]}}, {"filters": {"since": "2026-01-01T00:00:00Z"}},
    {"filters": {"sort": "newest"}}, {"query": "paging agent:claude"},
])
def test_a_cursor_used_with_another_query_key_is_malformed(client: Client, change: dict[str, Any]) -> None:
    """Query, scope, agents, paths, since and sort are bound into the cursor."""
    cursor = _a_cursor(client)
    params = {"query": "paging", "limit": 3, "cursor": cursor, **change}
    assert client.search_raw(params) == {"kind": "malformed-cursor"}


def test_the_query_key_ignores_limit_and_the_order_of_agents_and_paths(client: Client) -> None:
    """limit may change; agents and scopePaths are compared as sets."""
    cursor = _a_cursor(client, filters={"agents": ["claude", "codex"], "scopePaths": ["/home/dev/p1", "/home/dev/p2"]})
    r = client.search("paging", limit=30, cursor=cursor,
                      filters={"agents": ["codex", "claude"], "scopePaths": ["/home/dev/p2", "/home/dev/p1"]})
    assert r["kind"] == "results" and len(r["hits"]) > 3


def test_generation_advance_makes_cursors_stale_and_they_stay_stale(client: Client,
                                                                   world: tuple[Home, dict[str, Path],
                                                                                dict[str, str]]) -> None:
    """A cursor minted before a generation-advancing write is stale-cursor, every time it is reused."""
    cursor = _a_cursor(client)
    before = client.search("paging", limit=1)["generation"]
    w = ClaudeWriter(world[1]["claude"], cwd=f"/home/dev/late-{client.mode}")
    w.user("paging appears in a late session")
    client.reconcile()
    after = client.search("paging", limit=1)["generation"]
    assert after > before
    for _ in range(3):
        assert client.search("paging", limit=3, cursor=cursor) == {"kind": "stale-cursor", "generation": after,
                                                                   "expectedGeneration": before}


# --- planning and debug (docs/contract.md §2, §9) -------------------------------------------------
ROUTE_CASES = [
    ("could not set lock", "phrase", {"phrase"}, None),
    ("lock could not file", "all", {"phrase", "allterms"}, None),
    ("widgetz migration", "typo", {"codex"}, {"widgetz": "widgets"}),
    ("zanzibar qqqqqqqqqqqq", "any", {"snippets"}, None),
    # "the" is in four sessions, but on its own it is no evidence: the any-word route drops it.
    ("the zanzibar qqqqqqqqqqqq", "any", {"snippets"}, None),
    ("zanzibar", "all", {"snippets"}, None),
]


@pytest.mark.parametrize(("query", "route", "who", "repaired"), ROUTE_CASES)
def test_the_planner_tries_phrase_all_typo_any_in_order(client: Client, world: tuple[Home, dict[str, Path],
                                                                                       dict[str, str]],
                                                        query: str, route: str, who: set[str],
                                                        repaired: dict[str, str] | None) -> None:
    """The first route that answers is used, and debug reports it (with repaired terms)."""
    r = client.search(query, debug=True)
    ids = world[2]
    assert {h["sessionId"] for h in r["hits"]} == {ids[k] for k in who}
    assert r["debug"]["route"] == route
    assert r["debug"]["plannerReport"]["route"] == route
    assert r["debug"]["plannerReport"]["scope"] == "all"
    if repaired:
        assert r["debug"]["repairedTerms"] == repaired == r["debug"]["plannerReport"]["repairedTerms"]
    else:
        assert "repairedTerms" not in r["debug"]
    assert set(r) == {"kind", "hits", "page", "generation", "truncated", "durationMs", "debug"}
    assert "debug" not in client.search(query)


def test_any_word_matching_keeps_small_index_topics_and_marks_only_the_words_that_ranked(client: Client,
                                                                                        world: tuple[Home,
                                                                                                     dict[str, Path],
                                                                                                     dict[str, str]]
                                                                                        ) -> None:
    """In a small index a word in most chunks still counts; function words are neither ranked nor marked."""
    ids = world[2]
    r = client.search("paging zanzibar", limit=100, debug=True)
    assert r["debug"]["route"] == "any"
    found = [h["sessionId"] for h in r["hits"]]
    assert found[0] == ids["snippets"]  # the rarer word ranks first
    assert len(found) == 100 and r["page"]["hasMore"]  # and the 120 sessions saying "paging" follow
    r = client.search("the giant blobby zzzzqqq", debug=True)
    assert [h["sessionId"] for h in r["hits"]] == [ids["snippets"]] and r["debug"]["route"] == "any"
    snippet = r["hits"][0]["evidence"]["snippet"]
    assert "[[giant]]" in snippet and "[[the]]" not in snippet and "the [[giant]]" in snippet


def test_operators_filter_before_routing_and_alone_list_newest_sessions(client: Client,
                                                                         world: tuple[Home, dict[str, Path],
                                                                                      dict[str, str]]) -> None:
    """agent:, path: and branch: are filters; an operator-only query lists newest matches, evidence null."""
    ids = world[2]
    r = client.search("migration agent:codex")
    assert [h["sessionId"] for h in r["hits"]] == [ids["codex"]]
    assert client.search("migration agent:claude")["hits"] == []
    r = client.search("lock path:/home/dev/phrases", debug=True)
    assert {h["sessionId"] for h in r["hits"]} == {ids["phrase"]}
    r = client.search("branch:feat/phrase", debug=True)
    assert [h["sessionId"] for h in r["hits"]] == [ids["phrase"]]
    assert r["hits"][0]["evidence"] is None and r["debug"]["route"] == "operators"
    r = client.search("path:/home/dev/api", limit=50)
    assert [h["sessionId"] for h in r["hits"]] == [ids["codex"]]
    newest = client.search("agent:claude", limit=100)["hits"]
    stamps = [h["updatedAt"] for h in newest]
    assert stamps == sorted(stamps, reverse=True) and all(h["evidence"] is None for h in newest)


def test_source_is_present_for_files_seen(client: Client) -> None:
    """source is 'present' for transcripts the indexer saw on its last pass."""
    assert {h["source"] for h in client.search("paging", limit=100)["hits"]} == {"present"}


def test_a_cursor_survives_msgpack_and_json_round_trips(client: Client) -> None:
    """Cursors are plain URL-safe text: through JSON and msgpack they stay valid; padded, they are refused."""
    import msgpack

    cursor = _a_cursor(client)
    via_json = json.loads(json.dumps({"c": cursor}))["c"]
    via_msgpack = msgpack.unpackb(msgpack.packb({"c": cursor}, use_bin_type=True), raw=False)["c"]
    assert via_json == via_msgpack == cursor and cursor.isascii() and "=" not in cursor
    for again in (via_json, via_msgpack):
        assert client.search("paging", limit=3, cursor=again)["kind"] == "results"
    body, sig = cursor.split(".")
    base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))  # it is base64url
    padded = f"{body}{'=' * (-len(body) % 4) or '=='}.{sig}"
    assert client.search("paging", limit=3, cursor=padded) == {"kind": "malformed-cursor"}


@pytest.mark.parametrize(("field", "value"), [("offset", 2**64 - 1), ("offset", 2**63), ("offset", 2**31),
                                              ("generation", 2**64 - 1), ("generation", -1)])
def test_a_cursor_signed_with_the_real_key_but_out_of_range_is_malformed(client: Client, field: str,
                                                                         value: int) -> None:
    """A correctly signed cursor whose offset or generation no page could carry is malformed-cursor, not an error."""
    from dataclasses import replace

    from aivault.query.cursor import mint, open_cursor

    key = client.home.key()
    pos = open_cursor(key, _a_cursor(client))
    forged = mint(key, replace(pos, offset=value) if field == "offset" else replace(pos, generation=value))
    assert client.search("paging", limit=3, cursor=forged) == {"kind": "malformed-cursor"}
