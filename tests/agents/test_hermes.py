"""Hermes Agent (scanner/parsers/hermes.py): state.db sessions read live and read-only, profiles, in-place
rewinds and compaction, and the legacy JSON/JSONL session files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

import tests.builders.hermes as hb
from aivault.errors import UnitChanged
from aivault.scanner.parsers import hermes
from aivault.scanner.sources import Found, RootProblem, Unit, file_signature
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import discover, texts, units_by_id, well_formed

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "hermes" / "agent-sessions"
SAMPLE = REPO / "samples" / "hermes" / ".hermes"  # HERMES_HOME=samples/hermes/.hermes
OLD_NS = 1_600_000_000 * 1_000_000_000


def _discover(path: Path, *, explicit: bool = False, full: bool = True,
              dirs: dict[str, int] | None = None) -> tuple[list[Found], list[RootProblem]]:
    return discover("hermes", path, explicit=explicit, full=full, dirs=dirs)


def _units(path: Path) -> dict[str, Unit]:
    return units_by_id("hermes", path)


def _file(path: Path) -> Unit:
    st = path.stat()
    return hermes.read_unit(Found(str(path), "hermes", st.st_dev, st.st_ino, st.st_size,
                                  file_signature(str(path)) or 0, "whole", (str(path),)))


_texts = texts


sane = well_formed


# -- the copied corpus (legacy session_<id>.json snapshots) ------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The two Hermes corpus files are the ones tested below (no state.db sample exists: the builder makes one)."""
    assert sorted(p.name for p in CORPUS.iterdir()) == ["schema_drift.json", "small.json"]


def test_corpus_small_snapshot() -> None:
    """small.json: a prompt and a reply, both at the session's start (the file has no per-message time)."""
    unit = _file(CORPUS / "small.json")
    sane(unit)
    t0 = epoch_ms(BASE_TIME.replace(year=2026, month=4, day=29, hour=20))
    assert [(m.role, m.kind, m.text, m.ts) for m in unit.messages] == [
        ("user", "text", "Summarize this directory.", t0),
        ("assistant", "text", "This directory contains a small Hermes fixture.", t0)]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.started_at, s.updated_at) == (
        "20260429_hermes_small", "Summarize this directory.", "/tmp/hermes-small", t0, t0 + 4000)
    assert s.resume_command == "cd /tmp/hermes-small && hermes --resume 20260429_hermes_small"
    assert unit.skips == {}


def test_corpus_schema_drift_snapshot() -> None:
    """schema_drift.json: extra keys are ignored, the OpenAI-style call is `memory <args>`, the tool row is its
    result, and the trailing session_meta element is bookkeeping; times without an offset are UTC."""
    unit = _file(CORPUS / "schema_drift.json")
    sane(unit)
    assert _texts(unit.messages) == [
        ("user", "text", "Exercise additive Hermes metadata."),
        ("assistant", "text", "Calling a tool."),
        ("assistant", "tool_call", 'memory {"query":"session format"}'),
        ("tool", "tool_result", "No results.")]
    assert unit.skips == {"bookkeeping:session_meta": 1}
    t0 = epoch_ms(BASE_TIME.replace(year=2026, month=4, day=29, hour=20, minute=10))
    assert (unit.session.session_id, unit.session.started_at, unit.session.updated_at) == (
        "20260429_hermes_schema_drift", t0, t0 + 8000)


