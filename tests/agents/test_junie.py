"""Junie CLI sessions (scanner.junie): the index and events, block updates, prompt times, discovery, daemon."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from aivault.errors import UnitChanged
from aivault.scanner.parsers import junie
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import junie as b
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import timed_shape, whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "junie" / "ctx" / "sessions"
FIXTURE_ID = "session-260607-100000-acme"
SAMPLES = REPO / "samples" / "junie" / ".junie"
OLD_NS = 1_600_000_000 * 1_000_000_000


def read(path: Path) -> Unit:
    return whole_unit("junie", path)


shape = timed_shape


# -- the copied corpus ---------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The two Junie corpus files are the ones tested below."""
    assert sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()) == [
        "index.jsonl", f"{FIXTURE_ID}/events.jsonl"]


def test_corpus_session_from_index_and_events() -> None:
    """The prompt (timed by the next event), the terminal block as call and output, the file change as call and
    new content, the result as the reply; usage metadata is bookkeeping; title and folder from the index."""
    unit = read(CORPUS / FIXTURE_ID / "events.jsonl")
    assert shape(unit) == [
        ("user", "text", "JUNIE_ORACLE_USER_TEXT violet cedar compass"),
        ("assistant", "tool_call", 'terminal {"command":"./scripts/run-junie-smoke.sh"}'),
        ("tool", "tool_result", "JUNIE_TERMINAL_OUTPUT saffron harbor"),
        ("assistant", "tool_call", 'file_changes {"files":["src/junie_theme.rs"]}'),
        ("tool", "tool_result", 'src/junie_theme.rs\npub const THEME: &str = "dark";\n'
                                "// JUNIE_FILE_CHANGE_TEXT cobalt lantern\n"),
        ("assistant", "text", "JUNIE_RESULT_TEXT copper lantern atlas"),
    ]
    assert unit.messages[0].ts == 1783339320000  # the LlmResponseMetadataEvent right after it
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.parent_session_id) == (
        "junie", FIXTURE_ID, "Junie fixture task", "/workspace/junie-fixture", None)
    assert (s.started_at, s.updated_at) == (1783339200000, 1783339440000)
    assert s.resume_command == f"cd /workspace/junie-fixture && junie --resume {FIXTURE_ID}"
    assert unit.skips == {"bookkeeping": 1}


def test_corpus_index_gives_side_titles_once() -> None:
    """side_titles yields the index's task names, then nothing until index.jsonl changes."""
    sigs: dict[str, object] = {}
    root = Root("junie", str(CORPUS))
    assert list(junie.side_titles(root, sigs)) == [(FIXTURE_ID, "Junie fixture task")]
    assert list(junie.side_titles(root, sigs)) == []


# -- the format from the builder -----------------------------------------------------------------------------
def test_block_updates_keep_the_last_state_at_the_first_place(tmp_path: Path) -> None:
    """A terminal block's RUNNING then COMPLETED states are one call and one output (the last, with its exit
    code); a later prompt after the last timed event borrows the time before it."""
    w = b.JunieWriter(tmp_path / ".junie", "/home/dev/gradle-app", task_name=None)
    w.ask("the build fails").terminal("./gradlew build", "BUILD FAILED", exit_code=1).result("Fixed the plugin.")
    w.ask("thanks")
    unit = read(w.path)
    assert shape(unit) == [
        ("user", "text", "the build fails"),
        ("assistant", "tool_call", 'terminal {"command":"./gradlew build"}'),
        ("tool", "tool_result", "[exit 1] BUILD FAILED"),
        ("assistant", "text", "Fixed the plugin."),
        ("user", "text", "thanks"),
    ]
    assert unit.messages[-1].ts == unit.messages[-2].ts
    assert unit.session.title == "the build fails" and unit.skips == {"duplicate_update": 1, "bookkeeping": 1}


def test_a_renamed_task_is_the_title_and_a_side_title(tmp_path: Path) -> None:
    """A later index line for the session wins: its task name is the title and is sent again as a side title."""
    w = b.JunieWriter(tmp_path / ".junie", task_name="first name")
    w.ask("hello junie").result("hi")
    sigs: dict[str, object] = {}
    root = Root("junie", str(tmp_path / ".junie" / "sessions"))
    assert list(junie.side_titles(root, sigs)) == [(w.session_id, "first name")]
    time.sleep(0.01)
    w.rename("second name")
    assert list(junie.side_titles(root, sigs)) == [(w.session_id, "second name")]
    assert read(w.path).session.title == "second name"


def test_session_without_index_entry_uses_the_folder_and_events(tmp_path: Path) -> None:
    """Without an index line: the folder name is the id, CurrentDirectoryUpdatedEvent the folder, the first prompt
    the title; prompts before any timed event take the next event's time."""
    path = tmp_path / "sessions" / "session-260101-000000-zz" / "events.jsonl"
    w = b.JunieWriter(tmp_path / "elsewhere", session_id="session-260101-000000-zz")
    path.parent.mkdir(parents=True)
    w.path = path
    w.ask("where am I").write(b.agent_event(w.at(), "CurrentDirectoryUpdatedEvent", currentDirectory="/srv/app"))
    unit = read(path)
    s = unit.session
    assert (s.session_id, s.cwd, s.title) == ("session-260101-000000-zz", "/srv/app", "where am I")
    assert unit.messages[0].ts == w.t


