"""Kimi Code and the Python Kimi CLI (scanner.kimi, docs/formats.md §20): both wire formats, sub-agents,
titles and work dirs beside the logs, discovery, robustness, and a real daemon end to end."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest

from aivault.errors import ParserStateError
from aivault.home import Home
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.parsers.kimi import SPEC, KimiParser, default_roots
from aivault.scanner.parsers.kimi.store import side_titles
from aivault.scanner.sources import Root
from tests.builders import kimi as kb
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "kimi" / "agent-sessions"
SAMPLES = REPO / "samples" / "kimi"
CORPUS_SESSION = "session_1bcbe023-4f7e-4971-9dc9-43b8756045b0"
CORPUS_CWD = "/private/tmp/as-agent-lab/kimi/project"


def parse(path: Path) -> tuple[KimiParser, list[Message]]:
    parser = KimiParser(str(path))
    return parser, [m for line in file_lines(path) for m in parser.feed(line)]


def feed(parser: KimiParser, *records: dict[str, Any] | bytes) -> list[Message]:
    out: list[Message] = []
    for r in records:
        out += parser.feed(r if isinstance(r, bytes) else json.dumps(r).encode())
    return out


def sane(parser: KimiParser, messages: list[Message]) -> None:
    assert parser.session.message_count == len(messages)
    for m in messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip() and m.ts is not None


@pytest.fixture
def corpus_tree(tmp_path: Path) -> Path:
    """The corpus files laid out as Kimi Code keeps them: main and agent-0 logs beside state.json."""
    session = tmp_path / ".kimi-code" / "sessions" / "wd_project_ac3bb318f98e" / CORPUS_SESSION
    for agent, name in (("main", "assistant_tools.jsonl"), ("agent-0", "subagent_agent-0.jsonl")):
        (session / "agents" / agent).mkdir(parents=True)
        shutil.copy(CORPUS / name, session / "agents" / agent / "wire.jsonl")
    shutil.copy(CORPUS / "assistant_tools.state.json", session / "state.json")
    return session


# -- the copied corpus (trimmed captures of a real Kimi Code 0.29 run) -----------------------------------
def test_corpus_list_is_complete() -> None:
    """The three Kimi corpus files are the ones tested below."""
    assert sorted(p.name for p in CORPUS.iterdir()) == [
        "assistant_tools.jsonl", "assistant_tools.state.json", "subagent_agent-0.jsonl"]


def test_corpus_main_agent(corpus_tree: Path) -> None:
    """The main log: 8 prompts (their context copies and 5 injected reminders dropped), 22 thinking and 6 text
    parts, 19 calls with 19 results, the compaction summary last; title and work dir from state.json."""
    parser, messages = parse(corpus_tree / "agents" / "main" / "wire.jsonl")
    sane(parser, messages)
    assert Counter((m.role, m.kind) for m in messages) == {
        ("user", "text"): 8, ("assistant", "thinking"): 22, ("assistant", "text"): 6,
        ("assistant", "tool_call"): 19, ("tool", "tool_result"): 19, ("system", "text"): 1}
    assert [m.text for m in messages if m.role == "user"] == [
        "hi", "hi", "hi", "run ls command", "cat /nonexistent-file-xyz",
        "run subagent to count swift files in this repo", "plan counting all html files in this repo",
        'read README.md then grep for "Kimi"']
    assert [(m.role, m.kind, m.text) for m in messages[5:9]] == [
        ("user", "text", "run ls command"),
        ("assistant", "thinking", "The user wants me to run the `ls` command. I'll use Bash to run it in the "
                                  "current working directory."),
        ("assistant", "tool_call", 'Bash {"command":"ls"}'),
        ("tool", "tool_result", messages[8].text)]
    assert messages[8].text.startswith("agents.md\nAgentSessions\n")
    error = next(m for m in messages if m.kind == "tool_result" and "nonexistent" in m.text)
    assert error.text == "cat: /nonexistent-file-xyz: No such file or directory\nCommand failed with exit code: 1."
    assert messages[-1].role == "system" and messages[-1].text.startswith("I am writing this handoff note")
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.parent_session_id) == (CORPUS_SESSION, "hi", CORPUS_CWD, None)
    assert s.resume_command == f"cd {CORPUS_CWD} && kimi --session {CORPUS_SESSION}"
    assert (s.started_at, s.updated_at) == (1785612803281, 1785619064679)
    assert parser.stats.extra == {"prompt-echo": 8, "injected-context": 5}
    assert parser.stats.malformed == 0


def test_corpus_subagent(corpus_tree: Path) -> None:
    """agents/agent-0: its own session, linked to the main one; the task (origin system_trigger) is its prompt,
    all context so no title line: the title names the explore profile; resumed through the parent."""
    parser, messages = parse(corpus_tree / "agents" / "agent-0" / "wire.jsonl")
    sane(parser, messages)
    assert [(m.role, m.kind) for m in messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "thinking"), ("assistant", "text")]
    assert messages[0].text.startswith("<git-context>\nWorking directory: ")
    assert messages[6].text == "    3124\n"
    s = parser.session
    assert (s.session_id, s.parent_session_id, s.title, s.cwd) == (
        f"{CORPUS_SESSION}:agent-0", CORPUS_SESSION, "subagent (explore)", CORPUS_CWD)
    assert s.resume_command == f"cd {CORPUS_CWD} && kimi --session {CORPUS_SESSION}"
    assert parser.stats.extra == {"prompt-echo": 1}


@pytest.mark.parametrize("agent", ["main", "agent-0"])
def test_corpus_resumes_at_every_split_point(corpus_tree: Path, agent: str) -> None:
    """Parsing lines 1..k, saving the state through msgpack and resuming for the rest equals one whole pass."""
    path = corpus_tree / "agents" / agent / "wire.jsonl"
    assert_resumes_at_every_split(lambda state: KimiParser(str(path), state), path)


# -- Kimi Code sessions from the builder ------------------------------------------------------------------
def test_subagent_title_takes_the_task_past_its_context(tmp_path: Path) -> None:
    """A sub-agent's task after its closed <git-context> block is its title; a nested sub-agent's parent is the
    agent that started it; the main session's title is the first prompt while state.json has none."""
    w = kb.KimiCodeWriter(tmp_path / ".kimi-code", cwd="/home/dev/shop", session_uuid="0000-1")
    w.user("why does checkout double-charge").say("Looking.")
    sub = w.subagent("coder")
    sub.user("<git-context>\nBranch: main\n</git-context>\n\nFind the retry loop in payments.py",
             origin={"kind": "system_trigger", "name": "subagent"}).say("Line 40.")
    nested = sub.subagent("explore")
    nested.user("list callers", origin={"kind": "system_trigger", "name": "subagent"}).say("two callers")
    main = parse(w.path)[0].session
    assert (main.title, main.session_id) == ("why does checkout double-charge", "session_0000-1")
    child = parse(sub.path)[0].session
    assert (child.title, child.parent_session_id) == ("subagent (coder): Find the retry loop in payments.py",
                                                      "session_0000-1")
    grandchild = parse(nested.path)[0].session
    assert (grandchild.session_id, grandchild.parent_session_id) == ("session_0000-1:agent-1",
                                                                    "session_0000-1:agent-0")


