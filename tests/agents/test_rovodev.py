"""Rovo Dev sessions (scanner.rovodev): pydantic-ai history and metadata, both spellings, roots, daemon.

There is no corpus for Rovo Dev (no licence-clean session exists): every file here is built in the shape the
public readers describe (tests/builders/rovodev.py) or written inline.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers import rovodev
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import rovodev as b
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import timed_shape

SAMPLES = REPO / "samples" / "rovodev" / ".rovodev"
OLD_NS = 1_600_000_000 * 1_000_000_000


def units(root: Path) -> dict[str, Unit]:
    problems: list[RootProblem] = []
    found = list(rovodev.SPEC.discover(Root("rovodev", str(root)), problems, {}, True))
    assert problems == []
    out = {}
    for f in found:
        unit = rovodev.read_unit(f)
        assert unit.signature == f.mtime_ns  # discovery and reader agree: an unchanged session is not read again
        out[os.path.basename(os.path.dirname(f.path))] = unit
    return out


shape = timed_shape


def test_pydantic_ai_history_and_metadata(tmp_path: Path) -> None:
    """Requests and responses: the system prompt counted, a <system-reminder> stripped from the prompt, thinking,
    text, a tool call (JSON-string args) and its return; title, workspace and times from metadata.json."""
    w = b.RovoWriter(tmp_path / "sessions", title="Flaky Jira webhook", workspace="/home/dev/hooks")
    w.ask("<system-reminder>\nworkspace: /home/dev/hooks\n</system-reminder>\nWhy does the webhook 401?")
    w.tool("grep", {"pattern": "X-Hub-Signature"}, "src/hook.ts:12: verify(req.body)")
    w.reply("The body is parsed before verification.", thought="raw body needed")
    [unit] = units(tmp_path / "sessions").values()
    assert shape(unit) == [
        ("user", "text", "Why does the webhook 401?"),
        ("assistant", "tool_call", 'grep {"pattern":"X-Hub-Signature"}'),
        ("tool", "tool_result", "src/hook.ts:12: verify(req.body)"),
        ("assistant", "thinking", "raw body needed"),
        ("assistant", "text", "The body is parsed before verification."),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.resume_command) == (
        "rovodev", w.session_id, "Flaky Jira webhook", "/home/dev/hooks", None)
    assert s.started_at is not None and s.updated_at is not None and s.started_at < s.updated_at
    assert unit.skips == {"system-prompt": 1}


def test_untitled_fork_takes_the_first_prompt_and_names_its_parent(tmp_path: Path) -> None:
    """Without a title the first typed prompt is the title; a fork's forked_from_session_id is its parent; a prompt
    that is only a reminder is injected context."""
    w = b.RovoWriter(tmp_path / "sessions", "fork-1", title=None, forked_from_session_id="root-0", system=None)
    w.ask("<system-reminder>only context</system-reminder>").ask("continue from the fork").reply("ok")
    [unit] = units(tmp_path / "sessions").values()
    assert unit.session.title == "continue from the fork" and unit.session.parent_session_id == "root-0"
    assert unit.skips == {"injected-context": 1}


def test_generic_spelling_and_unknown_parts(tmp_path: Path) -> None:
    """The generic {role, parts:[{kind: text|tool_use|tool_result}]} spelling maps the same way; an unknown part
    kind and a non-object message are counted; retry prompts are tool results."""
    folder = tmp_path / "sessions" / "g-1"
    folder.mkdir(parents=True)
    history = [
        {"id": "m1", "role": "user", "created_at": "2026-03-01T10:00:00Z", "parts": [{"kind": "text", "text": "hi"}]},
        {"id": "m2", "role": "assistant", "created_at": "2026-03-01T10:00:05Z", "parts": [
            {"kind": "tool_use", "name": "bash", "input": {"command": "pwd"}},
            {"kind": "hologram", "text": "?"}]},
        {"id": "m3", "role": "user", "created_at": "2026-03-01T10:00:06Z", "parts": [
            {"kind": "tool_result", "tool_use_id": "t1", "content": "/srv"},
            {"part_kind": "retry-prompt", "content": "bad args", "tool_name": "bash"}]},
        "junk",
    ]
    (folder / "session_context.json").write_text(json.dumps({"session_id": "g-1", "messages": history}))
    [unit] = units(tmp_path / "sessions").values()
    assert shape(unit) == [("user", "text", "hi"), ("assistant", "tool_call", 'bash {"command":"pwd"}'),
                           ("tool", "tool_result", "/srv"), ("tool", "tool_result", "[retry] bad args")]
    assert unit.skips == {"unknown_part:hologram": 1, "malformed-record": 1}
    assert (unit.session.session_id, unit.session.title, unit.session.cwd) == ("g-1", "hi", None)


def test_a_rename_changes_the_signature_and_the_title(tmp_path: Path) -> None:
    """Renaming rewrites only metadata.json: discovery reports a new signature and the reader the new title."""
    w = b.RovoWriter(tmp_path / "sessions", title="old")
    w.ask("q").reply("a")
    [before] = rovodev.SPEC.discover(Root("rovodev", str(tmp_path / "sessions")), [], {}, True)
    time.sleep(0.01)
    w.rename("new and longer")
    [after] = rovodev.SPEC.discover(Root("rovodev", str(tmp_path / "sessions")), [], {}, True)
    assert before.mtime_ns != after.mtime_ns and rovodev.read_unit(after).session.title == "new and longer"


def test_a_document_being_written_waits_then_is_unreadable(tmp_path: Path) -> None:
    """A context that is not JSON yet is UnitChanged while fresh and UnitUnreadable once it settled."""
    w = b.RovoWriter(tmp_path / "sessions")
    w.path.write_text('{"message_history": [')
    [f] = rovodev.SPEC.discover(Root("rovodev", str(tmp_path / "sessions")), [], {}, True)
    with pytest.raises(UnitChanged):
        rovodev.read_unit(f)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    with pytest.raises(UnitUnreadable, match="not a Rovo Dev session context"):
        rovodev.read_unit(f)


# -- roots ---------------------------------------------------------------------------------------------------
def test_default_roots_and_the_persistence_dir(tmp_path: Path) -> None:
    """~/.rovodev/sessions on Linux and macOS; sessions.persistenceDir in config.yml adds its folder when absolute
    or ~, and is ignored when relative."""
    assert [r.path for r in rovodev.default_roots({}, tmp_path)] == [str(tmp_path / ".rovodev" / "sessions")]
    config = tmp_path / ".rovodev" / "config.yml"
    config.parent.mkdir()
    config.write_text("agent:\n  persistenceDir: /nope\nsessions:\n  # where sessions go\n"
                      f"  persistenceDir: \"{tmp_path / 'kept'}\"  # moved\nconsole:\n  theme: dark\n")
    assert [r.path for r in rovodev.default_roots({}, tmp_path)] == [
        str(tmp_path / ".rovodev" / "sessions"), str(tmp_path / "kept")]
    config.write_text("sessions:\n  persistenceDir: relative/dir\n")
    assert len(rovodev.default_roots({}, tmp_path)) == 1


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/rovodev (--root rovodev=samples/rovodev/.rovodev/sessions): 11 messages, the metadata title and
    workspace, the reminder stripped from both prompts, the system prompt left out."""
    [unit] = units(SAMPLES / "sessions").values()
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd) == ("Pipelines docker service out of memory", "/home/dev/payments-web")
    assert unit.messages[7].text == "Apply it." and "system-reminder" not in unit.messages[0].text
    assert "exceeded memory limit" in unit.messages[0].text and unit.skips == {"system-prompt": 1}


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".rovodev" / "sessions"
    sessions.mkdir(parents=True)
    return {"rovodev": sessions}


def test_daemon_indexes_a_rovo_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                       roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; a rewritten session (a new exchange) is seen by a recent pass and read once."""
    w = b.RovoWriter(roots["rovodev"], "5e55100-0000-4000-8000-0000000000a1", title="Confluence macro timeout",
                     workspace="/home/dev/macros")
    w.ask("the confluence macro times out").tool("bash", {"command": "npm test"}, "1 failing").reply("Raise it.")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("confluence")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "rovodev", w.session_id, 4, "Confluence macro timeout", "/home/dev/macros")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.ask("what about the jira gadget").reply("Same limit.")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 6
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("gadget")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 6
