"""Zed agent threads (scanner/parsers/zed.py): threads.db rows with zstd or JSON bodies, both thread document
generations, read read-only while the editor holds the store."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson
import pytest

import tests.builders.zed as zb
from aivault.errors import UnitUnreadable
from aivault.scanner.parsers import zed
from aivault.scanner.sources import Found, RootProblem, Unit
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import discover, texts, units_by_id, well_formed

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "zed" / "deja-vu" / "zed.sql"
SAMPLE = REPO / "samples" / "zed" / ".local" / "share" / "zed" / "threads"  # --root zed=<this>
T0 = epoch_ms(BASE_TIME)


def _discover(path: Path) -> tuple[list[Found], list[RootProblem]]:
    return discover("zed", path)


def _units(path: Path) -> dict[str, Unit]:
    return units_by_id("zed", path)


_texts = texts


sane = well_formed


# -- the copied corpus ------------------------------------------------------------------------------
def test_corpus_store_with_a_json_row_and_a_real_zstd_row(tmp_path: Path) -> None:
    """deja-vu's zed.sql: the agent-1 JSON row and the 0.3.0 zstd row (a real frame) each give their prompt,
    thinking and reply at the thread's creation time; the Resume marker is bookkeeping."""
    con = sqlite3.connect(tmp_path / "threads.db")
    con.executescript(CORPUS.read_text())
    con.close()
    units = _units(tmp_path)
    assert sorted(units) == ["registry-zed-legacy", "registry-zed-modern"]
    legacy, modern = units["registry-zed-legacy"], units["registry-zed-modern"]
    for unit in (legacy, modern):
        sane(unit)
    assert _texts(legacy.messages) == [
        ("user", "text", "does the pre-compression thread shape still load?"),
        ("assistant", "thinking", "reasoning is not indexed"), ("assistant", "text", "agent-1 threads still parse")]
    assert _texts(modern.messages) == [
        ("user", "text", "where does zed keep its agent threads?"),
        ("assistant", "thinking", "reasoning is not indexed"),
        ("assistant", "text", "in threads.db under the data dir")]
    assert (legacy.skips, modern.skips) == ({}, {"bookkeeping:Resume": 1})
    created = epoch_ms(BASE_TIME.replace(month=7, day=19, hour=9))
    s = modern.session
    assert (s.title, s.cwd, s.started_at, s.updated_at, s.resume_command, s.parent_session_id) == (
        "read the zed thread store", "/workspace/registry-demo", created, created + 2000, None, None)
    assert {m.ts for m in modern.messages} == {created}
    assert legacy.session.title == "legacy zed thread"


# -- the builder's threads ----------------------------------------------------------------------------
def test_thread_blocks_become_messages(tmp_path: Path) -> None:
    """Mentions stay in the prompt as @<path>[#name] (their content is not indexed), each tool use is followed by
    its result ([error] when is_error, output when there is no content), redacted thinking and images are counted."""
    db = zb.ZedDb(tmp_path / "threads.db")
    th = db.thread("t-1", "Explain the build script", folders=("/home/dev/zeta", "/home/dev/alpha"))
    th.add(zb.user("u1", zb.text("what does "), zb.mention("/home/dev/zeta/build.rs", "fn main() {}"),
                   zb.text(" do? see "), {"Mention": {"uri": {"Symbol": {"abs_path": "/home/dev/zeta/lib.rs",
                                                                          "name": "bind", "line_range": [1, 9]}}}},
                   zb.text(" and "), {"Mention": {"uri": "zed:///agent/thread/t-0", "content": ""}},
                   {"Image": {"source": "AAAA"}}))
    failed = {**zb.tool_result("t2", "terminal", "", is_error=True), "content": [], "output": "exit 101"}
    th.add(zb.agent(zb.thinking("Open the file."), {"RedactedThinking": "xx"},
                    zb.tool_use("t1", "read_file", {"path": "build.rs"}), zb.tool_use("t2", "terminal", {"cmd": "x"}),
                    zb.text("It generates bindings."),
                    results=[zb.tool_result("t1", "read_file", "fn main(){ bindgen() }"), failed]))
    [unit] = _units(tmp_path).values()
    sane(unit)
    assert _texts(unit.messages) == [
        ("user", "text", "what does @/home/dev/zeta/build.rs do? see @/home/dev/zeta/lib.rs#bind and "
                         "@zed:///agent/thread/t-0"),
        ("assistant", "thinking", "Open the file."),
        ("assistant", "tool_call", 'read_file {"path":"build.rs"}'),
        ("tool", "tool_result", "fn main(){ bindgen() }"),
        ("assistant", "tool_call", 'terminal {"cmd":"x"}'),
        ("tool", "tool_result", "[error] exit 101"),
        ("assistant", "text", "It generates bindings.")]
    assert unit.skips == {"mention": 3, "attachment:Image": 1, "redacted_thinking": 1}
    s = unit.session
    # The first folder of the workspace, whatever the sorted column's order.
    assert (s.session_id, s.title, s.cwd, s.started_at, s.updated_at) == (
        "t-1", "Explain the build script", "/home/dev/zeta", T0, T0 + 4000)
    assert {m.ts for m in unit.messages} == {T0}


