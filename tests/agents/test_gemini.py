"""Gemini CLI sessions (scanner.parsers.gemini and its records module): discovery, replay, mapping, robustness."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers import gemini
from aivault.scanner.sources import Found, Root, RootProblem, Unit, file_signature
from tests.builders import gemini as gb
from tests.builders.common import BASE_TIME, iso
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "gemini-cli"
QUIRKS = REPO / "tests" / "fixtures" / "quirks" / "gemini" / ".gemini"
SAMPLES = REPO / "samples" / "gemini" / ".gemini"
QUIRK_APP = QUIRKS / "tmp" / "quirk-app" / "chats"
QUIRK_MAIN = QUIRK_APP / "session-2026-03-03T08-00-5f0c2d1e.jsonl"
LEGACY_HASH_DIR = "5099ecbed77b811ecf453e387113436f9143c1dbd093df1e3ac45306cf40b33c"  # sha256 of /home/dev/legacy-svc
OLD_NS = 1_600_000_000 * 1_000_000_000  # an mtime long settled


def found(path: Path) -> Found:
    st = path.stat()
    return Found(str(path), "gemini", st.st_dev, st.st_ino, st.st_size, file_signature(str(path)) or 0, "whole")


def read(path: Path) -> Unit:
    return gemini.read_unit(found(path))


def settle(path: Path) -> Path:
    os.utime(path, ns=(OLD_NS, OLD_NS))
    return path


def sane(unit: Unit) -> None:
    well_formed(unit)
    s = unit.session
    if s.started_at is not None:
        assert s.updated_at is not None and s.started_at <= s.updated_at


# -- the copied corpus ------------------------------------------------------------------------------
# Counted by reading each file: one message per user record, per thought, per non-empty text, and a
# tool_call + tool_result per toolCalls[] entry; info/error/warning records are one system message.
CORPUS_FILES = {
    # u1 + (call, result) + text "Hello! I listed the files." = 4
    "agent-sessions/gemini/jsonl_v040.jsonl": (4, "gemini_stage0_jsonl", "Say hello and list files."),
    # Hello + (thought, "Hi!") = 3
    "agent-sessions/gemini/small.json": (3, "session-2026-01-16T18-34-3739ef95", "Hello"),
    # m1 + m2 (thought, call, result) + m2b (call, result) + m3 info + m4 model parts + m5 + m6 = 10
    "agent-sessions/gemini/large.json": (10, "session-2025-12-16T23-47-b4f17607", "Run a command"),
    # g1 + g2 (thought, text, call, result) + g3 + g4 (thought, text) = 8
    "agent-history/v1/gemini_golden.json": (8, "golden-gemini-001", "Read the package.json file"),
    # 4 user records + 4 gemini records with (thought, text, call, result) + ge9 (thought, text) = 22
    "agent-history/rejections/gemini_with_tool_error.jsonl": (22, "rejection-gemini-001",
                                                              "Edit the config file to change the port to 9000"),
}


def test_corpus_list_is_complete() -> None:
    """Every Gemini corpus file is either a listed transcript or the logs.json prompt index."""
    files = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.json*")}
    assert files == set(CORPUS_FILES) | {"agent-history/telemetry/gemini_logs.json"}


@pytest.mark.parametrize("relpath", sorted(CORPUS_FILES))
def test_corpus_file_parses_to_counted_messages(relpath: str) -> None:
    """Each corpus transcript gives the hand-counted messages, its own session id and its first prompt as title."""
    count, sid, title = CORPUS_FILES[relpath]
    unit = read(CORPUS / relpath)
    sane(unit)
    assert (len(unit.messages), unit.session.session_id, unit.session.title) == (count, sid, title)
    assert unit.session.agent == "gemini" and unit.session.cwd is None  # no registry beside the corpus
    assert unit.session.resume_command == f"gemini --resume {sid}"


def test_corpus_tool_error_result_and_legacy_model_parts() -> None:
    """A failed call's functionResponse error is its result; legacy ``model`` records with ``parts`` are
    assistant text."""
    rejected = read(CORPUS / "agent-history/rejections/gemini_with_tool_error.jsonl").messages
    results = [m.text for m in rejected if m.kind == "tool_result"]
    assert results[1] == "Failed to edit, 0 occurrences found for old_string"
    large = read(CORPUS / "agent-sessions/gemini/large.json").messages
    assert [m.text for m in large if m.role == "assistant" and m.kind == "text"] == ["Captured multiline output.", "Ok"]
    assert [(m.role, m.text) for m in large if m.role == "system"] == [("system", "Request cancelled.")]


def test_logs_json_is_not_a_session() -> None:
    """The logs.json prompt index is never discovered, and read as a unit it is refused, not guessed at."""
    assert gemini.session_file_mode(str(QUIRKS / "tmp" / "quirk-app"), "logs.json") is None
    with pytest.raises(UnitUnreadable):
        read(CORPUS / "agent-history/telemetry/gemini_logs.json")


# -- discovery ----------------------------------------------------------------------------------------
def test_discovery_takes_sessions_and_subagents_only() -> None:
    """Under a default-shaped root: session-*.json(l) and chats/<parent>/<id>.jsonl; never .tmp-<pid>,
    .unreadable-*, logs.json, checkpoints, shell_history, or a legacy .json already migrated to .jsonl."""
    root = Root("gemini", str(QUIRKS / "tmp"))
    problems: list[RootProblem] = []
    paths = {os.path.relpath(f.path, root.path) for f in gemini.SPEC.discover(root, problems, {}, True)}
    assert problems == []
    assert paths == {
        "quirk-app/chats/session-2026-03-03T08-00-5f0c2d1e.jsonl",
        "quirk-app/chats/session-2026-02-01T10-00-cc33dd44.jsonl",
        "quirk-app/chats/5f0c2d1e-0000-4000-8000-000000000001/7a7a7a7a-0000-4000-8000-000000000002.jsonl",
        f"{LEGACY_HASH_DIR}/chats/session-2025-11-02T09-15-aa11bb22.json",
        "marked/chats/session-2026-04-04T12-00-bb22cc33.jsonl",
    }


def test_default_roots_follow_gemini_cli_home(tmp_path: Path) -> None:
    """``~/.gemini/tmp`` by default; GEMINI_CLI_HOME replaces $HOME, not ~/.gemini."""
    assert [r.path for r in gemini.default_roots({}, tmp_path)] == [str(tmp_path / ".gemini" / "tmp")]
    other = tmp_path / "elsewhere"
    assert [r.path for r in gemini.default_roots({"GEMINI_CLI_HOME": str(other)}, tmp_path)] == \
        [str(other / ".gemini" / "tmp")]


# -- replay and mapping (the hand-written quirk log) -----------------------------------------------------
def test_quirk_log_replays_updates_rewind_and_checkpoint() -> None:
    """Repeated ids replace in place, $rewindTo drops the message and all after it, a $set.messages checkpoint
    replaces the list and later bare records append; injected context and its canned reply are dropped."""
    unit = read(QUIRK_MAIN)
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "list the flaky tests in quirk-app"),
        ("assistant", "text", "Looking."),
        ("assistant", "tool_call", 'glob {"pattern":"tests/**/*.py"}'),  # once, though the checkpoint repeats it
        ("tool", "tool_result", "tests/test_retry.py"),  # the updated record's result
        ("user", "text", "mark test_retry as xfail instead"),
        ("assistant", "thinking", "Edit\nAdd pytest.mark.xfail to test_retry"),
        ("assistant", "text", "Marked test_retry as xfail."),
        ("assistant", "tool_call", 'replace {"file_path":"tests/test_retry.py","old_string":"def test_retry",'
                                   '"new_string":"@pytest.mark.xfail\\ndef test_retry"}'),
        ("tool", "tool_result", "Successfully modified file: tests/test_retry.py (1 replacements)."),
        ("system", "text", "Request cancelled."),
    ]
    assert unit.skips == {"replaced-record": 1, "rewound": 2, "checkpointed": 5, "unknown_record:surprise": 1,
                          "injected-context": 2, "empty-record": 1}
    s = unit.session
    assert s.session_id == "5f0c2d1e-0000-4000-8000-000000000001"
    assert s.title == "Quarantine the flaky retry test"  # the $set summary
    assert s.cwd == "/home/dev/quirk-app"  # registry slug
    assert s.resume_command == "cd /home/dev/quirk-app && gemini --resume 5f0c2d1e-0000-4000-8000-000000000001"
    assert s.started_at == 1772524800000 and s.updated_at == 1772524850000


def test_rewind_to_an_unknown_id_empties_the_conversation(tmp_path: Path) -> None:
    """As in Gemini CLI's loader, a $rewindTo naming no known message drops everything before it."""
    path = tmp_path / "chats" / "session-x.jsonl"
    path.parent.mkdir()
    t = iso(BASE_TIME)
    path.write_bytes(gb.jsonl([gb.metadata("s1", "/p", t), gb.user_message("a", t, "gone soon"),
                               gb.rewind("nope"), gb.user_message("b", t, "kept")]))
    unit = read(settle(path))
    assert [m.text for m in unit.messages] == ["kept"] and unit.skips["rewound"] == 1


