"""Antigravity conversations (scanner.antigravity): the transcript, the SQLite store, the encrypted legacy file,
discovery of each conversation's best store, side files, sub-agents, robustness, and the daemon end to end."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.parsers import antigravity as ag
from aivault.scanner.parsers.antigravity import store
from aivault.scanner.sources import Found, RootProblem, Unit
from tests.builders import antigravity as ab
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "antigravity" / "irrlicht"
TOOL_CALL = CORPUS / "2-2_auto-executed-tool-call" / "transcript.jsonl"
TWO_TURNS = CORPUS / "1-8_model-context-display"
DB_ID = "873edfa9-6c16-4c1d-9a58-94b7c4cfcf63"
SAMPLES = REPO / "samples" / "antigravity" / ".gemini" / "antigravity-cli"
OLD_S = 1_600_000_000
A, B, C, D, E = (f"{n:08x}-0000-4000-8000-00000000000{n}" for n in range(1, 6))


def transcript_at(root: Path, conversation_id: str, source: Path) -> Path:
    """``source`` copied where the CLI keeps the transcript of ``conversation_id`` under ``root``."""
    path = root / "brain" / conversation_id / ".system_generated" / "logs" / "transcript.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)
    return path


def parse(path: Path) -> tuple[list[Message], ag.AntigravityParser]:
    """Every line of a transcript through one parser, as one uninterrupted pass."""
    parser = ag.AntigravityParser(str(path))
    out: list[Message] = []
    for line in path.read_bytes().split(b"\n"):
        if line:
            out += parser.feed(line)
    return out, parser


def settled(path: Path, age_s: int = 0) -> Path:
    """A database left alone long enough to be read (a fresh one may still get its transcript); a later write
    leaves it ``age_s`` seconds younger, as a real one would be."""
    os.utime(path, (OLD_S + age_s, OLD_S + age_s))
    return path


def unit_of(path: Path) -> Unit:
    st = path.stat()
    sig = store.change_stamp(str(path)) if path.suffix == ".db" else 0
    return ag.read_unit(Found(str(path), "antigravity", st.st_dev, st.st_ino, st.st_size, sig, "whole"))


def sane(messages: list[Message]) -> None:
    for m in messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip()


# -- the copied corpus (real agy recordings) -------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three Antigravity corpus files are the ones tested below."""
    assert sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()) == [
        f"1-8_model-context-display/conversations/{DB_ID}.db", "1-8_model-context-display/transcript.jsonl",
        "2-2_auto-executed-tool-call/transcript.jsonl"]


def test_corpus_tool_call_transcript(tmp_path: Path) -> None:
    """The run_command recording: the request without its wrappers, thinking, the call with its double-encoded
    arguments decoded, the result, the checkpoint as system text, the reply; reminders dropped and counted;
    the title is the checkpoint's objective; lines stay in file order (step 6 before step 5)."""
    cid = "7e1ff85c-2de4-47c2-a48f-2a029dcfeae4"
    out, parser = parse(transcript_at(tmp_path / ".gemini" / "antigravity-cli", cid, TOOL_CALL))
    sane(out)
    assert [(m.role, m.kind) for m in out] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("system", "text"), ("assistant", "thinking"), ("assistant", "text")]
    assert out[0].text == ("Run the shell command `echo hello` using your run_command tool, then reply with exactly "
                           "the word: done")
    assert out[2].text == ('run_command {"CommandLine":"echo hello",'
                           '"Cwd":"/Users/ingo/.gemini/antigravity-cli/scratch","WaitMsBeforeAsync":1000,'
                           '"toolAction":"Running command","toolSummary":"Command execution"}')
    assert "Output:\n\t\t\t\thello" in out[3].text and out[4].text.startswith("{{ CHECKPOINT 0 }}")
    assert out[1].text.startswith("**Prioritizing Tool Usage**") and out[-1].text == "done"
    s = parser.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.branch, s.parent_session_id) == (
        "antigravity", cid, "Execute Shell Command Echo", None, None, None)
    assert s.resume_command == f"agy --conversation {cid}"
    assert (s.started_at, s.updated_at, s.message_count) == (1781953914000, 1781953920000, 7)
    st = parser.stats
    assert (st.lines, st.malformed, st.skipped, st.extra) == (8, 0, 3, {"injected-context": 2})


