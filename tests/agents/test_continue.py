"""Continue (scanner/parsers/continuedev.py): whole-file JSON sessions beside sessions.json.

No real Continue session was found under a usable licence, so these sessions are written by
tests/builders/continuedev.py (and one is docs/formats.md §25's example verbatim) from the shapes of
Continue's ``core/index.d.ts``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.builders.continuedev as cb
from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.model import Message
from aivault.scanner.parsers import continuedev
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed

SAMPLE = REPO / "samples" / "continue" / ".continue"  # CONTINUE_GLOBAL_DIR=samples/continue/.continue
OLD_NS = 1_600_000_000 * 1_000_000_000
# docs/formats.md §25's synthetic example, as the format section gives it.
EXAMPLE = REPO / "tests" / "fixtures" / "quirks" / "continue" / "sessions" / "1d6f0b2a-0000-4000-8000-0000000000c0.json"


def found(path: Path) -> Found:
    [f] = [x for x in continuedev.discover(Root("continue", str(path.parent)), [], {}, True) if x.path == str(path)]
    return f


def read(path: Path) -> Unit:
    return continuedev.read_session(found(path))


def texts(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


sane = well_formed


def test_the_format_sections_example(tmp_path: Path) -> None:
    """docs/formats.md §25's example: the prompt (its @-mentioned file counted, not indexed), the read_file
    call and its result from toolCallStates, the reply; title, cwd from the file:// URI, the cn resume command;
    without an index entry every message takes the file's time."""
    path = tmp_path / "sessions" / EXAMPLE.name
    path.parent.mkdir()
    path.write_bytes(EXAMPLE.read_bytes())
    unit = read(path)
    sane(unit)
    assert texts(unit.messages) == [
        ("user", "text", "add pagination to /orders"),
        ("assistant", "tool_call", 'read_file {"filepath":"src/orders.ts"}'),
        ("tool", "tool_result", "export function list(){…}"),
        ("assistant", "text", "Added limit/offset."),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd) == (
        "continue", "1d6f0b2a-0000-4000-8000-0000000000c0", "Add pagination", "/home/dev/shop")
    assert s.resume_command == "cd /home/dev/shop && cn --fork 1d6f0b2a-0000-4000-8000-0000000000c0"
    mtime = path.stat().st_mtime_ns // 1_000_000
    assert {m.ts for m in unit.messages} == {mtime} and s.started_at == s.updated_at == mtime
    assert unit.skips == {"context-item": 1}


def test_every_role_reasoning_summaries_and_duplicate_results(tmp_path: Path) -> None:
    """Reasoning before the reply, a result given both in toolCallStates and as a role "tool" message once, an
    errored call marked, a thinking message, an image part counted, the system message and an unknown role
    counted, a compaction summary as system text; the default title gives way to the first prompt; times
    start at the index's dateCreated."""
    w = cb.ContinueWriter(tmp_path, "s-1", workspace="/home/dev/gull")
    w.user("why does the gull build fail").assistant("Check the lockfile.", reasoning="pnpm-lock drift?")
    w.tool("run_terminal_command", {"command": "pnpm i --frozen-lockfile"}, "ERR_PNPM_OUTDATED_LOCKFILE",
           as_message=True)
    w.tool("run_terminal_command", {"command": "rm -rf /"}, "refused", status="errored")
    w.add({"role": "thinking", "content": "The lockfile is older than package.json."})
    w.add({"role": "user", "content": [{"type": "text", "text": "here is the CI log"},
                                       {"type": "imageUrl", "imageUrl": {"url": "data:image/png;base64,AA"}}]})
    w.add({"role": "system", "content": "You are Continue."})
    w.add({"role": "narrator", "content": "?"})
    w.add({"role": "assistant", "content": "Regenerate it."}, conversationSummary="Lockfile drift, regenerated.")
    unit = read(w.path)
    assert texts(unit.messages) == [
        ("user", "text", "why does the gull build fail"),
        ("assistant", "thinking", "pnpm-lock drift?"),
        ("assistant", "text", "Check the lockfile."),
        ("assistant", "tool_call", 'run_terminal_command {"command":"pnpm i --frozen-lockfile"}'),
        ("tool", "tool_result", "ERR_PNPM_OUTDATED_LOCKFILE"),
        ("assistant", "tool_call", 'run_terminal_command {"command":"rm -rf /"}'),
        ("tool", "tool_result", "[errored] refused"),
        ("assistant", "thinking", "The lockfile is older than package.json."),
        ("user", "text", "here is the CI log"),
        ("assistant", "text", "Regenerate it."),
        ("system", "text", "Lockfile drift, regenerated."),
    ]
    assert unit.skips == {"attachment:imageUrl": 1, "system-prompt": 1, "unknown_role:narrator": 1}
    s = unit.session
    assert (s.title, s.cwd, s.started_at) == ("why does the gull build fail", "/home/dev/gull", epoch_ms(BASE_TIME))
    assert {m.ts for m in unit.messages} == {epoch_ms(BASE_TIME)}


def test_titles_and_dates_from_the_index(tmp_path: Path) -> None:
    """A document still titled "New Session" takes the index's title; dateCreated is read as digits or ISO."""
    w = cb.ContinueWriter(tmp_path, "s-2", workspace="/home/dev/tern").user("tern question")
    (w.folder / "sessions.json").write_text(json.dumps([
        {"sessionId": "s-2", "title": "Tern parser", "dateCreated": "2026-03-01T10:00:00Z", "workspaceDirectory": ""}]))
    s = read(w.path).session
    assert (s.title, s.started_at) == ("Tern parser", epoch_ms(BASE_TIME))
    assert continuedev.date_created("1772359200000") == continuedev.date_created(1772359200000) == 1772359200000


