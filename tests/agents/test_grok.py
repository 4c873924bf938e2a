"""Grok Build sessions (scanner.grok, docs/formats.md §21): the update log replayed with its rewinds, the chat
history fallback, summary.json metadata, discovery, robustness, and a real daemon end to end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.parsers import grok
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders import grok as gb
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "grok-build"
AV_SESSION = CORPUS / "agentsview" / "current" / "019f6000-0000-7000-8000-000000000001"
SAMPLES = REPO / "samples" / "grok" / ".grok"
OLD_NS = 1_600_000_000 * 1_000_000_000
T0 = epoch_ms(BASE_TIME)


def read(folder: Path) -> Unit:
    st = folder.stat()
    return grok.read_unit(Found(str(folder), "grok", st.st_dev, st.st_ino, 0, 0, "whole"))


def triples(unit: Unit) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in unit.messages]


sane = well_formed


# -- the copied corpus ------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three Grok corpus files are the ones tested below."""
    assert sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()) == [
        "agentsview/current/019f6000-0000-7000-8000-000000000001/chat_history.jsonl",
        "agentsview/current/019f6000-0000-7000-8000-000000000001/summary.json",
        "deja-vu/registry-grok/updates.jsonl"]


def test_corpus_chat_history_folder() -> None:
    """A folder with summary.json and chat_history.jsonl only (the upstream-generated golden): the system row and
    the project_instructions row are not messages, the interjection is the user's; reasoning, a backend web
    search, a call with its JSON-string arguments and its result; every message at the session's start; title,
    folder, branch, parent and times from the summary."""
    unit = read(AV_SESSION)
    sane(unit)
    assert triples(unit) == [
        ("user", "text", "Review parser compatibility"),
        ("assistant", "thinking", "Inspect both formats"),
        ("assistant", "tool_call", 'web_search {"type":"search","query":"Grok Build persistence","sources":[]}'),
        ("assistant", "text", "Reading the implementation."),
        ("assistant", "tool_call", 'read_file {"target_file":"src/session/persistence.rs"}'),
        ("tool", "tool_result", "source body"),
        ("user", "text", "also keep interjections"),
        ("assistant", "text", "Compatibility checked."),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.branch, s.parent_session_id) == (
        "019f6000-0000-7000-8000-000000000001", "Audit Grok compatibility", "/workspace/grok-worktrees/parser-audit",
        "feature/parser-audit", "019f5000-0000-7000-8000-000000000000")
    created = 1784368800000  # 2026-07-18T10:00:00Z; updated_at is 10:30, last_active_at 10:29
    assert (s.started_at, s.updated_at) == (created, created + 30 * 60_000)
    assert {m.ts for m in unit.messages} == {created}
    assert s.resume_command == ("cd /workspace/grok-worktrees/parser-audit && "
                                "grok --resume 019f6000-0000-7000-8000-000000000001")
    assert unit.skips == {"injected-context": 1}


def test_corpus_update_chunks_without_method_or_summary() -> None:
    """deja-vu's updates.jsonl (no ``method``, the agent's ``_meta`` on ``params``, no summary.json): the two agent
    chunks of one prompt are one reply; the id is the folder's name and the group name is not a path."""
    unit = read(CORPUS / "deja-vu" / "registry-grok")
    assert triples(unit) == [("user", "text", "inspect the grok stream"),
                             ("assistant", "text", "the stream is readable")]
    s = unit.session
    assert (s.session_id, s.title, s.cwd) == ("registry-grok", "inspect the grok stream", None)
    assert (s.started_at, s.updated_at) == (1784278801000, 1784278803000)
    assert s.resume_command == "grok --resume registry-grok" and unit.skips == {}


