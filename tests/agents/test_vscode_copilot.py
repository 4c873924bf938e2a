"""VS Code Copilot Chat (scanner.parsers.vscode_copilot): snapshots and operation logs replayed, mapping,
discovery, robustness. No licence-clean real chat file exists: both forms come from tests/builders/vscode_copilot.py,
written as VS Code's own serializers define them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.parsers import vscode_copilot as vc
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import vscode_copilot as vb
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import well_formed, whole_unit

SAMPLES = REPO / "samples" / "vscode-copilot" / ".config" / "Code" / "User" / "workspaceStorage"
OLD_NS = 1_600_000_000 * 1_000_000_000
CREATED = epoch_ms(BASE_TIME)
ASKED = CREATED + 30_000


def read(path: Path) -> Unit:
    return whole_unit("vscode-copilot", path)


sane = well_formed


RESPONSE = [
    vb.thinking("Lockfile and package.json disagree."),
    vb.markdown("The lockfile in "), vb.inline_reference("/home/dev/shop/package-lock.json"),
    vb.markdown(" is stale: regenerate it."),
    vb.terminal_tool("tc1", "npm ci", "npm ERR! `npm ci` can only install packages when your package.json and "
                     "package-lock.json are in sync"),
    vb.undo_stop(), vb.codeblock_uri("/home/dev/shop/package.json"), vb.text_edit_group("/home/dev/shop/package.json"),
    vb.tool("copilot_readFile", "tc2", "Reading package.json", "Read package.json, lines 1 to 40"),
    vb.tool("mcp_registry_lookup", "tc3", "Looking up left-pad", "Looked up left-pad",
            tool_input={"name": "left-pad"}, output="left-pad 1.3.0"),
]
EXPECTED = [
    ("user", "text", "why does npm ci fail?"),
    ("assistant", "thinking", "Lockfile and package.json disagree."),
    ("assistant", "text", "The lockfile in package-lock.json is stale: regenerate it."),
    ("assistant", "tool_call", 'copilot_runInTerminal {"command":"npm ci"}'),
    ("tool", "tool_result", "npm ERR! `npm ci` can only install packages when your package.json and "
                            "package-lock.json are in sync"),
    ("assistant", "tool_call", 'copilot_readFile {"message":"Reading package.json"}'),
    ("tool", "tool_result", "Read package.json, lines 1 to 40"),
    ("assistant", "tool_call", 'mcp_registry_lookup {"name":"left-pad"}'),
    ("tool", "tool_result", "left-pad 1.3.0"),
]


# -- both forms ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["jsonl", "json"])
def test_both_forms_give_the_same_session(tmp_path: Path, form: str) -> None:
    """A snapshot and an operation log of the same chat give the same messages: one per part (markdown joined
    across an inline file reference), terminal and MCP tool calls with their outputs, a built-in tool's
    past-tense summary as its result, edit bookkeeping left out; the workspace folder is the cwd."""
    w = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/shop", form="jsonl" if form == "jsonl" else "json")
    w.ask("why does npm ci fail?", RESPONSE)
    unit = read(w.path)
    sane(unit)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == EXPECTED
    assert all(m.ts == ASKED for m in unit.messages)
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.branch, s.resume_command, s.parent_session_id) == (
        "vscode-copilot", w.session_id, "why does npm ci fail?", "/home/dev/shop", None, None, None)
    assert (s.started_at, s.updated_at) == (CREATED, ASKED)
    assert unit.skips == {}


def test_operation_log_set_push_truncate_delete(tmp_path: Path) -> None:
    """Replaying the log: a custom title set, a streamed markdown part replaced (push with i), a request removed
    (push truncating the array), a title deleted again; the chat shows what the last operation left."""
    w = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/shop")
    w.ask("first question about the build", [vb.markdown("first answer, long enough to stream")])
    w.ask("second question, later undone", [vb.markdown("second answer")]).remove_last()
    w.title("Build questions")
    assert read(w.path).session.title == "Build questions"
    assert [m.text for m in read(w.path).messages] == ["first question about the build",
                                                       "first answer, long enough to stream"]
    w.op({"kind": 3, "k": ["customTitle"]})
    assert read(w.path).session.title == "first question about the build"


def test_a_new_snapshot_line_replaces_the_state(tmp_path: Path) -> None:
    """VS Code compacts a long log into one snapshot line (kind 0): what came before no longer counts."""
    w = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/shop")
    w.ask("an old question", [vb.markdown("an old answer")])
    w.op({"kind": 0, "v": vb.snapshot(w.session_id, CREATED, [vb.request("the only question", ASKED,
                                                                         [vb.markdown("the only answer")])])})
    assert [m.text for m in read(w.path).messages] == ["the only question", "the only answer"]


def test_log_with_bad_operations_counts_them(tmp_path: Path) -> None:
    """Operations before the snapshot, with a path that leads nowhere, of an unknown kind, and lines that are
    not JSON are counted by reason; everything else replays."""
    path = tmp_path / "workspaceStorage" / "h" / "chatSessions" / "0f0f0f0f-0000-4000-8000-000000000001.jsonl"
    path.parent.mkdir(parents=True)
    ops = [
        {"kind": 1, "k": ["customTitle"], "v": "too early"},
        {"kind": 0, "v": vb.snapshot("0f0f0f0f-0000-4000-8000-000000000001", CREATED)},
        {"kind": 2, "k": ["requests"], "v": [vb.request("kept prompt", ASKED, [vb.markdown("kept reply")])]},
        {"kind": 1, "k": ["requests", 7, "result"], "v": {}},
        {"kind": 1, "k": "requests", "v": []},
        {"kind": 9, "k": ["x"]},
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"kind": "hologram", "value": "?"}]},
    ]
    path.write_bytes(b"".join(orjson.dumps(op) + b"\n" for op in ops) + b"not json\n")
    unit = read(path)
    assert [m.text for m in unit.messages] == ["kept prompt", "kept reply"]
    assert unit.skips == {"op-before-snapshot": 1, "op-path-missing": 1, "malformed-op": 1, "unknown_op:9": 1,
                          "unknown_item:hologram": 1, "malformed-record": 1}
    assert unit.session.cwd is None, "no workspace.json: no folder"


def test_empty_window_chat_and_older_snapshot_fields(tmp_path: Path) -> None:
    """A chat of a window with no folder has no cwd; a snapshot's lastMessageDate is its end; older response
    parts (markdownContent) and thinking given as a list of pieces are read."""
    w = vb.ChatWriter(tmp_path / "globalStorage", None, form="json")
    w.ask("explain this regex", [{"kind": "thinking", "value": ["pieces ", "of a thought"]},
                                 {"kind": "markdownContent", "content": {"value": "It matches ISO dates."}}])
    unit = read(w.path)
    assert [(m.kind, m.text) for m in unit.messages] == [
        ("text", "explain this regex"), ("thinking", "pieces of a thought"), ("text", "It matches ISO dates.")]
    assert unit.session.cwd is None and unit.session.updated_at == ASKED
    assert os.path.basename(os.path.dirname(w.path)) == "emptyWindowChatSessions"


def test_a_snapshot_being_written_waits_and_a_broken_one_is_unreadable(tmp_path: Path) -> None:
    """A .json that does not parse is being written while fresh (UnitChanged), unreadable once settled; a cut-off
    last operation of a fresh log waits too, and is counted once settled."""
    w = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/shop", form="json")
    w.path.write_bytes(w.path.read_bytes()[:40])
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    with pytest.raises(UnitUnreadable):
        read(w.path)
    log = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/shop")
    log.ask("a question", [vb.markdown("an answer")])
    with log.path.open("ab") as fh:
        fh.write(b'{"kind":2,"k":["requests"],"v":[{"requestId":"r')
    with pytest.raises(UnitChanged):
        read(log.path)
    os.utime(log.path, ns=(OLD_NS, OLD_NS))
    unit = read(log.path)
    assert [m.text for m in unit.messages] == ["a question", "an answer"] and unit.skips == {"truncated-record": 1}


def test_empty_file(tmp_path: Path) -> None:
    """An empty chat file is an empty session named by its file, counted."""
    path = tmp_path / "chatSessions" / "0f0f0f0f-0000-4000-8000-000000000002.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"")
    unit = read(path)
    assert (unit.messages, unit.session.session_id, unit.skips) == (
        [], "0f0f0f0f-0000-4000-8000-000000000002", {"empty-file": 1})


# -- discovery and roots --------------------------------------------------------------------------------
def test_default_roots_linux_macos_builds_and_portable(tmp_path: Path) -> None:
    """workspaceStorage and the two chat folders of globalStorage of Code, Code - Insiders and VSCodium under
    ~/.config ($XDG_CONFIG_HOME) and ~/Library/Application Support, and a portable install's user-data."""
    home = tmp_path / "home"
    subs = ("workspaceStorage", "globalStorage/emptyWindowChatSessions", "globalStorage/transferredChatSessions")
    paths = [r.path for r in vc.default_roots({}, home)]
    for base in (home / ".config", home / "Library" / "Application Support"):
        for editor in ("Code", "Code - Insiders", "VSCodium"):
            for sub in subs:
                assert str(base / editor / "User" / sub) in paths
    assert len(paths) == 18
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "VSCODE_PORTABLE": str(tmp_path / "portable")}
    paths = [r.path for r in vc.default_roots(env, home)]
    assert str(tmp_path / "xdg" / "Code" / "User" / "workspaceStorage") in paths
    assert str(home / ".config" / "Code" / "User" / "workspaceStorage") not in paths
    assert paths[-3:] == [str(tmp_path / "portable" / "user-data" / "User" / sub) for sub in subs]
    assert {r.agent for r in vc.default_roots(env, home)} == {"vscode-copilot"}