def test_unknown_events_and_bad_lines_are_counted(tmp_path: Path) -> None:
    """Unknown top-level and agent event kinds, a non-object line and an event without agentEvent are counted."""
    w = b.JunieWriter(tmp_path / ".junie")
    w.ask("hi").write({"kind": "HologramEvent"}, b.agent_event(w.at(), "FutureBlockUpdatedEvent", stepId="f1"),
                      {"kind": "SessionA2uxEvent", "timestampMs": w.at(), "event": {}})
    with w.path.open("ab") as f:
        f.write(b"[1, 2]\n")
    unit = read(w.path)
    assert shape(unit) == [("user", "text", "hi")]
    assert unit.skips == {"unknown_record:HologramEvent": 1, "unknown_event:FutureBlockUpdatedEvent": 1,
                          "malformed-record": 2}


def test_a_record_being_written_waits_then_is_counted(tmp_path: Path) -> None:
    """A cut-off last line waits while the file is fresh and is counted once it settled."""
    w = b.JunieWriter(tmp_path / ".junie")
    w.ask("hello")
    with w.path.open("ab") as f:
        f.write(b'{"kind":"SessionA2uxEv')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["hello"] and unit.skips == {"truncated-record": 1}


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_follow_junie_home_and_sessions_dir(tmp_path: Path) -> None:
    """~/.junie/sessions on Linux and macOS alike; JUNIE_HOME replaces ~/.junie; JUNIE_SESSIONS_DIR names the folder."""
    assert [r.path for r in junie.default_roots({}, tmp_path)] == [str(tmp_path / ".junie" / "sessions")]
    assert [r.path for r in junie.default_roots({"JUNIE_HOME": str(tmp_path / "j")}, tmp_path)] == [
        str(tmp_path / "j" / "sessions")]
    env = {"JUNIE_HOME": str(tmp_path / "j"), "JUNIE_SESSIONS_DIR": str(tmp_path / "s")}
    assert [r.path for r in junie.default_roots(env, tmp_path)] == [str(tmp_path / "s")]


def test_discovery_finds_session_event_files_only() -> None:
    """session-*/events.jsonl are units; index.jsonl is not; a recent pass lists known session folders again."""
    problems: list[RootProblem] = []
    dirs: dict[str, int] = {}
    root = Root("junie", str(CORPUS))
    found = [os.path.relpath(f.path, CORPUS) for f in junie.SPEC.discover(root, problems, dirs, True)]
    assert problems == [] and found == [f"{FIXTURE_ID}/events.jsonl"]
    assert [os.path.relpath(f.path, CORPUS) for f in junie.SPEC.discover(root, problems, dirs, False)] == found
    assert junie.events_mode("/x/session-1", "events.jsonl") == "whole"
    assert junie.events_mode("/x/other", "events.jsonl") is None


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/junie (JUNIE_HOME=samples/junie/.junie): 11 messages, the renamed task title, the failing then
    passing build, the file change, two prompts."""
    [f] = junie.SPEC.discover(Root("junie", str(SAMPLES / "sessions")), [], {}, True)
    unit = junie.read_unit(f)
    shape(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "tool_call"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("user", "text"), ("assistant", "text")]
    s = unit.session
    assert s.title == "Fix kotlinx.serialization unresolved reference in :telemetry"
    assert s.cwd == "/home/dev/fleet-tracker"
    assert "Unresolved reference 'serialization'" in unit.messages[3].text
    assert 'kotlin("plugin.serialization")' in unit.messages[5].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".junie" / "sessions"
    sessions.mkdir(parents=True)
    return {"junie": sessions}


def test_daemon_indexes_a_junie_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                        roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata (the task
    name from the index); a second pass reads nothing; appended events are seen by a recent pass and read once; a
    task renamed in the index renames the session without reading it again."""
    w = b.JunieWriter(roots["junie"].parent, "/home/dev/pelican", "session-260301-100000-pe1c",
                      task_name="Pelican migration checksum")
    w.ask("the pelican migration checksum mismatches").terminal("./gradlew flywayValidate", "checksum mismatch")
    w.result("Repair the migration history.")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("pelican")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "junie", w.session_id, 4, "Pelican migration checksum", "/home/dev/pelican")
    assert hit["resumeCommand"] == f"cd /home/dev/pelican && junie --resume {w.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.ask("and the albatross schema").result("Same fix.")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 6
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("albatross")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 6
    w.rename("Flyway checksum repair")  # only the index changes: the session is renamed, not read again
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("albatross")["hits"]
    assert hit["title"] == "Flyway checksum repair"


def test_copied_fixture_through_the_daemon(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """The corpus session copied under a root is indexed with its index title."""
    shutil.copytree(CORPUS, roots["junie"], dirs_exist_ok=True)
    assert inproc_daemon.reconcile()["messages"] == 6
    [hit] = inproc_daemon.search("saffron")["hits"]
    assert hit["sessionId"] == FIXTURE_ID and hit["title"] == "Junie fixture task"
