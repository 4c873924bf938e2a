"""Kiro CLI (scanner/parsers/kiro): 2.x JSONL + sidecar and V3 transcripts line by line, the SQLite store whole."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import tests.builders.kiro as kb
from aivault.errors import ParserStateError, UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.parsers import kiro
from aivault.scanner.parsers.kiro import store
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders.common import BASE_TIME
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "kiro-cli"
RECORDED = CORPUS / "irrlicht" / "2-2_auto-executed-tool-call" / "transcript.jsonl"
PAYLOAD = CORPUS / "agentsview" / "kiro_sqlite" / "standard_payload.json"
SAMPLE = REPO / "samples" / "kiro" / ".kiro"  # KIRO_HOME=samples/kiro/.kiro
T0 = datetime(2026, 5, 17, 10, 0, 0, tzinfo=UTC)


def parse(path: Path) -> tuple[kiro.jsonl._KiroParser, list[Message]]:
    parser = kiro.make_parser(str(path))
    return parser, [m for line in file_lines(path) for m in parser.feed(line)]


def texts(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


def sane(messages: list[Message]) -> None:
    for m in messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip()


def discover(path: Path, dirs: dict[str, int] | None = None, full: bool = True) -> tuple[list[Found],
                                                                                       list[RootProblem]]:
    problems: list[RootProblem] = []
    found = list(kiro.discover(Root("kiro", str(path)), problems, {} if dirs is None else dirs, full))
    return found, problems


def db_units(folder: Path) -> dict[str, Unit]:
    found, problems = discover(folder)
    assert problems == []
    return {u.session.session_id: u for u in (store.read_conversation(f) for f in found if f.mode == "whole")}


# -- the copied corpus --------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three Kiro corpus files are the ones tested below."""
    assert sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()) == [
        "agentsview/kiro_sqlite/standard_payload.json",
        "irrlicht/2-2_auto-executed-tool-call/transcript.json",
        "irrlicht/2-2_auto-executed-tool-call/transcript.jsonl"]


def test_recorded_2_6_session_with_its_sidecar() -> None:
    """The real kiro-cli 2.6.0 recording: prompt, shell call (the empty text block dropped), its output, the
    reply; id, cwd and title from the sidecar; every line takes the prompt's time; the session ends at the
    sidecar's updated_at."""
    parser, messages = parse(RECORDED)
    sane(messages)
    prompt = "Run the shell command 'echo hello' using your shell tool, then reply with exactly the word: done"
    assert texts(messages) == [
        ("user", "text", prompt),
        ("assistant", "tool_call",
         'shell {"command":"echo hello","__tool_use_purpose":"Execute shell command to echo hello"}'),
        ("tool", "tool_result", "hello\n"),
        ("assistant", "text", "done"),
    ]
    assert {m.ts for m in messages} == {1787363522000}
    s = parser.session
    cwd = "/Users/ingo/projects/irrlicht-1735/.build/refresh/kiro-cli/2-2_auto-executed-tool-call-20260822T015156/cwd"
    assert (s.agent, s.session_id, s.cwd, s.title, s.message_count, s.parent_session_id) == (
        "kiro", "e36d6e16-bf0a-4982-91e1-68e63be0fa60", cwd, prompt[:79] + "…", 4, None)
    assert (s.started_at, s.updated_at) == (1787363522000, 1787363526191)
    assert s.resume_command == f"cd {cwd} && kiro-cli chat --resume-id e36d6e16-bf0a-4982-91e1-68e63be0fa60"
    assert (parser.stats.lines, parser.stats.malformed, parser.stats.skipped, parser.stats.extra) == (4, 0, 0, {})


def test_recorded_session_resumes_at_every_split() -> None:
    """Lines 1..k, the state through msgpack, then k+1..n equal one whole pass (the Parser contract)."""
    assert_resumes_at_every_split(lambda state: kiro.make_parser(str(RECORDED), state), RECORDED)