def test_injected_context_is_never_title_and_names_the_workspace(tmp_path: Path) -> None:
    """With no registry, the <session_context> block is dropped but its workspace directory becomes the cwd."""
    path = tmp_path / "tmp" / "unknown-slug" / "chats" / "session-2026-03-01T10-00-s2.jsonl"
    path.parent.mkdir(parents=True)
    t = iso(BASE_TIME)
    path.write_bytes(gb.jsonl([
        gb.metadata("s2", "/work/ctx-app", t),
        gb.user_message("c", t, gb.session_context("/work/ctx-app", "/tmp/x")),
        gb.gemini_message("d", t, gb.CONTEXT_ACK),
        gb.user_message("e", t, "the real question", display="the real question"),
    ]))
    unit = read(path)
    assert [m.text for m in unit.messages] == ["the real question"]
    assert unit.session.title == "the real question" and unit.session.cwd == "/work/ctx-app"


def test_display_content_wins_over_expanded_file_content() -> None:
    """A user turn's displayContent (what was typed) is indexed, not the @file expansion; a legacy hash
    folder resolves through the registry by hash."""
    unit = read(QUIRKS / "tmp" / LEGACY_HASH_DIR / "chats" / "session-2025-11-02T09-15-aa11bb22.json")
    assert [(m.role, m.text[:23]) for m in unit.messages] == [
        ("user", "explain @src/app.py"), ("assistant", "It prints hi and exits."),
        ("system", "[API Error: Quota excee")]
    assert unit.session.cwd == "/home/dev/legacy-svc"