# -- state.db ----------------------------------------------------------------------------------------------
def test_database_session_rows_become_messages(tmp_path: Path) -> None:
    """Reasoning, text and OpenAI tool calls of an assistant row, tool rows as results; title, cwd, branch, times
    and the resume command from the session row."""
    db = hb.HermesDb(tmp_path / "state.db")
    s = db.session("/home/dev/etl", title="Fix flaky retry")
    s.user("the retry test is flaky").assistant(
        None, think="Look at the backoff.", tools=[("terminal", {"command": "pytest -k retry"}, "1 failed")])
    s.assistant("The jitter uses the wall clock; seeding it fixes the test.")
    [unit] = _units(tmp_path).values()
    sane(unit)
    assert _texts(unit.messages) == [
        ("user", "text", "the retry test is flaky"),
        ("assistant", "thinking", "Look at the backoff."),
        ("assistant", "tool_call", 'terminal {"command":"pytest -k retry"}'),
        ("tool", "tool_result", "1 failed"),
        ("assistant", "text", "The jitter uses the wall clock; seeding it fixes the test.")]
    info = unit.session
    t0 = epoch_ms(BASE_TIME)
    assert (info.session_id, info.title, info.cwd, info.branch, info.started_at, info.updated_at) == (
        s.session_id, "Fix flaky retry", "/home/dev/etl", "main", t0, t0 + 16_000)
    assert [m.ts for m in unit.messages] == [t0 + 4000, t0 + 8000, t0 + 8000, t0 + 12_000, t0 + 16_000]
    assert info.resume_command == f"cd /home/dev/etl && hermes --resume {s.session_id}"


def test_rewound_rows_are_off_the_branch_and_compacted_rows_stay(tmp_path: Path) -> None:
    """/undo's active=0 rows are dropped (counted rewound); in-place compaction keeps the archived rows and the
    summary as system text; a clone sharing a display_identity with an archived row is indexed once."""
    db = hb.HermesDb(tmp_path / "state.db")
    s = db.session(title=None)
    s.user("first question").assistant("first answer").user("a question I take back").assistant("taken back")
    s.undo(2).compact("Summary: the user asked one question.")
    s.row("assistant", "cloned row", display_identity=b"id-1", compacted=1, active=0)
    s.row("assistant", "cloned row", display_identity=b"id-1")
    s.user("second question")
    [unit] = _units(tmp_path).values()
    assert _texts(unit.messages) == [
        ("user", "text", "first question"), ("assistant", "text", "first answer"),
        ("system", "text", "Summary: the user asked one question."), ("assistant", "text", "cloned row"),
        ("user", "text", "second question")]
    assert unit.skips == {"rewound": 2, "duplicate": 1}
    assert unit.session.title == "first question"


