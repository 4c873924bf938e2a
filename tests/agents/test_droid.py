"""Factory Droid sessions (scanner.droid, docs/formats.md §22): Claude-like blocks in append-only JSONL, the
session_start header, injected reminders, discovery, robustness, and a real daemon end to end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from aivault.errors import ParserStateError
from aivault.home import Home
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.parsers.droid import SPEC, DroidParser, default_roots
from aivault.scanner.sources import Root
from tests.builders import droid as db
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "factory-droid" / "agent-sessions"
SAMPLES = REPO / "samples" / "droid" / ".factory"


def parse(path: Path) -> tuple[DroidParser, list[Message]]:
    parser = DroidParser(str(path))
    return parser, [m for line in file_lines(path) for m in parser.feed(line)]


def feed(parser: DroidParser, *records: dict[str, Any] | bytes) -> list[Message]:
    out: list[Message] = []
    for r in records:
        out += parser.feed(r if isinstance(r, bytes) else json.dumps(r).encode())
    return out


def triples(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


# -- the copied corpus ------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The two Droid session-store corpus files are the ones tested below."""
    assert sorted(p.name for p in CORPUS.iterdir()) == ["session_store_schema_drift.jsonl",
                                                        "session_store_small.jsonl"]


def test_corpus_small_session() -> None:
    """session_store_small: the prompt, the Execute call and its failing result; id, title and cwd from
    session_start; times from the messages."""
    parser, messages = parse(CORPUS / "session_store_small.jsonl")
    assert triples(messages) == [
        ("user", "text", "Run a command"),
        ("assistant", "tool_call", 'Execute {"command":"ls /nope"}'),
        ("tool", "tool_result", "Error: Command failed (exit code: 1)\nls: /nope: No such file or directory")]
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.parent_session_id, s.message_count) == (
        "droid_s1", "Stage0 Droid Small", "/tmp", None, 3)
    assert (s.started_at, s.updated_at) == (1766793000000, 1766793002000)
    assert s.resume_command == "cd /tmp && droid --resume droid_s1"
    assert parser.stats.extra == {} and parser.stats.malformed == 0


def test_corpus_schema_drift() -> None:
    """session_store_schema_drift: an integer version is fine, the <system-reminder> in front of the prompt is
    dropped and the typed words stay; messages without parentId are read all the same."""
    parser, messages = parse(CORPUS / "session_store_schema_drift.jsonl")
    assert triples(messages) == [("user", "text", "Do the thing"), ("assistant", "text", "Ok")]
    assert (parser.session.session_id, parser.session.title) == ("droid_drift", "Stage0 Droid Drift")


@pytest.mark.parametrize("name", ["session_store_small.jsonl", "session_store_schema_drift.jsonl"])
def test_corpus_resumes_at_every_split_point(name: str) -> None:
    """Parsing lines 1..k, saving the state through msgpack and resuming for the rest equals one whole pass."""
    path = CORPUS / name
    assert_resumes_at_every_split(lambda state: DroidParser(str(path), state), path)


# -- sessions from the builder --------------------------------------------------------------------------------
def test_blocks_compaction_and_bookkeeping(tmp_path: Path) -> None:
    """Thinking, text and tool_use blocks (Claude's mapping), string content of older files, a compaction summary
    as system text; todo_state is bookkeeping, unknown types and roles are counted by name; a prompt that is
    only a reminder is injected context and never the title."""
    w = db.DroidWriter(tmp_path / ".factory", cwd="/home/dev/web", session_id="d-1", title=None)
    w.user("", reminder="Be concise.")
    w.user("CORS fails on /api", reminder="Be concise.")
    w.assistant("Checking the server.", thought="Look at the cors middleware.")
    w.tool("Read", {"file_path": "server.ts"}, "app.use(cors())")
    w.add("assistant", "plain string reply")
    w.write({"type": "compaction_state", "summary": "User is fixing CORS on /api."})
    w.write({"type": "todo_state", "todos": [{"content": "fix cors", "status": "in_progress"}]})
    w.write({"type": "hologram", "x": 1})
    w.add("system", [db.text("a system note")])
    parser, messages = parse(w.path)
    assert triples(messages) == [
        ("user", "text", "CORS fails on /api"), ("assistant", "thinking", "Look at the cors middleware."),
        ("assistant", "text", "Checking the server."), ("assistant", "tool_call", 'Read {"file_path":"server.ts"}'),
        ("tool", "tool_result", "app.use(cors())"), ("assistant", "text", "plain string reply"),
        ("system", "text", "User is fixing CORS on /api.")]
    assert parser.session.title == "CORS fails on /api"
    assert parser.stats.extra == {"injected-context": 1, "unknown_record:hologram": 1, "unknown_role:system": 1}