def test_agentsview_sqlite_payload_as_a_database_row(tmp_path: Path) -> None:
    """The conversations_v2 document from AgentsView's fixtures, stored as kiro-cli stores it: two prompts,
    the reply, the ToolUse turn's call; the assistant's time is stream_end_timestamp_ms; cwd is the row's key."""
    con = kb.create_db(tmp_path / "data.sqlite3")
    doc = json.loads(PAYLOAD.read_text())
    kb.add_conversation(con, "/home/user/code/kiro-app", doc, T0, T0 + timedelta(seconds=30))
    con.close()
    [unit] = db_units(tmp_path).values()
    assert [(m.role, m.kind, m.text, m.ts) for m in unit.messages] == [
        ("user", "text", "Build the Kiro parser", 1779012000000),
        ("assistant", "text", "I can do that.", 1779012010000),
        ("user", "text", "Read the source first", 1779012020000),
        ("assistant", "tool_call", """execute_bash {"command":"sed -n '1,120p' internal/parser/kiro.go"}""",
         1779012030000),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.started_at, s.updated_at) == (
        "sqlite-session", "Build the Kiro parser", "/home/user/code/kiro-app", 1779012000000, 1779012030000)
    assert s.resume_command == "cd /home/user/code/kiro-app && kiro-cli chat --resume"
    assert unit.skips == {}


# -- 2.x transcripts from the builder -----------------------------------------------------------------------
def test_a_turn_with_tools_errors_and_unknown_records(tmp_path: Path) -> None:
    """Shell output as stdout+stderr with a non-zero exit status in front, a failed tool's status, a text
    result; an unknown kind, an unknown block and a line that is no JSON are counted, never fatal."""
    w = kb.KiroWriter(tmp_path / ".kiro", "/home/dev/gull", "a0000000-0000-4000-8000-000000000001")
    w.prompt("why does make test fail").assistant("Running it.", [("shell", {"command": "make test"})])
    w.results([kb.shell_result("t1", "FAIL gull_test.go:12\n", "exit 2\n", exit_status=2),
               kb.text_result("t2", "permission denied", status="error")])
    w.assistant("The fixture path is wrong.").save()
    w.write({"version": "v1", "kind": "Hologram", "data": {"message_id": "h1"}})
    w.write(kb.line("AssistantMessage", {"message_id": "x", "content": [{"kind": "image", "data": {}}]}))
    with w.path.open("ab") as f:
        f.write(b'{"version":"v1","kind":\n[1,2]\n')
    parser, messages = parse(w.path)
    assert texts(messages) == [
        ("user", "text", "why does make test fail"),
        ("assistant", "text", "Running it."),
        ("assistant", "tool_call", 'shell {"command":"make test"}'),
        ("tool", "tool_result", "[exit status: 2]\nFAIL gull_test.go:12\n\nexit 2\n"),
        ("tool", "tool_result", "[error] permission denied"),
        ("assistant", "text", "The fixture path is wrong."),
    ]
    assert (parser.stats.malformed, parser.stats.extra) == (
        2, {"unknown_record:Hologram": 1, "unknown_content:image": 1})
    with pytest.raises(ParserStateError):
        kiro.make_parser(str(w.path), {**parser.state(), "v": 99})


def test_without_a_sidecar_the_file_names_the_session(tmp_path: Path) -> None:
    """A transcript whose sidecar is missing (or not written yet): the file stem is the id, the first prompt
    the title, the prompts' times the session's; no cwd, so the resume command has no cd."""
    w = kb.KiroWriter(tmp_path / ".kiro", session_id="b0000000-0000-4000-8000-000000000002")
    w.prompt("first line\nsecond line").assistant("ok")
    parser, _ = parse(w.path)
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.resume_command) == (
        "b0000000-0000-4000-8000-000000000002", "first line", None,
        "kiro-cli chat --resume-id b0000000-0000-4000-8000-000000000002")
    assert s.started_at == s.updated_at == int(w.t.timestamp()) * 1000


def test_a_sidecar_caught_mid_rewrite_keeps_the_folder_and_parent(tmp_path: Path) -> None:
    """The sidecar is rewritten every turn: a read that finds it cut short keeps the cwd and parent the state
    remembers from the last read, and the file names the session."""
    w = kb.KiroWriter(tmp_path / ".kiro", "/home/dev/auk", "b0000000-0000-4000-8000-000000000003", parent="p-1")
    w.prompt("first").assistant("one").save()
    parser, _ = parse(w.path)
    w.sidecar_path.write_text(w.sidecar_path.read_text()[:40])
    resumed = kiro.make_parser(str(w.path), parser.state())
    s = resumed.session
    assert (s.cwd, s.parent_session_id, s.session_id) == ("/home/dev/auk", "p-1", w.session_id)