def test_hidden_harness_and_structured_rows(tmp_path: Path) -> None:
    """display_kind 'hidden' rows and persisted curator prompts (with the reply after them) are injected context;
    harness event rows are system text; JSON content parts are read (images counted); reasoning_details is
    thinking; session_meta rows are bookkeeping; an unknown role is counted."""
    db = hb.HermesDb(tmp_path / "state.db")
    s = db.session()
    s.user("[heartbeat] build still running", display_kind="hidden")
    s.user([{"type": "text", "text": "why is this chart empty?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])
    s.row("assistant", "The query filters on a future date.",
          reasoning_details=orjson.dumps([{"type": "reasoning.text", "text": "Check the WHERE clause."}]).decode())
    s.user("Background delegation finished: 3 files changed", display_kind="async_delegation_complete")
    s.user("Review the conversation above and consider saving to memory anything durable.")
    s.assistant("Saved a memory about chart filters.")
    s.row("session_meta", None)
    s.row("critic", "hmm")
    [unit] = _units(tmp_path).values()
    assert _texts(unit.messages) == [
        ("user", "text", "why is this chart empty?"),
        ("assistant", "thinking", "Check the WHERE clause."),
        ("assistant", "text", "The query filters on a future date."),
        ("system", "text", "Background delegation finished: 3 files changed")]
    assert unit.skips == {"injected-context": 3, "attachment:image_url": 1, "bookkeeping:session_meta": 1,
                          "unknown_role:critic": 1}
    assert unit.session.title == "why is this chart empty?"


def test_an_old_store_without_state_columns(tmp_path: Path) -> None:
    """A pre-0.17 messages table (no active, reasoning or display columns) reads; no cwd means a bare resume."""
    db = hb.HermesDb(tmp_path / "state.db", schema=hb.OLD_SCHEMA)
    db.con.execute("INSERT INTO sessions (id, source, started_at) VALUES ('20250301_090000_aa11bb22', 'cli', "
                   "1740819600.5)")
    db.con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES "
                   "('20250301_090000_aa11bb22', 'user', 'hello from 0.16', 1740819601.25)")
    [unit] = _units(tmp_path).values()
    assert _texts(unit.messages) == [("user", "text", "hello from 0.16")]
    assert (unit.session.started_at, unit.session.updated_at, unit.session.cwd) == (1740819600500, 1740819601250, None)
    assert unit.session.resume_command == "hermes --resume 20250301_090000_aa11bb22"
    db.con.execute("ALTER TABLE messages RENAME COLUMN content TO body")
    found, problems = _discover(tmp_path)
    assert found == [] and "table 'messages' has no column 'content'" in problems[0].reason


def test_profiles_subagents_and_legacy_files_are_each_indexed_once(tmp_path: Path) -> None:
    """profiles/<p>/state.db is read with `-p <p>` in its resume command; an id two databases hold is taken from
    the first; a sub-agent links its parent and has no resume; legacy files of ids a database holds are left
    out, and a JSONL wins over the JSON of its id."""
    main = hb.HermesDb(tmp_path / "state.db")
    parent = main.session("/home/dev/api", title="Parent")
    parent.user("delegate the lint fixes")
    child = main.session("/home/dev/api", suffix="0000aaaa", source="subagent", parent=parent.session_id,
                         start=BASE_TIME.replace(minute=5))
    child.user("fix the lint errors in api/")
    work = hb.HermesDb(tmp_path / "profiles" / "work" / "state.db")
    work.session("/home/dev/crm", title="Work thing", suffix="77777777").user("work prompt")
    work.session("/home/dev/api", title="Copy", suffix="9c1d2e3f").user("the same id again")
    legacy = tmp_path / "sessions"
    legacy.mkdir()
    old = "20250101_120000_0badf00d"
    msgs = [{"role": "user", "content": "legacy prompt", "timestamp": "2025-01-01T12:00:05"}]
    (legacy / f"{parent.session_id}.jsonl").write_bytes(hb.legacy_jsonl(BASE_TIME, msgs))
    t_old = BASE_TIME.replace(year=2025, month=1, day=1, hour=12)
    (legacy / f"{old}.jsonl").write_bytes(hb.legacy_jsonl(t_old, msgs))
    (legacy / f"session_{old}.json").write_bytes(hb.legacy_json(old, BASE_TIME, msgs))
    (legacy / "notes.txt").write_text("not a session")
    units = _units(tmp_path)
    assert sorted(units) == sorted([parent.session_id, child.session_id, "20260301_100000_77777777", old])
    assert units[parent.session_id].messages[0].text == "delegate the lint fixes"
    sub = units[child.session_id].session
    assert (sub.parent_session_id, sub.resume_command, sub.title) == (
        parent.session_id, None, "fix the lint errors in api/")
    assert units["20260301_100000_77777777"].session.resume_command == (
        "cd /home/dev/crm && hermes -p work --resume 20260301_100000_77777777")
    legacy_unit = units[old]
    assert (legacy_unit.session.started_at, legacy_unit.session.updated_at) == (epoch_ms(t_old), epoch_ms(t_old) + 5000)
    assert [m.ts for m in legacy_unit.messages] == [epoch_ms(t_old) + 5000]


def test_signature_moves_with_in_place_edits_only(tmp_path: Path) -> None:
    """An unchanged session keeps its signature across listings; an /undo (no new row), a display kind stamped
    on the newest row and a rename each move it, and the read signature equals the listed one."""
    db = hb.HermesDb(tmp_path / "state.db")
    s = db.session()
    s.user("one").assistant("two")
    [first], _ = _discover(tmp_path)
    assert hermes.read_unit(first).signature == first.mtime_ns
    sigs = [first.mtime_ns]
    for edit in (lambda: None, lambda: s.undo(1),
                 lambda: db.con.execute("UPDATE messages SET display_kind = 'steer' WHERE id = 1"),
                 lambda: s.rename("Renamed")):
        edit()
        [again], _ = _discover(tmp_path)
        assert hermes.read_unit(again).signature == again.mtime_ns
        sigs.append(again.mtime_ns)
    assert sigs[0] == sigs[1] and len(set(sigs)) == 4


def test_a_live_writer_never_blocks_the_read_and_a_locked_store_waits(tmp_path: Path) -> None:
    """With the WAL, a writer's open transaction is invisible and does not block; a rollback-journal store held
    by an exclusive lock is UnitChanged (retried next pass), never read half or as immutable."""
    db = hb.HermesDb(tmp_path / "state.db")
    s = db.session()
    s.user("committed")
    [found], _ = _discover(tmp_path)
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', 'pending', 1.7e9)",
                   (s.session_id,))
    assert [m.text for m in hermes.read_unit(found).messages] == ["committed"]
    writer.execute("ROLLBACK")
    writer.close()
    db.close()
    old = tmp_path / "old"
    old.mkdir()
    con = sqlite3.connect(old / "state.db", isolation_level=None)
    con.executescript(hb.OLD_SCHEMA)
    con.execute("INSERT INTO sessions (id, source, started_at) VALUES ('x1', 'cli', 1.7e9)")
    [locked], _ = _discover(old)
    con.execute("BEGIN EXCLUSIVE")
    with pytest.raises(UnitChanged):
        hermes.read_unit(locked)
    con.execute("ROLLBACK")
    assert hermes.read_unit(locked).session.session_id == "x1"


def test_a_store_locked_before_its_first_listing_lets_no_legacy_copy_stand_in(tmp_path: Path) -> None:
    """While a state.db that was never listed is locked, its ids are unknown: the pass reports the root and offers
    neither its sessions nor the legacy files (which may be copies of them); once free, the database wins."""
    con = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    con.executescript(hb.OLD_SCHEMA)
    con.execute("INSERT INTO sessions (id, source, started_at) VALUES ('20250101_120000_0badf00d', 'cli', 1.7e9)")
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "20250101_120000_0badf00d.jsonl").write_bytes(
        hb.legacy_jsonl(BASE_TIME, [{"role": "user", "content": "legacy copy"}]))
    con.execute("BEGIN EXCLUSIVE")
    found, problems = _discover(tmp_path)
    assert found == [] and "locked" in problems[0].reason
    con.execute("ROLLBACK")
    found, problems = _discover(tmp_path)
    assert problems == [] and [f.locator[1] for f in found] == ["20250101_120000_0badf00d"]


