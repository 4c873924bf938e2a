"""OpenHands (scanner/parsers/openhands.py): a conversation folder of event files, read whole.

No real OpenHands conversation was found under a usable licence, so conversations here are written by
tests/builders/openhands.py from the SDK's event models; docs/formats.md §26's example events are
tests/fixtures/quirks/openhands verbatim.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.builders.openhands as hb
from aivault.errors import UnitChanged
from aivault.home import Home
from aivault.scanner.model import Message
from aivault.scanner.parsers import openhands
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed

SAMPLE = REPO / "samples" / "openhands" / ".openhands"  # OPENHANDS_PERSISTENCE_DIR=samples/openhands/.openhands
EXAMPLE = REPO / "tests" / "fixtures" / "quirks" / "openhands" / "conversations"
OLD_NS = 1_600_000_000 * 1_000_000_000


def discover(root: Path) -> tuple[list[Found], list[RootProblem]]:
    problems: list[RootProblem] = []
    return list(openhands.discover(Root("openhands", str(root)), problems, {}, True)), problems


def read(folder: Path) -> Unit:
    [found] = [f for f in discover(folder.parent)[0] if f.path == str(folder)]
    return openhands.read_conversation(found)


def texts(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


sane = well_formed


def test_the_format_sections_example_events() -> None:
    """docs/formats.md §26's two example events (no base_state.json): the thought, the terminal call with its
    JSON arguments, the output; zone-less times read as UTC; the id is the folder's in UUID form."""
    unit = read(EXAMPLE / "0c1d2e3f4a5b4c6d8e9f0a1b2c3d4e5f")
    sane(unit)
    assert [(m.role, m.kind, m.text, m.ts) for m in unit.messages] == [
        ("assistant", "text", "List the repo first.", 1783418405120),
        ("assistant", "tool_call", 'terminal {"command":"ls"}', 1783418405120),
        ("tool", "tool_result", "README.md\nsrc", 1783418405900),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd) == (
        "openhands", "0c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", None, None)
    assert s.resume_command == "openhands --resume 0c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
    assert (s.started_at, s.updated_at) == (1783418405120, 1783418405900)


def test_every_event_kind(tmp_path: Path) -> None:
    """Prompt, thinking blocks and reasoning, the thought before a call, results, an agent error, a rejection,
    a condensation summary (system), a runtime message on the user's side (system), an ACP call reported twice
    (indexed once); the system prompt, injected context, bookkeeping and an unknown kind are counted."""
    w = hb.OpenHandsWriter(tmp_path, "1" * 32, working_dir="/home/dev/gull")
    w.user("why does make test fail")
    w.add("MessageEvent", "user", llm_message={"role": "user", "content": hb.text("and check CI")},
          extended_content=[{"type": "text", "text": "<REPO_CONTEXT>AGENTS.md</REPO_CONTEXT>"}])
    call = w.action("terminal", {"command": "make test"}, thought="Run it.", reasoning="Probably the fixture.")
    w.observe("terminal", call, "FAIL gull_test.go:12", exit_code=2, is_error=True)
    w.add("AgentErrorEvent", "agent", tool_name="terminal", tool_call_id="x", error="timeout after 120s")
    w.add("UserRejectObservation", "environment", tool_name="terminal", tool_call_id="y", action_id="a",
          rejection_reason="not on main")
    w.add("CondensationSummaryEvent", "environment", summary="Earlier: make test fails on a fixture path.")
    w.add("MessageEvent", "environment", llm_message={"role": "user", "content": hb.text("Resumed after pause.")})
    for output in (None, "ok"):
        w.add("ACPToolCallEvent", "agent", tool_call_id="acp-1", title="Read gull.go", raw_input={"path": "gull.go"},
              raw_output=output, status="completed" if output else "in_progress")
    w.add("PauseEvent", "user")
    w.add("ConversationStateUpdateEvent", "environment", key="execution_status", value="paused")
    w.add("HologramEvent", "agent")
    w.assistant("The fixture path is wrong.", reasoning="It reads testdata/ from the wrong cwd.")
    unit = read(w.dir)
    sane(unit)
    assert texts(unit.messages) == [
        ("user", "text", "why does make test fail"),
        ("user", "text", "and check CI"),
        ("assistant", "thinking", "Probably the fixture."),
        ("assistant", "text", "Run it."),
        ("assistant", "tool_call", 'terminal {"command":"make test"}'),
        ("tool", "tool_result", "[error] FAIL gull_test.go:12"),
        ("tool", "tool_result", "[error] timeout after 120s"),
        ("tool", "tool_result", "[rejected] not on main"),
        ("system", "text", "Earlier: make test fails on a fixture path."),
        ("system", "text", "Resumed after pause."),
        ("assistant", "tool_call", 'Read gull.go {"path":"gull.go"}'),
        ("tool", "tool_result", "ok"),
        ("assistant", "thinking", "It reads testdata/ from the wrong cwd."),
        ("assistant", "text", "The fixture path is wrong."),
    ]
    assert unit.skips == {"system-prompt": 1, "injected-context": 1, "unknown_record:HologramEvent": 1}
    s = unit.session
    assert (s.session_id, s.title, s.cwd) == ("11111111-1111-1111-1111-111111111111", "why does make test fail",
                                             "/home/dev/gull")
    assert s.resume_command == "cd /home/dev/gull && openhands --resume 11111111-1111-1111-1111-111111111111"
    assert s.started_at == epoch_ms(BASE_TIME) + 1120 and s.updated_at == epoch_ms(w.t)