def test_corpus_transcript_and_database_agree(tmp_path: Path) -> None:
    """The two-turn recording and its real database give the same conversation: the database's protobuf steps
    decode to the transcript's prompts, thinking and replies (its checkpoint is rebuilt from the objective
    and requests); the session is the cascade id, titled by the objective, timed to the millisecond."""
    root = tmp_path / "antigravity-cli"
    lines, parser = parse(transcript_at(root, DB_ID, TWO_TURNS / "transcript.jsonl"))
    db = root / "conversations" / f"{DB_ID}.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(TWO_TURNS / "conversations" / f"{DB_ID}.db", db)
    unit = unit_of(settled(db))
    sane(unit.messages)

    def talk(ms: list[Message]) -> list[tuple[str, str, str]]:
        return [(m.role, m.kind, m.text) for m in ms if m.role != "system"]

    assert talk(unit.messages) == talk(lines)
    assert [m.text for m in unit.messages if m.role == "user"] == ["What is 6 times 7?", "And what is 8 times 9?"]
    assert [m.text for m in unit.messages if m.role == "system"] == [
        "Basic Multiplication Calculation\n\nWhat is 6 times 7?"]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.message_count) == (DB_ID, "Basic Multiplication Calculation", None, 7)
    assert (s.started_at, s.updated_at) == (1782641383997, 1782641398020)
    assert unit.skips == {"bookkeeping:CONVERSATION_HISTORY": 1, "injected-context": 2}
    assert parser.session.title == s.title and unit.messages[0].ts == 1782641384058


# -- discovery and roots ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("home", ["/home/dev", "/Users/dev"])
def test_default_roots_on_linux_and_macos(home: str) -> None:
    """The CLI's and the IDE's folders under ~/.gemini on Linux and macOS alike; ANTIGRAVITY_APP_DATA_DIR moves
    the CLI's."""
    assert [r.path for r in ag.default_roots({}, Path(home))] == [
        f"{home}/.gemini/antigravity-cli", f"{home}/.gemini/antigravity", f"{home}/.gemini/antigravity-ide"]
    moved = ag.default_roots({"ANTIGRAVITY_APP_DATA_DIR": "/srv/agy"}, Path(home))
    assert [r.path for r in moved] == ["/srv/agy", f"{home}/.gemini/antigravity", f"{home}/.gemini/antigravity-ide"]


def test_each_conversation_is_found_once_in_its_best_store(tmp_path: Path) -> None:
    """Under a fake home: a transcript wins over the database and legacy file of its conversation, a database
    over a legacy file; a legacy or implicit .pb alone is a unit; transcript_full.jsonl counts only without
    transcript.jsonl; WAL files, foreign files and the IDE's database are discovered as they should be."""
    home = tmp_path / "home"
    cli = home / ".gemini" / "antigravity-cli"
    ab.AntigravityWriter(cli, A).user("a")
    ab.AntigravityWriter(cli, E, full_name=True).user("e, full only")
    both = ab.AntigravityWriter(cli, D)
    both.user("d")
    shutil.copyfile(both.path, both.path.with_name("transcript_full.jsonl"))
    for cid in (A, B):
        ab.write_database(cli / "conversations" / f"{cid}.db", cid, [ab.db_user(cid)])
    for cid in (A, B, C):
        (cli / "conversations" / f"{cid}.pb").write_bytes(b"\x8a\x01encrypted")
    (cli / "implicit").mkdir()
    (cli / "implicit" / f"{A}.pb").write_bytes(b"\x01\x02")
    (cli / "conversations" / f"{B}.db-wal").write_bytes(b"")
    (cli / "conversations" / "notes.txt").write_text("x")
    ide = home / ".gemini" / "antigravity"
    ab.write_database(ide / "conversations" / f"{C}.db", C, [ab.db_user("ide")])
    problems: list[RootProblem] = []
    found = {os.path.relpath(f.path, home / ".gemini"): f.mode
             for root in ag.default_roots({}, home) for f in ag.SPEC.discover(root, problems, {}, True)}
    assert problems == []
    logs = ".system_generated/logs"
    assert found == {
        f"antigravity-cli/brain/{A}/{logs}/transcript.jsonl": "lines",
        f"antigravity-cli/brain/{D}/{logs}/transcript.jsonl": "lines",
        f"antigravity-cli/brain/{E}/{logs}/transcript_full.jsonl": "lines",
        f"antigravity-cli/conversations/{B}.db": "whole",
        f"antigravity-cli/conversations/{C}.pb": "whole",
        f"antigravity/conversations/{C}.db": "whole",
    }
    assert ag.shaped("transcript.jsonl") and ag.shaped(f"{A}.db") and not ag.shaped(f"{A}.pb")
    assert not ag.shaped("state.db")