def test_a_rename_in_the_index_or_a_rewrite_in_place_changes_the_signature(tmp_path: Path) -> None:
    """The signature follows the document and its index entry, and equals what its read reports."""
    w = cb.ContinueWriter(tmp_path, "s-3").user("first")
    before = found(w.path)
    assert read(w.path).signature == before.mtime_ns
    w.title = "Renamed"
    w.save()
    os.utime(w.path, ns=(before.mtime_ns, OLD_NS))  # the document alone would look unchanged
    renamed = found(w.path)
    assert renamed.mtime_ns != before.mtime_ns and read(w.path).signature == renamed.mtime_ns
    assert read(w.path).session.title == "Renamed"


def test_documents_being_written_broken_or_odd(tmp_path: Path) -> None:
    """A cut-off document is UnitChanged while fresh and unreadable once settled; a non-object is unreadable;
    history entries that are no objects are counted; an empty history is an empty session."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    cut = folder / "cut.json"
    cut.write_bytes(EXAMPLE.read_bytes()[:200])
    with pytest.raises(UnitChanged):
        read(cut)
    os.utime(cut, ns=(OLD_NS, OLD_NS))
    with pytest.raises(UnitUnreadable):
        read(cut)
    (folder / "list.json").write_text("[1, 2]")
    with pytest.raises(UnitUnreadable):
        read(folder / "list.json")
    odd = folder / "odd.json"
    odd.write_text(json.dumps({"sessionId": "odd", "history": [1, {"message": {"role": "user", "content": "hi"}}]}))
    unit = read(odd)
    assert texts(unit.messages) == [("user", "text", "hi")] and unit.skips == {"malformed-record": 1}
    empty = folder / "empty.json"
    empty.write_text(json.dumps({"sessionId": "empty", "title": "New Session", "history": []}))
    assert read(empty).messages == [] and read(empty).session.title is None


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_and_continue_global_dir(tmp_path: Path) -> None:
    """~/.continue/sessions on Linux and macOS alike; CONTINUE_GLOBAL_DIR replaces ~/.continue."""
    assert [r.path for r in continuedev.default_roots({}, tmp_path)] == [str(tmp_path / ".continue" / "sessions")]
    env = {"CONTINUE_GLOBAL_DIR": str(tmp_path / "g")}
    assert [r.path for r in continuedev.default_roots(env, tmp_path)] == [str(tmp_path / "g" / "sessions")]


def test_discovery_lists_session_documents_only(tmp_path: Path) -> None:
    """Every <id>.json, not sessions.json or hidden files; a Continue home named as the root finds its sessions/;
    a missing root is a problem only when the user named it."""
    cb.ContinueWriter(tmp_path / ".continue", "a").user("one")
    cb.ContinueWriter(tmp_path / ".continue", "b").user("two")
    (tmp_path / ".continue" / "sessions" / ".a.json").write_text("x")
    for root in (tmp_path / ".continue" / "sessions", tmp_path / ".continue"):
        problems: list[RootProblem] = []
        got = [Path(f.path).name for f in continuedev.discover(Root("continue", str(root)), problems, {}, True)]
        assert (got, problems) == (["a.json", "b.json"], [])
    problems = []
    assert list(continuedev.discover(Root("continue", str(tmp_path / "nope"), explicit=True), problems, {}, True)) == []
    assert len(problems) == 1
    assert continuedev.SPEC.shaped("a.json") and not continuedev.SPEC.shaped("sessions.json")


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/continue (CONTINUE_GLOBAL_DIR=samples/continue/.continue): a Vitest locale bug, 11 messages."""
    [f] = continuedev.discover(Root("continue", str(SAMPLE / "sessions")), [], {}, True)
    unit = continuedev.read_session(f)
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text")]
    s = unit.session
    assert (s.session_id, s.title, s.cwd) == (
        "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", "Vitest snapshots differ only in CI", "/home/dev/invoice-ui")
    assert unit.skips == {"context-item": 1} and "Intl.DateTimeFormat" in unit.messages[-1].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def continue_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path]]:
    global_dir = tmp_path / "user" / ".continue"
    (global_dir / "sessions").mkdir(parents=True)
    with InprocDaemon(home, {"continue": global_dir / "sessions"}) as d:
        yield d, global_dir


def test_daemon_indexes_a_session_once_and_rereads_a_rewrite_once(continue_daemon: tuple[InprocDaemon, Path]) -> None:
    """Through a real daemon and scanner: a session under a default-shaped root is searchable with the right
    metadata; a second pass reads nothing; the session rewritten with a new turn is re-read once, still one
    session."""
    d, global_dir = continue_daemon
    w = cb.ContinueWriter(global_dir, "40000000-0000-4000-8000-000000000001", title="Heron importer BOM",
                          workspace="/home/dev/heron")
    w.user("the heron importer skips rows with a BOM").tool("read_file", {"filepath": "importer.py"}, "open(p)")
    w.assistant("Open it with encoding='utf-8-sig'.")
    assert d.reconcile()["messages"] == 4
    [hit] = d.search("heron")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "continue", w.session_id, 4, "Heron importer BOM", "/home/dev/heron")
    assert hit["resumeCommand"] == f"cd /home/dev/heron && cn --fork {w.session_id}"
    again = d.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.user("does the egret importer need it too")
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert d.reconcile(full=False)["messages"] == 0
    [hit] = d.search("egret")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 5
    assert len(d.search("heron", limit=10)["hits"]) == 1
