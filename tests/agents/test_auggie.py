"""Auggie CLI sessions (scanner.auggie): plain and node exchanges, tools, summaries, roots, daemon."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers import auggie
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import auggie as b
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import timed_shape, whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "auggie" / "ctx" / "sessions"
FIXTURE_ID = "01K0AUGGIESESSION0000000000"
SAMPLES = REPO / "samples" / "auggie" / ".augment"
OLD_NS = 1_600_000_000 * 1_000_000_000


def read(path: Path) -> Unit:
    return whole_unit("auggie", path)


shape = timed_shape


# -- the copied corpus ---------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The one Auggie corpus file is the one tested below."""
    assert [p.name for p in CORPUS.iterdir()] == [f"{FIXTURE_ID}.json"]


def test_corpus_plain_and_node_exchanges() -> None:
    """Both exchange forms: request_message/response_text, and text request/response nodes; each exchange's
    messages take its finishedAt; session fields from the document."""
    unit = read(CORPUS / f"{FIXTURE_ID}.json")
    assert shape(unit) == [
        ("user", "text", "auggie session json oracle prompt"),
        ("assistant", "text", "Auggie session import finished"),
        ("user", "text", "auggie node text oracle prompt"),
        ("assistant", "text", "Auggie node response imported"),
    ]
    assert [m.ts for m in unit.messages] == [1783195202000, 1783195202000, 1783195204000, 1783195204000]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.parent_session_id, s.resume_command) == (
        "auggie", FIXTURE_ID, "auggie session json oracle prompt", "/workspace/auggie", None, None)
    assert (s.started_at, s.updated_at) == (1783195200000, 1783195204000)
    assert unit.skips == {}


# -- the format from the builder -----------------------------------------------------------------------------
def test_tool_use_and_result_nodes_in_order(tmp_path: Path) -> None:
    """The agent loop: prompt, thinking and a tool_use node; then the tool_result node and the reply, given both
    as response_text and as a text node (indexed once)."""
    w = b.AuggieWriter(tmp_path / "sessions")
    w.tool("why is the build red", "launch-process", {"command": "npm test"}, "2 failing", "Two snapshot tests fail.",
           thought="run the tests first")
    unit = read(w.path)
    assert shape(unit) == [
        ("user", "text", "why is the build red"),
        ("assistant", "thinking", "run the tests first"),
        ("assistant", "tool_call", 'launch-process {"command":"npm test"}'),
        ("tool", "tool_result", "2 failing"),
        ("assistant", "text", "Two snapshot tests fail."),
    ]


def test_a_plain_reply_goes_before_the_tool_use(tmp_path: Path) -> None:
    """A response given as response_text plus tool_use nodes (no text node) reads as the text, then the call."""
    w = b.AuggieWriter(tmp_path / "sessions")
    w.add({"request_message": "lint it", "response_text": "Running the linter.",
           "response_nodes": [b.tool_use_node(1, "t1", "launch-process", {"command": "ruff check"})]})
    assert [(m.kind, m.text) for m in read(w.path).messages] == [
        ("text", "lint it"), ("text", "Running the linter."), ("tool_call", 'launch-process {"command":"ruff check"}')]


def test_history_summary_is_system_text_and_other_nodes_are_counted(tmp_path: Path) -> None:
    """A compaction summary exchange is system text (never the title); an IDE-state request node and an unknown
    response node are counted; an error tool result is marked; camelCase exchanges read the same."""
    w = b.AuggieWriter(tmp_path / "sessions")
    w.add({"request_message": "Summarize the conversation so far.", "response_text": "We fixed the cache key."},
          summary=True)
    w.add({"requestMessage": "next step", "requestNodes": [{"id": 2, "type": 4, "ide_state_node": {}}],
           "responseNodes": [{"id": 1, "type": 0, "textNode": {"content": "On it."}},
                             {"id": 2, "type": 3, "workspace_file_chunks": []}]})
    w.add({"request_nodes": [b.tool_result_node(1, "t1", "EACCES", is_error=True)], "response_text": "Permissions."})
    unit = read(w.path)
    assert shape(unit) == [
        ("system", "text", "Summarize the conversation so far."),
        ("system", "text", "We fixed the cache key."),
        ("user", "text", "next step"),
        ("assistant", "text", "On it."),
        ("tool", "tool_result", "[error] EACCES"),
        ("assistant", "text", "Permissions."),
    ]
    assert unit.session.title == "next step"
    assert unit.skips == {"request_node:4": 1, "response_node:3": 1}