# -- folder, branch, parent ------------------------------------------------------------------------------------------
def test_folder_and_branch_come_from_the_database_then_the_side_files(tmp_path: Path) -> None:
    """The database's workspace and branch win; else the CLI's last_conversations.json, the IDE's
    conversation_metadata.json, the prompt log history.jsonl; the IDE's conversations have no resume command."""
    cli = tmp_path / "antigravity-cli"
    w = ab.AntigravityWriter(cli, A, cwd="/home/dev/from-cache")
    w.user("one")
    ab.write_database(cli / "conversations" / f"{A}.db", A, [ab.db_user("one")], workspace="/home/dev/api v2",
                      branch="fix/locks")
    s = parse(w.path)[1].session
    assert (s.cwd, s.branch) == ("/home/dev/api v2", "fix/locks")
    assert s.resume_command == f"cd '/home/dev/api v2' && agy --conversation {A}"
    w2 = ab.AntigravityWriter(cli, B, cwd="/home/dev/from-cache")
    w2.user("two")
    assert (parse(w2.path)[1].session.cwd, parse(w2.path)[1].session.branch) == ("/home/dev/from-cache", None)
    (cli / "history.jsonl").write_bytes(ab.jsonl([
        {"display": "x", "timestamp": 1, "workspace": "/home/dev/old", "conversationId": C},
        {"display": "y", "timestamp": 2, "workspace": "file:///home/dev/from-history", "conversationId": C}]))
    w3 = ab.AntigravityWriter(cli, C)
    w3.user("three")
    assert parse(w3.path)[1].session.cwd == "/home/dev/from-history"
    ide = tmp_path / "antigravity"
    (ide / "cache").mkdir(parents=True)
    (ide / "cache" / "conversation_metadata.json").write_bytes(orjson.dumps(
        {"conversations": {D: {"summary": {"WorkspaceURIs": ["file:///home/dev/ide%20app"]}}}}))
    w4 = ab.AntigravityWriter(ide, D)
    w4.user("four")
    s4 = parse(w4.path)[1].session
    assert (s4.cwd, s4.resume_command) == ("/home/dev/ide app", None)


def test_a_subagent_is_linked_to_the_conversation_that_spawned_it(tmp_path: Path) -> None:
    """A sub-agent is its own conversation; its parent is the one whose INVOKE_SUBAGENT step names it, which
    also gives its folder; a conversation nobody spawned has none, and an old one is not looked up again."""
    root = tmp_path / "antigravity-cli"
    parent = ab.AntigravityWriter(root, A, cwd="/home/dev/mono")
    parent.user("split the work").subagent(B, "/home/dev/mono/web")
    child = ab.AntigravityWriter(root, B)
    child.user("update the web package")
    out, _ = parse(parent.path)
    assert out[-1].role == "tool" and f'"conversationId": "{B}"' in out[-1].text
    assert out[-2].text.startswith('invoke_subagent {"Subagents":[')
    s = parse(child.path)[1].session
    assert (s.parent_session_id, s.cwd) == (A, "/home/dev/mono/web")
    top = parse(parent.path)[1]
    assert top.session.parent_session_id is None and top.st.lineage  # BASE_TIME is long ago: looked up once