def test_a_rewind_fork_keeps_only_what_came_after_the_fork(tmp_path: Path) -> None:
    """2.6 /rewind: the new session replays the parent's lines up to the chosen prompt (same message ids);
    those are skipped as fork-replay, the rest indexed, and the fork links to its parent. The parent keeps
    everything."""
    w = kb.KiroWriter(tmp_path / ".kiro", "/home/dev/tern", "c0000000-0000-4000-8000-000000000003")
    w.prompt("Reply with exactly the word: one").assistant("one").save()
    w.prompt("Reply with exactly the word: two").assistant("two").save()
    fork = w.rewind(0, "c0000000-0000-4000-8000-000000000004")
    fork.prompt("Reply with exactly the word: three").assistant("three").save()
    _, parent_messages = parse(w.path)
    assert [m.text for m in parent_messages] == ["Reply with exactly the word: one", "one",
                                                 "Reply with exactly the word: two", "two"]
    child, messages = parse(fork.path)
    assert [m.text for m in messages] == ["Reply with exactly the word: three", "three"]
    assert child.stats.extra == {"fork-replay": 2}
    assert (child.session.parent_session_id, child.session.title) == (w.session_id, "Reply with exactly the word: one")
    assert_resumes_at_every_split(lambda state: kiro.make_parser(str(fork.path), state), fork.path)
    # Without the parent's file there is nothing to compare with: everything is indexed.
    w.path.unlink()
    assert len(parse(fork.path)[1]) == 4


# -- the V3 engine (low confidence: shapes from peers' parsers) --------------------------------------------
def test_v3_session_maps_every_payload_type(tmp_path: Path) -> None:
    """user, Reasoning (thinking), tool call and result (a failed one marked), Say, a sub-agent call and its
    answer, a Summary (system); the system prompt, steering and bookkeeping are not messages, an unknown
    type and operation are counted; id, title, cwd, parent and times come from session.json."""
    w = kb.KiroV3Writer(tmp_path / ".kiro", "/home/dev/puffin", "sess_d0000000-0000-4000-8000-000000000005",
                        title="Puffin retry storm", parent="sess_d0000000-0000-4000-8000-000000000000")
    w.add({"type": "session_start", "content": "You are Kiro CLI"})
    w.add({"type": "steering_inclusion", "name": "product"})
    w.user("the puffin client retries forever")
    w.add({"type": "turn_start", "executionId": "exec-1"})
    w.say("Look for the retry loop.", op="Reasoning")
    w.tool("grep", {"pattern": "max_retries"}, "client.rs:8: max_retries: None")
    w.tool("shell", {"command": "cargo test"}, "1 failed", success=False)
    w.add({"type": "sub_agent_start", "subSessionId": "sub-1", "subAgentName": "reviewer", "prompt": "review"})
    w.add({"type": "sub_agent_complete", "subSessionId": "sub-1", "response": "looks right"})
    w.say("max_retries is never read; defaulting it to 5.")
    w.say("Summary of the work so far.", op="Summary")
    w.say("hmm", op="Daydream")
    w.add({"type": "teleport", "content": "?"})
    parser, messages = parse(w.path)
    assert texts(messages) == [
        ("user", "text", "the puffin client retries forever"),
        ("assistant", "thinking", "Look for the retry loop."),
        ("assistant", "tool_call", 'grep {"pattern":"max_retries"}'),
        ("tool", "tool_result", "client.rs:8: max_retries: None"),
        ("assistant", "tool_call", 'shell {"command":"cargo test"}'),
        ("tool", "tool_result", "[error] 1 failed"),
        ("assistant", "tool_call", 'sub_agent {"subAgentName":"reviewer","prompt":"review"}'),
        ("tool", "tool_result", "looks right"),
        ("assistant", "text", "max_retries is never read; defaulting it to 5."),
        ("system", "text", "Summary of the work so far."),
    ]
    assert parser.stats.extra == {"system-prompt": 1, "injected-context": 1, "unknown_operation:Daydream": 1,
                                  "unknown_record:teleport": 1}
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.parent_session_id) == (
        w.session_id, "Puffin retry storm", "/home/dev/puffin", "sess_d0000000-0000-4000-8000-000000000000")
    assert s.started_at == int(BASE_TIME.timestamp() * 1000) and s.updated_at == int(w.t.timestamp() * 1000)
    assert s.resume_command == f"cd /home/dev/puffin && kiro-cli chat --resume-id {w.session_id}"
    assert_resumes_at_every_split(lambda state: kiro.make_parser(str(w.path), state), w.path)