def test_prompt_echo_injection_and_protocols_without_loop_events(tmp_path: Path) -> None:
    """A prompt is indexed once (its context copy dropped), a reminder not at all; a log of an older protocol
    with only context messages gives user, assistant, call and tool result from them; once loop events exist,
    context copies of assistant and tool messages are counted, not indexed."""
    parser = KimiParser(str(tmp_path / "s" / "agents" / "main" / "wire.jsonl"))
    out = feed(parser,
               kb.append_message("user", "old protocol prompt", 1_785_000_000_000),
               {"type": "context.append_message", "time": 1_785_000_001_000,
                "message": {"role": "assistant", "content": [{"type": "text", "text": "old reply"}],
                            "toolCalls": [{"id": "c1",
                                           "function": {"name": "Bash", "arguments": '{"command":"ls"}'}}]}},
               {"type": "context.append_message", "time": 1_785_000_002_000,
                "message": {"role": "tool", "content": "a.txt", "toolCallId": "c1"}},
               kb.turn_prompt("new prompt", 1_785_000_003_000),
               kb.append_message("user", "<system-reminder>plan mode</system-reminder>", 1_785_000_003_500,
                                 {"kind": "injection", "variant": "plan_mode"}),
               kb.append_message("user", "new prompt", 1_785_000_004_000, {"kind": "user"}),
               kb.loop(kb.part("s", "text", "new reply"), 1_785_000_005_000),
               {"type": "context.append_message", "time": 1_785_000_006_000,
                "message": {"role": "assistant", "content": [{"type": "text", "text": "copied reply"}]}})
    assert [(m.role, m.kind, m.text) for m in out] == [
        ("user", "text", "old protocol prompt"), ("assistant", "text", "old reply"),
        ("assistant", "tool_call", 'Bash {"command":"ls"}'), ("tool", "tool_result", "a.txt"),
        ("user", "text", "new prompt"), ("assistant", "text", "new reply")]
    assert parser.stats.extra == {"injected-context": 1, "prompt-echo": 1, "context-copy": 1}
    assert parser.session.title == "old protocol prompt"


