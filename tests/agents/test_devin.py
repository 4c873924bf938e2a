"""Devin CLI (scanner/parsers/devin.py): sessions.db's message tree walked from the main chain's leaf, read
read-only, and the transcript export read only where there is no database."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson
import pytest

import tests.builders.devin as dvb
from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers import devin
from aivault.scanner.sources import Found, RootProblem, Unit
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import discover, texts, units_by_id, well_formed

SAMPLE = REPO / "samples" / "devin" / ".local" / "share" / "devin" / "cli"  # --root devin=<this>
T0 = epoch_ms(BASE_TIME)


def _discover(path: Path, *, full: bool = True) -> tuple[list[Found], list[RootProblem]]:
    return discover("devin", path, full=full)


def _units(path: Path) -> dict[str, Unit]:
    return units_by_id("devin", path)


_texts = texts


sane = well_formed


def test_there_is_no_devin_corpus() -> None:
    """No licence-clean Devin sample exists (tests/fixtures/corpus/SOURCES.md): the builder writes the schema the
    format notes describe, and these tests pin that."""
    assert not (REPO / "tests" / "fixtures" / "corpus" / "devin").exists()


def test_database_session_nodes_become_messages(tmp_path: Path) -> None:
    """The system prompt is left out; user text, thinking, text, OpenAI tool calls and tool rows map in chain order,
    timed by metadata.created_at or the node's created_at; title, cwd and resume from the session row."""
    db = dvb.DevinDb(tmp_path / "sessions.db")
    s = db.session("/home/dev/api", title="Go tests fail on CI")
    s.system("You are Devin, a software engineer.")
    s.user("go test ./... fails only on CI")
    s.assistant("Running the tests.", think="Probably a race.",
                tools=[("exec", {"command": "go test -race ./..."}, "WARNING: DATA RACE")])
    s.assistant("The cache map is written without its mutex.")
    [unit] = _units(tmp_path).values()
    sane(unit)
    assert _texts(unit.messages) == [
        ("user", "text", "go test ./... fails only on CI"),
        ("assistant", "thinking", "Probably a race."),
        ("assistant", "text", "Running the tests."),
        ("assistant", "tool_call", 'exec {"command":"go test -race ./..."}'),
        ("tool", "tool_result", "WARNING: DATA RACE"),
        ("assistant", "text", "The cache map is written without its mutex.")]
    assert [m.ts for m in unit.messages] == [T0 + 6000, T0 + 9000, T0 + 9000, T0 + 9000, T0 + 12_000, T0 + 15_000]
    info = unit.session
    assert (info.session_id, info.title, info.cwd, info.started_at, info.updated_at) == (
        s.session_id, "Go tests fail on CI", "/home/dev/api", T0, T0 + 15_000)
    assert info.resume_command == f"cd /home/dev/api && devin -r {s.session_id}"
    assert unit.skips == {"system-prompt": 1}


def test_the_active_chain_leaves_retries_and_abandoned_branches_out(tmp_path: Path) -> None:
    """A retry from an earlier node starts a sibling branch: only the chain up from main_chain_id is indexed and
    the nodes off it are counted; the title falls back to the first prompt on the chain."""
    db = dvb.DevinDb(tmp_path / "sessions.db")
    s = db.session(title=None)
    s.user("rename the package")
    prompt = s.leaf
    assert prompt is not None
    s.assistant("Renaming to pkg/v1.").user("no, to pkg/core")
    s.retry_from(prompt).assistant("Renaming to pkg/core.")
    [unit] = _units(tmp_path).values()
    assert _texts(unit.messages) == [("user", "text", "rename the package"),
                                     ("assistant", "text", "Renaming to pkg/core.")]
    assert unit.skips == {"dead-branch": 2}
    assert unit.session.title == "rename the package"
    # main_chain_id pointing back at the first branch's leaf shows that branch instead.
    db.con.execute("UPDATE sessions SET main_chain_id = 3")
    [unit] = _units(tmp_path).values()
    assert [m.text for m in unit.messages] == ["rename the package", "Renaming to pkg/v1.", "no, to pkg/core"]


def test_a_missing_leaf_a_gap_and_a_cycle_end_the_chain(tmp_path: Path) -> None:
    """No main_chain_id (or one naming no node) takes the newest node as the leaf; a parent that is not there, or
    a cycle, ends the walk instead of looping."""
    db = dvb.DevinDb(tmp_path / "sessions.db")
    s = db.session()
    s.user("one").assistant("two")
    db.con.execute("UPDATE sessions SET main_chain_id = 999")
    [unit] = _units(tmp_path).values()
    assert [m.text for m in unit.messages] == ["one", "two"] and unit.skips == {"missing-leaf": 1}
    db.con.execute("UPDATE sessions SET main_chain_id = NULL")
    db.con.execute("UPDATE message_nodes SET parent_node_id = 77 WHERE node_id = 1")
    [unit] = _units(tmp_path).values()
    assert [m.text for m in unit.messages] == ["one", "two"] and unit.skips == {"history-gap": 1}
    db.con.execute("UPDATE message_nodes SET parent_node_id = 2 WHERE node_id = 1")
    [unit] = _units(tmp_path).values()
    assert [m.text for m in unit.messages] == ["one", "two"]