# -- steps of every kind ---------------------------------------------------------------------------------------------
def test_steps_of_every_kind(tmp_path: Path) -> None:
    """Tool errors are marked, cleared steps dropped, clipped fields counted, a prompt the agent made is system
    text, an unknown system step counted by type, an unknown model step is a tool result, ctx's lower-case
    sources are read, an error message is system text."""
    w = ab.AntigravityWriter(tmp_path / "antigravity-cli", A)
    w.user("deploy it")
    w.assistant("Running both.", calls=[("run_command", {"CommandLine": "make deploy"}),
                                        ("view_file", {"AbsolutePath": "/x"})])
    w.tool("RUN_COMMAND", "exit status 2", status="ERROR")
    w.tool("VIEW_FILE", "old output", status="CLEARED")
    w.write(ab.step(90, "MODEL", "PLANNER_RESPONSE", w.t, content="a very long reply", truncated_fields=["content"]))
    w.write(ab.step(91, "USER_IMPLICIT", "USER_INPUT", w.t, content="<USER_REQUEST>\nauto context\n</USER_REQUEST>"))
    w.write(ab.step(92, "SYSTEM", "HOLOGRAM", w.t, content="?"))
    w.write(ab.step(93, "MODEL", "BROWSER_NAVIGATE", w.t, content="Navigated to http://localhost:3000"))
    w.write(ab.step(94, "user", "USER_INPUT", w.t, content="lower-case source"))
    w.write(ab.step(95, "planner", "PLANNER_RESPONSE", w.t, content="lower-case planner"))
    w.write(ab.step(96, "SYSTEM", "ERROR_MESSAGE", w.t, content="model quota exceeded"))
    out, parser = parse(w.path)
    assert [(m.role, m.kind, m.text) for m in out] == [
        ("user", "text", "deploy it"),
        ("assistant", "text", "Running both."),
        ("assistant", "tool_call", 'run_command {"CommandLine":"make deploy"}'),
        ("assistant", "tool_call", 'view_file {"AbsolutePath":"/x"}'),
        ("tool", "tool_result", "[error] exit status 2"),
        ("assistant", "text", "a very long reply"),
        ("system", "text", "auto context"),
        ("tool", "tool_result", "Navigated to http://localhost:3000"),
        ("user", "text", "lower-case source"),
        ("assistant", "text", "lower-case planner"),
        ("system", "text", "model quota exceeded"),
    ]
    assert parser.stats.extra == {"injected-context": 1, "cleared-step": 1, "truncated-by-agent:content": 1,
                                  "unknown_record:HOLOGRAM": 1}


def test_malformed_lines_are_counted_never_fatal(tmp_path: Path) -> None:
    """A line that is not JSON, a JSON array, a step without a type and invalid UTF-8 are counted or repaired;
    the steps around them are read."""
    w = ab.AntigravityWriter(tmp_path / "antigravity-cli", A)
    w.user("before")
    with w.path.open("ab") as f:
        f.write(b'not json\n[1, 2]\n{"step_index": 7, "source": "MODEL"}\n')
        f.write(b'{"step_index":8,"source":"MODEL","type":"PLANNER_RESPONSE","content":"caf\xe9"}\n')
    out, parser = parse(w.path)
    assert [m.text for m in out] == ["before", "caf\ufffd"]
    assert parser.stats.malformed == 3