def test_discovery_under_default_shaped_roots(tmp_path: Path) -> None:
    """Chat files of every workspace and of empty windows are found; a .json beside the .jsonl of the same id is
    not (the log won); other files of the storage folders are not chats."""
    home = tmp_path / "home"
    user = vb.user_dir(home / ".config")
    a = vb.ChatWriter(user / "workspaceStorage", "/home/dev/a")
    b = vb.ChatWriter(user / "workspaceStorage", "/home/dev/b", form="json")
    converted = b.path.with_suffix(".jsonl")
    c = vb.ChatWriter(user / "workspaceStorage", "/home/dev/b", form="json")
    converted.write_bytes(b.path.read_bytes())  # content does not matter to discovery
    empty = vb.ChatWriter(user / "globalStorage", None)
    (user / "workspaceStorage" / vb.workspace_hash("/home/dev/a") / "state.vscdb").write_bytes(b"")
    (user / "globalStorage" / "storage.json").write_bytes(b"{}")
    problems: list[RootProblem] = []
    found = {f.path for r in vc.default_roots({}, home) for f in vc.SPEC.discover(r, problems, {}, True)}
    assert problems == []
    assert found == {str(a.path), str(converted), str(c.path), str(empty.path)}
    assert vc.SPEC.predecessor(str(converted)) == str(b.path)
    assert vc.SPEC.shaped(a.path.name) and not vc.SPEC.shaped("workspace.json")