def test_subagent_session_links_its_caller_and_titles_past_the_task_header(tmp_path: Path) -> None:
    """A Task-tool sub-agent (callingSessionId, no title) links to its caller and is titled by the task's first
    line after its ``# Task Tool Invocation`` header; ``parent`` is read too."""
    w = db.DroidWriter(tmp_path / ".factory", cwd="/home/dev/web", session_id="d-sub", title=None,
                       callingSessionId="d-1", decompSessionType="worker")
    w.user("# Task Tool Invocation\n\nFind every CORS middleware registration\n\nReport file:line.")
    s = parse(w.path)[0].session
    assert (s.parent_session_id, s.title) == ("d-1", "Find every CORS middleware registration")
    v = db.DroidWriter(tmp_path / ".factory", cwd="/home/dev/web", session_id="d-fork", title="Forked", parent="d-1")
    assert parse(v.path)[0].session.parent_session_id == "d-1"


def test_malformed_lines_are_counted_never_fatal() -> None:
    """Bad JSON, a non-object, a record without a type and a message without an object are malformed; a record
    whose content is neither a string nor blocks too; the next good line still parses."""
    parser = DroidParser("/s/-home-dev-x/d-2.jsonl")
    out = feed(parser, b'{"type":"message","mess', b"42", {"no": "type"}, {"type": "message", "message": "x"},
               {"type": "message", "timestamp": "2026-03-01T10:00:00Z", "message": {"role": "user", "content": 7}},
               db.message("m1", "d-2", "2026-03-01T10:00:01Z", "user", [db.text("still parsed")]))
    assert [m.text for m in out] == ["still parsed"]
    assert parser.stats.malformed == 5
    assert parser.session.session_id == "d-2"  # no session_start: the file stem


def test_state_stays_bounded_and_foreign_state_is_rejected() -> None:
    """Thousands of messages keep the state small; a state of another version or shape is refused."""
    parser = DroidParser("/s/x.jsonl")
    for i in range(3000):
        feed(parser, db.message(f"m{i}", "p", "2026-03-01T10:00:00Z", "user", [db.text(f"prompt {i}")]))
    assert len(msgpack.packb(parser.state())) < 8192
    good = parser.state()
    for bad in ({}, {**good, "v": 99}, {**good, "n": "many"}, {**good, "sid": 5}):
        with pytest.raises(ParserStateError):
            DroidParser("/s/x.jsonl", bad)


# -- roots and discovery ----------------------------------------------------------------------------------------
def test_default_roots_follow_the_factory_home(tmp_path: Path) -> None:
    """~/.factory/sessions on Linux and macOS; FACTORY_HOME (else FACTORY_DIR) replaces ~/.factory."""
    assert [r.path for r in default_roots({}, tmp_path)] == [str(tmp_path / ".factory" / "sessions")]
    assert [r.path for r in default_roots({"FACTORY_DIR": str(tmp_path / "d")}, tmp_path)] == [
        str(tmp_path / "d" / "sessions")]
    assert [r.path for r in default_roots({"FACTORY_HOME": str(tmp_path / "h"), "FACTORY_DIR": "x"}, tmp_path)] == [
        str(tmp_path / "h" / "sessions")]