def test_legacy_files_being_written_malformed_and_empty(tmp_path: Path) -> None:
    """A JSONL whose last line is cut off waits while fresh and is counted once settled; a line that is not an
    object is counted; a JSON document that does not parse waits while fresh."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / "20250101_120000_0badf00d.jsonl"
    msgs = [{"role": "user", "content": "hello", "timestamp": 1735732800}]
    path.write_bytes(hb.legacy_jsonl(BASE_TIME, msgs) + b'"not a message"\n[1]\n{"role":"assistant","content":"cut')
    with pytest.raises(UnitChanged):
        _file(path)
    os.utime(path, ns=(OLD_NS, OLD_NS))
    unit = _file(path)
    assert _texts(unit.messages) == [("user", "text", "hello")]
    assert unit.skips == {"bookkeeping:session_meta": 1, "malformed-record": 2, "truncated-record": 1}
    doc = folder / "session_20250101_120000_0badf00d.json"
    doc.write_bytes(b'{"session_id": "x", "messages": [')
    with pytest.raises(UnitChanged):
        _file(doc)


def test_default_roots_follow_hermes_home(tmp_path: Path) -> None:
    """~/.hermes (Linux and macOS alike), or $HERMES_HOME."""
    assert [r.path for r in hermes.default_roots({}, tmp_path)] == [str(tmp_path / ".hermes")]
    assert [r.path for r in hermes.default_roots({"HERMES_HOME": str(tmp_path / "h")}, tmp_path)] == [
        str(tmp_path / "h")]


def test_discovery_under_the_default_root_of_a_fake_home(tmp_path: Path) -> None:
    """With HOME at a fake folder the default root finds ~/.hermes/state.db and a profile; HERMES_HOME moves it."""
    home = tmp_path / "home"
    hb.HermesDb(home / ".hermes" / "state.db").session().user("default home")
    hb.HermesDb(home / ".hermes" / "profiles" / "work" / "state.db").session(suffix="11112222").user("work profile")
    hb.HermesDb(tmp_path / "elsewhere" / "state.db").session().user("moved home")

    def texts(env: dict[str, str]) -> list[str]:
        problems: list[RootProblem] = []
        found = [f for r in hermes.default_roots(env, home) for f in hermes.discover(r, problems, {}, True)]
        assert problems == []
        return sorted(hermes.read_unit(f).messages[0].text for f in found)

    assert texts({}) == ["default home", "work profile"]
    assert texts({"HERMES_HOME": str(tmp_path / "elsewhere")}) == ["moved home"]


def test_discovery_shapes_and_a_named_legacy_folder(tmp_path: Path) -> None:
    """doctor's shape test knows state.db and the legacy names; a folder of legacy files named as a root is read."""
    assert [hermes.SPEC.shaped(n) for n in ("state.db", "session_x.json", "20250101_120000_ab12cd34.jsonl",
                                            "state.db-wal", "config.yaml", "notes.jsonl")] == [
        True, True, True, False, False, False]
    (tmp_path / "session_20250101_120000_0badf00d.json").write_bytes(
        hb.legacy_json("20250101_120000_0badf00d", BASE_TIME, [{"role": "user", "content": "hi"}]))
    assert _discover(tmp_path)[0] == []
    [found], _ = _discover(tmp_path, explicit=True)
    assert hermes.read_unit(found).session.session_id == "20250101_120000_0badf00d"