# -- the database ----------------------------------------------------------------------------------------------------
def test_database_tool_steps_and_unfinished_steps(tmp_path: Path) -> None:
    """A database-only conversation: planner calls with their JSON arguments, the tool step's output, the
    workspace and branch; a step still generating is left for a later read and counted."""
    db = ab.write_database(tmp_path / "antigravity-cli" / "conversations" / f"{A}.db", A, [
        ab.db_user("why does make lint hang"), ab.db_history(), ab.db_ephemeral(),
        ab.db_planner(None, thinking="Run it.", calls=[("call-1", "run_command", {"CommandLine": "make lint"})]),
        ab.db_run_command("call-1", "make lint", "ruff: waiting for lock on .ruff_cache"),
        ab.db_planner("A stale .ruff_cache lock; delete it."),
        ab.db_checkpoint("Lint Hang", "1. why does make lint hang"),
        ab.db_planner("still typing", status="GENERATING")], workspace="/home/dev/tooling", branch="main")
    unit = unit_of(settled(db))
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "why does make lint hang"),
        ("assistant", "thinking", "Run it."),
        ("assistant", "tool_call", 'run_command {"CommandLine":"make lint"}'),
        ("tool", "tool_result", "ruff: waiting for lock on .ruff_cache"),
        ("assistant", "text", "A stale .ruff_cache lock; delete it."),
        ("system", "text", "Lint Hang\n\n1. why does make lint hang"),
    ]
    s = unit.session
    assert (s.title, s.cwd, s.branch, s.resume_command) == (
        "Lint Hang", "/home/dev/tooling", "main", f"cd /home/dev/tooling && agy --conversation {A}")
    assert unit.skips == {"unfinished-step": 1, "bookkeeping:CONVERSATION_HISTORY": 1, "injected-context": 1}


def test_database_being_written_locked_or_foreign(tmp_path: Path) -> None:
    """A database written in the last seconds waits (its transcript may follow), a locked one is left for the
    next pass, one without a steps table is unreadable, a damaged payload reads what precedes the damage."""
    folder = tmp_path / "antigravity-cli" / "conversations"
    db = ab.write_database(folder / f"{A}.db", A, [ab.db_user("hello"), ab.db_planner("hi")])
    with pytest.raises(UnitChanged):
        unit_of(db)
    settled(db)
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UnitChanged):
            unit_of(db)
    finally:
        holder.rollback()
        holder.close()
    settled(db)
    assert [m.text for m in unit_of(db).messages] == ["hello", "hi"]
    foreign = folder / f"{B}.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(UnitUnreadable):
        unit_of(settled(foreign))
    damaged = ab.pb((1, "kept reply")) + b"\x1a\xff\x01thinking cut short"  # field 3 claims 255 bytes
    step, ts = store.decode_step(15, 3, ab.pb((1, 15), (20, damaged)), None, None)
    assert (step.content, step.thinking, ts) == ("kept reply", "", None)
    assert store.fields(b"\x08") == [] and store.fields(ab.pb((1, 5)) + b"\xff") == [(1, 5)]


def test_encrypted_legacy_conversations_are_present_and_unreadable(tmp_path: Path) -> None:
    """A legacy .pb alone is an empty session with the skip ``encrypted-store``: counted, never read."""
    cli = tmp_path / "antigravity-cli"
    (cli / "conversations").mkdir(parents=True)
    (cli / "implicit").mkdir()
    pb = cli / "conversations" / f"{A}.pb"
    pb.write_bytes(os.urandom(64))
    implicit = cli / "implicit" / f"{B}.pb"
    implicit.write_bytes(os.urandom(64))
    unit = unit_of(pb)
    assert (unit.messages, unit.skips, unit.session.session_id) == ([], {"encrypted-store": 1}, A)
    assert unit.session.resume_command == f"agy --conversation {A}"
    other = unit_of(implicit)
    assert (other.session.session_id, other.session.resume_command) == (f"implicit-{B}", None)


# -- the shipped sample ----------------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/antigravity (ANTIGRAVITY_APP_DATA_DIR=samples/antigravity/.gemini/antigravity-cli): the xdist
    SQLite-lock debugging conversation, its objective as title, its folder from the CLI's cache."""
    [root] = ag.default_roots({"ANTIGRAVITY_APP_DATA_DIR": str(SAMPLES)}, Path("/nonexistent"))[:1]
    [f] = ag.SPEC.discover(root, [], {}, True)
    out, parser = parse(Path(f.path))
    sane(out)
    assert [(m.role, m.kind) for m in out] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "thinking"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "text"), ("system", "text"), ("user", "text"), ("assistant", "text")]
    s = parser.session
    assert (s.title, s.cwd) == ("Fix SQLite Locking In Parallel Tests", "/home/dev/inventory-api")
    assert s.resume_command == f"cd /home/dev/inventory-api && agy --conversation {s.session_id}"
    assert "database is locked" in out[8].text and "worker_id" in out[9].text


