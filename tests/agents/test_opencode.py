"""OpenCode (scanner/parsers/opencode/): the SQLite database and the legacy JSON tree, read as whole units."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import tests.builders.opencode as ob
from aivault import policy
from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.parsers import opencode
from aivault.scanner.parsers.sqlite_units import snapshot
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.support.common import REPO, cli_env, lexical_only, pid_alive, wait_until
from tests.support.daemons import InprocDaemon, restart_and_stop_cleanly
from tests.support.index import assert_same_index, fingerprint, generation_over_rpc

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "opencode" / "agent-sessions" / "opencode" / "storage_v2"
SAMPLE = REPO / "samples" / "opencode" / ".local" / "share" / "opencode"
T0 = 1_772_500_000_000


def _discover(root: Path, dirs: dict[str, int] | None = None, full: bool = True) -> tuple[list[Found],
                                                                                         list[RootProblem]]:
    problems: list[RootProblem] = []
    found = list(opencode.discover(Root("opencode", str(root)), problems, {} if dirs is None else dirs, full))
    return found, problems


def _read_all(root: Path) -> list[Unit]:
    found, problems = _discover(root)
    assert problems == []
    return [opencode.read_unit(f) for f in found]


def _texts(unit: Unit) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in unit.messages]


def _age(path: Path, seconds: int = 3600) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


# -- the corpus --------------------------------------------------------------------------------------
def test_corpus_legacy_session_is_read_with_counted_messages(tmp_path: Path) -> None:
    """The corpus tree (legacy storage/) gives 8 messages, counted by reading its 16 files."""
    shutil.copytree(CORPUS, tmp_path / "opencode" / "storage")
    [unit] = _read_all(tmp_path / "opencode")
    # m_user_large_1: 1 text. m_assistant_large_1, parts in id order: compaction, file, patch (bookkeeping),
    # reasoning (thinking), step-finish, step-start (bookkeeping), synthetic text (system), bash tool (call +
    # result with exit 1), and its MessageAbortedError (system): 5. m_user_large_2: 1. m_assistant_large_2: 1.
    assert _texts(unit) == [
        ("user", "text", "Step 1"),
        ("assistant", "thinking", "Investigating failing command."),
        ("system", "text", "Command failed with exit code 1."),
        ("assistant", "tool_call", 'bash {"command":"ls /non-existent-directory","cwd":"/tmp/large"}'),
        ("tool", "tool_result", "[exit code 1]\nls: /non-existent-directory: No such file or directory\n"),
        ("system", "text", "[MessageAbortedError] The operation was aborted."),
        ("user", "text", "Step 2"),
        ("assistant", "text", "Ok"),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.started_at, s.updated_at, s.message_count, s.parent_session_id) == (
        "s_stage0_large", "OpenCode Large", "/tmp/large", 1730000100000, 1730000109000, 8, None)
    assert s.resume_command == "cd /tmp/large && opencode --session s_stage0_large"
    assert unit.skips == {"bookkeeping:compaction": 1, "bookkeeping:file": 1, "bookkeeping:patch": 1,
                          "bookkeeping:step-finish": 1, "bookkeeping:step-start": 1}


def test_sample_database() -> None:
    """samples/opencode is a default-shaped data directory whose one session reads as 6 messages."""
    [unit] = _read_all(SAMPLE)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("user", "text")]
    assert unit.session.title == "Pin the tokio runtime in the fjord-sync daemon"
    assert unit.session.cwd == "/home/dev/fjord-sync"
    assert (SAMPLE / "opencode.db").stat().st_size < 100_000


# -- fields and quirks (docs/formats.md §4, §14) ------------------------------------------------------
def test_placeholder_titles_fall_back_to_the_first_prompt_and_children_link_to_parents(tmp_path: Path) -> None:
    """'New session - <ISO>' / 'Child session - <ISO>' are no titles (isDefaultTitle); parent_id links a child."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    parent = db.session(directory="/home/dev/cli")
    parent.user("make the retry loop back off exponentially").assistant("Done.")
    child = db.session(directory="/home/dev/cli", parent_id=parent.session_id)
    child.user("explore how retries are scheduled").assistant("They use a fixed 1 s sleep.")
    assert parent.title.startswith("New session - ") and child.title.startswith("Child session - ")
    units = {u.session.session_id: u.session for u in _read_all(tmp_path)}
    assert units[parent.session_id].title == "make the retry loop back off exponentially"
    assert units[child.session_id].title == "explore how retries are scheduled"
    assert units[child.session_id].parent_session_id == parent.session_id
    assert units[parent.session_id].parent_session_id is None