def test_sample_session() -> None:
    """samples/hermes: one state.db session (a rewound attempt left out), titled, with cwd, branch and resume."""
    [unit] = _units(SAMPLE).values()
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
        ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd, s.branch) == ("Celery beat fires every task twice", "/home/dev/ledger-worker",
                                          "fix/double-beat")
    assert unit.skips == {"rewound": 2}
    assert s.resume_command == f"cd /home/dev/ledger-worker && hermes --resume {s.session_id}"


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "user" / ".hermes"
    home.mkdir(parents=True)
    return {"hermes": home}


def test_daemon_indexes_hermes_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                               roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a state.db session and a legacy file under a default-shaped root are
    searchable with the right metadata; a second pass reads nothing; an appended row and an /undo are each read
    once, the session staying one."""
    db = hb.HermesDb(roots["hermes"] / "state.db")
    s = db.session("/home/dev/puffin", title="Puffin retries")
    s.user("the puffin client retries forever").assistant(
        "It ignores max_retries.", tools=[("terminal", {"command": "rg retries"}, "client.py:8")])
    (roots["hermes"] / "sessions").mkdir()
    shutil.copy(CORPUS / "small.json", roots["hermes"] / "sessions" / "session_20260429_hermes_small.json")
    assert inproc_daemon.reconcile()["messages"] == 6
    [hit] = inproc_daemon.search("puffin")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "hermes", s.session_id, 4, "Puffin retries", "/home/dev/puffin")
    assert hit["resumeCommand"] == f"cd /home/dev/puffin && hermes --resume {s.session_id}"
    [old] = inproc_daemon.search("fixture")["hits"]
    assert (old["sessionId"], old["cwd"]) == ("20260429_hermes_small", "/tmp/hermes-small")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    s.user("and the gannet client too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("gannet")["hits"]
    assert hit["sessionId"] == s.session_id and hit["messageCount"] == 5
    time.sleep(0.01)
    s.undo(1)
    assert inproc_daemon.reconcile(full=False)["messages"] == 4
    assert inproc_daemon.search("gannet")["hits"] == []
    assert len(inproc_daemon.search("puffin", limit=10)["hits"]) == 1