def test_lineage_and_malformed_entries(tmp_path: Path) -> None:
    """parentSessionId is the parent; a history entry that is not an object, or without an exchange, is counted."""
    w = b.AuggieWriter(tmp_path / "sessions", "01K0CHILD", parentSessionId="01K0PARENT")
    w.ask("child prompt", "child reply")
    w.doc["chatHistory"] += ["junk", {"completed": True}]
    w.save()
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["child prompt", "child reply"]
    assert unit.session.parent_session_id == "01K0PARENT" and unit.skips == {"malformed-record": 2}


def test_a_document_being_rewritten_waits_then_is_unreadable(tmp_path: Path) -> None:
    """A document that is not JSON yet is UnitChanged while fresh and UnitUnreadable once it settled."""
    w = b.AuggieWriter(tmp_path / "sessions")
    w.path.write_text('{"sessionId": "x", "chatHistory": [')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    with pytest.raises(UnitUnreadable, match="not an Auggie session"):
        read(w.path)


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_and_discovery(tmp_path: Path) -> None:
    """~/.augment/sessions on Linux and macOS; only *.json directly in it are units, listed on every pass."""
    assert [r.path for r in auggie.default_roots({}, tmp_path)] == [str(tmp_path / ".augment" / "sessions")]
    root = tmp_path / "sessions"
    b.AuggieWriter(root, "A1")
    (root / "notes.txt").write_text("x")
    (root / "sub").mkdir()
    (root / "sub" / "B2.json").write_text("{}")
    problems: list[RootProblem] = []
    dirs: dict[str, int] = {}
    found = [Path(f.path).name for f in auggie.SPEC.discover(Root("auggie", str(root)), problems, dirs, True)]
    assert problems == [] and found == ["A1.json"]
    assert [Path(f.path).name for f in auggie.SPEC.discover(Root("auggie", str(root)), problems, dirs, False)] == found


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/auggie (--root auggie=samples/auggie/.augment/sessions): 7 messages, the first prompt as title, the
    Jest open-handle output as a tool result, the IDE-state node counted."""
    [f] = auggie.SPEC.discover(Root("auggie", str(SAMPLES / "sessions")), [], {}, True)
    unit = auggie.read_unit(f)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("user", "text"), ("assistant", "text")]
    s = unit.session
    assert s.cwd == "/home/dev/orders-service" and s.title is not None and s.title.startswith("CI hangs after all Jest")
    assert "Jest has detected the following 1 open handle" in unit.messages[3].text
    assert "setupFilesAfterEnv" in unit.messages[-1].text and unit.skips == {"request_node:4": 1}


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".augment" / "sessions"
    sessions.mkdir(parents=True)
    return {"auggie": sessions}


def test_daemon_indexes_an_auggie_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                          roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; the document rewritten with a new exchange is seen by a recent pass and read once."""
    w = b.AuggieWriter(roots["auggie"], "01K0DAEMON0000000000000001", workspace="/home/dev/gannet")
    w.tool("gannet tests hang", "launch-process", {"command": "npx jest"}, "open handle", "Close the redis client.")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("gannet")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "auggie", "01K0DAEMON0000000000000001", 4, "gannet tests hang", "/home/dev/gannet")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.ask("and the cormorant suite", "Same fix there.")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 6
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("cormorant")["hits"]
    assert hit["messageCount"] == 6


def test_copied_fixture_through_the_daemon(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """The corpus document copied under a root is indexed as one session."""
    shutil.copytree(CORPUS, roots["auggie"], dirs_exist_ok=True)
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("oracle")["hits"]
    assert hit["sessionId"] == FIXTURE_ID and hit["title"] == "auggie session json oracle prompt"