def test_tool_outcomes_synthetic_text_and_errors(tmp_path: Path) -> None:
    """tool:'invalid' is marked, a non-zero bash exit is in the result, an error state is the result, and
    synthetic text is system context (AV #1255, #1257)."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Tooling")
    s.user("run the linter", synthetic=['Called the Read tool with the following input: {"filePath":"lint.toml"}'])
    s.assistant("Two problems.", tools=[
        ob.tool_part("c1", "bash", {"command": "ruff check"}, "E501 line too long", T0, exit_code=1),
        ob.tool_part("c2", "bash", {"command": "true"}, "", T0, exit_code=0),
        ob.tool_part("c3", "invalid", {"tool": "bsh", "error": "unknown tool"}, "The arguments are invalid", T0),
        ob.tool_part("c4", "edit", {"filePath": "a.py"}, None, T0, status="error", error="file not found"),
        ob.tool_part("c5", "read", {"filePath": "b.py"}, None, T0, status="running")])
    [unit] = _read_all(tmp_path)
    assert _texts(unit) == [
        ("user", "text", "run the linter"),
        ("system", "text", 'Called the Read tool with the following input: {"filePath":"lint.toml"}'),
        ("assistant", "tool_call", 'bash {"command":"ruff check"}'),
        ("tool", "tool_result", "[exit code 1]\nE501 line too long"),
        ("assistant", "tool_call", 'bash {"command":"true"}'),
        ("tool", "tool_result", ""),
        ("assistant", "tool_call", 'invalid {"tool":"bsh","error":"unknown tool"}'),
        ("tool", "tool_result", "[invalid tool call] The arguments are invalid"),
        ("assistant", "tool_call", 'edit {"filePath":"a.py"}'),
        ("tool", "tool_result", "[error] file not found"),
        ("assistant", "tool_call", 'read {"filePath":"b.py"}'),
        ("assistant", "text", "Two problems."),
    ]
    assert unit.skips["tool_unfinished"] == 1 and unit.skips["bookkeeping:step-start"] == 1


def test_session_directory_wins_over_the_global_worktree(tmp_path: Path) -> None:
    """cwd is session.directory, even in the 'global' project whose worktree is '/' (AV #1237)."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db", worktree="/")
    db.session(directory="/home/dev/notes", title="Notes").user("hello").assistant("hi")
    [unit] = _read_all(tmp_path)
    assert unit.session.cwd == "/home/dev/notes"
    assert unit.session.resume_command == f"cd /home/dev/notes && opencode --session {unit.session.session_id}"


def test_channel_databases_are_read_and_a_session_in_two_is_taken_once(tmp_path: Path) -> None:
    """opencode-stable.db and opencode-beta.db are roots' databases too; opencode.db wins a shared id."""
    main = ob.OpenCodeDb(tmp_path / "opencode.db")
    main.session(title="Shared", session_id="ses_shared").user("in main")
    ob.OpenCodeDb(tmp_path / "opencode-beta.db").session(title="Shared", session_id="ses_shared").user("in beta")
    stable = ob.OpenCodeDb(tmp_path / "opencode-stable.db").session(title="Stable only").user("stable")
    (tmp_path / "opencode.db-wal").touch()
    found, _ = _discover(tmp_path)
    assert sorted((os.path.basename(f.locator[0]), f.locator[1]) for f in found) == [
        ("opencode-stable.db", stable.session_id), ("opencode.db", "ses_shared")]
    units = {u.session.session_id: u for u in map(opencode.read_unit, found)}
    assert _texts(units["ses_shared"]) == [("user", "text", "in main")]


def test_legacy_tree_is_deduplicated_against_the_database(tmp_path: Path) -> None:
    """A session the 1.2 migration copied into the database is not read again from storage/ (Maestro #387)."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    db.session(title="Migrated", session_id="ses_migrated").user("in the database")
    user = ob.user_info(T0)
    ob.legacy_session(tmp_path, "ses_migrated", "/home/dev/a", "Migrated", [(user, [ob.text_part("old copy", T0)])])
    ob.legacy_session(tmp_path, "ses_legacyonly", "/home/dev/b", "Only legacy",
                      [(user, [ob.text_part("never migrated", T0)])])
    units = {u.session.session_id: u for u in _read_all(tmp_path)}
    assert set(units) == {"ses_migrated", "ses_legacyonly"}
    assert _texts(units["ses_migrated"]) == [("user", "text", "in the database")]
    assert units["ses_legacyonly"].session.cwd == "/home/dev/b"


def test_child_rows_newer_than_the_session_row_change_the_signature(tmp_path: Path) -> None:
    """A part updated in place (time_updated only) changes the session's signature; nothing else does."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Streaming")
    s.user("stream me").assistant("partial", touch_session=False)
    [before], _ = _discover(tmp_path)
    [again], _ = _discover(tmp_path)
    assert again.mtime_ns == before.mtime_ns
    db.con.execute("UPDATE part SET data = ?, time_updated = time_updated + 60000 WHERE data LIKE '%partial%'",
                   (orjson.dumps(ob.text_part("partial answer, now complete", T0)).decode(),))
    [after], _ = _discover(tmp_path)
    assert after.mtime_ns != before.mtime_ns
    unit = opencode.read_unit(after)
    assert unit.signature == after.mtime_ns and unit.messages[-1].text == "partial answer, now complete"


def test_schema_drift_reads_what_is_there_and_names_what_is_missing(tmp_path: Path) -> None:
    """Parts without session_id are joined through their message; a table without 'data', or no session table
    (opencode 2.x), is a root problem naming it, never an exception."""
    con = sqlite3.connect(tmp_path / "opencode.db")
    con.executescript("""
        CREATE TABLE session (id text PRIMARY KEY, title text, time_created integer, time_updated integer);
        CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer, data text);
        CREATE TABLE part (id text PRIMARY KEY, message_id text, data text);""")
    info = dict(ob.assistant_info(T0, "msg_u", "/home/dev/from-path"))
    con.execute("INSERT INTO session VALUES ('ses_1', 'Old columns', ?, ?)", (T0, T0))
    con.execute("INSERT INTO message VALUES ('msg_a', 'ses_1', ?, ?)", (T0, orjson.dumps(info).decode()))
    con.execute("INSERT INTO part VALUES ('prt_1', 'msg_a', ?)", (orjson.dumps(ob.text_part("joined", T0)).decode(),))
    con.commit()
    [unit] = _read_all(tmp_path)
    assert _texts(unit) == [("assistant", "text", "joined")]
    assert unit.session.cwd == "/home/dev/from-path"  # no directory column: the assistant's path.cwd
    con.execute("ALTER TABLE part RENAME COLUMN data TO body")
    con.commit()
    found, problems = _discover(tmp_path)
    assert found == [] and "table 'part' has no column 'data'" in problems[0].reason
    with pytest.raises(UnitUnreadable, match="'part' has no column 'data'"):
        opencode.read_unit(Found(f"{tmp_path}/opencode.db#ses_1", "opencode", 0, 0, 0, 0, "whole",
                                 (str(tmp_path / "opencode.db"), "ses_1")))
    con.executescript("DROP TABLE part; DROP TABLE message; DROP TABLE session; CREATE TABLE session_v2 (id text);")
    con.close()
    found, problems = _discover(tmp_path)
    assert found == [] and "no table 'session'" in problems[0].reason


def test_bad_rows_unknown_parts_and_bad_bytes_are_counted(tmp_path: Path) -> None:
    """Malformed JSON, unknown part types, orphan parts and non-UTF-8 bytes are counts, not failures."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Messy")
    mid = s.message(ob.user_info(T0), [ob.text_part("good", T0), {"type": "hologram", "beam": 1}])
    con = db.con
    con.execute("INSERT INTO part VALUES ('prt_zz1', ?, ?, ?, ?, ?)", (mid, s.session_id, T0, T0, '{"type": "te'))
    con.execute("INSERT INTO part VALUES ('prt_zz2', ?, ?, ?, ?, CAST(? AS TEXT))",
                (mid, s.session_id, T0, T0, b'{"type":"text","text":"caf\xe9 au lait"}'))
    con.execute("INSERT INTO part VALUES ('prt_zz4', ?, ?, ?, ?, ?)",
                (mid, s.session_id, T0, T0, b'{"type":"text","text":"blob \xff bytes"}'))
    con.execute("INSERT INTO part VALUES ('prt_zz3', 'msg_gone', ?, ?, ?, ?)", (s.session_id, T0, T0, "{}"))
    con.execute("INSERT INTO message VALUES ('msg_zzbad', ?, ?, ?, 'not json')", (s.session_id, T0 + 1, T0 + 1))
    [unit] = _read_all(tmp_path)
    assert _texts(unit) == [("user", "text", "good"), ("user", "text", "caf\ufffd au lait"),
                            ("user", "text", "blob \ufffd bytes")]
    assert unit.skips == {"unknown_part:hologram": 1, "malformed-record": 2, "orphan_part": 1}


def test_empty_and_broken_databases(tmp_path: Path) -> None:
    """A database with no session is no unit; a file that is not SQLite is a root problem; no database at all
    and a missing root are nothing."""
    ob.create_db(tmp_path / "opencode.db").close()
    assert _discover(tmp_path) == ([], [])
    (tmp_path / "opencode-beta.db").write_bytes(b"this is not a database, just bytes\n" * 200)
    found, problems = _discover(tmp_path)
    assert found == [] and len(problems) == 1 and "opencode-beta.db" in problems[0].reason
    assert _discover(tmp_path / "nowhere") == ([], [])


def test_legacy_documents_being_written_wait_and_broken_ones_are_counted(tmp_path: Path) -> None:
    """A cut-off legacy document that just changed is UnitChanged (read next pass); once settled it is
    counted malformed; non-UTF-8 bytes and unknown part types are counted too; an empty session file waits."""
    session = ob.legacy_session(tmp_path, "ses_old", "/home/dev/old", "Old",
                                [(ob.user_info(T0), [ob.text_part("first", T0), {"type": "mystery"}])])
    part_dir = next((tmp_path / "storage" / "part").iterdir())
    cut = part_dir / "prt_zzzz.json"
    cut.write_bytes(b'{"id":"prt_zzzz","type":"text","text":"half')
    (part_dir / "prt_zzzy.json").write_bytes(b'{"id":"prt_zzzy","type":"text","text":"na\xefve"}')
    [found], _ = _discover(tmp_path)
    with pytest.raises(UnitChanged):
        opencode.read_unit(found)
    _age(cut)
    [found], _ = _discover(tmp_path)
    unit = opencode.read_unit(found)
    assert _texts(unit) == [("user", "text", "first"), ("user", "text", "na\ufffdve")]
    assert unit.skips == {"unknown_part:mystery": 1, "malformed-record": 1}
    session.write_bytes(b"")
    with pytest.raises(UnitChanged):
        opencode.read_unit(found)
    _age(session)
    with pytest.raises(UnitUnreadable):
        opencode.read_unit(found)


def test_a_recent_pass_looks_only_at_legacy_sessions_touched_lately(tmp_path: Path) -> None:
    """The legacy tree is stat-ed whole only by a full pass; a recent pass opens sessions whose file or message
    folder changed within the recent window."""
    user = ob.user_info(T0)
    old = ob.legacy_session(tmp_path, "ses_old", "/home/dev/a", "Old", [(user, [ob.text_part("long ago", T0)])])
    ob.legacy_session(tmp_path, "ses_new", "/home/dev/b", "New", [(user, [ob.text_part("just now", T0)])])
    for path in [old, *(tmp_path / "storage" / "message" / "ses_old").rglob("*"),
                 tmp_path / "storage" / "message" / "ses_old"]:
        _age(path, 3 * 86400)
    assert sorted(f.path for f in _discover(tmp_path, full=False)[0]) == [
        str(tmp_path / "storage" / "session" / "proj_test" / "ses_new.json")]
    assert len(_discover(tmp_path, full=True)[0]) == 2


# -- change detection, locks and the writer -------------------------------------------------------------
def test_a_database_is_listed_again_only_when_its_stamp_moves(tmp_path: Path) -> None:
    """A recent pass re-lists a database only after a commit; touching -shm (readers do) lists nothing."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Quiet")
    s.user("one")
    dirs: dict[str, int] = {}
    assert len(_discover(tmp_path, dirs)[0]) == 1
    opencode.read_unit(_discover(tmp_path, dirs, full=True)[0][0])
    (tmp_path / "opencode.db-shm").touch()
    assert _discover(tmp_path, dirs, full=False)[0] == []
    s.user("two")
    assert len(_discover(tmp_path, dirs, full=False)[0]) == 1
    assert _discover(tmp_path, dirs, full=False)[0] == []
    assert len(_discover(tmp_path, dirs, full=True)[0]) == 1, "a full pass names every unit"