def test_state_json_title_wins_and_side_titles_report_renames(tmp_path: Path) -> None:
    """state.json's title names the session; a rename (state.json only) is reported once by side_titles."""
    w = kb.KimiCodeWriter(tmp_path / ".kimi-code", cwd="/home/dev/a", session_uuid="0000-2")
    w.user("first prompt").say("ok")
    root = Root("kimi", str(tmp_path / ".kimi-code" / "sessions"))
    sigs: dict[str, Any] = {}
    assert list(side_titles(root, sigs)) == []  # no title yet
    w.rename("Renamed by hand")
    assert parse(w.path)[0].session.title == "Renamed by hand"
    assert list(side_titles(root, sigs)) == [("session_0000-2", "Renamed by hand")]
    assert list(side_titles(root, sigs)) == []


# -- the Python Kimi CLI ------------------------------------------------------------------------------------
def test_kimi_cli_session_and_subagent_instance(tmp_path: Path) -> None:
    """Envelope records (TurnBegin, ContentPart, ToolCall with a JSON-string argument, ToolResult); the work
    dir from kimi.json's md5; custom_title wins; a sub-agent instance is a session titled by its description;
    the nested SubagentEvent copy in the parent log is counted, not indexed."""
    share = tmp_path / ".kimi"
    w = kb.KimiCliWriter(share, cwd="/home/dev/tiles", session_id="s-1", custom_title="LFS pointers in CI")
    w.user("rasterio cannot open the tif").think("Maybe an LFS pointer.")
    w.tool("Shell", {"command": "file a.tif"}, "a.tif: ASCII text")
    w.event("SubagentEvent", {"agent_id": "a1", "subagent_type": "explore",
                              "event": {"type": "TurnBegin", "payload": {"user_input": "copied"}}})
    w.event("BrandNewEvent", {}).say("Enable lfs in checkout.")
    sub = w.subagent("a1", "explore", "Find LFS-tracked files")
    sub.user("find files tracked by git lfs").say("data/*.tif")
    parser, messages = parse(w.path)
    assert [(m.role, m.kind, m.text) for m in messages] == [
        ("user", "text", "rasterio cannot open the tif"), ("assistant", "thinking", "Maybe an LFS pointer."),
        ("assistant", "tool_call", 'Shell {"command":"file a.tif"}'), ("tool", "tool_result", "a.tif: ASCII text"),
        ("assistant", "text", "Enable lfs in checkout.")]
    s = parser.session
    assert (s.session_id, s.title, s.cwd) == ("s-1", "LFS pointers in CI", "/home/dev/tiles")
    assert s.resume_command == "cd /home/dev/tiles && kimi --session s-1"
    assert parser.stats.extra == {"subagent-event": 1, "unknown_record:BrandNewEvent": 1}
    child, child_messages = parse(sub.path)
    assert (child.session.session_id, child.session.parent_session_id, child.session.title) == (
        "s-1:a1", "s-1", "subagent (explore): Find LFS-tracked files")
    assert [m.text for m in child_messages] == ["find files tracked by git lfs", "data/*.tif"]


def test_kimi_cli_without_kimi_json_has_no_folder_and_titles_from_the_first_prompt(tmp_path: Path) -> None:
    """No kimi.json entry: no cwd (the md5 cannot be reversed), resume without cd; no custom_title: the first
    TurnBegin (a plain string here, as older CLIs wrote it) is the title."""
    w = kb.KimiCliWriter(tmp_path / ".kimi", cwd="/home/dev/x", session_id="s-2", register=False)
    w.event("TurnBegin", {"user_input": "string input prompt\nsecond line"}).say("done")
    s = parse(w.path)[0].session
    assert (s.cwd, s.title, s.resume_command) == (None, "string input prompt", "kimi --session s-2")