def test_a_root_named_by_the_user_may_be_one_workspace_or_one_chat_folder(tmp_path: Path) -> None:
    """--root vscode-copilot=<hash folder> or =<chatSessions folder> finds the same chats."""
    w = vb.ChatWriter(tmp_path / "workspaceStorage", "/home/dev/a")
    for path in (w.path.parent.parent, w.path.parent):
        found = [f.path for f in vc.SPEC.discover(Root("vscode-copilot", str(path), True), [], {}, True)]
        assert found == [str(w.path)]


# -- the shipped sample ---------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/vscode-copilot (--root vscode-copilot=samples/vscode-copilot/.config/Code/User/workspaceStorage):
    the Jest open-handle chat, its custom title and folder, two requests."""
    [found] = vc.SPEC.discover(Root("vscode-copilot", str(SAMPLES)), [], {}, True)
    unit = vc.read_unit(found)
    sane(unit)
    s = unit.session
    assert (s.session_id, s.title, s.cwd) == ("5d0f6b0e-2c41-4a8e-9b17-8e3f40c2a9d1",
                                              "Jest does not exit in CI: pg pool open handle", "/home/dev/invoice-api")
    assert [m.role for m in unit.messages].count("user") == 2 and len(unit.messages) == 11
    assert "pool.end()" in unit.messages[6].text and unit.skips == {}


# -- end to end -------------------------------------------------------------------------------------------
def test_daemon_indexes_a_chat_once_and_rereads_a_change_once(home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner: a chat under a default-shaped workspaceStorage is found and searchable
    with its title and folder; a second pass reads nothing; a new request is seen by a recent pass and the chat
    re-read once, still one session."""
    storage = vb.user_dir(tmp_path / "user" / ".config") / "workspaceStorage"
    w = vb.ChatWriter(storage, "/home/dev/marmot")
    w.ask("the marmot service leaks file descriptors", [vb.terminal_tool("t1", "lsof -p 4242 | wc -l", "10231"),
                                                        vb.markdown("Close the marmot response bodies.")])
    with InprocDaemon(home, {"vscode-copilot": storage}) as daemon:
        assert daemon.reconcile()["messages"] == 4
        [hit] = daemon.search("marmot")["hits"]
        assert (hit["agent"], hit["sessionId"], hit["title"], hit["cwd"], hit["messageCount"], hit["resumeCommand"]) \
            == ("vscode-copilot", w.session_id, "the marmot service leaks file descriptors", "/home/dev/marmot", 4,
                None)
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)
        time.sleep(0.01)
        w.ask("does the badger service leak too", [vb.markdown("No, it closes them.")])
        changed = daemon.reconcile(full=False)
        assert (changed["files_changed"], changed["messages"]) == (1, 6)
        assert daemon.reconcile(full=False)["messages"] == 0
        [hit] = daemon.search("badger")["hits"]
        assert hit["sessionId"] == w.session_id and hit["messageCount"] == 6
        assert len(daemon.search("marmot", limit=10)["hits"]) == 1