def test_rows_committed_between_discovery_and_read_are_read_whole(tmp_path: Path) -> None:
    """A read after a commit the listing did not see is one consistent snapshot with its own signature: the
    next listing agrees with it, so nothing is read twice or half."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Racing")
    s.user("before the listing")
    dirs: dict[str, int] = {}
    [found], _ = _discover(tmp_path, dirs)
    s.user("after the listing").assistant("answered")
    unit = opencode.read_unit(found)
    assert unit.signature != found.mtime_ns and len(unit.messages) == 3
    [relisted], _ = _discover(tmp_path, dirs, full=False)
    assert relisted.mtime_ns == unit.signature


def test_a_locked_database_is_retried_on_the_next_pass(tmp_path: Path) -> None:
    """A writer holding the lock (rollback journal) makes the read UnitChanged; the next recent pass offers the
    unit again although the stamp did not move, and then it reads whole."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db", wal=False)
    db.session(title="Locked").user("wait for the writer")
    dirs: dict[str, int] = {}
    [found], _ = _discover(tmp_path, dirs)
    writer = sqlite3.connect(tmp_path / "opencode.db", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UnitChanged):
            opencode.read_unit(found)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    [again], _ = _discover(tmp_path, dirs, full=False)
    assert again.path == found.path
    assert len(opencode.read_unit(again).messages) == 1
    assert _discover(tmp_path, dirs, full=False)[0] == []