# -- the SQLite store -------------------------------------------------------------------------------------
def test_sqlite_tool_results_cancellations_summaries_and_the_legacy_table(tmp_path: Path) -> None:
    """Tool results ride in the next turn's user content (an error marked), a cancelled call's prompt is a
    prompt, a compaction summary is system text first; a conversation saved under two folders is read from
    its newest row once; the oldest table's conversation (id inside the document) is read too, unless
    conversations_v2 holds it."""
    con = kb.create_db(tmp_path / "data.sqlite3")
    cwd = "/home/dev/heron"
    history = [
        kb.prompt_entry("the heron importer skips BOM rows", T0, cwd,
                        kb.tool_use("Checking.", [("t1", "fs_read", {"path": "importer.py"})])),
        kb.prompt_entry("", T0 + timedelta(seconds=10), cwd, kb.response("Open it with utf-8-sig."),
                        content=kb.tool_results([("t1", "open(p)", "Success")])),
        kb.prompt_entry("", T0 + timedelta(seconds=20), cwd, kb.response("Stopped."),
                        content={"CancelledToolUses": {"prompt": "stop, use pandas instead", "tool_use_results": [
                            {"tool_use_id": "t2", "content": [{"Text": "Tool use was cancelled by the user"}],
                             "status": "Error"}]}}),
    ]
    doc = kb.conversation("e0000000-0000-4000-8000-000000000006", history, latest_summary="Earlier: BOM bug.")
    kb.add_conversation(con, "/home/dev/old-place", {**doc, "history": history[:1]}, T0, T0 + timedelta(seconds=1))
    kb.add_conversation(con, cwd, doc, T0, T0 + timedelta(seconds=25))
    legacy = kb.conversation("e0000000-0000-4000-8000-000000000007", [
        [{"content": {"Prompt": {"prompt": "old egret question"}}, "timestamp": "2025-01-02T03:04:05+01:00"},
         {"Response": {"message_id": "m", "content": "old answer"}}]])
    con.execute("INSERT INTO conversations VALUES (?, ?)", ("/home/dev/egret", json.dumps(legacy)))
    con.execute("INSERT INTO conversations VALUES (?, ?)", (cwd, json.dumps({**doc, "history": []})))
    con.execute("INSERT INTO conversations VALUES (?, ?)", ("/home/dev/broken", "{not json"))
    con.commit()
    con.close()
    units = db_units(tmp_path)
    assert sorted(units) == ["e0000000-0000-4000-8000-000000000006", "e0000000-0000-4000-8000-000000000007"]
    unit = units["e0000000-0000-4000-8000-000000000006"]
    assert texts(unit.messages) == [
        ("system", "text", "Earlier: BOM bug."),
        ("user", "text", "the heron importer skips BOM rows"),
        ("assistant", "text", "Checking."),
        ("assistant", "tool_call", 'fs_read {"path":"importer.py"}'),
        ("tool", "tool_result", "open(p)"),
        ("assistant", "text", "Open it with utf-8-sig."),
        ("tool", "tool_result", "[error] Tool use was cancelled by the user"),
        ("user", "text", "stop, use pandas instead"),
        ("assistant", "text", "Stopped."),
    ]
    assert (unit.session.cwd, unit.session.title) == (cwd, "the heron importer skips BOM rows")
    old = units["e0000000-0000-4000-8000-000000000007"]
    assert texts(old.messages) == [("user", "text", "old egret question"), ("assistant", "text", "old answer")]
    assert (old.session.cwd, old.session.started_at) == ("/home/dev/egret", 1735783445000)


