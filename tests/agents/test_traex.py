"""TraeX rollouts (scanner.parsers.traex): Codex's parser under TraeX's name, roots and resume command."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from aivault.home import Home
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.parsers import codex, traex
from aivault.scanner.reader import ReadStats
from aivault.scanner.sources import LineFile, Root, RootProblem
from tests.builders import codex as cb
from tests.builders import traex as tb
from tests.builders.common import BASE_TIME, iso
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "traex" / "agentsview" / "rollout_subagent.jsonl"
SAMPLES = REPO / "samples" / "traex" / ".trae" / "cli" / "sessions"


def parse(path: Path, state: dict[str, object] | None = None,
          start: int = 0) -> tuple[traex.TraexParser, list[Message]]:
    parser = traex.TraexParser(str(path), state)
    out: list[Message] = []
    src = LineFile(str(path), "lines")
    try:
        for line, _ in src.lines(start, ReadStats()):
            assert line is not None
            out += parser.feed(line)
    finally:
        src.close()
    return parser, out


# -- the copied corpus ------------------------------------------------------------------------------
def test_corpus_sub_agent_rollout() -> None:
    """The de-identified TRAE CLI 0.200.19 sub-agent rollout: the prompt, the thinking kept only in the raw
    reasoning event (the reasoning item is encrypted), three calls with their outputs and the reply; the
    user_message/agent_message twins are not indexed twice; the parent thread is the parent session."""
    parser, messages = parse(CORPUS)
    assert [(m.role, m.kind, m.text) for m in messages] == [
        ("user", "text", "Explore the parser package."),
        ("assistant", "thinking", "Plan the exploration."),
        ("assistant", "tool_call",
         'spawn_agent {"agent_type":"explorer","message":"Summarize the provider facade."}'),
        ("tool", "tool_result", '{"agent_id":"019fbcd0-1111-7000-8000-000000000001","nickname":"Sartre"}'),
        ("assistant", "tool_call",
         'wait_agent {"targets":["019fbcd0-1111-7000-8000-000000000001"],"timeout_ms":1000}'),
        ("tool", "tool_result",
         '{"status":{"019fbcd0-1111-7000-8000-000000000001":{"completed":'
         '{"message":"The facade owns discovery and parsing."}}}}'),
        ("assistant", "tool_call", 'exec_command {"cmd":"ls internal/parser"}'),
        ("tool", "tool_result", "codex.go\ncodex_provider.go\ntraex.go\n"),
        ("assistant", "text", "The provider facade owns discovery and parsing."),
    ]
    s = parser.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.branch, s.parent_session_id) == (
        "traex", "019fbcca-9fd4-7d20-83dc-0762b2f839b3", "Explore the parser package.", "/home/user/code/api", "main",
        "019fbc4a-48b9-7472-a0da-6d92901383db")
    assert s.resume_command == "cd /home/user/code/api && traex resume 019fbcca-9fd4-7d20-83dc-0762b2f839b3"
    assert (s.started_at, s.updated_at, s.message_count) == (1785607624550, 1785607635100, 9)
    assert parser.stats.malformed == 0 and parser.stats.extra == {}


def test_codex_keeps_its_own_name_and_resume() -> None:
    """The same rollout read as Codex is the codex agent, resumed without a cd: TraeX changes only itself."""
    parser = codex.CodexParser(str(CORPUS))
    src = LineFile(str(CORPUS), "lines")
    try:
        for line, _ in src.lines(0, ReadStats()):
            assert line is not None
            parser.feed(line)
    finally:
        src.close()
    assert parser.session.agent == "codex"
    assert parser.session.resume_command == "codex resume 019fbcca-9fd4-7d20-83dc-0762b2f839b3"


def test_raw_reasoning_event_is_only_taken_for_an_unreadable_reasoning_item(tmp_path: Path) -> None:
    """A raw reasoning event after an item with a summary is a copy (not indexed); after an encrypted-only
    item it is the thinking; an item carrying reasoning_text content gives that text itself."""
    path = tmp_path / "rollout-2026-03-01T10-00-00-019f0000-0000-7000-8000-0000000000aa.jsonl"
    lines = [
        cb.line(iso(BASE_TIME), "session_meta", tb.session_meta("019f0000-0000-7000-8000-0000000000aa", iso(BASE_TIME),
                                                                "/home/dev/x", branch="main")),
        cb.line(iso(BASE_TIME), "response_item", cb.user_item("why is the cache cold")),
        cb.line(iso(BASE_TIME), "response_item", cb.reasoning_item("summarised thought", "gAAA")),
        cb.line(iso(BASE_TIME), "event_msg", {"type": "agent_reasoning_raw_content", "text": "raw copy"}),
        cb.line(iso(BASE_TIME), "response_item", {"type": "reasoning", "summary": [], "content": None,
                                                  "encrypted_content": "gAAA"}),
        cb.line(iso(BASE_TIME), "response_item", cb.assistant_item("an unrelated reply")),
        cb.line(iso(BASE_TIME), "event_msg", {"type": "agent_reasoning_raw_content", "text": "too late"}),
        cb.line(iso(BASE_TIME), "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA",
                                                  "content": [{"type": "reasoning_text", "text": "inline raw"}]}),
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    _, messages = parse(path)
    assert [(m.kind, m.text) for m in messages] == [
        ("text", "why is the cache cold"), ("thinking", "summarised thought"), ("text", "an unrelated reply"),
        ("thinking", "inline raw")]


# -- the builder, robustness and incremental reads ---------------------------------------------------------
def test_builder_session_and_resume_from_a_saved_state(tmp_path: Path) -> None:
    """A built two-turn rollout; read in two passes (the state saved after the first) gives the same
    messages as one pass, and the raw reasoning event is the thinking."""
    w = tb.TraexWriter(tb.sessions_dir(tmp_path), cwd="/home/dev/gw", branch="fix/limit")
    w.user("bursts pass the rate limiter after failover").reasoning("INCR and EXPIRE are two round trips.")
    w.tool("rg -n INCR internal", "window.go:41: Incr").assistant("Use one Lua script.")
    first, before = parse(w.path)
    offset = w.path.stat().st_size
    w.user("add a failover test").assistant("Added TestWindowFailover.")
    second, after = parse(w.path, first.state(), offset)
    _, whole = parse(w.path)
    assert [(m.role, m.kind) for m in before] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text")]
    assert before + after == whole and second.session.message_count == 7
    assert second.session.title == "bursts pass the rate limiter after failover"
    assert second.session.resume_command == f"cd /home/dev/gw && traex resume {w.session_id}"
    for m in whole:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip()


def test_malformed_lines_and_unknown_records_are_counted(tmp_path: Path) -> None:
    """A line that is not JSON and a non-object are malformed; an unknown record type and an unknown item type
    are counted by name; the rest of the rollout is read."""
    w = tb.TraexWriter(tb.sessions_dir(tmp_path))
    w.user("first prompt")
    with w.path.open("ab") as fh:
        fh.write(b'{"timestamp":"2026-03-01T10:00:09.000Z","type":"respon\n[1,2]\n')
        fh.write(orjson.dumps(cb.line(iso(BASE_TIME), "hologram", {"x": 1})) + b"\n")
        fh.write(orjson.dumps(cb.line(iso(BASE_TIME), "response_item", {"type": "telepathy"})) + b"\n")
    w.assistant("still read")
    parser, messages = parse(w.path)
    assert [m.text for m in messages] == ["first prompt", "still read"]
    assert parser.stats.malformed == 2
    assert parser.stats.extra == {"unknown_record:hologram": 1, "unknown_item:telepathy": 1}


# -- discovery and roots ---------------------------------------------------------------------------------
def test_default_roots_on_linux_and_macos(tmp_path: Path) -> None:
    """~/.trae/cli/sessions and ~/.trae/cli/archived_sessions, the same under a Linux or a macOS home; Codex's
    variables do not move them."""
    for home in (tmp_path / "home" / "dev", tmp_path / "Users" / "dev"):
        roots = traex.default_roots({"CODEX_HOME": str(tmp_path / "codex")}, home)
        assert [(r.agent, r.path) for r in roots] == [
            ("traex", str(home / ".trae" / "cli" / "sessions")),
            ("traex", str(home / ".trae" / "cli" / "archived_sessions"))]


def test_discovery_finds_rollouts_not_the_prompt_history(tmp_path: Path) -> None:
    """Dated and archived rollouts (plain and .zst) are units; history.jsonl beside them is not a transcript."""
    cli_home = tmp_path / ".trae" / "cli"
    w = tb.TraexWriter(cli_home / "sessions")
    w.user("hello")
    archived = cli_home / "archived_sessions" / "rollout-2026-01-01T00-00-00-019f0000-0000-7000-8000-000000000001.jsonl"
    archived.parent.mkdir(parents=True)
    archived.write_bytes(w.path.read_bytes())
    (cli_home / "sessions" / "history.jsonl").write_bytes(b'{"session_id":"x","ts":1,"text":"hello"}\n')
    zst = archived.with_name("rollout-2026-01-02T00-00-00-019f0000-0000-7000-8000-000000000002.jsonl.zst")
    zst.write_bytes(b"")
    problems: list[RootProblem] = []
    found = {(f.path, f.mode) for root in traex.SPEC.default_roots({}, tmp_path)
             for f in traex.SPEC.discover(root, problems, {}, True)}
    assert problems == []
    assert found == {(str(w.path), "lines"), (str(archived), "lines"), (str(zst), "zst")}
    assert traex.SPEC.shaped(w.path.name) and not traex.SPEC.shaped("history.jsonl")


def test_thread_names_from_a_state_database(tmp_path: Path) -> None:
    """A state database beside the sessions folder (Codex's threads table) names the thread; TraeX writes no
    session_index.jsonl, so nothing else is read."""
    cli_home = tmp_path / ".trae" / "cli"
    (cli_home / "sessions").mkdir(parents=True)
    con = sqlite3.connect(cli_home / "state_5.sqlite")
    con.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, title TEXT)")
    con.execute("INSERT INTO threads VALUES ('019f0000-0000-7000-8000-0000000000bb', 'gateway failover')")
    con.commit()
    con.close()
    assert traex.SPEC.side_titles is not None
    sigs: dict[str, object] = {}
    got = list(traex.SPEC.side_titles(Root("traex", str(cli_home / "sessions")), sigs))
    assert got == [("019f0000-0000-7000-8000-0000000000bb", "gateway failover")]
    assert list(traex.SPEC.side_titles(Root("traex", str(cli_home / "sessions")), sigs)) == []


# -- the shipped sample -------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/traex (--root traex=samples/traex/.trae/cli/sessions): the rate limiter failover session."""
    [found] = traex.SPEC.discover(Root("traex", str(SAMPLES)), [], {}, True)
    parser, messages = parse(Path(found.path))
    s = parser.session
    assert (s.session_id, s.cwd, s.branch) == ("019fc3a1-5b2e-7d40-8a11-3c6e2f9b7d02", "/home/dev/gateway",
                                               "fix/ratelimit-failover")
    assert s.title is not None and s.title.startswith("After the Redis failover last night")
    assert s.resume_command == "cd /home/dev/gateway && traex resume 019fc3a1-5b2e-7d40-8a11-3c6e2f9b7d02"
    assert [m.kind for m in messages].count("thinking") == 1 and len(messages) == 11
    assert "PEXPIRE" in messages[-1].text


# -- end to end -------------------------------------------------------------------------------------------
@pytest.fixture
def trae_sessions(tmp_path: Path) -> Path:
    [sessions, _] = traex.default_roots({}, tmp_path / "user")
    path = Path(sessions.path)
    path.mkdir(parents=True)
    return path


def test_daemon_indexes_a_rollout_once_and_reads_an_append_once(home: Home, trae_sessions: Path) -> None:
    """Through a real daemon and scanner: a rollout under ~/.trae/cli/sessions is found and searchable with its
    metadata; a second pass reads nothing; appended lines are read once, in the same session."""
    w = tb.TraexWriter(trae_sessions, "019f3333-0000-7000-8000-0000000000e3", cwd="/home/dev/quokka", branch="dev")
    w.user("the quokka importer drops rows after a failover").reasoning("Check the retry path.")
    w.tool("rg retry importer", "importer.go:12: retry(0)").assistant("Retries were disabled: set retry(3).")
    with InprocDaemon(home, {"traex": trae_sessions}) as daemon:
        assert daemon.reconcile()["messages"] == 5
        [hit] = daemon.search("quokka")["hits"]
        assert (hit["agent"], hit["sessionId"], hit["title"], hit["cwd"], hit["branch"], hit["messageCount"]) == (
            "traex", w.session_id, "the quokka importer drops rows after a failover", "/home/dev/quokka", "dev", 5)
        assert hit["resumeCommand"] == f"cd /home/dev/quokka && traex resume {w.session_id}"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)
        time.sleep(0.01)
        w.user("does the wombat importer retry too").assistant("It does.")
        appended = daemon.reconcile(full=False)
        assert (appended["files_changed"], appended["messages"]) == (1, 2)
        assert daemon.reconcile(full=False)["messages"] == 0
        [hit] = daemon.search("wombat")["hits"]
        assert hit["sessionId"] == w.session_id and hit["messageCount"] == 7
