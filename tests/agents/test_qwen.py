"""Qwen Code sessions (scanner.qwen): the active chain of the uuid tree, mapping, discovery, robustness."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged
from aivault.scanner.parsers import qwen
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import qwen as qb
from tests.builders.common import BASE_TIME, iso
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed, whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "qwen-code" / "agent-sessions" / "qwen"
QUIRKS = REPO / "tests" / "fixtures" / "quirks" / "qwen" / ".qwen"
SAMPLES = REPO / "samples" / "qwen" / ".qwen"
QUIRK_CHATS = QUIRKS / "projects" / "-home-dev-svc" / "chats"
QUIRK_MAIN = QUIRK_CHATS / "019f1111-0000-7000-8000-000000000001.jsonl"
LEGACY_DIR = "0bf6933e8ef34a3bd42687dda8a365e4f876a36717528baf2e25a671d78459ae"  # sha256 of /home/dev/oldproj
OLD_NS = 1_600_000_000 * 1_000_000_000


def read(path: Path) -> Unit:
    return whole_unit("qwen", path)


sane = well_formed


# -- the copied corpus ------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three Qwen corpus files are the ones tested below."""
    assert sorted(p.name for p in CORPUS.iterdir()) == [
        "019f0000-0000-7000-8000-000000000001.jsonl", "019f0000-0000-7000-8000-000000000004.jsonl",
        "system_telemetry.jsonl"]


def test_corpus_linear_session_with_hook_context_and_notification() -> None:
    """...0001: 6 messages (user, thought + call, tool result, text, the runtime notification as system);
    the hook context part is not user text; ui_telemetry is bookkeeping."""
    unit = read(CORPUS / "019f0000-0000-7000-8000-000000000001.jsonl")
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "Inspect the synthetic fixture."),
        ("assistant", "thinking", "I should read the synthetic file."),
        ("assistant", "tool_call", 'read_file {"path":"/tmp/as-qwen-fixture/project/README.md"}'),
        ("tool", "tool_result", "Synthetic file contents."),
        ("assistant", "text", "The synthetic fixture is valid."),
        ("system", "text", "Synthetic background notification."),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.branch) == (
        "019f0000-0000-7000-8000-000000000001", "Inspect the synthetic fixture.", "/tmp/as-qwen-fixture/project",
        "fixture-branch")
    assert s.resume_command == "cd /tmp/as-qwen-fixture/project && qwen --resume 019f0000-0000-7000-8000-000000000001"
    assert unit.skips == {"bookkeeping": 1}


def test_corpus_rewound_session_follows_the_active_chain() -> None:
    """...0004: the chain from the last conversation record (not the artifact snapshot) skips the rewound
    branch (2 records), joins the two fragments of one uuid, and takes cwd and title from the live branch."""
    unit = read(CORPUS / "019f0000-0000-7000-8000-000000000004.jsonl")
    sane(unit)
    # 41 user, 45 mid-turn user, 46 (thought) + 46 (call, text); 42/43 dead; 44/47 bookkeeping; 48 side record.
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "Begin the active-chain fixture."),
        ("user", "text", "Continue from the rewound branch."),
        ("assistant", "thinking", "Reason over the active branch."),
        ("assistant", "tool_call", 'read_file {"path":"/tmp/as-qwen-fixture/new-project/README.md"}'),
        ("assistant", "text", "Active branch answer."),
    ]
    s = unit.session
    assert (s.title, s.cwd, s.branch) == ("Active branch title", "/tmp/as-qwen-fixture/new-project", None)
    assert unit.skips == {"dead-branch": 2, "bookkeeping": 3}
    # The artifact snapshot's 13:00:08 is not on the chain.
    assert s.started_at == 1786971600000 and s.updated_at == 1786971607000


def test_corpus_trimmed_telemetry_file() -> None:
    """system_telemetry.jsonl (every uuid trimmed to one value): one chain of fragments; the assistant's two text
    parts are one block, its call a tool_call, the empty tool result and the system records give nothing."""
    unit = read(CORPUS / "system_telemetry.jsonl")
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [("assistant", "text"), ("assistant", "tool_call")]
    assert unit.session.session_id == "[trimmed for fixture]" and unit.session.started_at is None
    assert unit.skips == {"bookkeeping": 6, "empty-record": 1}