def test_titles_sub_agent_threads_and_unknown_shapes(tmp_path: Path) -> None:
    """A "New Thread" placeholder gives way to the first prompt; a sub-agent thread links its parent; unknown
    messages and blocks are counted, legacy system messages are injected context, tool uses of agent 1 read."""
    db = zb.ZedDb(tmp_path / "threads.db")
    db.thread("parent").ask("split the parser module")
    child = db.thread("child", parent="parent")
    child.ask("move the lexer into lexer.rs").add({"Critic": {}}).add(zb.agent({"Sparkle": 1}, zb.text("Moved.")))
    old = zb.legacy_document("Old thread", [
        zb.legacy_message(1, "system", ("text", "<context>files</context>")),
        zb.legacy_message(2, "user", ("text", "fix the panic")),
        zb.legacy_message(3, "assistant", ("text", "Looking."),
                          tool_uses=[{"id": "x", "name": "grep", "input": {"q": "unwrap"}}],
                          tool_results=[{"tool_use_id": "x", "is_error": False, "content": "src/a.rs:3"}]),
        zb.legacy_message(4, "critic", ("text", "?"))], BASE_TIME)
    db.put("old", "Old thread", BASE_TIME, "json", orjson.dumps(old).decode(), folders=("/home/dev/old",))
    units = _units(tmp_path)
    assert units["parent"].session.title == "split the parser module"
    c = units["child"]
    assert (c.session.parent_session_id, c.session.title) == ("parent", "move the lexer into lexer.rs")
    assert _texts(c.messages) == [("user", "text", "move the lexer into lexer.rs"), ("assistant", "text", "Moved.")]
    assert c.skips == {"unknown_message:Critic": 1, "unknown_block:Sparkle": 1}
    o = units["old"]
    assert _texts(o.messages) == [("user", "text", "fix the panic"), ("assistant", "text", "Looking."),
                                  ("assistant", "tool_call", 'grep {"q":"unwrap"}'),
                                  ("tool", "tool_result", "src/a.rs:3")]
    assert o.skips == {"injected-context": 1, "unknown_role:critic": 1}


def test_an_undecodable_body_spoils_only_its_thread(tmp_path: Path) -> None:
    """A corrupt zstd frame, an unknown data_type and a body that is not a JSON object are unreadable with the
    reason; the other threads of the store still read."""
    db = zb.ZedDb(tmp_path / "threads.db")
    db.thread("good").ask("still fine")
    db.put("corrupt", "x", BASE_TIME, "zstd", b"\x28\xb5\x2f\xfd garbage")
    db.put("brotli", "x", BASE_TIME, "brotli", b"...")
    db.put("list", "x", BASE_TIME, "json", "[1, 2]")
    found, problems = _discover(tmp_path)
    assert problems == []
    by_id = {f.locator[1]: f for f in found}
    assert zed.read_unit(by_id["good"]).messages[0].text == "still fine"
    for tid, reason in (("corrupt", "undecodable zstd body"), ("brotli", "unknown data_type"),
                        ("list", "not a JSON object")):
        with pytest.raises(UnitUnreadable, match=reason):
            zed.read_unit(by_id[tid])


def test_an_original_table_without_the_later_columns(tmp_path: Path) -> None:
    """A store a newer Zed never opened has no folder, parent or created_at columns: no cwd, times from updated_at."""
    db = zb.ZedDb(tmp_path / "threads.db", schema=zb.LEGACY_SCHEMA)
    doc = zb.document("Old store", [zb.user("u", zb.text("hello"))], BASE_TIME)
    db.put("t", "Old store", BASE_TIME, "zstd", zb.compress(doc))
    [unit] = _units(tmp_path).values()
    assert (unit.session.cwd, unit.session.started_at, unit.session.title) == (None, T0, "Old store")