def test_the_agent_is_never_locked_out_and_every_read_is_whole_commits(tmp_path: Path) -> None:
    """While reads run back to back, a running OpenCode's writer (no busy wait at all) commits every turn, and
    each read holds a whole number of turns (a commit is in a read entirely or not at all)."""
    db = ob.OpenCodeDb(tmp_path / "opencode.db")
    s = db.session(title="Busy")
    [found], _ = _discover(tmp_path)
    # The agent's connection is open (as while OpenCode runs), so its WAL index exists; the builder's
    # connection is closed after it, which leaves the WAL in place.
    writer = sqlite3.connect(tmp_path / "opencode.db", isolation_level=None, timeout=0, check_same_thread=False)
    writer.execute("SELECT count(*) FROM session").fetchone()
    s.db.con.close()
    s.db.con = writer
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        try:
            for i in range(150):
                s.user(f"question {i}")
                s.assistant(f"answer {i}", tools=[ob.tool_part(f"c{i}", "bash", {"command": "ls"}, "ok", T0)])
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=write)
    thread.start()
    sizes = []
    while not stop.is_set():
        sizes.append(len(opencode.read_unit(found).messages))
    thread.join()
    with snapshot(str(tmp_path / "opencode.db")) as con:
        con.execute("SELECT count(*) FROM part").fetchone()
        writer.execute("INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) "
                       "VALUES ('prj_x', '/x', 0, 0, '[]')")  # commits while our read transaction is open
    assert errors == []
    assert all(n % 4 in (0, 1) for n in sizes), sizes  # user turn (1) then assistant turn (3): never a part
    assert len(opencode.read_unit(found).messages) == 600