# -- the hand-written quirk session ---------------------------------------------------------------------------
def test_quirk_session_chain_titles_and_recovery() -> None:
    """Hook part stripped without displayText, dead branch skipped, a glued ``}{`` line recovered, fragments
    joined, an unknown subtype and record type counted, malformed lines counted, parent from parent_session,
    the latest custom title, cwd and branch from the live end of the chain."""
    unit = read(QUIRK_MAIN)
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "add structured logging to svc"),
        ("assistant", "thinking", "Find the entrypoint."),
        ("assistant", "text", "Let me look at main.go."),
        ("assistant", "tool_call", 'read_file {"path":"main.go"}'),
        ("tool", "tool_result", "package main\n\nfunc main() {}"),
        ("user", "text", "use zap instead of slog"),
        ("assistant", "tool_call", 'edit {"file_path":"main.go","new_string":"zap.NewProduction()"}'),
        ("tool", "tool_result", "Edited main.go: zap.NewProduction()"),
        ("assistant", "thinking", "zap needs one logger per request."),
        ("assistant", "text", "Switched svc to zap."),
        ("system", "text", "Background task finished: go test ./... passed"),
    ]
    assert unit.skips == {"glued-records": 1, "malformed-record": 2, "unknown_record:progress": 1, "bookkeeping": 4,
                          "unknown_subtype:brand_new_thing": 1, "dead-branch": 2}
    s = unit.session
    assert (s.title, s.cwd, s.branch, s.parent_session_id) == (
        "Structured logging with zap", "/home/dev/svc/cmd", "feature/zap", "019f0000-aaaa-7000-8000-000000000000")
    assert s.resume_command == "cd /home/dev/svc/cmd && qwen --resume 019f1111-0000-7000-8000-000000000001"


def test_title_is_the_first_prompt_until_a_custom_title(tmp_path: Path) -> None:
    """No custom_title: the first typed prompt (first line) is the title; runtime notifications never are."""
    w = qb.QwenWriter(tmp_path / ".qwen", cwd="/home/dev/t", session_id="t-1")
    w.add("user", subtype="notification", **qb.user_fields("Background task finished"))
    w.user("first line of the prompt\nsecond line").assistant("ok")
    assert read(w.path).session.title == "first line of the prompt"
    w.title("Renamed by hand")
    assert read(w.path).session.title == "Renamed by hand"


def test_rewind_from_the_builder_drops_the_abandoned_branch(tmp_path: Path) -> None:
    """A /rewind branches from an earlier record: only the new branch is indexed."""
    w = qb.QwenWriter(tmp_path / ".qwen", cwd="/home/dev/r", session_id="r-1")
    w.user("try approach A")
    first = w.last
    assert first is not None
    w.assistant("approach A is a dead end").rewind(first).user("try approach B").assistant("approach B works")
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["try approach A", "try approach B", "approach B works"]
    assert unit.skips["dead-branch"] == 1


def test_archived_chat_has_no_resume_command() -> None:
    """chats/archive/<id>.jsonl is searchable but Qwen cannot resume it."""
    unit = read(QUIRK_CHATS / "archive" / "019f1111-0000-7000-8000-000000000002.jsonl")
    assert unit.session.resume_command is None and len(unit.messages) == 2


def test_gemini_fork_era_file_reads_as_gemini_format() -> None:
    """~/.qwen/tmp/<sha256>/chats/session-*.json is Gemini's format: agent qwen, cwd from the older untagged
    environment context (which is dropped), no resume command."""
    unit = read(QUIRKS / "tmp" / LEGACY_DIR / "chats" / "session-2025-08-01T12-00-deadbeef.json")
    s = unit.session
    assert (s.agent, s.session_id, s.cwd, s.resume_command) == (
        "qwen", "deadbeef-0000-4000-8000-000000000006", "/home/dev/oldproj", None)
    assert [m.role for m in unit.messages] == ["user", "assistant"] and unit.skips == {"injected-context": 1}


# -- discovery and roots --------------------------------------------------------------------------------------
def test_discovery_under_default_shaped_roots() -> None:
    """projects/<cwd>/chats/<id>.jsonl and chats/archive/*.jsonl under projects/; session-*.json under tmp/."""
    problems: list[RootProblem] = []
    projects = Root("qwen", str(QUIRKS / "projects"))
    legacy = Root("qwen", str(QUIRKS / "tmp"))
    got = {os.path.relpath(f.path, QUIRKS) for root in (projects, legacy)
           for f in qwen.SPEC.discover(root, problems, {}, True)}
    assert problems == []
    assert got == {
        "projects/-home-dev-svc/chats/019f1111-0000-7000-8000-000000000001.jsonl",
        "projects/-home-dev-svc/chats/archive/019f1111-0000-7000-8000-000000000002.jsonl",
        f"tmp/{LEGACY_DIR}/chats/session-2025-08-01T12-00-deadbeef.json",
    }
    assert qwen.session_file_mode("/x/chats", "a.jsonl.tmp-12") is None
    assert qwen.session_file_mode("/x/memory", "a.jsonl") is None