def test_project_root_marker_names_the_cwd() -> None:
    """A project folder's .project_root file names the project, even when projects.json does not list it."""
    unit = read(QUIRKS / "tmp" / "marked" / "chats" / "session-2026-04-04T12-00-bb22cc33.jsonl")
    assert unit.session.cwd == "/srv/marked-project"
    assert unit.session.resume_command == \
        "cd /srv/marked-project && gemini --resume bb22cc33-0000-4000-8000-000000000005"


def test_unresolvable_legacy_hash_folder_has_no_cwd(tmp_path: Path) -> None:
    """A hex folder that neither the registry nor a marker knows leaves cwd null (and resume without cd)."""
    folder = tmp_path / ".gemini" / "tmp" / gb.project_hash("/nowhere") / "chats"
    folder.mkdir(parents=True)
    t = iso(BASE_TIME)
    path = folder / "session-2026-03-01T10-00-s3.json"
    path.write_bytes(orjson.dumps(gb.legacy_document(gb.metadata("s3", "/nowhere", t, kind=None),
                                                     [gb.user_message("u", t, "hello there")])))
    unit = read(path)
    assert unit.session.cwd is None and unit.session.resume_command == "gemini --resume s3"


def test_subagent_file_has_its_parent_and_no_resume() -> None:
    """chats/<parentSessionId>/<sessionId>.jsonl: its own id, the folder's parent id, no resume command."""
    unit = read(QUIRK_APP / "5f0c2d1e-0000-4000-8000-000000000001" / "7a7a7a7a-0000-4000-8000-000000000002.jsonl")
    s = unit.session
    assert (s.session_id, s.parent_session_id, s.resume_command, s.message_count) == (
        "7a7a7a7a-0000-4000-8000-000000000002", "5f0c2d1e-0000-4000-8000-000000000001", None, 2)
    assert s.cwd == "/home/dev/quirk-app"