def test_a_save_changes_the_signature_and_nothing_else_does(tmp_path: Path) -> None:
    """The listed signature equals the read one and holds still until Zed saves the thread again."""
    db = zb.ZedDb(tmp_path / "threads.db")
    th = db.thread("t").ask("one")
    sigs = []
    for edit in (lambda: None, lambda: None, lambda: th.answer("two"), lambda: th.rename("Named")):
        edit()
        [found], _ = _discover(tmp_path)
        assert zed.read_unit(found).signature == found.mtime_ns
        sigs.append(found.mtime_ns)
    assert sigs[0] == sigs[1] and len(set(sigs)) == 3


def test_project_folder_follows_the_order_column() -> None:
    """folder_paths is sorted; folder_paths_order gives each its workspace place; a bad order falls back."""
    assert zed.project_folder("/a\n/b", "1,0") == "/b"
    assert zed.project_folder("/a\n/b", "0,1") == "/a"
    assert zed.project_folder("/a\n/b", "x") == "/a"
    assert zed.project_folder("", None) is None


def test_default_roots_follow_xdg_flatpak_and_macos(tmp_path: Path) -> None:
    """$XDG_DATA_HOME/zed/threads (absolute only, else ~/.local/share), $FLATPAK_XDG_DATA_HOME when set, and
    macOS's Application Support folder."""
    mac = str(tmp_path / "Library/Application Support/Zed/threads")

    def paths(env: dict[str, str]) -> list[str]:
        return [r.path for r in zed.default_roots(env, tmp_path)]

    assert paths({}) == [str(tmp_path / ".local/share/zed/threads"), mac]
    assert paths({"XDG_DATA_HOME": "/x/share", "FLATPAK_XDG_DATA_HOME": "/f"}) == [
        "/x/share/zed/threads", "/f/zed/threads", mac]
    assert paths({"XDG_DATA_HOME": "rel"})[0] == str(tmp_path / ".local/share/zed/threads")
    assert zed.SPEC.shaped("threads.db") and not zed.SPEC.shaped("threads.db-wal")


def test_discovery_under_the_default_roots_of_a_fake_home(tmp_path: Path) -> None:
    """With HOME at a fake folder the Linux and macOS stores are found by the default roots; an open write
    transaction of the editor is not seen and does not block the read."""
    for n, layout in enumerate((".local/share/zed/threads", "Library/Application Support/Zed/threads")):
        home = tmp_path / f"home{n}"
        zb.ZedDb(home / layout / "threads.db").thread("t").ask(f"from {layout}")
        problems: list[RootProblem] = []
        found = [f for r in zed.default_roots({}, home) for f in zed.discover(r, problems, {}, True)]
        assert problems == [] and [zed.read_unit(f).messages[0].text for f in found] == [f"from {layout}"]
    threads = tmp_path / "home0" / ".local/share/zed/threads"
    editor = sqlite3.connect(threads / "threads.db", isolation_level=None)
    editor.execute("BEGIN IMMEDIATE")
    editor.execute("UPDATE threads SET data = x'00', data_type = 'zstd'")
    [unit_found], _ = _discover(threads)
    assert zed.read_unit(unit_found).messages[0].text == "from .local/share/zed/threads"
    editor.execute("ROLLBACK")
    editor.close()


def test_sample_thread() -> None:
    """samples/zed: one zstd thread with a mention, two tool calls and their results, titled, in its project."""
    [unit] = _units(SAMPLE).values()
    sane(unit)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
        ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd, s.resume_command) == ("Tokio task starves the UI channel", "/home/dev/tidepool", None)
    assert "Look at @/home/dev/tidepool/src/sync.rs — I think" in unit.messages[0].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    threads = tmp_path / "user" / ".local" / "share" / "zed" / "threads"
    threads.mkdir(parents=True)
    return {"zed": threads}


def test_daemon_indexes_zed_once_and_rereads_a_save_once(inproc_daemon: InprocDaemon,
                                                         roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a zstd thread under a default-shaped root is searchable with the right
    metadata; a second pass reads nothing; a save is read once, the thread staying one session."""
    db = zb.ZedDb(roots["zed"] / "threads.db")
    th = db.thread("th-puffin", "Puffin retries", folders=("/home/dev/puffin",))
    th.ask("the puffin client retries forever").answer(
        "It ignores max_retries.", tools=[("grep", {"regex": "retries"}, "client.rs:8")])
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("puffin")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "zed", "th-puffin", 4, "Puffin retries", "/home/dev/puffin")
    assert hit["resumeCommand"] is None
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    th.ask("and the gannet client too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("gannet")["hits"]
    assert hit["sessionId"] == "th-puffin" and hit["messageCount"] == 5
    assert len(inproc_daemon.search("puffin", limit=10)["hits"]) == 1