def test_sqlite_signatures_move_only_with_a_save(tmp_path: Path) -> None:
    """A conversation's signature is the same from the listing and from its read, and changes when kiro-cli
    saves it again; a row that vanished is UnitChanged, a document that is no JSON object UnitUnreadable."""
    con = kb.create_db(tmp_path / "data.sqlite3")
    doc = kb.conversation("f0000000-0000-4000-8000-000000000008", [
        kb.prompt_entry("why is the gannet cache cold", T0, "/home/dev/gannet", kb.response("TTL of 0."))])
    kb.add_conversation(con, "/home/dev/gannet", doc, T0, T0 + timedelta(seconds=5))
    [found], _ = discover(tmp_path)
    assert store.read_conversation(found).signature == found.mtime_ns
    kb.add_conversation(con, "/home/dev/gannet", doc, T0, T0 + timedelta(seconds=9))
    [again], _ = discover(tmp_path, full=True)
    assert again.mtime_ns != found.mtime_ns and store.read_conversation(again).signature == again.mtime_ns
    con.execute("UPDATE conversations_v2 SET value = '[1]'")
    con.commit()
    with pytest.raises(UnitUnreadable):
        store.read_conversation(again)
    con.execute("DELETE FROM conversations_v2")
    con.commit()
    con.close()
    with pytest.raises(UnitChanged):
        store.read_conversation(again)


def test_a_locked_database_is_left_for_the_next_pass(tmp_path: Path) -> None:
    """A kiro-cli writer holding the lock (rollback journal) makes the read UnitChanged, never a half read or an
    error; the next recent pass offers the conversation again and reads it whole."""
    con = kb.create_db(tmp_path / "data.sqlite3", wal=False)
    kb.add_conversation(con, "/home/dev/auk", kb.conversation("30000000-0000-4000-8000-000000000001", [
        kb.prompt_entry("the auk build is slow", T0, "/home/dev/auk", kb.response("Cache the deps."))]), T0, T0)
    con.close()
    dirs: dict[str, int] = {}
    [found], _ = discover(tmp_path, dirs)
    writer = sqlite3.connect(tmp_path / "data.sqlite3", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UnitChanged):
            store.read_conversation(found)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    [again], _ = discover(tmp_path, dirs, full=False)
    assert len(store.read_conversation(again).messages) == 2


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_linux_macos_and_overrides(tmp_path: Path) -> None:
    """~/.kiro/sessions, ~/.local/share/kiro-cli and ~/Library/Application Support/kiro-cli; KIRO_HOME moves the
    first, XDG_DATA_HOME the second."""
    home = tmp_path / "u"
    assert [r.path for r in kiro.default_roots({}, home)] == [
        str(home / ".kiro/sessions"), str(home / ".local/share/kiro-cli"),
        str(home / "Library/Application Support/kiro-cli")]
    env = {"KIRO_HOME": str(tmp_path / "k"), "XDG_DATA_HOME": str(tmp_path / "x")}
    assert [r.path for r in kiro.default_roots(env, home)][:2] == [
        str(tmp_path / "k/sessions"), str(tmp_path / "x/kiro-cli")]