# -- end to end ------------------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    cli = tmp_path / "user" / ".gemini" / "antigravity-cli"
    cli.mkdir(parents=True)
    return {"antigravity": cli}


def test_daemon_indexes_a_transcript_once_and_an_append_once(inproc_daemon: InprocDaemon,
                                                              roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a transcript under a default-shaped root is found, searchable, with its
    title, folder and resume command; a second pass reads nothing; a step being written is not read until its
    line is complete; an appended turn is read once by a recent pass, still one session."""
    w = ab.AntigravityWriter(roots["antigravity"], A, cwd="/home/dev/pelican")
    w.user("the pelican importer rejects dates like 2026-02-30")
    w.assistant(None, thinking="Check the parser.",
                calls=[("view_file", {"AbsolutePath": "/home/dev/pelican/dates.py"})])
    w.tool("VIEW_FILE", "1: def parse(s): return datetime.strptime(s, '%Y-%m-%d')")
    w.assistant("strptime rejects invalid days; report them instead of crashing.").checkpoint("Pelican Date Import")
    assert inproc_daemon.reconcile()["messages"] == 6
    [hit] = inproc_daemon.search("pelican importer")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["title"], hit["cwd"], hit["messageCount"]) == (
        "antigravity", A, "Pelican Date Import", "/home/dev/pelican", 6)
    assert hit["resumeCommand"] == f"cd /home/dev/pelican && agy --conversation {A}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    line = orjson.dumps(ab.step(40, "USER_EXPLICIT", "USER_INPUT", w.t, content="what about the flamingo importer"))
    with w.path.open("ab") as f:
        f.write(line[:30])
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    assert inproc_daemon.search("flamingo")["hits"] == []
    with w.path.open("ab") as f:
        f.write(line[30:] + b"\n")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 1  # the new line only
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("flamingo")["hits"]
    assert hit["sessionId"] == A and hit["messageCount"] == 7
    assert len(inproc_daemon.search("pelican", limit=10)["hits"]) == 1


def test_daemon_reads_a_database_conversation_and_counts_an_encrypted_one(inproc_daemon: InprocDaemon,
                                                                          roots: dict[str, Path]) -> None:
    """A conversation kept only in its database is indexed once and again once after a new step; an encrypted
    legacy conversation is a unit the root report shows as skipped, with its reason."""
    cli = roots["antigravity"]
    db = ab.write_database(cli / "conversations" / f"{B}.db", B, [
        ab.db_user("the heron cache never expires"), ab.db_planner("Its TTL is read in ms, set in seconds.")],
        workspace="/home/dev/heron", branch="main")
    settled(db)
    (cli / "conversations" / f"{C}.pb").write_bytes(os.urandom(48))
    first = inproc_daemon.reconcile()
    assert first["messages"] == 2 and first["files_changed"] == 2
    [hit] = inproc_daemon.search("heron cache")["hits"]
    assert (hit["sessionId"], hit["cwd"], hit["branch"], hit["messageCount"]) == (B, "/home/dev/heron", "main", 2)
    report = inproc_daemon.service.root_report([str(cli)])[str(cli)]
    assert (report["units"], report["sessions"], report["skipped"].get("encrypted-store")) == (2, 1, 1)
    assert inproc_daemon.reconcile()["files_changed"] == 0
    con = sqlite3.connect(db)
    payload = ab.pb((1, 14), (4, 3), (19, ab.pb((2, "and the egret cache"))))
    con.execute("INSERT INTO steps (idx, step_type, status, step_payload) VALUES (2, 14, 3, ?)", (payload,))
    con.commit()
    con.close()
    settled(db, 60)
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 3
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("egret")["hits"]
    assert hit["sessionId"] == B and hit["messageCount"] == 3