# -- the update log ------------------------------------------------------------------------------------------
def test_chunks_calls_and_metadata(tmp_path: Path) -> None:
    """Streamed chunks join into one thinking and one reply per prompt, a call's updates give one result, and the
    summary's generated title, folder and branch name the session."""
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/api", session_id="019f-a", title="Slow login")
    w.user("why is login slow?").think("Check the ", "hash cost.")
    w.tool("grep bcrypt", "search", {"pattern": "bcrypt"}, "src/auth.rs:40: cost 14")
    w.say("The bcrypt ", "cost is 14.")
    unit = read(w.dir)
    sane(unit)
    assert triples(unit) == [
        ("user", "text", "why is login slow?"), ("assistant", "thinking", "Check the hash cost."),
        ("assistant", "tool_call", 'grep bcrypt {"pattern":"bcrypt"}'),
        ("tool", "tool_result", "src/auth.rs:40: cost 14"),
        ("assistant", "text", "The bcrypt cost is 14.")]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.branch) == ("019f-a", "Slow login", "/home/dev/api", "main")
    assert s.resume_command == "cd /home/dev/api && grok --resume 019f-a"
    assert unit.messages[0].ts == T0 + 2000 and unit.messages[-1].ts == T0 + 14000  # the first chunk's time


def test_rewind_drops_the_abandoned_prompts(tmp_path: Path) -> None:
    """/rewind to prompt 1 drops prompt 1 and everything after it (its call and result too); the prompts written
    after the marker are the timeline; a rewind past the last prompt changes nothing."""
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/r", session_id="019f-r")
    w.user("try approach A").say("A needs a cache.")
    w.user("add the cache").tool("edit cache.rs", "edit", {"path": "cache.rs"}, "edited").say("Cache added.")
    w.rewind(1).user("use approach B instead").say("B works without a cache.").rewind(5)
    unit = read(w.dir)
    assert [m.text for m in unit.messages] == ["try approach A", "A needs a cache.", "use approach B instead",
                                               "B works without a cache."]
    assert unit.skips == {"rewound": 4}
    w.rewind(0).user("start over")
    assert [m.text for m in read(w.dir).messages] == ["start over"]


def test_title_falls_back_to_summary_then_first_prompt_and_parent_is_linked(tmp_path: Path) -> None:
    """No generated title: session_summary, else the first prompt's first line; parent_session_id links a fork."""
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/f", session_id="019f-f", parent="019f-parent")
    w.user("first line\nsecond line").say("ok")
    unit = read(w.dir)
    assert (unit.session.title, unit.session.parent_session_id) == ("first line", "019f-parent")
    doc = json.loads((w.dir / "summary.json").read_text())
    doc["session_summary"] = "Summarised by Grok"
    (w.dir / "summary.json").write_text(json.dumps(doc))
    assert read(w.dir).session.title == "Summarised by Grok"


def test_host_turns_bare_lines_late_input_and_failures(tmp_path: Path) -> None:
    """A hostTurn chunk is skipped; a bare ACP line (no envelope) still counts; agentTimestampMs refines the time;
    a call announced without input gets it from its update; a failed call without output says so; a repeated
    tool_call is one call; unknown update kinds are counted by name."""
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/h", session_id="019f-h")
    w.write(gb.text_chunk("user_message_chunk", "host says hi", promptIndex=0, hostTurn=True))
    with w.path.open("ab") as fh:
        fh.write(orjson.dumps({"sessionId": "019f-h", "update": gb.text_chunk("user_message_chunk", "bare prompt")})
                 + b"\n")
    w.write(gb.text_chunk("agent_message_chunk", "precise", promptId="p", agentTimestampMs=T0 + 123))
    w.write(gb.tool_call("c1", "Run tests", "execute", None))
    w.write(gb.tool_call("c1", "Run tests", "execute", None))
    w.write(gb.tool_update("c1", "in_progress", rawInput={"command": "cargo test"}))
    w.write(gb.tool_update("c1", "failed"))
    w.write({"sessionUpdate": "hologram_update"})
    w.write({"sessionUpdate": "plan", "entries": []})
    unit = read(w.dir)
    assert triples(unit) == [
        ("user", "text", "bare prompt"), ("assistant", "text", "precise"),
        ("assistant", "tool_call", 'Run tests {"command":"cargo test"}'), ("tool", "tool_result", "[failed]")]
    assert unit.messages[0].ts is None and unit.messages[1].ts == T0 + 123
    assert unit.skips == {"host-turn": 1, "duplicate_tool_call": 1, "unknown_update:hologram_update": 1}


