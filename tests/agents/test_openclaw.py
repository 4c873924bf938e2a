"""OpenClaw sessions (scanner.openclaw over scanner.pitree): JSONL transcripts, the SQLite store, keys, discovery."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from aivault.scanner.model import KINDS, ROLES
from aivault.scanner.parsers import openclaw
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import openclaw as cb
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "openclaw"
DEJA_AGENTS = CORPUS / "deja-vu" / "agents"
SAMPLES = REPO / "samples" / "openclaw" / ".openclaw"


def read(path: Path) -> Unit:
    return whole_unit("openclaw", path)


def units(agents: Path, problems: list[RootProblem] | None = None) -> dict[str, Unit]:
    """Every session discovery offers under ``agents``, read, by session id."""
    found = openclaw.SPEC.discover(Root("openclaw", str(agents)), problems if problems is not None else [], {}, True)
    out: dict[str, Unit] = {}
    for f in found:
        unit = openclaw.read_unit(f)
        assert unit.signature == f.mtime_ns, "a unit read must carry the signature discovery offered it with"
        out[unit.session.session_id] = unit
    return out


def rows(unit: Unit) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in unit.messages]


# -- the copied corpus ------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three OpenClaw corpus files are the ones tested below."""
    assert sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()) == [
        "agent-sessions/large.jsonl", "deja-vu/agents/main/sessions/a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d.jsonl",
        "deja-vu/agents/main/sessions/sessions.json"]


def test_corpus_transcript_with_runtime_context_and_string_results() -> None:
    """agent-sessions' file: its parentIds name the header and tool-call ids, so it is read in file order; the
    hidden runtime context is dropped, string tool results are results, custom entries bookkeeping."""
    unit = read(CORPUS / "agent-sessions" / "large.jsonl")
    assert rows(unit) == [
        ("user", "text", "Open /tmp/large and run status"),
        ("assistant", "text", "Gathering files and git status."),
        ("assistant", "tool_call", 'run_terminal {"command":"git status --short","cwd":"/tmp/large"}'),
        ("tool", "tool_result", "M file1\nM file2"),
        ("assistant", "text", "Done"),
        ("assistant", "text", "[media attached: screenshot-1]"),
        ("assistant", "tool_call", 'edit_file {"path":"/tmp/large/notes.md","content":"note"}'),
        ("tool", "tool_result", "file written"),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.resume_command) == (
        "openclaw", "openclaw-stage0-large", "Open /tmp/large and run status", "/tmp/large", None)
    assert unit.skips == {"broken-tree": 1, "bookkeeping": 3, "injected-context": 1}