def test_injected_hidden_malformed_and_other_shapes(tmp_path: Path) -> None:
    """A user node Devin sent itself (is_user_input false) is injected context; a hidden session is not listed;
    content parts, flattened tool calls and a bare "agent" role are read; bad JSON, unknown roles, images and
    nameless calls are counted."""
    db = dvb.DevinDb(tmp_path / "sessions.db")
    db.session(title="hidden one", session_id="hidden-1", hidden=True).user("secret side session")
    s = db.session(title="Shapes")
    s.user("continue", typed=False)
    s.node({"role": "user", "content": [{"type": "text", "text": "look at this screenshot"},
                                        {"type": "image", "source": {"data": "AAAA"}}]})
    s.node({"role": "agent", "content": [{"type": "text", "text": "Reading it."}],
            "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "a.png"}}, {"id": "c2"}]})
    s.node({}, raw="{not json")
    s.node({"role": "critic", "content": "hmm"})
    units = _units(tmp_path)
    assert list(units) == [s.session_id]
    unit = units[s.session_id]
    assert _texts(unit.messages) == [("user", "text", "look at this screenshot"),
                                     ("assistant", "text", "Reading it."),
                                     ("assistant", "tool_call", 'read {"path":"a.png"}')]
    assert unit.skips == {"injected-context": 1, "attachment:image": 1, "malformed-tool-call": 1,
                          "malformed-record": 1, "unknown_role:critic": 1}


def test_signature_follows_the_chain_and_new_nodes(tmp_path: Path) -> None:
    """The listed signature equals the read one and stays put while nothing changes; a new node and a switch of
    main_chain_id each move it."""
    db = dvb.DevinDb(tmp_path / "sessions.db")
    s = db.session()
    s.user("one").assistant("two")
    sigs = []
    for edit in (lambda: None, lambda: None, lambda: s.user("three"),
                 lambda: db.con.execute("UPDATE sessions SET main_chain_id = 1")):
        edit()
        [found], _ = _discover(tmp_path)
        assert devin.read_unit(found).signature == found.mtime_ns
        sigs.append(found.mtime_ns)
    assert sigs[0] == sigs[1] and len(set(sigs)) == 3


def test_transcripts_are_read_only_without_a_database(tmp_path: Path) -> None:
    """Without sessions.db the ATIF exports are the sessions (steps as messages, observation results as tool
    results, user turns of older exports by is_user_input; one being written waits); with a database they are not
    read."""
    cli = tmp_path / "devin" / "cli"
    (cli / "transcripts").mkdir(parents=True)
    steps = [
        dvb.step(0, "system", BASE_TIME, "You are Devin."),
        {"step_id": 1, "timestamp": "2026-03-01T10:00:05Z", "message": "why is the build red?",
         "metadata": {"is_user_input": True}},
        dvb.step(2, "agent", BASE_TIME.replace(second=9), "Checking the log.", reasoning_content="Look at CI.",
                 tool_calls=[{"tool_call_id": "t1", "function_name": "exec", "arguments": {"command": "make"}}],
                 observation={"results": [{"source_call_id": "t1", "content": "error: missing go.sum entry"}]}),
        dvb.step(3, "user", BASE_TIME.replace(second=12), "continue", metadata={"is_user_input": False}),
        dvb.step(4, "agent", BASE_TIME.replace(second=15), [{"type": "text", "text": "Run go mod tidy."}]),
        dvb.step(5, "robot", BASE_TIME.replace(second=16), "?"),
    ]
    (cli / "transcripts" / "t-1.json").write_bytes(dvb.transcript("t-1", steps, cwd="/home/dev/svc"))
    (cli / "transcripts" / "broken.json").write_bytes(b"[]")
    found, _ = _discover(tmp_path / "devin")  # a root one level up reads through cli/
    units = {f.path.rsplit("/", 1)[1]: f for f in found}
    assert sorted(units) == ["broken.json", "t-1.json"]
    unit = devin.read_unit(units["t-1.json"])
    assert _texts(unit.messages) == [
        ("user", "text", "why is the build red?"), ("assistant", "thinking", "Look at CI."),
        ("assistant", "text", "Checking the log."), ("assistant", "tool_call", 'exec {"command":"make"}'),
        ("tool", "tool_result", "error: missing go.sum entry"), ("assistant", "text", "Run go mod tidy.")]
    assert unit.skips == {"system-prompt": 1, "injected-context": 1, "unknown_record:robot": 1}
    info = unit.session
    assert (info.session_id, info.title, info.cwd, info.started_at, info.updated_at) == (
        "t-1", "why is the build red?", "/home/dev/svc", T0, T0 + 16_000)
    assert info.resume_command == "cd /home/dev/svc && devin -r t-1"
    with pytest.raises(UnitUnreadable, match="not a Devin transcript"):
        devin.read_unit(units["broken.json"])
    (cli / "transcripts" / "broken.json").write_bytes(b'{"session_id": "t-2", "steps": [')
    [being_written] = [f for f in _discover(cli)[0] if f.path.endswith("broken.json")]
    with pytest.raises(UnitChanged):  # an export still being written is read on a later pass
        devin.read_unit(being_written)
    dvb.DevinDb(cli / "sessions.db").session().user("from the database")
    found, _ = _discover(cli)
    assert [f.locator[1] for f in found] == ["5b0e8c1a-7d2f-4e6b-9a31-0c4d2e6f8a10"]


def test_a_schema_without_message_nodes_is_a_root_problem(tmp_path: Path) -> None:
    """A database whose message_nodes lacks a column it needs is reported by name, offering no unit."""
    con = sqlite3.connect(tmp_path / "sessions.db")
    con.executescript("CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at INTEGER);"
                      "CREATE TABLE message_nodes (node_id INTEGER, session_id TEXT, chat_message TEXT);")
    con.close()
    found, problems = _discover(tmp_path)
    assert found == [] and "table 'message_nodes' has no column 'parent_node_id'" in problems[0].reason


def test_default_roots_cover_linux_and_macos(tmp_path: Path) -> None:
    """~/.local/share/devin/cli and ~/Library/Application Support/devin/cli; no environment variable moves them."""
    assert [r.path for r in devin.default_roots({"XDG_DATA_HOME": "/x"}, tmp_path)] == [
        str(tmp_path / ".local/share/devin/cli"), str(tmp_path / "Library/Application Support/devin/cli")]
    assert devin.SPEC.shaped("sessions.db") and not devin.SPEC.shaped("sessions.db-wal")


def test_discovery_under_the_default_roots_of_a_fake_home(tmp_path: Path) -> None:
    """With HOME at a fake folder, a macOS-laid store and a Linux-laid one are each found by the default roots (the
    absent one is no problem)."""
    for n, layout in enumerate((".local/share/devin/cli", "Library/Application Support/devin/cli")):
        home = tmp_path / f"home{n}"
        dvb.DevinDb(home / layout / "sessions.db").session().user(f"from {layout}")
        problems: list[RootProblem] = []
        found = [f for r in devin.default_roots({}, home) for f in devin.discover(r, problems, {}, True)]
        assert problems == [] and [devin.read_unit(f).messages[0].text for f in found] == [f"from {layout}"]


def test_sample_session() -> None:
    """samples/devin: one session whose retried answer is off the chain, titled, with its folder and resume."""
    [unit] = _units(SAMPLE).values()
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "text"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd) == ("Postgres connection pool exhausted under load", "/home/dev/billing-api")
    assert unit.skips == {"system-prompt": 1, "dead-branch": 1}
    assert s.resume_command == f"cd /home/dev/billing-api && devin -r {s.session_id}"


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    cli = tmp_path / "user" / ".local" / "share" / "devin" / "cli"
    cli.mkdir(parents=True)
    return {"devin": cli}


def test_daemon_indexes_devin_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                             roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a sessions.db session under a default-shaped root is searchable with the
    right metadata; a second pass reads nothing; a new node is read once; a retry replaces the old answer."""
    db = dvb.DevinDb(roots["devin"] / "sessions.db")
    s = db.session("/home/dev/puffin", title="Puffin retries")
    s.user("the puffin client retries forever")
    prompt = s.leaf
    assert prompt is not None
    s.assistant("It ignores max_retries.", tools=[("exec", {"command": "rg retries"}, "client.go:8")])
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("puffin")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "devin", s.session_id, 4, "Puffin retries", "/home/dev/puffin")
    assert hit["resumeCommand"] == f"cd /home/dev/puffin && devin -r {s.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    s.user("and the gannet client too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    time.sleep(0.01)
    s.retry_from(prompt).assistant("A loop without a bound in backoff.go.")
    assert inproc_daemon.reconcile(full=False)["messages"] == 2
    assert inproc_daemon.search("gannet")["hits"] == []
    [hit] = inproc_daemon.search("backoff")["hits"]
    assert hit["sessionId"] == s.session_id and hit["messageCount"] == 2
    assert orjson.loads(orjson.dumps(hit))["agent"] == "devin"