def test_discovery_finds_every_generation_and_prefers_the_v3_copy(tmp_path: Path) -> None:
    """cli/<uuid>.jsonl (not its sidecar), V3 sess_*/messages.jsonl (not snapshots/ or sub-executions/), the
    conversations of a data.sqlite3; a 2.x file whose session the V3 engine took over (cli_<uuid>_…) is left
    out, also when a recent pass only lists the changed folder."""
    kh = tmp_path / ".kiro"
    kept = kb.KiroWriter(kh, session_id="10000000-0000-4000-8000-000000000001").prompt("kept").save()
    moved = kb.KiroWriter(kh, session_id="10000000-0000-4000-8000-000000000002").prompt("moved").save()
    v3 = kb.KiroV3Writer(kh, folder="sess_10000000-0000-4000-8000-000000000003").user("v3 native")
    for sub in ("snapshots/a", "sub-executions/b"):
        (v3.dir / sub).mkdir(parents=True)
        (v3.dir / sub / "messages.jsonl").write_text("{}\n")
    dirs: dict[str, int] = {}
    found, problems = discover(kh / "sessions", dirs)
    assert problems == []
    rel = sorted(os.path.relpath(f.path, kh / "sessions") for f in found)
    assert rel == [f"8e890988228762f5/{v3.session_id}/messages.jsonl", f"cli/{kept.session_id}.jsonl",
                   f"cli/{moved.session_id}.jsonl"]
    time.sleep(0.01)
    kb.KiroV3Writer(kh, folder=f"cli_{moved.session_id}_0", workspace_hash="0f0f0f0f0f0f0f0f").user("moved")
    recent, _ = discover(kh / "sessions", dirs, full=False)
    assert [os.path.basename(os.path.dirname(f.path)) for f in recent] == [f"cli_{moved.session_id}_0"]
    full, _ = discover(kh / "sessions", dirs)
    assert {Path(f.path).parent.name if f.path.endswith("messages.jsonl") else Path(f.path).stem for f in full} == {
        kept.session_id, v3.session_id, f"cli_{moved.session_id}_0"}
    con = kb.create_db(tmp_path / "data" / "kiro-cli" / "data.sqlite3")
    kb.add_conversation(con, "/x", kb.conversation("c1", []), T0, T0)
    con.close()
    [db], _ = discover(tmp_path / "data" / "kiro-cli")
    assert (db.mode, db.locator[1], db.path.endswith("data.sqlite3#c1")) == ("whole", "c1", True)
    assert kiro.SPEC.shaped("data.sqlite3") and kiro.SPEC.shaped("x.jsonl") and not kiro.SPEC.shaped("x.json")


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/kiro (KIRO_HOME=samples/kiro/.kiro): two turns of a Celery broker mix-up, 10 messages."""
    [found], _ = discover(SAMPLE / "sessions")
    parser, messages = parse(Path(found.path))
    sane(messages)
    assert [(m.role, m.kind) for m in messages] == [
        ("user", "text"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"),
        ("user", "text"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "text")]
    s = parser.session
    assert (s.session_id, s.cwd, s.title) == (
        "5b0e7c2a-91d4-4f3e-b6a8-0c2d9e4f7a13", "/home/dev/orders-worker",
        "celery tasks stay PENDING forever since we moved redis into docker compose, but…")
    assert "CELERY_BROKER_URL" in messages[3].text and "pong" in messages[8].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def kiro_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path, Path]]:
    user = tmp_path / "user"
    sessions, data = user / ".kiro" / "sessions", user / ".local" / "share" / "kiro-cli"
    sessions.mkdir(parents=True)
    data.mkdir(parents=True)
    with InprocDaemon(home, [f"kiro={sessions}", f"kiro={data}"]) as d:
        yield d, user, data


def test_daemon_indexes_every_store_once_and_reads_an_append_once(kiro_daemon: tuple[InprocDaemon, Path, Path]) -> None:
    """Through a real daemon and scanner: a 2.x session and a SQLite conversation under default-shaped roots are
    searchable with the right metadata; a second pass reads nothing; an appended turn is read once."""
    d, user, data = kiro_daemon
    w = kb.KiroWriter(user / ".kiro", "/home/dev/heron", "20000000-0000-4000-8000-000000000001")
    w.prompt("the heron importer skips rows with a BOM").shell("rg open importer.py", "open(p)\n",
                                                              "Open it with encoding='utf-8-sig'.")
    con = kb.create_db(data / "data.sqlite3")
    kb.add_conversation(con, "/home/dev/tern", kb.conversation("20000000-0000-4000-8000-000000000002", [
        kb.prompt_entry("the tern parser drops trailing commas", T0, "/home/dev/tern", kb.response("Allow them."))]),
        T0, T0 + timedelta(seconds=4))
    con.close()
    assert d.reconcile()["messages"] == 6
    [hit] = d.search("heron")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "kiro", w.session_id, 4, "the heron importer skips rows with a BOM", "/home/dev/heron")
    assert hit["resumeCommand"] == f"cd /home/dev/heron && kiro-cli chat --resume-id {w.session_id}"
    [old] = d.search("tern")["hits"]
    assert (old["sessionId"], old["cwd"], old["resumeCommand"]) == (
        "20000000-0000-4000-8000-000000000002", "/home/dev/tern", "cd /home/dev/tern && kiro-cli chat --resume")
    again = d.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    w.prompt("does the egret importer need it too").assistant("Yes, same reader.").save()
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 2
    assert d.reconcile(full=False)["messages"] == 0
    [hit] = d.search("egret")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 6
    assert len(d.search("heron", limit=10)["hits"]) == 1


def test_sample_tree_is_self_contained() -> None:
    """The sample is only the transcript and its sidecar (nothing the demo would index twice)."""
    assert sorted(p.name for p in (SAMPLE / "sessions" / "cli").iterdir()) == [
        "5b0e7c2a-91d4-4f3e-b6a8-0c2d9e4f7a13.json", "5b0e7c2a-91d4-4f3e-b6a8-0c2d9e4f7a13.jsonl"]
