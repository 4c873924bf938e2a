"""Tabnine CLI sessions (scanner.tabnine): the Gemini reader under Tabnine's roots, on its corpus and sample."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aivault.errors import UnitChanged
from aivault.scanner.parsers import tabnine
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import tabnine as tb
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed, whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "tabnine-cli" / "ctx" / ".tabnine" / "agent" / "tmp"
CHATS = CORPUS / "project" / "chats"
SAMPLES = REPO / "samples" / "tabnine"
OLD_NS = 1_600_000_000 * 1_000_000_000


def read(path: Path) -> Unit:
    return whole_unit("tabnine", path)


sane = well_formed


# -- the copied corpus ----------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The two Tabnine corpus files are the ones tested below, and discovery finds both."""
    found = sorted(os.path.relpath(f.path, CHATS) for f in tabnine.SPEC.discover(Root("tabnine", str(CORPUS)), [], {},
                                                                                  True))
    assert found == ["session-2026-07-05T12-00-tabnine-.jsonl", "tabnine-root/tabnine-child.jsonl"]


def test_corpus_main_session() -> None:
    """``tabnine`` records are the assistant's; the call and its result, written as two records under two
    message ids, are one call and one result; the folder comes from ``directories``."""
    unit = read(CHATS / "session-2026-07-05T12-00-tabnine-.jsonl")
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "tabnine jsonl oracle prompt"),
        ("assistant", "tool_call", 'read_file {"file_path":"src/tabnine_oracle.txt"}'),
        ("tool", "tool_result", "TABNINE_RAW_TOOL_RESULT_SHOULD_NOT_SEARCH"),
        ("assistant", "text", "tabnine jsonl oracle answer"),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.branch, s.parent_session_id) == (
        "tabnine", "tabnine-root", "tabnine jsonl oracle prompt", "/workspace/tabnine", None, None)
    assert s.resume_command == "cd /workspace/tabnine && tabnine --resume tabnine-root"
    assert (s.started_at, s.updated_at) == (1783252800000, 1783252803000)
    assert unit.skips == {"repeated-call": 1}


def test_corpus_subagent_is_linked_to_its_parent() -> None:
    """``chats/<parent id>/<id>.jsonl`` (``kind: subagent``): its own session, the parent's id, no resume."""
    unit = read(CHATS / "tabnine-root" / "tabnine-child.jsonl")
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [("user", "text", "tabnine child oracle prompt")]
    s = unit.session
    assert (s.session_id, s.parent_session_id, s.resume_command, s.cwd) == (
        "tabnine-child", "tabnine-root", None, "/workspace/tabnine")


# -- builder sessions -------------------------------------------------------------------------------------
def test_built_session_with_registry_title_and_split_call(tmp_path: Path) -> None:
    """A session written by the builder: the project registry gives the folder, ``$set.summary`` the title, a
    split call is indexed once."""
    w = tb.TabnineWriter(tmp_path / ".tabnine" / "agent", cwd="/home/dev/shop", session_id="7e1c2b3a-0001")
    w.user("where is checkout validated?").split_tool("grep", {"pattern": "validate"}, "src/checkout/validate.ts:3")
    w.assistant("In src/checkout/validate.ts.", thinking="Search first.").title("Checkout validation")
    unit = read(w.path)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "thinking"),
        ("assistant", "text")]
    assert (unit.session.title, unit.session.cwd) == ("Checkout validation", "/home/dev/shop")


def test_gemini_typed_records_of_the_fork_are_the_assistants_too(tmp_path: Path) -> None:
    """Records a Gemini-family build wrote with ``type: gemini`` read as the assistant's."""
    w = tb.TabnineWriter(tmp_path / "agent", cwd="/home/dev/x", session_id="g-1")
    w.user("hello")
    w.ASSISTANT_TYPE = "gemini"
    w.assistant("hi from an older build")
    assert [m.role for m in read(w.path).messages] == ["user", "assistant"]


# -- discovery and roots ----------------------------------------------------------------------------------
@pytest.mark.parametrize("home", ["/home/dev", "/Users/dev"])
def test_default_roots_on_linux_and_macos(home: str) -> None:
    """``~/.tabnine/agent/tmp`` on Linux and macOS alike; ``GEMINI_CLI_HOME`` replaces the home folder."""
    assert [r.path for r in tabnine.default_roots({}, Path(home))] == [f"{home}/.tabnine/agent/tmp"]
    assert [r.path for r in tabnine.default_roots({"GEMINI_CLI_HOME": "/opt/th"}, Path(home))] == [
        "/opt/th/.tabnine/agent/tmp"]