def test_default_roots_follow_qwen_home_and_runtime_dir(tmp_path: Path) -> None:
    """~/.qwen/projects and ~/.qwen/tmp; QWEN_HOME replaces ~/.qwen; QWEN_RUNTIME_DIR adds <dir>/projects."""
    assert [r.path for r in qwen.default_roots({}, tmp_path)] == [
        str(tmp_path / ".qwen" / "projects"), str(tmp_path / ".qwen" / "tmp")]
    env = {"QWEN_HOME": str(tmp_path / "qh"), "QWEN_RUNTIME_DIR": str(tmp_path / "rt")}
    assert [r.path for r in qwen.default_roots(env, tmp_path)] == [
        str(tmp_path / "qh" / "projects"), str(tmp_path / "rt" / "projects"), str(tmp_path / "qh" / "tmp")]


# -- robustness -------------------------------------------------------------------------------------------------
def _session(tmp_path: Path, tail: bytes) -> Path:
    w = qb.QwenWriter(tmp_path / ".qwen", cwd="/home/dev/x", session_id="x-1")
    w.user("hello qwen")
    with w.path.open("ab") as f:
        f.write(tail)
    return w.path


def test_truncated_last_record_waits_then_is_counted(tmp_path: Path) -> None:
    """A cut-off last record is UnitChanged while the file is fresh, counted once it settled."""
    path = _session(tmp_path, b'{"uuid":"z","parentUuid":null,"type":"assis')
    with pytest.raises(UnitChanged):
        read(path)
    os.utime(path, ns=(OLD_NS, OLD_NS))
    unit = read(path)
    assert [m.text for m in unit.messages] == ["hello qwen"] and unit.skips == {"truncated-record": 1}


def test_unknown_types_and_bad_bytes(tmp_path: Path) -> None:
    """Unknown record types are counted by name, non-objects as malformed, invalid UTF-8 repaired."""
    user = qb.record("x-1", "u9", None, iso(BASE_TIME), "user", "/home/dev/x", **qb.user_fields("placeholder"))
    line = orjson.dumps(user).replace(b"placeholder", b"caf\xe9")
    tail = b'[1, 2]\n{"uuid":"k","parentUuid":null,"sessionId":"x-1","type":"hologram"}\n' + line + b"\n"
    unit = read(_session(tmp_path, tail))
    assert unit.skips == {"malformed-record": 1, "unknown_record:hologram": 1, "dead-branch": 1}
    assert [m.text for m in unit.messages] == ["caf\ufffd"]  # the last record is the leaf of its own chain


def test_empty_file_is_an_empty_session(tmp_path: Path) -> None:
    """An empty session file gives no messages, its file stem as id, and an empty-file count."""
    path = tmp_path / "projects" / "-p" / "chats" / "e-1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    unit = read(path)
    assert (unit.messages, unit.session.session_id, unit.skips) == ([], "e-1", {"empty-file": 1})


# -- the shipped sample ---------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/qwen (QWEN_HOME=samples/qwen/.qwen): 5 messages, the auto title, cwd and branch from the records."""
    [f] = qwen.SPEC.discover(Root("qwen", str(SAMPLES / "projects")), [], {}, True)
    unit = qwen.read_unit(f)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd, s.branch) == ("martin 404s above zoom 14", "/home/dev/tile-server", "main")
    assert "hookContext" not in unit.messages[0].text and "mbtiles" in unit.messages[-1].text
    assert not unit.messages[0].text.endswith("</qwen:user-prompt-submit-context>")


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    projects = tmp_path / "user" / ".qwen" / "projects"
    projects.mkdir(parents=True)
    return {"qwen": projects}


def test_daemon_indexes_a_qwen_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                       roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; an appended record is seen by a recent pass and re-read once, still one session."""
    w = qb.QwenWriter(roots["qwen"].parent, cwd="/home/dev/heron", session_id="019f2222-0000-7000-8000-0000000000e2")
    w.user("the heron importer skips rows with a BOM").tool("read_file", {"path": "importer.py"}, "open(p)")
    w.assistant("Open it with encoding='utf-8-sig'.").title("Heron importer BOM")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("heron")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "qwen", w.session_id, 4, "Heron importer BOM", "/home/dev/heron")
    assert hit["resumeCommand"] == f"cd /home/dev/heron && qwen --resume {w.session_id}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.user("does the egret importer need it too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("egret")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 5
    assert len(inproc_daemon.search("heron", limit=10)["hits"]) == 1
