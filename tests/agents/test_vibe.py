"""Mistral Vibe sessions (scanner.parsers.vibe): session folders read whole, injected context, rewind forks,
sub-agents, discovery, robustness."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from aivault.errors import UnitChanged
from aivault.home import Home
from aivault.scanner.parsers import vibe
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import vibe as vb
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "mistral-vibe"
REAL = CORPUS / "irrlicht" / "2-11_auto-classified-permission" / "transcript.jsonl"
SAMPLES = REPO / "samples" / "vibe" / ".vibe" / "logs" / "session"
OLD_NS = 1_600_000_000 * 1_000_000_000
START = epoch_ms(BASE_TIME)


def units(root: Path) -> dict[str, Unit]:
    """Every unit discovery finds under ``root``, read, by path relative to it."""
    problems: list[RootProblem] = []
    found = list(vibe.SPEC.discover(Root("vibe", str(root)), problems, {}, True))
    assert problems == []
    return {os.path.relpath(f.path, root): vibe.read_unit(f) for f in found}


def read(folder: Path) -> Unit:
    [found] = vibe.SPEC.discover(Root("vibe", str(folder), True), [], {}, True)
    return vibe.read_unit(found)


sane = well_formed


# -- the copied corpus -------------------------------------------------------------------------------------
def test_corpus_real_messages_file(tmp_path: Path) -> None:
    """The real Vibe 2.19 messages.jsonl (Irrlicht keeps no meta.json beside it): prompt, reasoning, a read_file
    call whose string arguments are decoded, its result, a reasoning + text reply. Without a meta the session is
    named by its folder, timed by the file, and has no resume command."""
    folder = tmp_path / "session_20260707_174328_a404f127"
    folder.mkdir()
    shutil.copy(REAL, folder / "messages.jsonl")
    unit = read(folder)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "thinking"), ("assistant", "text")]
    texts = [m.text for m in unit.messages]
    assert texts[0] == "Read the file README.md using the read_file tool, then reply 'done'."
    assert texts[2] == 'read_file {"file_path":"/Users/merlin/IdeaProjects/Irrlicht/README.md"}'
    assert texts[3].startswith("file_path: /Users/merlin/IdeaProjects/Irrlicht/README.md\ncontent:")
    assert texts[5] == "done" and texts[4].startswith("The user asked me to read the README.md file")
    s = unit.session
    mtime = (folder / "messages.jsonl").stat().st_mtime_ns // 1_000_000
    assert (s.session_id, s.title, s.cwd, s.resume_command) == (
        folder.name, "Read the file README.md using the read_file tool, then reply 'done'.", None, None)
    assert s.started_at == s.updated_at == mtime and all(m.ts == mtime for m in unit.messages)
    assert unit.skips == {}


def test_corpus_agentsview_session_with_meta() -> None:
    """agentsview's session folder: meta.json gives id, folder, branch, times and title; object-valued tool
    arguments are accepted; every message inherits the session's start (no message carries a time)."""
    unit = read(CORPUS / "agentsview" / "session_with_tools")
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "Read the README file"),
        ("assistant", "text", "I'll read the README file for you."),
        ("assistant", "tool_call", 'read_file {"path":"README.md"}'),
        ("tool", "tool_result", "# My Project\n\nThis is a sample project."),
        ("assistant", "text", "The README.md file contains:\n\n# My Project\n\nThis is a sample project."),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.branch, s.parent_session_id) == (
        "def456ghi-0000-0000-0000-000000000000", "Read the README file", "/home/user/projects/myapp",
        "feature/tool-support", None)
    assert (s.started_at, s.updated_at) == (1781348400000, 1781348460000)
    assert {m.ts for m in unit.messages} == {1781348400000}
    assert s.resume_command == "cd /home/user/projects/myapp && vibe --resume def456ghi-0000-0000-0000-000000000000"