def test_discovery_under_a_fake_home(tmp_path: Path) -> None:
    """Main sessions and sub-agents under the default root of a fake home; checkpoints, temp copies and
    other files are not units; the census counts session files only."""
    home = tmp_path / "home"
    [root] = tabnine.default_roots({}, home)
    agent = home / ".tabnine" / "agent"
    main = tb.TabnineWriter(agent, cwd="/home/dev/a", session_id="aaaa1111-0000-4000-8000-000000000001")
    main.user("first")
    child = tb.TabnineWriter(agent, cwd="/home/dev/a", session_id="child-1", parent=main.session_id)
    child.user("sub")
    project = main.path.parent.parent
    (project / "checkpoint-tag.json").write_text("{}")
    (main.path.parent / (main.path.name + ".tmp-123")).write_text("{}")
    (project / "logs.json").write_text("[]")
    problems: list[RootProblem] = []
    got = sorted(os.path.relpath(f.path, root.path) for f in tabnine.SPEC.discover(root, problems, {}, True))
    assert problems == []
    assert got == sorted([os.path.relpath(main.path, root.path), os.path.relpath(child.path, root.path)])
    assert all(f.mode == "whole" for f in tabnine.SPEC.discover(root, [], {}, True))
    assert tabnine.SPEC.shaped(main.path.name) and not tabnine.SPEC.shaped("logs.json")


# -- robustness ---------------------------------------------------------------------------------------------
def test_malformed_unknown_and_cut_records(tmp_path: Path) -> None:
    """A line that is not JSON and an unknown record type are counted; a cut-off last record waits while the
    file is fresh and is counted once it settled."""
    w = tb.TabnineWriter(tmp_path / "agent", cwd="/home/dev/x", session_id="r-1")
    w.user("still here")
    with w.path.open("ab") as f:
        f.write(b"not json\n" + b'{"id":"m9","timestamp":"2026-03-01T10:00:09Z","type":"hologram","content":"x"}\n')
        f.write(b'{"id":"m10","type":"tabn')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["still here"]
    assert unit.skips == {"malformed-record": 1, "unknown_record:hologram": 1, "truncated-record": 1}


# -- the shipped sample -----------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/tabnine (GEMINI_CLI_HOME=samples/tabnine): the debugging session with its split calls, title,
    folder and resume command."""
    [root] = tabnine.default_roots({"GEMINI_CLI_HOME": str(SAMPLES)}, Path("/nonexistent"))
    [f] = tabnine.SPEC.discover(root, [], {}, True)
    unit = tabnine.read_unit(f)
    sane(unit)
    s = unit.session
    assert (s.title, s.cwd) == ("Celery beat runs the nightly report twice", "/home/dev/reports")
    assert s.resume_command == f"cd /home/dev/reports && tabnine --resume {s.session_id}"
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
        ("assistant", "text")]
    assert "beat_schedule" in unit.messages[3].text and "crontab(hour=2" in unit.messages[-1].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    tmp = tmp_path / "user" / ".tabnine" / "agent" / "tmp"
    tmp.mkdir(parents=True)
    return {"tabnine": tmp}


def test_daemon_indexes_a_tabnine_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                         roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; an appended record is seen by a recent pass and re-read once, still one session."""
    w = tb.TabnineWriter(roots["tabnine"].parent, cwd="/home/dev/quokka",
                         session_id="5f0c2d1e-0000-4000-8000-00000000aa01")
    w.user("the quokka exporter drops the last CSV row").split_tool("read_file", {"path": "export.py"}, "rows[:-1]")
    w.assistant("The slice rows[:-1] drops it; iterate over rows.").title("Quokka exporter last row")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("quokka")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "tabnine", w.session_id, 4, "Quokka exporter last row", "/home/dev/quokka")
    assert hit["resumeCommand"] == f"cd /home/dev/quokka && tabnine --resume {w.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.user("does the wombat exporter slice too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("wombat")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 5
    assert len(inproc_daemon.search("quokka", limit=10)["hits"]) == 1