def test_a_branched_event_tree_keeps_the_active_branch(tmp_path: Path) -> None:
    """Events with parent_id form a tree: the chain from the last event back to the root is indexed (a legacy
    event without parent_id follows the one before it), the rolled-back turn is counted dead-branch."""
    w = hb.OpenHandsWriter(tmp_path, "2" * 32, system_prompt=False)
    root = w.add("MessageEvent", "user", llm_message={"role": "user", "content": hb.text("fix the tern parser")})
    w.add("MessageEvent", "agent", parent_id=root, llm_message={"role": "assistant", "content": hb.text("bad turn")})
    w.add("MessageEvent", "agent", parent_id=root, llm_message={"role": "assistant", "content": hb.text("retry")})
    w.add("MessageEvent", "user", llm_message={"role": "user", "content": hb.text("thanks")})
    unit = read(w.dir)
    assert [m.text for m in unit.messages] == ["fix the tern parser", "retry", "thanks"]
    assert unit.skips == {"dead-branch": 1}


def test_working_dir_fallbacks_and_broken_files(tmp_path: Path) -> None:
    """Without base_state.json the folder names the session and a terminal observation's working_dir is the
    cwd; the newest event still being written is UnitChanged, once settled it is counted; hidden files and
    names that are not events are ignored."""
    w = hb.OpenHandsWriter(tmp_path, "3" * 32, working_dir=None)
    (w.dir / "base_state.json").unlink()
    w.working_dir = "/srv/heron"
    w.user("heron").terminal("pwd", "/srv/heron\n")
    (w.events_dir / "notes.json").write_text("{}")
    unit = read(w.dir)
    assert (unit.session.cwd, unit.session.session_id) == ("/srv/heron", "33333333-3333-3333-3333-333333333333")
    cut = w.events_dir / f"event-{w.count:05d}-cut.json"
    cut.write_text('{"id":"cut","kind":"Mess')
    with pytest.raises(UnitChanged):
        read(w.dir)
    os.utime(cut, ns=(OLD_NS, OLD_NS))
    unit = read(w.dir)
    assert len(unit.messages) == 3 and unit.skips == {"system-prompt": 1, "malformed-record": 1}


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_and_overrides(tmp_path: Path) -> None:
    """~/.openhands/conversations (the CLI) and ~/.openhands (the server's store), on Linux and macOS alike;
    OPENHANDS_CONVERSATIONS_DIR / OPENHANDS_PERSISTENCE_DIR move the first, OH_PERSISTENCE_DIR or FILE_STORE_PATH
    the second."""
    home = tmp_path / "u"
    assert [r.path for r in openhands.default_roots({}, home)] == [
        str(home / ".openhands" / "conversations"), str(home / ".openhands")]
    env = {"OPENHANDS_PERSISTENCE_DIR": str(tmp_path / "p"), "FILE_STORE_PATH": str(tmp_path / "f")}
    assert [r.path for r in openhands.default_roots(env, home)] == [str(tmp_path / "p" / "conversations"),
                                                                    str(tmp_path / "f")]
    env = {"OPENHANDS_CONVERSATIONS_DIR": str(tmp_path / "c"), "OH_PERSISTENCE_DIR": str(tmp_path / "c")}
    assert [r.path for r in openhands.default_roots(env, home)] == [str(tmp_path / "c")]