def test_resume_command_is_shell_quoted(tmp_path: Path) -> None:
    """A cwd with spaces and quotes is quoted for the shell."""
    w = gb.GeminiWriter(tmp_path / ".gemini", cwd="/home/dev/it's my app", session_id="s-4")
    w.user("hi")
    assert read(w.path).session.resume_command == "cd '/home/dev/it'\"'\"'s my app' && gemini --resume s-4"


def test_pending_tool_call_and_display_only_result(tmp_path: Path) -> None:
    """A call still waiting has no result message; a call whose result is only resultDisplay uses it."""
    path = tmp_path / "chats" / "session-y.jsonl"
    path.parent.mkdir()
    t = iso(BASE_TIME)
    pending = gb.tool_call("c1", "run_shell_command", {"command": "make"}, None, t, status="executing")
    shown = {**gb.tool_call("c2", "read_file", {"path": "a"}, None, t), "resultDisplay": "file a, 3 lines"}
    path.write_bytes(gb.jsonl([gb.metadata("s5", "/p", t), gb.gemini_message("m", t, "", tool_calls=[pending, shown])]))
    assert [(m.kind, m.text) for m in read(path).messages] == [
        ("tool_call", 'run_shell_command {"command":"make"}'), ("tool_call", 'read_file {"path":"a"}'),
        ("tool_result", "file a, 3 lines")]


# -- robustness ---------------------------------------------------------------------------------------------
def _log(tmp_path: Path, tail: bytes) -> Path:
    path = tmp_path / "chats" / "session-z.jsonl"
    path.parent.mkdir(exist_ok=True)
    t = iso(BASE_TIME)
    path.write_bytes(gb.jsonl([gb.metadata("s6", "/p", t), gb.user_message("a", t, "first words")]) + tail)
    return path


def test_truncated_last_record_waits_while_written_then_is_counted(tmp_path: Path) -> None:
    """A cut-off last line of a file just written is UnitChanged (retried); once settled it is counted and the
    rest read."""
    path = _log(tmp_path, b'{"id":"b","timestamp":"2026-03-01T10:00:00Z","type":"us')
    with pytest.raises(UnitChanged):
        read(path)
    unit = read(settle(path))
    assert [m.text for m in unit.messages] == ["first words"] and unit.skips == {"truncated-record": 1}


def test_unknown_shapes_and_bad_bytes_are_counted(tmp_path: Path) -> None:
    """Unknown record and message types are counted by name, non-JSON lines as malformed, bad UTF-8 repaired."""
    tail = (b'{"kind":"mystery"}\n{"id":"q","type":"hologram","content":"x"}\nnot json\n'
            b'{"id":"r","type":"user","content":"caf\xe9 \xff ok"}\n')
    unit = read(_log(tmp_path, tail))
    assert unit.skips == {"unknown_record:(none)": 1, "unknown_record:hologram": 1, "malformed-record": 1}
    assert [m.text for m in unit.messages] == ["first words", "caf\ufffd \ufffd ok"]


def test_empty_files_are_empty_sessions(tmp_path: Path) -> None:
    """An empty .jsonl or .json is a session with no messages, named by its file, not an error."""
    for name in ("session-e1.jsonl", "session-e2.json"):
        path = tmp_path / "chats" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
        unit = read(path)
        assert (unit.messages, unit.session.session_id, unit.skips) == ([], name.rsplit(".", 1)[0], {"empty-file": 1})


def test_broken_document_waits_then_is_unreadable(tmp_path: Path) -> None:
    """A legacy .json that does not parse is UnitChanged while fresh (being written), then UnitUnreadable."""
    path = tmp_path / "chats" / "session-b.json"
    path.parent.mkdir()
    path.write_bytes(b'{"sessionId": "b", "messages": [{"id": ')
    with pytest.raises(UnitChanged):
        read(path)
    with pytest.raises(UnitUnreadable):
        read(settle(path))