# -- the builder: injected context, titles, compaction, forks, sub-agents ------------------------------------------
def test_injected_context_is_not_a_prompt_nor_the_title(tmp_path: Path) -> None:
    """An injected:true user message is skipped and counted; Vibe's auto title cut from it is not used (the first
    typed prompt is); a compaction summary (injected, context_boundary compaction) is kept as system text."""
    w = vb.VibeWriter(tmp_path, cwd="/home/dev/etl")
    w.add(vb.user("Directory context: /home/dev/etl. Files: load.py", injected=True))
    w.turn("dates are parsed month-first\nsecond line", vb.assistant("Use dayfirst.", reasoning="Ambiguous dates."))
    w.add(vb.user("Summary: switched to dayfirst parsing.", injected=True, context_boundary="compaction")).save()
    unit = read(w.path)
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "dates are parsed month-first\nsecond line"), ("assistant", "thinking", "Ambiguous dates."),
        ("assistant", "text", "Use dayfirst."), ("system", "text", "Summary: switched to dayfirst parsing.")]
    assert unit.skips == {"injected-context": 1}
    assert json.loads((w.path / "meta.json").read_text())["title"].startswith("Directory context")
    assert unit.session.title == "dates are parsed month-first"
    w.rename("Day-first dates")
    assert read(w.path).session.title == "Day-first dates"


def test_vibe_auto_title_is_kept_when_it_is_the_prompt(tmp_path: Path) -> None:
    """An auto title that is the first real prompt cut to 50 characters is Vibe's own: kept as it shows it."""
    w = vb.VibeWriter(tmp_path).turn("x" * 60, vb.assistant("ok"))
    assert read(w.path).session.title == "x" * 50 + "…"


def test_rewind_fork_leaves_the_copied_prefix_to_its_parent(tmp_path: Path) -> None:
    """/rewind forks: the new session names its parent and repeats the parent's messages up to the rewind point;
    only what follows is indexed there (the copy counted replayed_parent), the parent keeps everything."""
    parent = vb.VibeWriter(tmp_path, session_id="aaaaaaaa-0000-4000-8000-000000000001")
    parent.turn("try approach A", vb.assistant("approach A fails"))
    parent.turn("and then B?", vb.assistant("B too"))
    child = parent.fork(2)  # back to before "and then B?"
    child.turn("try approach C", vb.assistant("approach C works"))
    got = units(tmp_path)
    assert [m.text for m in got[parent.path.name].messages] == ["try approach A", "approach A fails", "and then B?",
                                                               "B too"]
    forked = got[child.path.name]
    assert [m.text for m in forked.messages] == ["try approach C", "approach C works"]
    assert forked.skips == {"replayed_parent": 2}
    assert forked.session.parent_session_id == parent.session_id and forked.session.title == "try approach A"
    assert forked.session.resume_command is not None and child.session_id in forked.session.resume_command


def test_fork_whose_parent_is_gone_is_indexed_whole(tmp_path: Path) -> None:
    """Without the parent's folder nothing can be told apart as copied: the fork is indexed whole, still linked."""
    parent = vb.VibeWriter(tmp_path).turn("first", vb.assistant("one"))
    child = parent.fork(2)
    child.turn("second", vb.assistant("two"))
    shutil.rmtree(parent.path)
    [unit] = units(tmp_path).values()
    assert [m.text for m in unit.messages] == ["first", "one", "second", "two"]
    assert unit.session.parent_session_id == parent.session_id and unit.skips == {}


def test_sub_agent_is_its_own_linked_session(tmp_path: Path) -> None:
    """A task-tool run under <session>/agents/<child>/ is its own session with its parent, and no resume command."""
    w = vb.VibeWriter(tmp_path).turn("map the repo", vb.assistant(tool_calls=[vb.tool_call("t1", "task", {})]))
    sub = w.subagent("explore-1").turn("list the modules", vb.assistant("etl, api"))
    got = units(tmp_path)
    child = got[os.path.relpath(sub.path, tmp_path)]
    assert [m.text for m in child.messages] == ["list the modules", "etl, api"]
    assert (child.session.parent_session_id, child.session.resume_command) == (w.session_id, None)
    assert child.skips == {}, "a sub-agent's messages are its own: nothing compared with the parent"