# -- end to end --------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    data = tmp_path / "user" / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    return {"opencode": data}


def test_daemon_indexes_a_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                 roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found in opencode.db under a default-shaped root, searchable with the
    right metadata; a second pass reads nothing; a new commit is re-read once, still one session."""
    db = ob.OpenCodeDb(roots["opencode"] / "opencode.db")
    s = db.session(directory="/home/dev/kestrel")
    s.user("why does the kestrel scheduler drop jobs").assistant(
        "The queue is bounded at 64.", reasoning="Look at the queue.",
        tools=[ob.tool_part("c1", "grep", {"pattern": "bound"}, "queue.rs:12: bounded(64)", T0)])
    s.rename("Kestrel scheduler drops jobs")
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 5
    [hit] = inproc_daemon.search("kestrel")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "opencode", s.session_id, 5, "Kestrel scheduler drops jobs", "/home/dev/kestrel")
    assert hit["resumeCommand"] == f"cd /home/dev/kestrel && opencode --session {s.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    s.user("and the heron worker too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 6
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("heron")["hits"]
    assert hit["sessionId"] == s.session_id and hit["messageCount"] == 6
    assert len(inproc_daemon.search("kestrel", limit=10)["hits"]) == 1


# -- kill -9 (tests/system/test_crash.py, for a database) ---------------------------------------------------------
# Several batches (4,000 messages each) in flight, the first five of them all inside one session listed
# first, so a kill after three commits lands inside that session (its later parts resume from the
# committed message offset).
KILL_SESSIONS, KILL_TURNS, KILL_BIG_TURNS = 300, 12, 5000
KILL_MESSAGES = 4 * (KILL_SESSIONS * KILL_TURNS + KILL_BIG_TURNS)
BIG_SESSION_SUFFIX = f"{KILL_SESSIONS:06d}bulk"  # bulk_database's id of the large session


@pytest.fixture(scope="module")
def big_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("opencode-big") / ".local" / "share" / "opencode"
    n = ob.bulk_database(root / "opencode.db", KILL_SESSIONS, KILL_TURNS, big_turns=KILL_BIG_TURNS)
    assert n == KILL_MESSAGES
    return root


def _index(home: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--no-default-roots", "--root",
                           f"opencode={root}"], env=cli_env(home), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def big_reference(big_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Counter[tuple[Any, ...]], int,
                                                                                    int]:
    home = Home.resolve(tmp_path_factory.mktemp("opencode-ref") / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    proc = _index(home.path, big_root)
    assert proc.returncode == 0, proc.stderr
    fp = fingerprint(home.db_path)
    assert fp[2] == KILL_MESSAGES and max(fp[0].values()) == 1
    return fp


def test_kill_9_of_the_scanner_mid_database_loses_and_duplicates_nothing(
        home: Home, big_root: Path, big_reference: tuple[Counter[tuple[Any, ...]], int, int]) -> None:
    """A scanner SIGKILLed while batches of database sessions are in flight is respawned and resumes from the
    committed offsets (within a session larger than a batch too): the index equals a clean one."""

    with InprocDaemon(home, [f"opencode={big_root}"]) as d:
        ix = d.service.indexer
        fut = ix.reconcile(full=True)
        assert wait_until(lambda: ix.generation >= 3, timeout=120), "no batch committed"
        proc = ix.slots[0].proc
        assert proc is not None and not fut.done()
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = ix.generation
        big = [e.offset for p, e in list(ix.writer.files.items()) if p.endswith(BIG_SESSION_SUFFIX)]
        assert big and 0 < big[0] < 4 * KILL_BIG_TURNS, "the kill is meant to land inside the large session"
        fut.result(300)
        assert ix.generation > killed_at
    assert_same_index(home.db_path, big_reference)
    restart_and_stop_cleanly(home, [])
    assert_same_index(home.db_path, big_reference)


def test_kill_9_of_the_indexer_mid_database_loses_and_duplicates_nothing(
        home: Home, big_root: Path, big_reference: tuple[Counter[tuple[Any, ...]], int, int]) -> None:
    """A SIGKILLed `aivault index` keeps only committed batches of the database's sessions; a rerun completes
    them exactly once."""
    args = [sys.executable, "-m", "aivault.cli", "index", "--no-default-roots", "--root", f"opencode={big_root}"]
    proc = subprocess.Popen(args, env=cli_env(home.path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # A one-shot index commits bulk-sized batches (BULK_BATCH_SCALE x 4,000 messages): the database's
        # 34,400 messages are three of them, so the kill follows the first.
        assert wait_until(lambda: generation_over_rpc(home) >= 1, timeout=120), "no batch committed"
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_until(lambda: not any(pid_alive(int(c)) for c in children), timeout=15), "orphan scanner"
    partial = fingerprint(home.db_path)
    assert 0 < partial[2] < KILL_MESSAGES
    restart_and_stop_cleanly(home, [])  # nothing to index: the killed writer's file, opened and closed
    assert fingerprint(home.db_path) == partial
    rerun = _index(home.path, big_root)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_index(home.db_path, big_reference)
