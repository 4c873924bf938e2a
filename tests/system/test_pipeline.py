"""End to end: real scanner child, ZeroMQ batches, DuckDB postings, query worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import ClaudeWriter, CodexWriter
from tests.support.daemons import InprocDaemon

HIT_FIELDS = {"agent", "sessionId", "title", "cwd", "branch", "updatedAt", "messageCount", "score", "source",
              "evidence", "resumeCommand"}


def _corpus(roots: dict[str, Path]) -> tuple[ClaudeWriter, CodexWriter]:
    c = ClaudeWriter(roots["claude"], cwd="/home/dev/vault", branch="fix/lock")
    c.user("Why does DuckDB say Could not set lock on file when the daemon runs?")
    c.assistant("Only one process may open a DuckDB file read-write; the daemon already holds it.")
    c.tool("Bash", {"command": "lsof index.duckdb"}, "python 4242 dev 12u REG index.duckdb")
    x = CodexWriter(roots["codex"], cwd="/home/dev/api", branch="main")
    x.user("the integration tests hang forever on CI")
    x.assistant("The event loop is closed before the fixture finishes; use a fresh loop per test.")
    x.tool("pytest -x tests/test_api.py", "FAILED tests/test_api.py::test_login - RuntimeError: Event loop is closed")
    return c, x


def test_search_finds_claude_and_codex_sessions_with_every_hit_field(inproc_daemon: InprocDaemon,
                                                                    roots: dict[str, Path]) -> None:
    """Sessions written in both formats are found, and each hit carries every docs/contract.md §2 field."""
    c, x = _corpus(roots)
    summary = inproc_daemon.reconcile()
    assert summary["files_changed"] == 2
    r = inproc_daemon.search("DuckDB lock")
    assert r["kind"] == "results"
    assert set(r) == {"kind", "hits", "page", "generation", "truncated", "durationMs"}
    assert set(r["truncated"]) == {"candidates", "snippets", "query", "freshness"}
    assert r["page"] == {"cursor": None, "hasMore": False}
    [hit] = r["hits"]
    assert set(hit) == HIT_FIELDS
    assert hit["agent"] == "claude"
    assert hit["sessionId"] == c.session_id
    assert hit["cwd"] == "/home/dev/vault"
    assert hit["branch"] == "fix/lock"
    assert hit["source"] == "present"
    assert hit["messageCount"] == 4
    assert hit["resumeCommand"].endswith(f"claude --resume {c.session_id}")
    assert "[[DuckDB]]" in hit["evidence"]["snippet"] and "[[lock]]" in hit["evidence"]["snippet"]
    assert hit["evidence"]["role"] in ("user", "assistant")
    assert isinstance(hit["evidence"]["timestamp"], int)
    assert isinstance(hit["updatedAt"], int) and hit["updatedAt"] > 1_700_000_000_000

    r = inproc_daemon.search("event loop closed")
    assert [h["sessionId"] for h in r["hits"]] == [x.session_id]
    assert r["hits"][0]["resumeCommand"] == f"codex resume {x.session_id}"
    assert r["hits"][0]["agent"] == "codex"


def test_conversation_scope_never_searches_tool_text(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """scope=conversation matches user/assistant text only and is not widened when it misses."""
    _corpus(roots)
    inproc_daemon.reconcile()
    assert len(inproc_daemon.search("lsof")["hits"]) == 1
    r = inproc_daemon.search("lsof", scope="conversation")
    assert r["kind"] == "results" and r["hits"] == []
    assert len(inproc_daemon.search("fixture", scope="conversation")["hits"]) == 1


def test_filters_agents_paths_since_and_sort(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """agents, scopePaths (cwd at or below, not a mere prefix), since and sort=newest filter and order."""
    from datetime import UTC, datetime

    old = ClaudeWriter(roots["claude"], cwd="/home/dev/proj", start=datetime(2026, 1, 1, tzinfo=UTC))
    old.user("refactor the parser module")
    new = ClaudeWriter(roots["claude"], cwd="/home/dev/proj/sub", start=datetime(2026, 6, 1, tzinfo=UTC))
    new.user("refactor the parser module again, parser parser")
    other = ClaudeWriter(roots["claude"], cwd="/home/dev/project2", start=datetime(2026, 3, 1, tzinfo=UTC))
    other.user("refactor the parser")
    cx = CodexWriter(roots["codex"], cwd="/home/dev/proj", start=datetime(2026, 2, 1, tzinfo=UTC))
    cx.user("refactor the parser in codex")
    inproc_daemon.reconcile()

    def ids(r: dict[str, Any]) -> list[str]:
        return [h["sessionId"] for h in r["hits"]]

    assert set(ids(inproc_daemon.search("parser", filters={"agents": ["codex"]}))) == {cx.session_id}
    r = inproc_daemon.search("parser", filters={"scopePaths": ["/home/dev/proj"]})
    assert set(ids(r)) == {old.session_id, new.session_id, cx.session_id}
    r = inproc_daemon.search("parser", filters={"since": "2026-02-15T00:00:00Z"})
    assert set(ids(r)) == {new.session_id, other.session_id}
    r = inproc_daemon.search("parser", filters={"sort": "newest"})
    assert ids(r) == [new.session_id, other.session_id, cx.session_id, old.session_id]


def test_a_session_with_many_matching_chunks_does_not_crowd_out_others(inproc_daemon: InprocDaemon,
                                                                       roots: dict[str, Path]) -> None:
    """Ranking is per session (best chunk), so 600 matching chunks in one session count once."""
    big = ClaudeWriter(roots["claude"], cwd="/home/dev/big")
    for i in range(600):
        big.user(f"segfault in worker {i}")
    small = ClaudeWriter(roots["claude"], cwd="/home/dev/small")
    small.user("a segfault segfault segfault")
    inproc_daemon.reconcile()
    r = inproc_daemon.search("segfault", limit=2)
    assert {h["sessionId"] for h in r["hits"]} == {big.session_id, small.session_id}
    assert r["page"]["hasMore"] is False


def test_long_tool_lines_are_not_searchable_but_long_user_text_is(inproc_daemon: InprocDaemon,
                                                                   roots: dict[str, Path]) -> None:
    """A tool-output line over 3,072 characters is not indexed; user text is indexed in full."""
    c = ClaudeWriter(roots["claude"])
    long_line = "zzqlongtoken " + "x" * 3100
    c.tool("Bash", {"command": "cat min.js"}, "short line with shortokenq\n" + long_line + "\nlast line")
    c.user(" ".join(f"word{i}" for i in range(3000)) + " tailtokenq")
    inproc_daemon.reconcile()
    assert inproc_daemon.search("zzqlongtoken")["hits"] == []
    assert len(inproc_daemon.search("shortokenq")["hits"]) == 1
    assert len(inproc_daemon.search("tailtokenq")["hits"]) == 1
    assert len(inproc_daemon.search("word2999")["hits"]) == 1


def test_identifiers_and_unicode_are_found(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """camelCase parts, snake_case, C++, #123, café and CJK/Hangul text are all searchable."""
    c = ClaudeWriter(roots["claude"])
    c.user("call resolveTerminalPath in foo_bar.ts; compile with C++ for issue #123")
    c.assistant("Le café est prêt. 修復バグ 안녕하세요")
    inproc_daemon.reconcile()
    for q in ("resolveTerminalPath", "terminal path", "foo_bar", "bar", "C++", "#123", "café", "修復", "안녕하세요"):
        assert len(inproc_daemon.search(q)["hits"]) == 1, q