def test_discovery_of_cli_and_server_layouts_and_signatures(tmp_path: Path) -> None:
    """The CLI's conversations/<id>/ and the server's <user>/v1_conversations/<id>/ (no resume command: the CLI
    does not know them) are found under their default roots, each once; the signature moves with a new event
    or a base_state.json rewrite, and equals what the read reports."""
    oh = tmp_path / ".openhands"
    cli = hb.OpenHandsWriter(oh / "conversations", "4" * 32).user("cli conversation")
    server = hb.OpenHandsWriter(oh / "user-7" / "v1_conversations", "5" * 32).user("server conversation")
    (oh / "skills").mkdir()
    found = {f.path: f for root in (oh / "conversations", oh) for f in discover(root)[0]}
    assert sorted(found) == [str(cli.dir), str(server.dir)]
    assert openhands.read_conversation(found[str(server.dir)]).session.resume_command is None
    first = found[str(cli.dir)]
    assert openhands.read_conversation(first).signature != first.mtime_ns  # just written: read again next pass
    for path in (cli.events_dir, cli.dir / "base_state.json"):
        os.utime(path, ns=(OLD_NS, OLD_NS))
    [first], _ = discover(oh / "conversations")
    assert openhands.read_conversation(first).signature == first.mtime_ns
    assert discover(oh / "conversations")[0][0].mtime_ns == first.mtime_ns
    time.sleep(0.01)
    cli.assistant("answered")
    [grown], _ = discover(oh / "conversations")
    assert grown.mtime_ns != first.mtime_ns
    time.sleep(0.01)
    cli.save_state(execution_status="finished")
    [rewritten], _ = discover(oh / "conversations")
    assert rewritten.mtime_ns != grown.mtime_ns
    [itself], _ = discover(cli.dir)
    assert itself.path == str(cli.dir)
    assert openhands.SPEC.shaped("base_state.json") and not openhands.SPEC.shaped("event-00000-a.json")


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_conversation() -> None:
    """samples/openhands (OPENHANDS_PERSISTENCE_DIR=samples/openhands/.openhands): an Alembic autogenerate bug."""
    [f] = discover(SAMPLE / "conversations")[0]
    unit = openhands.read_conversation(f)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "thinking"),
        ("assistant", "text")]
    s = unit.session
    assert (s.session_id, s.cwd, s.title) == (
        "9f3b2a1c-0d4e-4f5a-8b6c-7d8e9f0a1b2c", "/home/dev/ledger-api",
        "alembic revision --autogenerate keeps producing an empty migration even though…")
    assert "invoices.due_date" in unit.messages[-1].text and unit.skips == {"system-prompt": 1}
    assert json.loads((Path(f.path) / "base_state.json").read_text())["id"] == s.session_id


# -- end to end ----------------------------------------------------------------------------------------------
def settle(w: hb.OpenHandsWriter, k: int) -> None:
    """Date the conversation's last change in the past (the k-th change), as if its writes had settled."""
    for path in (w.events_dir, w.dir / "base_state.json"):
        os.utime(path, ns=(OLD_NS + k, OLD_NS + k))


@pytest.fixture
def openhands_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path]]:
    conversations = tmp_path / "user" / ".openhands" / "conversations"
    conversations.mkdir(parents=True)
    with InprocDaemon(home, {"openhands": conversations}) as d:
        yield d, conversations


def test_daemon_indexes_a_conversation_once_and_rereads_new_events_once(
        openhands_daemon: tuple[InprocDaemon, Path]) -> None:
    """Through a real daemon and scanner: a conversation under a default-shaped root is searchable with the right
    metadata; a second pass reads nothing; new event files are read by a recent pass once, still one session
    (changes are dated back: one read within seconds of a change is repeated by the next pass)."""
    d, conversations = openhands_daemon
    w = hb.OpenHandsWriter(conversations, "6" * 32, working_dir="/home/dev/heron")
    w.user("the heron importer skips rows with a BOM").terminal("rg open importer.py", "open(p)")
    w.assistant("Open it with encoding='utf-8-sig'.")
    settle(w, 1)
    assert d.reconcile()["messages"] == 4
    [hit] = d.search("heron")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "openhands", w.session_id, 4, "the heron importer skips rows with a BOM", "/home/dev/heron")
    assert hit["resumeCommand"] == f"cd /home/dev/heron && openhands --resume {w.session_id}"
    again = d.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    w.user("does the egret importer need it too")
    settle(w, 2)
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert d.reconcile(full=False)["messages"] == 0
    [hit] = d.search("egret")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 5
    assert len(d.search("heron", limit=10)["hits"]) == 1