def test_unknown_roles_bad_lines_and_a_system_prompt_are_counted(tmp_path: Path) -> None:
    """A line that is not JSON, an unknown role and a system prompt line are counted; the rest is read."""
    w = vb.VibeWriter(tmp_path).turn("hello", vb.assistant("hi"))
    with (w.path / "messages.jsonl").open("a") as fh:
        fh.write('{"role": "narrator", "content": "meanwhile"}\nnot json\n{"role": "system", "content": "You are"}\n')
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["hello", "hi"]
    assert unit.skips == {"unknown_record:narrator": 1, "malformed-record": 1, "system-prompt": 1}


def test_a_session_being_written_waits(tmp_path: Path) -> None:
    """A cut-off last message of a fresh file, or a meta.json that does not parse yet, leaves the session for the
    next pass (UnitChanged); once settled the cut-off line is counted and the broken meta ignored."""
    w = vb.VibeWriter(tmp_path).turn("hello", vb.assistant("hi"))
    messages = w.path / "messages.jsonl"
    with messages.open("a") as fh:
        fh.write('{"role": "assistant", "content": "hal')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(messages, ns=(OLD_NS, OLD_NS))
    assert read(w.path).skips == {"truncated-record": 1}
    (w.path / "meta.json").write_text('{"session_id": ')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path / "meta.json", ns=(OLD_NS, OLD_NS))
    unit = read(w.path)
    assert unit.skips == {"truncated-record": 1, "malformed-meta": 1} and unit.session.session_id == w.path.name


def test_legacy_single_document_session(tmp_path: Path) -> None:
    """A pre-2.0 session_*.json ({metadata, messages}) is read; the folder Vibe migrates it into continues it."""
    doc = {"metadata": {"session_id": "0b0b0b0b-0000-4000-8000-000000000001", "start_time": BASE_TIME.isoformat(),
                        "environment": {"working_directory": "/home/dev/old"}, "title": "old chat"},
           "messages": [vb.user("an old prompt"), vb.assistant("an old reply"), "junk"]}
    path = tmp_path / "session_20260301_100000_0b0b0b0b.json"
    path.write_text(json.dumps(doc))
    unit = units(tmp_path)[path.name]
    assert [m.text for m in unit.messages] == ["an old prompt", "an old reply"]
    assert (unit.session.session_id, unit.session.title, unit.session.cwd, unit.skips) == (
        "0b0b0b0b-0000-4000-8000-000000000001", "old chat", "/home/dev/old", {"malformed-record": 1})
    folder = tmp_path / path.stem
    assert vibe.SPEC.predecessor(str(folder)) == str(path)
    folder.mkdir()  # mid-migration: the folder exists, the document is about to go
    assert path.name not in units(tmp_path)


# -- discovery and roots ------------------------------------------------------------------------------------
def test_default_roots_follow_vibe_home_and_the_configured_save_dir(tmp_path: Path) -> None:
    """~/.vibe/logs/session on Linux and macOS homes; VIBE_HOME moves it; [session_logging] save_dir in the
    config adds the folder it names."""
    home = tmp_path / "home"
    assert [r.path for r in vibe.default_roots({}, home)] == [str(home / ".vibe" / "logs" / "session")]
    mac = tmp_path / "Users" / "dev"
    assert [r.path for r in vibe.default_roots({}, mac)] == [str(mac / ".vibe" / "logs" / "session")]
    vh = tmp_path / "vh"
    vh.mkdir()
    (vh / "config.toml").write_text('[session_logging]\nsave_dir = "~/vibe-logs"\nenabled = true\n')
    roots = vibe.default_roots({"VIBE_HOME": str(vh)}, home)
    assert [(r.agent, r.path) for r in roots] == [("vibe", str(vh / "logs" / "session")),
                                                  ("vibe", str(home / "vibe-logs"))]
    (vh / "config.toml").write_text("not toml [")
    assert len(vibe.default_roots({"VIBE_HOME": str(vh)}, home)) == 1