# -- robustness ------------------------------------------------------------------------------------------------
def _session(tmp_path: Path, tail: bytes) -> Path:
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/x", session_id="019f-x")
    w.user("hello grok")
    with w.path.open("ab") as fh:
        fh.write(tail)
    return w.dir


def test_truncated_last_line_waits_then_is_counted(tmp_path: Path) -> None:
    """A cut-off last line is UnitChanged while the log is fresh, counted once it settled."""
    folder = _session(tmp_path, b'{"timestamp":1,"params":{"update":{"sessionUpd')
    with pytest.raises(UnitChanged):
        read(folder)
    os.utime(folder / "updates.jsonl", ns=(OLD_NS, OLD_NS))
    unit = read(folder)
    assert [m.text for m in unit.messages] == ["hello grok"] and unit.skips == {"truncated-record": 1}


def test_bad_lines_and_a_broken_summary_are_counted(tmp_path: Path) -> None:
    """Lines that are not JSON objects, envelopes without an update and an unreadable summary are counted; the
    folder is still read; a folder with only a summary is no unit, one that vanished is UnitChanged."""
    folder = _session(tmp_path, b'not json\n[1]\n{"timestamp":5,"params":{}}\n{"params":{"update":{"sessionUpdate":'
                                b'"rewind_marker","target_prompt_index":"x"}}}\n')
    (folder / "summary.json").write_text("{broken")
    unit = read(folder)
    assert [m.text for m in unit.messages] == ["hello grok"]
    assert unit.skips == {"malformed-record": 4, "unreadable-summary": 1}
    (folder / "updates.jsonl").unlink()
    assert grok.session_stamps(str(folder)) is None
    with pytest.raises(UnitUnreadable):
        read(folder)
    (folder / "summary.json").unlink()
    folder.rmdir()
    with pytest.raises(UnitChanged):
        grok.read_unit(Found(str(folder), "grok", 0, 0, 0, 0, "whole"))


def test_empty_log_is_an_empty_session(tmp_path: Path) -> None:
    """A just-created session folder (empty log) gives no messages and an empty-file count."""
    w = gb.GrokWriter(tmp_path / ".grok", cwd="/home/dev/e", session_id="019f-e", title="Fresh")
    unit = read(w.dir)
    assert (unit.messages, unit.session.title, unit.skips) == ([], "Fresh", {"empty-file": 1})


# -- discovery and roots ----------------------------------------------------------------------------------------
def test_discovery_and_signature(tmp_path: Path) -> None:
    """Every <group>/<id>/ folder holding a log is a whole unit whose signature is the reader's; a summary change
    changes it; folders without a log, hidden folders and loose files are not units; the cwd comes from the
    group's .cwd file when the summary has none."""
    home = tmp_path / ".grok"
    a = gb.GrokWriter(home, cwd="/home/dev/a", session_id="s-a").user("a")
    b = gb.GrokWriter(home, cwd="/home/dev/b", session_id="s-b").user("b")
    (home / "sessions" / "%2Fhome%2Fdev%2Fa" / "s-empty").mkdir()
    (home / "sessions" / "%2Fhome%2Fdev%2Fa" / "s-empty" / "summary.json").write_text("{}")
    (home / "sessions" / ".hidden" / "s-h").mkdir(parents=True)
    (home / "sessions" / ".hidden" / "s-h" / "updates.jsonl").write_text("")
    (home / "sessions" / "notes.txt").write_text("")
    root = Root("grok", str(home / "sessions"))
    problems: list[RootProblem] = []
    found = {Path(f.path).name: f for f in grok.SPEC.discover(root, problems, {}, True)}
    assert problems == [] and set(found) == {"s-a", "s-b"}
    assert all(f.mode == "whole" for f in found.values())
    assert found["s-a"].mtime_ns == read(a.dir).signature
    a.retitle("Renamed")
    assert next(f for f in grok.SPEC.discover(root, [], {}, True) if f.path.endswith("s-a")).mtime_ns != \
        found["s-a"].mtime_ns
    doc = json.loads((b.dir / "summary.json").read_text())
    del doc["info"]
    (b.dir / "summary.json").write_text(json.dumps(doc))
    (b.dir.parent / ".cwd").write_text("/home/dev/a-very-long-path\n")
    assert read(b.dir).session.cwd == "/home/dev/a-very-long-path"