# -- robustness -----------------------------------------------------------------------------------------------
def test_unknown_malformed_and_odd_records_are_counted_never_fatal(tmp_path: Path) -> None:
    """Bad JSON, a non-object, an unknown record type and loop event, a media part and a loop event that is
    not an object are counted; bookkeeping families (permission.*, plan_mode.*) are silent."""
    parser = KimiParser(str(tmp_path / "s" / "agents" / "main" / "wire.jsonl"))
    out = feed(parser, b'{"type": "turn.prompt", "inp', b"[1, 2]", {"type": "hologram.beam", "time": 1_785_000_000_000},
               kb.loop({"type": "quantum.leap"}, 1_785_000_000_100),
               kb.loop({"type": "content.part", "part": {"type": "image_url", "image_url": "x"}}, 1_785_000_000_200),
               {"type": "context.append_loop_event", "event": "oops", "time": 1_785_000_000_300},
               {"type": "permission.record_approval_result", "time": 1_785_000_000_400},
               {"type": "plan_mode.enter", "time": 1_785_000_000_500}, b"",
               kb.turn_prompt("caf\u00e9 still parses", 1_785_000_001_000))
    assert [m.text for m in out] == ["caf\u00e9 still parses"]
    assert parser.stats.malformed == 3
    assert parser.stats.extra == {"unknown_record:hologram.beam": 1, "unknown_event:quantum.leap": 1,
                                  "unparsed_part:image_url": 1}


def test_state_stays_bounded_and_foreign_state_is_rejected(tmp_path: Path) -> None:
    """Thousands of prompts keep the state small; a state of another version or shape is refused."""
    parser = KimiParser(str(tmp_path / "a" / "wire.jsonl"))
    for i in range(2000):
        feed(parser, kb.turn_prompt(f"prompt {i}", 1_785_000_000_000 + i), kb.loop(kb.part("s", "text", "ok"), 1))
    assert len(msgpack.packb(parser.state())) < 8192
    good = parser.state()
    for bad in ({}, {**good, "v": 99}, {**good, "prompt": "x"}, {**good, "t0": "soon"}):
        with pytest.raises(ParserStateError):
            KimiParser("/x/wire.jsonl", bad)