def test_vanished_file_is_changed_not_failed(tmp_path: Path) -> None:
    """A file deleted between discovery and reading is retried (UnitChanged), not reported as broken."""
    path = _log(tmp_path, b"")
    f = found(path)
    path.unlink()
    with pytest.raises(UnitChanged):
        gemini.read_unit(f)


# -- the shipped sample ---------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/gemini (GEMINI_CLI_HOME=samples/gemini) holds one session: 5 messages, the summary title, cwd from
    the registry."""
    [f] = gemini.SPEC.discover(Root("gemini", str(SAMPLES / "tmp")), [], {}, True)
    unit = gemini.read_unit(f)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd, s.session_id) == ("Stripe webhook signature fails behind nginx", "/home/dev/webhook-relay",
                                              "3c9e51a7-5b2d-4f0e-9a61-8d4c2e7b1f30")
    assert "express.raw" in unit.messages[-1].text and unit.skips == {"injected-context": 2}


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    gemini_tmp = tmp_path / "user" / ".gemini" / "tmp"
    gemini_tmp.mkdir(parents=True)
    return {"gemini": gemini_tmp}


def test_daemon_indexes_a_gemini_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                         roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; an in-place append is seen by a recent pass and re-read once, still one session."""
    w = gb.GeminiWriter(roots["gemini"].parent, cwd="/home/dev/pelican",
                        session_id="9d0f0000-0000-4000-8000-00000000e2e0")
    w.user("why does the pelican parser crash on empty input").tool("read_file", {"path": "parser.py"}, "def parse(s):")
    w.assistant("It indexes s[0] before checking the length.").title("Pelican parser crash")
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 4
    [hit] = inproc_daemon.search("pelican")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "gemini", w.session_id, 4, "Pelican parser crash", "/home/dev/pelican")
    assert hit["resumeCommand"] == f"cd /home/dev/pelican && gemini --resume {w.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)  # a distinct mtime for the append
    w.user("and the albatross parser too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("albatross")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 5
    assert len(inproc_daemon.search("pelican", limit=10)["hits"]) == 1


def test_a_legacy_document_migrated_to_jsonl_stays_one_session(inproc_daemon: InprocDaemon,
                                                               roots: dict[str, Path]) -> None:
    """A session-*.json indexed before Gemini resumed it as session-*.jsonl is replaced by the log (one session,
    the new message searchable, the old file's rows gone rather than left as an unverifiable copy)."""
    sid = "9d0f0000-0000-4000-8000-00000000e2e1"
    chats = roots["gemini"] / "heron" / "chats"
    chats.mkdir(parents=True)
    legacy = chats / "session-2026-02-01T10-00-9d0f0000.json"
    meta = gb.metadata(sid, "/home/dev/heron", iso(BASE_TIME))
    messages = [gb.user_message("m1", iso(BASE_TIME), "why does the heron build fail on arm64"),
                gb.gemini_message("m2", iso(BASE_TIME), "The heron toolchain pins an x86 linker.")]
    legacy.write_bytes(orjson.dumps(gb.legacy_document(meta, messages)))
    assert inproc_daemon.reconcile()["messages"] == 2
    assert len(inproc_daemon.search("heron")["hits"]) == 1
    # Gemini's migration on resume: the log is written beside the document, which stays.
    later = gb.user_message("m3", iso(BASE_TIME), "and the egret build on riscv")
    legacy.with_suffix(".jsonl").write_bytes(gb.jsonl([meta, *messages, later]))
    assert inproc_daemon.reconcile()["messages"] == 3
    [hit] = inproc_daemon.search("heron", limit=10)["hits"]
    assert hit["sessionId"] == sid and hit["messageCount"] == 3
    assert [h["sessionId"] for h in inproc_daemon.search("egret")["hits"]] == [sid]
    ix = inproc_daemon.service.indexer
    assert [p for p, f in ix.writer.files.items() if f.present] == [str(legacy.with_suffix(".jsonl"))]