def test_discovery_finds_both_layouts_and_nothing_else(tmp_path: Path) -> None:
    """Per-project <slug>/<id>.jsonl and the flat sessions/<id>.jsonl are line units; settings files and
    anything deeper are not."""
    home = tmp_path / ".factory"
    nested = db.DroidWriter(home, cwd="/home/dev/a", session_id="d-a")
    flat = db.DroidWriter(home, cwd="/home/dev/b", session_id="d-b", flat=True)
    deep = home / "sessions" / "-home-dev-a" / "d-a" / "artifacts"
    deep.mkdir(parents=True)
    (deep / "x.jsonl").write_text("")
    found = {Path(f.path): f.mode for f in SPEC.discover(Root("droid", str(home / "sessions")), [], {}, True)}
    assert found == {nested.path: "lines", flat.path: "lines"}


# -- the shipped sample ----------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/droid: the session title, the reminder stripped from the prompt, thinking, calls and results."""
    [f] = SPEC.discover(Root("droid", str(SAMPLES / "sessions")), [], {}, True)
    parser, messages = parse(Path(f.path))
    s = parser.session
    assert (s.title, s.cwd, s.message_count) == ("Invoice due dates off by one day after DST",
                                                 "/home/dev/invoice-service", len(messages))
    assert [m.kind for m in messages] == ["text", "thinking", "text", "tool_call", "tool_result", "tool_call",
                                          "tool_result", "text", "tool_call", "tool_result", "tool_call",
                                          "tool_result", "text"]
    assert messages[0].text.startswith("Invoices created on March 28") and "system-reminder" not in messages[0].text
    assert all(m.role in ROLES and m.kind in KINDS for m in messages)


# -- end to end ---------------------------------------------------------------------------------------------------
def test_daemon_indexes_a_droid_session_once_and_reads_an_append_once(home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner: a session under a default-shaped root is found and searchable with the
    right metadata; a second pass reads nothing; a line still being written is left for later; the appended
    records are read once."""
    factory = tmp_path / "user" / ".factory"
    [root] = default_roots({"FACTORY_HOME": str(factory)}, Path("/nowhere"))
    w = db.DroidWriter(factory, cwd="/home/dev/heron", session_id="6c0d9a10-0000-4000-8000-00000000d001",
                       title="Heron CORS preflight")
    w.user("the heron API rejects the CORS preflight for PATCH", reminder="Be concise.")
    w.tool("Read", {"file_path": "server.ts"}, "app.use(cors({ methods: ['GET', 'POST'] }))")
    w.assistant("Add PATCH to the allowed methods.")
    with InprocDaemon(home, {"droid": Path(root.path)}) as daemon:
        assert daemon.reconcile()["messages"] == 4
        [hit] = daemon.search("heron")["hits"]
        assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
            "droid", w.session_id, 4, "Heron CORS preflight", "/home/dev/heron")
        assert hit["resumeCommand"] == f"cd /home/dev/heron && droid --resume {w.session_id}"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)

        time.sleep(0.01)
        line = json.dumps(db.message("m9", w.last, "2026-03-01T11:00:00.000Z", "user",
                                     [db.text("also the egret endpoint")])).encode()
        with w.path.open("ab") as fh:
            fh.write(line[:40])  # Droid is in the middle of writing the line
        assert daemon.reconcile(full=False)["messages"] == 0
        with w.path.open("ab") as fh:
            fh.write(line[40:] + b"\n")
        w.assistant("Egret gets the same fix.")
        appended = daemon.reconcile(full=False)
        assert (appended["files_changed"], appended["messages"]) == (1, 2)
        assert daemon.reconcile(full=False)["messages"] == 0
        [hit] = daemon.search("egret")["hits"]
        assert (hit["sessionId"], hit["messageCount"]) == (w.session_id, 6)