def test_corpus_agent_folder_with_its_session_index() -> None:
    """deja-vu's agents/main: the transcript is found through discovery and resumes by the key sessions.json
    maps to it (the key, not the uuid, is what openclaw chat --session takes)."""
    [unit] = units(DEJA_AGENTS).values()
    assert rows(unit) == [("user", "text", "openclaw registry conformance question"),
                          ("assistant", "thinking", "reasoning"),
                          ("assistant", "text", "openclaw registry conformance answer")]
    s = unit.session
    assert (s.session_id, s.cwd, s.resume_command) == (
        "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "/workspace/registry-demo", "openclaw chat --session agent:main:main")


# -- JSONL transcripts ------------------------------------------------------------------------------------
def test_the_sessions_folder_holds_more_than_sessions(tmp_path: Path) -> None:
    """Live transcripts and /reset archives are sessions (an archive without a resume command); the index,
    checkpoint copies, trajectories, deleted and backup archives are not."""
    agents = tmp_path / "agents"
    live = cb.transcript(agents, "11111111-0000-4000-8000-000000000001").user("live chat")
    old = cb.transcript(agents, "22222222-0000-4000-8000-000000000002").user("chat before the reset")
    cb.write_index(agents, {"agent:main:main": "11111111-0000-4000-8000-000000000001"})
    folder = cb.sessions_dir(agents)
    os.rename(old.file, folder / f"{old.session_id}.jsonl.reset.2026-03-01T10-05-00.123Z")
    for name in (f"{live.session_id}.checkpoint.0f1e2d3c-4b5a-4968-8776-655443322110.jsonl",
                 f"{live.session_id}.trajectory.jsonl", "33333333-0000-4000-8000-000000000003.jsonl.deleted."
                 "2026-03-01T10-06-00.000Z", f"{live.session_id}.jsonl.bak.2026-03-01T10-07-00Z"):
        shutil.copy(live.file, folder / name)
    got = units(agents)
    assert set(got) == {live.session_id, old.session_id}
    assert got[live.session_id].session.resume_command == "openclaw chat --session agent:main:main"
    assert got[old.session_id].session.resume_command is None
    assert openclaw.transcript_kind("x.jsonl.reset.not-a-time") is None


def test_gateway_time_stamps_stay_in_the_text_but_not_the_title(tmp_path: Path) -> None:
    """A prompt from a chat channel starts with the gateway's local time: the message keeps it, the title
    starts after it."""
    w = cb.transcript(tmp_path / "agents", "44444444-0000-4000-8000-000000000004")
    cb.runtime_context(w).user("[Wed 2026-02-18 11:21 GMT+1] remind me to renew the TLS cert")
    unit = read(w.file)
    assert unit.messages[0].text == "[Wed 2026-02-18 11:21 GMT+1] remind me to renew the TLS cert"
    assert unit.session.title == "remind me to renew the TLS cert" and unit.skips == {"injected-context": 1}


# -- the SQLite store -----------------------------------------------------------------------------------
def test_database_sessions_read_their_events_through_the_tree(tmp_path: Path) -> None:
    """A database session is its events, read as pi's tree up to the index state's leaf; the window's display
    name titles it and its key resumes it; the leaf moved back to an earlier entry drops the branch after it."""
    agents = tmp_path / "agents"
    db = cb.OpenClawDb(agents)
    db.window("55555555-0000-4000-8000-000000000005", "agent:main:telegram:42", display_name="Cert renewal")
    w = db.writer("55555555-0000-4000-8000-000000000005")
    w.user("when does the shop certificate expire?").assistant("On 2026-04-02.")
    keep = w.last
    assert keep is not None
    w.user("renew it now").assistant("Renewed with certbot.")
    unit = units(agents)["55555555-0000-4000-8000-000000000005"]
    assert [m.text for m in unit.messages][-1] == "Renewed with certbot." and len(unit.messages) == 4
    s = unit.session
    assert (s.title, s.cwd, s.resume_command) == (
        "Cert renewal", "/home/dev/bot", "openclaw chat --session agent:main:telegram:42")
    db.set_leaf(w.session_id, keep)
    unit = units(agents)[w.session_id]
    assert [m.text for m in unit.messages] == ["when does the shop certificate expire?", "On 2026-04-02."]
    assert unit.skips == {"dead-branch": 2}
    db.set_leaf(w.session_id, keep, needs_rebuild=True)  # a stale projection: the last event is the leaf
    assert len(units(agents)[w.session_id].messages) == 4
    db.close()


def test_lineage_keys_and_the_transcripts_the_database_holds(tmp_path: Path) -> None:
    """parent_session_key names the parent through its newest window, previous_session_id the session a reset
    continued from; a session a newer window continues has no resume command; a JSONL transcript of a
    session whose events the database holds is not read again, one of a metadata-only window gets its
    display name."""
    agents = tmp_path / "agents"
    db = cb.OpenClawDb(agents)
    db.window("a0000000-0000-4000-8000-000000000001", "agent:main:main")
    db.window("a0000000-0000-4000-8000-000000000002", "agent:main:main",
              previous="a0000000-0000-4000-8000-000000000001")
    db.window("a0000000-0000-4000-8000-000000000003", "agent:main:sub:1", parent_key="agent:main:main")
    db.window("a0000000-0000-4000-8000-000000000004", "agent:main:cron", display_name="Nightly digest")
    for n in (1, 2, 3):
        db.writer(f"a0000000-0000-4000-8000-00000000000{n}").user(f"message of session {n}")
    cb.transcript(agents, "a0000000-0000-4000-8000-000000000002").user("stale JSONL copy of session 2")
    cb.transcript(agents, "a0000000-0000-4000-8000-000000000004").user("digest of the night")
    got = {sid[-1]: u.session for sid, u in units(agents).items()}
    assert set(got) == {"1", "2", "3", "4"}
    assert (got["1"].resume_command, got["1"].parent_session_id) == (None, None)
    assert (got["2"].resume_command, got["2"].parent_session_id) == (
        "openclaw chat --session agent:main:main", "a0000000-0000-4000-8000-000000000001")
    assert got["3"].parent_session_id == "a0000000-0000-4000-8000-000000000002"
    assert (got["4"].title, got["4"].resume_command) == ("Nightly digest", "openclaw chat --session agent:main:cron")
    assert got["2"].title == "message of session 2"
    db.close()


def test_a_database_that_is_not_the_store_is_a_root_problem(tmp_path: Path) -> None:
    """A database without transcript_events is reported (nothing under it is taken for gone) and the agent's
    JSONL transcripts are still read; an event that is not JSON is counted."""
    agents = tmp_path / "agents"
    (agents / "main" / "agent").mkdir(parents=True)
    con = sqlite3.connect(agents / "main" / "agent" / cb.DB_NAME)
    con.execute("CREATE TABLE other (x)")
    con.commit()
    con.close()
    cb.transcript(agents, "b0000000-0000-4000-8000-000000000001").user("still read")
    problems: list[RootProblem] = []
    assert list(units(agents, problems)) == ["b0000000-0000-4000-8000-000000000001"]
    assert len(problems) == 1 and "transcript_events" in problems[0].reason
    other = tmp_path / "other"
    db = cb.OpenClawDb(other)
    db.writer("c0000000-0000-4000-8000-000000000001").user("fine")
    db.con.execute("INSERT INTO transcript_events VALUES ('c0000000-0000-4000-8000-000000000001', 99, 'not json', 0)")
    db.con.commit()
    unit = units(other)["c0000000-0000-4000-8000-000000000001"]
    assert [m.text for m in unit.messages] == ["fine"] and unit.skips == {"malformed-record": 1}
    db.close()


# -- roots ---------------------------------------------------------------------------------------------
def test_default_roots(tmp_path: Path) -> None:
    """~/.openclaw/agents and the earlier names' folders on every OS; OPENCLAW_STATE_DIR moves the first."""
    home = tmp_path / "home"
    assert [r.path for r in openclaw.default_roots({}, home)] == [
        str(home / ".openclaw" / "agents"), str(home / ".clawdbot" / "agents"), str(home / ".moltbot" / "agents")]
    moved = openclaw.default_roots({"OPENCLAW_STATE_DIR": "~/state"}, home)
    assert moved[0].path == str(home / "state" / "agents") and len(moved) == 3


def test_sample_session() -> None:
    """samples/openclaw (OPENCLAW_STATE_DIR=samples/openclaw/.openclaw): the 502 session, its key, no context."""
    root = openclaw.default_roots({"OPENCLAW_STATE_DIR": str(SAMPLES)}, Path("/nonexistent"))[0]
    [unit] = units(Path(root.path)).values()
    assert all(m.role in ROLES and m.kind in KINDS and m.text.strip() for m in unit.messages)
    s = unit.session
    assert s.message_count == len(unit.messages) == 11 and s.resume_command == "openclaw chat --session agent:main:main"
    assert s.title == "the shop throws 502 Bad Gateway every few minutes since last night, can you che…"
    assert unit.skips == {"bookkeeping": 2, "injected-context": 1}


# -- end to end ----------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    agents = tmp_path / "user" / ".openclaw" / "agents"
    agents.mkdir(parents=True)
    return {"openclaw": agents}


def test_daemon_indexes_both_stores_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                     roots: dict[str, Path]) -> None:
    """Through a real daemon: a JSONL session and a database session are found under a default-shaped root and
    searchable with their metadata; a second pass reads nothing; a new event is read once by a recent pass;
    a new key in sessions.json re-reads its transcript once (its resume command follows)."""
    agents = roots["openclaw"]
    w = cb.transcript(agents, "d0000000-0000-4000-8000-000000000001", cwd="/home/dev/.openclaw/workspace")
    cb.runtime_context(w).user("the osprey backup job failed twice").assistant("Its disk is 98% full.")
    db = cb.OpenClawDb(agents, agent="ops")
    db.window("d0000000-0000-4000-8000-000000000002", "agent:ops:main", display_name="Kestrel deploy")
    dw = db.writer("d0000000-0000-4000-8000-000000000002")
    dw.user("kestrel deploy is stuck at 80%")
    assert inproc_daemon.reconcile()["messages"] == 3
    [hit] = inproc_daemon.search("osprey")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["cwd"]) == (
        "openclaw", w.session_id, 2, "/home/dev/.openclaw/workspace")
    assert not hit.get("resumeCommand")
    [hit] = inproc_daemon.search("kestrel")["hits"]
    assert (hit["title"], hit["resumeCommand"]) == ("Kestrel deploy", "openclaw chat --session agent:ops:main")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    dw.assistant("The readiness probe of kestrel-web never passes.")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 2
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    time.sleep(0.01)
    cb.write_index(agents, {"agent:main:main": w.session_id})
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 2
    [hit] = inproc_daemon.search("osprey")["hits"]
    assert hit["resumeCommand"] == "openclaw chat --session agent:main:main"
    db.close()


def test_daemon_keeps_a_session_its_reset_archived(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """/reset renames the transcript to <id>.jsonl.reset.<time> and points the key at a new session: after the
    next full pass the old conversation is still one searchable session, now without a resume command."""
    agents = roots["openclaw"]
    old = cb.transcript(agents, "e0000000-0000-4000-8000-000000000001").user("the plover cron never fires")
    cb.write_index(agents, {"agent:main:main": old.session_id})
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("plover")["hits"]
    assert hit["resumeCommand"] == "openclaw chat --session agent:main:main"
    os.rename(old.file, old.file.with_name(old.file.name + ".reset.2026-03-01T11-00-00.000Z"))
    new = cb.transcript(agents, "e0000000-0000-4000-8000-000000000002").user("a fresh start")
    cb.write_index(agents, {"agent:main:main": new.session_id})
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("plover")["hits"]
    assert (hit["sessionId"], hit["messageCount"]) == (old.session_id, 1) and not hit.get("resumeCommand")
    [hit] = inproc_daemon.search("fresh")["hits"]
    assert hit["resumeCommand"] == "openclaw chat --session agent:main:main"