def test_default_roots_follow_an_absolute_grok_home(tmp_path: Path) -> None:
    """~/.grok/sessions by default (Linux and macOS alike); GROK_HOME replaces ~/.grok only when absolute."""
    assert [r.path for r in grok.default_roots({}, tmp_path)] == [str(tmp_path / ".grok" / "sessions")]
    assert [r.path for r in grok.default_roots({"GROK_HOME": str(tmp_path / "g")}, tmp_path)] == [
        str(tmp_path / "g" / "sessions")]
    assert [r.path for r in grok.default_roots({"GROK_HOME": "relative/g"}, tmp_path)] == [
        str(tmp_path / ".grok" / "sessions")]


# -- the shipped sample ------------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/grok: the generated title, cwd from the summary, the rewound "reset the registry" answer gone."""
    [f] = grok.SPEC.discover(Root("grok", str(SAMPLES / "sessions")), [], {}, True)
    unit = grok.read_unit(f)
    sane(unit)
    s = unit.session
    assert (s.title, s.cwd, s.branch) == ("Duplicate Prometheus collector registration in tests",
                                          "/home/dev/metrics-exporter", "fix/registry-panic")
    assert [m.kind for m in unit.messages] == ["text", "thinking", "tool_call", "tool_result", "text", "text",
                                               "tool_call", "tool_result", "tool_call", "tool_result", "text"]
    assert not any("Unregister" in m.text or "fragile" in m.text for m in unit.messages)
    assert unit.skips == {"rewound": 2}


# -- end to end ---------------------------------------------------------------------------------------------------
def test_daemon_indexes_a_grok_session_and_follows_appends_rewinds_and_titles(home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner: a session under a default-shaped root is found and searchable with the
    right metadata; a second pass reads nothing; an append is read once; a rewind removes the abandoned prompt
    from the index; a new generated title is picked up."""
    [root] = grok.default_roots({"GROK_HOME": str(tmp_path / "user" / ".grok")}, Path("/nowhere"))
    w = gb.GrokWriter(tmp_path / "user" / ".grok", cwd="/home/dev/pelican",
                      session_id="019f7000-0000-7000-8000-0000000000aa")
    w.user("the pelican exporter panics on duplicate registration")
    w.tool("grep Register", "search", {"pattern": "Register"}, "exporter.go:48")
    w.say("Pass a registry into NewExporter.")
    with InprocDaemon(home, {"grok": Path(root.path)}) as daemon:
        assert daemon.reconcile()["messages"] == 4
        [hit] = daemon.search("pelican")["hits"]
        assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["cwd"]) == (
            "grok", w.session_id, 4, "/home/dev/pelican")
        assert hit["title"] == "the pelican exporter panics on duplicate registration"
        assert hit["resumeCommand"] == f"cd /home/dev/pelican && grok --resume {w.session_id}"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)

        time.sleep(0.01)
        w.user("now try the albatross collector").say("Albatross needs the same change.")
        changed = daemon.reconcile(full=False)
        assert (changed["files_changed"], changed["messages"]) == (1, 6)
        assert daemon.reconcile(full=False)["files_changed"] == 0
        assert daemon.search("albatross")["hits"][0]["messageCount"] == 6

        w.rewind(1).user("forget that, document the flamingo flag").say("Documented.")
        w.retitle("Pelican registry panic")
        daemon.reconcile(full=False)
        assert daemon.search("albatross")["hits"] == []
        [hit] = daemon.search("flamingo")["hits"]
        assert (hit["messageCount"], hit["title"]) == (6, "Pelican registry panic")
        assert len(daemon.search("pelican", limit=10)["hits"]) == 1