# -- roots and discovery ----------------------------------------------------------------------------------------
def test_default_roots_follow_the_environment(tmp_path: Path) -> None:
    """~/.kimi-code and ~/.kimi sessions, moved by KIMI_CODE_HOME / KIMI_SHARE_DIR; Kimi Work's kernel home under
    macOS Application Support and the Linux XDG config and data folders."""
    work = "kimi-desktop/daimon-share/daimon/runtime/kimi-code/home/sessions"
    assert [r.path for r in default_roots({}, tmp_path)] == [
        str(tmp_path / ".kimi-code/sessions"), str(tmp_path / ".kimi/sessions"),
        str(tmp_path / "Library/Application Support" / work), str(tmp_path / ".config" / work),
        str(tmp_path / ".local/share" / work)]
    env = {"KIMI_CODE_HOME": str(tmp_path / "kc"), "KIMI_SHARE_DIR": str(tmp_path / "ks"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    paths = [r.path for r in default_roots(env, tmp_path)]
    assert paths[:2] == [str(tmp_path / "kc/sessions"), str(tmp_path / "ks/sessions")]
    assert paths[3:] == [str(tmp_path / "cfg" / work), str(tmp_path / "data" / work)]


def test_discovery_finds_every_layout_and_skips_kimi_work_internals(tmp_path: Path) -> None:
    """Kimi Code agents, Kimi CLI sessions and sub-agent instances, Kimi Work conv-* (both layouts) are units;
    ctitle-/sklsum-/dvlt- sessions, plans and context files are not."""
    root = tmp_path / "sessions"
    files = ["wd_a_0123456789ab/session_1/agents/main/wire.jsonl",
             "wd_a_0123456789ab/session_1/agents/agent-0/wire.jsonl",
             "wd_a_0123456789ab/session_1/agents/main/plans/plan.txt", "wd_a_0123456789ab/session_1/state.json",
             "0cc175b9c0f1b6a831c399e269772661/s-1/wire.jsonl", "0cc175b9c0f1b6a831c399e269772661/s-1/context.jsonl",
             "0cc175b9c0f1b6a831c399e269772661/s-1/subagents/a1/wire.jsonl",
             "wd_b_0123456789ab/conv-7/agents/main/wire.jsonl", "wd_b_0123456789ab/conv-8/wire.jsonl",
             "wd_b_0123456789ab/ctitle-1/agents/main/wire.jsonl", "wd_b_0123456789ab/sklsum-1/wire.jsonl",
             "wd_b_0123456789ab/dvlt-1/agents/main/wire.jsonl"]
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("")
    found = {Path(f.path).relative_to(root).as_posix(): f.mode
             for f in SPEC.discover(Root("kimi", str(root)), [], {}, True)}
    assert found == {f: "lines" for f in files[:2] + files[4:5] + files[6:9]}
    conv = KimiParser(str(root / "wd_b_0123456789ab/conv-8/wire.jsonl")).session
    assert (conv.session_id, conv.resume_command) == ("conv-8", None)  # Kimi Work: resumed in the app


# -- the shipped sample -------------------------------------------------------------------------------------------
def test_sample_sessions() -> None:
    """samples/kimi: a Kimi Code session renamed in state.json with an explore sub-agent, and a Kimi CLI session
    whose work dir comes from kimi.json."""
    found = sorted(f.path for r in default_roots({"KIMI_CODE_HOME": str(SAMPLES / ".kimi-code"),
                                                  "KIMI_SHARE_DIR": str(SAMPLES / ".kimi")}, Path("/nowhere"))
                   for f in SPEC.discover(r, [], {}, True))
    assert len(found) == 3
    sessions = {}
    for path in found:
        parser, messages = parse(Path(path))
        sane(parser, messages)
        sessions[parser.session.session_id] = (parser.session, messages)
    main, messages = sessions["session_3f6c2a9e-8b41-4d7a-9e15-6a0c4b2d7e58"]
    assert (main.title, main.cwd) == ("SQLAlchemy QueuePool exhausted by reconcile_batch", "/home/dev/ledger-api")
    assert any("QueuePool limit of size 5 overflow 10" in m.text for m in messages if m.role == "user")
    sub, _ = sessions["session_3f6c2a9e-8b41-4d7a-9e15-6a0c4b2d7e58:agent-0"]
    assert (sub.title or "").startswith("subagent (explore): Find every place in /home/dev/ledger-api")
    cli, cli_messages = sessions["a1d4e7b0-2c5f-4e8a-9b13-7f0e6d5c4b3a"]
    assert (cli.cwd, len(cli_messages)) == ("/home/dev/geo-tiler", 5)
    assert cli.title == "rasterio says `RasterioIOError: not recognized as a supported file format` for…"


# -- end to end ---------------------------------------------------------------------------------------------------
def test_daemon_indexes_kimi_sessions_once_and_reads_an_append_once(home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner: a Kimi Code session and its sub-agent under a default-shaped root are
    found and searchable with the right metadata; a second pass reads nothing; a rename in state.json changes
    the title without reading the log; an appended turn is read once."""
    kimi_home = tmp_path / "user" / ".kimi-code"
    [root] = default_roots({"KIMI_CODE_HOME": str(kimi_home)}, Path("/nowhere"))[:1]
    w = kb.KimiCodeWriter(kimi_home, cwd="/home/dev/quokka", session_uuid="11111111-2222-4333-8444-555555555555")
    w.user("the quokka importer drops rows with a BOM").think("Check the csv reader.")
    w.tool("Read", {"path": "importer.py"}, "open(path, encoding='utf-8')").say("Use encoding='utf-8-sig'.")
    sub = w.subagent("explore")
    sub.user("find other quokka readers", origin={"kind": "system_trigger", "name": "subagent"}).say("only one")
    sid = "session_11111111-2222-4333-8444-555555555555"
    with InprocDaemon(home, {"kimi": Path(root.path)}) as daemon:
        first = daemon.reconcile()
        assert first["messages"] == 7
        hits = {h["sessionId"]: h for h in daemon.search("quokka", limit=10)["hits"]}
        assert set(hits) == {sid, f"{sid}:agent-0"}
        main = hits[sid]
        assert (main["agent"], main["messageCount"], main["title"], main["cwd"]) == (
            "kimi", 5, "the quokka importer drops rows with a BOM", "/home/dev/quokka")
        assert main["resumeCommand"] == f"cd /home/dev/quokka && kimi --session {sid}"
        assert hits[f"{sid}:agent-0"]["title"] == "subagent (explore): find other quokka readers"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)

        w.rename("Quokka BOM")
        renamed = daemon.reconcile()
        assert renamed["files_changed"] == 0, "only state.json changed: the title travels alone"
        assert {h["sessionId"]: h["title"] for h in daemon.search("quokka", limit=10)["hits"]}[sid] == "Quokka BOM"

        time.sleep(0.01)
        w.user("does the wombat importer need it too").say("Yes, same reader.")
        appended = daemon.reconcile(full=False)
        assert (appended["files_changed"], appended["messages"]) == (1, 2)
        assert daemon.reconcile(full=False)["messages"] == 0
        [hit] = daemon.search("wombat")["hits"]
        assert (hit["sessionId"], hit["messageCount"], hit["title"]) == (sid, 7, "Quokka BOM")