def test_discovery_signature_follows_both_files(tmp_path: Path) -> None:
    """A session is one whole unit; its signature changes when messages.jsonl grows and when meta.json alone is
    rewritten (a /rename), so either is read again; the prompt history file is not a session."""
    w = vb.VibeWriter(tmp_path).turn("hello", vb.assistant("hi"))
    (tmp_path / "vibehistory").write_text("hello\n")
    [before] = vibe.SPEC.discover(Root("vibe", str(tmp_path)), [], {}, True)
    assert before.mode == "whole" and before.path == str(w.path)
    assert read(w.path).signature == before.mtime_ns
    w.rename("greeting")
    [renamed] = vibe.SPEC.discover(Root("vibe", str(tmp_path)), [], {}, True)
    assert renamed.mtime_ns != before.mtime_ns
    assert vibe.SPEC.shaped("messages.jsonl") and not vibe.SPEC.shaped("meta.json")


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/vibe (VIBE_HOME=samples/vibe/.vibe): the meter readings session, its manual title, the injected
    directory context left out."""
    [(name, unit)] = units(SAMPLES).items()
    sane(unit)
    s = unit.session
    assert name == "session_20260612_083015_7c1e2a9b"
    assert (s.session_id, s.title, s.cwd, s.branch) == ("7c1e2a9b-40d3-4f6e-b8a5-2d9c61e0f314",
                                                        "June meter readings: day/month swapped", "/home/dev/meter-etl",
                                                        "main")
    assert s.resume_command == "cd /home/dev/meter-etl && vibe --resume 7c1e2a9b-40d3-4f6e-b8a5-2d9c61e0f314"
    assert len(unit.messages) == 11 and unit.skips == {"injected-context": 1}
    assert "dayfirst" in unit.messages[4].text


# -- end to end -----------------------------------------------------------------------------------------------
def test_daemon_indexes_sessions_and_forks_once(home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner: a session under ~/.vibe/logs/session is found and searchable with its
    metadata; a second pass reads nothing; a new turn is read by a recent pass, once; a rewind fork is its own
    session and the prefix it copied is found only in the parent."""
    [root] = vibe.default_roots({}, tmp_path / "user")
    save_dir = Path(root.path)
    w = vb.VibeWriter(save_dir, cwd="/home/dev/pelican", branch="main",
                      session_id="9d9d9d9d-0000-4000-8000-0000000000f1")
    w.turn("the pelican exporter writes empty parquet files", vb.assistant("Row groups are never flushed."))
    with InprocDaemon(home, {"vibe": save_dir}) as daemon:
        assert daemon.reconcile()["messages"] == 2
        [hit] = daemon.search("pelican")["hits"]
        assert (hit["agent"], hit["sessionId"], hit["title"], hit["cwd"], hit["branch"], hit["messageCount"]) == (
            "vibe", w.session_id, "the pelican exporter writes empty parquet files", "/home/dev/pelican", "main", 2)
        assert hit["resumeCommand"] == f"cd /home/dev/pelican && vibe --resume {w.session_id}"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)
        time.sleep(0.01)
        w.turn("does the heron exporter flush", vb.assistant("It calls close()."))
        changed = daemon.reconcile(full=False)
        assert (changed["files_changed"], changed["messages"]) == (1, 4)
        assert daemon.reconcile(full=False)["messages"] == 0
        fork = w.fork(2)
        fork.turn("try the cormorant writer instead", vb.assistant("cormorant flushes per batch"))
        forked = daemon.reconcile()
        assert (forked["files_changed"], forked["messages"]) == (1, 2)
        [hit] = daemon.search("cormorant")["hits"]
        assert hit["sessionId"] == fork.session_id and hit["messageCount"] == 2
        [hit] = daemon.search("pelican", limit=10)["hits"]
        assert hit["sessionId"] == w.session_id
