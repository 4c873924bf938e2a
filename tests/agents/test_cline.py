"""Cline / Roo Code / Kilo Code task folders (scanner.parsers.cline): parsing, discovery, pipeline, kill -9.

There is no shared corpus for these agents: every count below was verified by reading the
hand-written fixtures under tests/fixtures/quirks/{cline,roo}/ message by message.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import policy
from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.agents import SPECS
from aivault.scanner.parsers import cline
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders import cline as b
from tests.support.common import FIXTURES, REPO, cli_env, lexical_only, wait_until
from tests.support.daemons import InprocDaemon, restart_and_stop_cleanly
from tests.support.index import assert_same_index, fingerprint

QUIRKS = FIXTURES / "quirks"
CLINE_EXT = QUIRKS / "cline" / "saoudrizwan.claude-dev"
ROO_EXT = QUIRKS / "roo" / "rooveterinaryinc.roo-cline"
SAMPLES = REPO / "samples"


def _units(agent: str, root: Path) -> dict[str, Unit]:
    problems: list[RootProblem] = []
    found = list(SPECS[agent].discover(Root(agent, str(root), explicit=True), problems, {}, True))
    assert problems == []
    return {os.path.basename(f.path): cline.read_task(f) for f in found}


def _shape(unit: Unit) -> list[tuple[str, str]]:
    return [(m.role, m.kind) for m in unit.messages]


def _found(folder: Path, agent: str = "cline") -> Found:
    [f] = [x for x in cline.discover(Root(agent, str(folder.parent)), [], {}, True) if x.path == str(folder)]
    return f


# --- the fixtures --------------------------------------------------------------------------------------
def test_cline_task_in_the_xml_tool_protocol() -> None:
    """The UI timeline is kept, tool outputs only the model view has are joined in, and nothing is doubled."""
    unit = _units("cline", CLINE_EXT)["1772700000000"]
    # Counted by reading ui_messages.json (25 entries): task, reasoning, the final text (its partial
    # snapshot dropped), readFile + its result from the model view, editedExistingFile + its result,
    # command + command_output, MCP call + response, browser launch + result, error, followup,
    # user_feedback, user_feedback_diff, completion_result = 18; the 3 api_req_started, checkpoint,
    # task_progress, the unknown say, the empty completion ask and the bare 42 give no message.
    assert _shape(unit) == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "text"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("system", "text"), ("assistant", "text"),
        ("user", "text"), ("user", "text"), ("assistant", "text")]
    texts = [m.text for m in unit.messages]
    assert texts[2] == "I'll start by reading the form handler."
    assert texts[3].startswith('readFile {"path":"src/signup.ts"')
    assert texts[4].startswith("export function signup(form)")  # only the model view has the file's text
    assert texts[6] == "The content was successfully saved to src/signup.ts."
    assert texts[7] == 'execute_command {"command":"npm test -- signup"}'  # REQ_APP marker gone
    assert texts[9].startswith('use_mcp_tool {"serverName":"github","toolName":"create_issue","arguments":{"title"')
    assert texts[12] == "http://localhost:3000/signup\n[warn] the password field has no label"  # no screenshot
    assert texts[14] == "Should the password rule require a symbol?\n- Yes, one symbol\n- No"
    assert texts[16].startswith("src/schema.ts\n-  password")
    assert sum("npm test" in t for t in texts) == 1 and sum("issue #42" in t for t in texts) == 1
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd) == (
        "cline", "1772700000000", "Add input validation to the signup form", "/home/dev/signup")
    assert (s.started_at, s.updated_at, s.resume_command, s.parent_session_id) == (
        1772700000000, 1772700022000, None, None)
    assert unit.skips == {"malformed-record": 1, "image": 1, "bookkeeping:api_req_started": 3,
                          "partial-superseded": 1, "bookkeeping:checkpoint_created": 1,
                          "bookkeeping:task_progress": 1, "unknown_record:say:zebra_stripes": 1,
                          "duplicate_tool_result": 4, "unmatched_tool_result": 1}


def test_cline_task_with_only_the_model_view() -> None:
    """A folder without ui_messages.json is read from api_conversation_history.json: blocks, times, cwd."""
    unit = _units("cline", CLINE_EXT)["1772700100000"]
    # Counted from the 6 entries: the task (environment details and the image dropped), thinking, text,
    # tool_use, its tool_result, the resumption notice (system), the answer = 7.
    assert _shape(unit) == [("user", "text"), ("assistant", "thinking"), ("assistant", "text"),
                            ("assistant", "tool_call"), ("tool", "tool_result"), ("system", "text"),
                            ("assistant", "text")]
    assert unit.messages[0].text == "Why does the rate limiter reject bursts?"
    assert unit.messages[3].text == 'read_file {"path":"limiter.go"}'
    s = unit.session
    assert (s.title, s.cwd, s.started_at, s.updated_at) == (
        "Why does the rate limiter reject bursts?", "/home/dev/gateway", 1772700100000, 1772700162000)
    assert unit.skips == {"image": 1, "injected-context": 2, "redacted-thinking": 1,
                          "unknown_block:server_tool_use": 1, "malformed-record": 1}


def test_roo_task_native_tools_history_item_and_parent() -> None:
    """Roo: the task is the first say:text, native tool_use inputs are exact, history_item.json gives cwd and parent."""
    unit = _units("roo", ROO_EXT)["0199bd3e-5a10-7000-8000-00000000c0de"]
    # Counted from ui_messages.json (11 entries): task text, readFile + joined result, codebase search
    # result, followup, feedback, newTask + joined result, subtask_result, completion = 10.
    assert _shape(unit) == [("user", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
                            ("tool", "tool_result"), ("assistant", "text"), ("user", "text"),
                            ("assistant", "tool_call"), ("tool", "tool_result"), ("tool", "tool_result"),
                            ("assistant", "text")]
    assert unit.messages[1].text == 'read_file {"args":{"file":[{"path":"src/warmer.ts","line_range":["1-40"]}]}}'
    assert "await fetchOne(key)" in unit.messages[2].text
    assert unit.messages[4].text == ("Parallelise the warmer with a concurrency limit?\n"
                                     "- Yes, limit 8\n- No, keep it serial")
    s = unit.session
    assert (s.agent, s.title, s.cwd, s.parent_session_id) == (
        "roo", "Profile why the cache warmer is slow", "/home/dev/cache", "0199bd3e-5a10-7000-8000-00000000beef")
    assert unit.skips == {"bookkeeping:api_req_started": 1, "bookkeeping:checkpoint_saved": 1,
                          "bookkeeping:condense_context": 1, "duplicate_tool_result": 1}


def test_sample_task() -> None:
    """The demo sample: a VAT-row fix, 5 messages (task, reply, read + its content, edit, completion)."""
    tasks = SAMPLES / "cline/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks"
    [unit] = _units("cline", tasks).values()
    assert _shape(unit) == [("user", "text"), ("assistant", "text"), ("assistant", "tool_call"),
                            ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"),
                            ("assistant", "text")]
    assert unit.session.cwd == "/home/dev/billing" and unit.session.title is not None
    assert unit.session.title.startswith("The invoice PDF export puts the VAT line")


# --- broken and unusual documents ----------------------------------------------------------------------
@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    return b.tasks_root(tmp_path / "home")


def _write(folder: Path, name: str, data: bytes, age_s: float = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(data)
    if age_s:
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - int(age_s * 1e9)))


def _ui(*records: dict[str, object]) -> bytes:
    return json.dumps(list(records)).encode()


def test_a_document_cut_off_mid_write_is_read_again_later(tasks: Path) -> None:
    """A truncated ui_messages.json just written is UnitChanged (retried), never half-indexed."""
    data = _ui(b.say(1, "task", "deploy the blue build"), b.say(2, "text", "Deploying now"))
    _write(tasks / "100", "ui_messages.json", data[:-20])
    with pytest.raises(UnitChanged):
        cline.read_task(_found(tasks / "100"))
    _write(tasks / "101", "ui_messages.json", b"")
    with pytest.raises(UnitChanged):
        cline.read_task(_found(tasks / "101"))


def test_a_truncated_document_left_alone_keeps_its_complete_records(tasks: Path) -> None:
    """Once settled, the complete elements of a cut-off array are indexed and the cut is counted."""
    data = _ui(b.say(1772700000000, "task", "deploy the blue build"), b.say(1772700001000, "text", "Deploying now"))
    _write(tasks / "100", "ui_messages.json", data[:-20], age_s=3600)
    unit = cline.read_task(_found(tasks / "100"))
    assert [m.text for m in unit.messages] == ["deploy the blue build"]
    assert unit.skips["truncated-document"] == 1
    _write(tasks / "101", "ui_messages.json", b"{oops", age_s=3600)
    with pytest.raises(UnitUnreadable):
        cline.read_task(_found(tasks / "101"))
    _write(tasks / "102", "ui_messages.json", b"", age_s=3600)  # an empty settled file: an empty task
    assert cline.read_task(_found(tasks / "102")).messages == []


def test_non_utf8_bytes_unknown_types_and_a_trailing_partial(tasks: Path) -> None:
    """Invalid UTF-8 is repaired, unknown say/ask types are counted, a last partial message is kept."""
    raw = _ui(b.say(1772700000000, "task", "rename the XYZ column"), b.ask(1772700001000, "quantum_leap", "?"),
              b.say(1772700002000, "text", "Renaming", partial=True))
    raw = raw.replace(b"XYZ", b"\xff\xfe")
    _write(tasks / "100", "ui_messages.json", raw)
    unit = cline.read_task(_found(tasks / "100"))
    assert [m.text for m in unit.messages] == ["rename the \ufffd\ufffd column", "Renaming"]
    assert unit.skips == {"unknown_record:ask:quantum_leap": 1}


def test_a_ui_document_of_the_wrong_shape_falls_back_to_the_model_view(tasks: Path) -> None:
    """ui_messages.json holding an object is counted; the model view still gives the task."""
    _write(tasks / "100", "ui_messages.json", b'{"not": "a list"}')
    _write(tasks / "100", "api_conversation_history.json",
           json.dumps([b.api_user([b.text_block("<task>\nbump the lodash pin\n</task>")])]).encode())
    unit = cline.read_task(_found(tasks / "100"))
    assert [m.text for m in unit.messages] == ["bump the lodash pin"]
    assert unit.skips == {"unexpected-shape:ui_messages.json": 1}


# --- discovery and the task index ----------------------------------------------------------------------
def test_default_roots_cover_every_editor_build_and_the_cli(tmp_path: Path) -> None:
    """Linux and macOS User folders of five editor builds per extension, XDG_CONFIG_HOME, and the Cline CLI."""
    home = tmp_path
    roots = {r.path for r in SPECS["cline"].default_roots({}, home)}
    for editor in cline.EDITORS:
        assert str(home / ".config" / editor / "User/globalStorage/saoudrizwan.claude-dev/tasks") in roots
        assert str(home / "Library/Application Support" / editor
                   / "User/globalStorage/saoudrizwan.claude-dev/tasks") in roots
    assert str(home / ".cline/data/tasks") in roots
    assert str(tmp_path / "c/data/tasks") in {r.path for r in SPECS["cline"].default_roots(
        {"CLINE_DIR": str(tmp_path / "c")}, home)}
    assert str(tmp_path / "d/tasks") in {r.path for r in SPECS["cline"].default_roots(
        {"CLINE_DATA_DIR": str(tmp_path / "d")}, home)}
    roo = {r.path for r in SPECS["roo"].default_roots({"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, home)}
    assert str(tmp_path / "xdg/Cursor/User/globalStorage/rooveterinaryinc.roo-cline/tasks") in roo
    kilo = {r.path for r in SPECS["kilo"].default_roots({}, home)}
    assert str(home / ".config/Windsurf/User/globalStorage/kilocode.kilo-code/tasks") in kilo
    assert not any(".cline" in p for p in roo | kilo)


def test_discovery_skips_index_files_and_folders_without_messages(tasks: Path) -> None:
    """_index.json, hidden entries and folders with no message document are not units."""
    b.TaskWriter(tasks, "1").task("tidy the imports").save()
    (tasks / "2").mkdir()
    (tasks / "2" / "task_metadata.json").write_text("{}")
    (tasks / ".DS_Store").write_text("")
    (tasks / "_index.json").write_text("{}")
    found = list(cline.discover(Root("cline", str(tasks)), [], {}, True))
    assert [os.path.basename(f.path) for f in found] == ["1"]


def test_an_index_entry_written_later_changes_the_signature_once(tasks: Path) -> None:
    """cwd recorded in taskHistory.json after the task's last write re-reads that task (and only it)."""
    w = b.TaskWriter(tasks, "7").task("upgrade pydantic").save()
    b.TaskWriter(tasks, "8").task("other task").save()
    before = {f.path: f.mtime_ns for f in cline.discover(Root("cline", str(tasks)), [], {}, True)}
    b.write_json(b.index_path(tasks), [b.history_item("7", "upgrade pydantic", w.t, "/srv/api")])
    after = {f.path: f.mtime_ns for f in cline.discover(Root("cline", str(tasks)), [], {}, True)}
    assert after[str(w.folder)] != before[str(w.folder)]
    assert after[str(tasks / "8")] == before[str(tasks / "8")]
    assert cline.read_task(_found(w.folder)).session.cwd == "/srv/api"


def test_the_editor_global_state_supplies_roo_cwd_and_parent(tmp_path: Path) -> None:
    """Versions that keep taskHistory in VS Code's state.vscdb (ItemTable) still get cwd and parent."""
    tasks = b.tasks_root(tmp_path, b.ROO_EXT)
    b.TaskWriter(tasks, "0199-child").task("write the migration").save()
    db = tasks.parent.parent / "state.vscdb"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
    state = {"taskHistory": [b.history_item("0199-child", "write the migration", 1, "/home/dev/db", roo=True,
                                            parent="0199-parent")]}
    con.execute("INSERT INTO ItemTable VALUES (?, ?)", ("RooVeterinaryInc.roo-cline", json.dumps(state)))
    con.commit()
    con.close()
    unit = cline.read_task(_found(tasks / "0199-child", "roo"))
    assert (unit.session.cwd, unit.session.parent_session_id) == ("/home/dev/db", "0199-parent")


# --- through the real pipeline ---------------------------------------------------------------------------
@pytest.fixture
def cline_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path]]:
    user = tmp_path / "userhome"
    tasks = b.tasks_root(user)
    tasks.mkdir(parents=True)
    with InprocDaemon(home, {"cline": tasks, "roo": b.tasks_root(user, b.ROO_EXT, "Cursor"),
                            "kilo": b.tasks_root(user, b.KILO_EXT, "VSCodium")}) as d:
        yield d, tasks


def test_a_task_is_found_searched_and_re_read_once_when_it_changes(cline_daemon: tuple[InprocDaemon, Path]) -> None:
    """Discovery under a default-shaped root, search, hit fields; an unchanged pass reads nothing; a
    rewrite of the task re-reads it exactly once, still one session."""
    d, tasks = cline_daemon
    w = b.TaskWriter(tasks).task("the webhook signature check rejects valid payloads", cwd="/home/dev/hooks")
    w.read_file("src/verify.ts", "hmac.update(rawBody)").reply("The body is parsed before hashing: use rawBody.")
    w.save()
    b.write_json(b.index_path(tasks), [b.history_item(w.task_id, "the webhook signature check rejects valid payloads",
                                                      w.t, "/home/dev/hooks")])
    summary = d.reconcile()
    assert summary["messages"] == 4
    [hit] = d.search("webhook signature")["hits"]
    assert hit["agent"] == "cline" and hit["sessionId"] == w.task_id and hit["messageCount"] == 4
    assert hit["title"] == "the webhook signature check rejects valid payloads"
    assert hit["cwd"] == "/home/dev/hooks" and hit["resumeCommand"] is None
    again = d.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    w.feedback("also cover the replay window").reply("Added a five-minute replay window check.").save()
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 6
    [hit] = d.search("replay window")["hits"]
    assert hit["messageCount"] == 6 and hit["sessionId"] == w.task_id
    assert len(d.search("webhook signature")["hits"]) == 1


def test_roo_and_kilo_tasks_are_their_own_agents(cline_daemon: tuple[InprocDaemon, Path]) -> None:
    """The same task layout under the Roo and Kilo extension folders is indexed as roo and kilo."""
    d, tasks = cline_daemon
    user = tasks.parents[5]
    b.TaskWriter(b.tasks_root(user, b.ROO_EXT, "Cursor"), "0199-roo").task("roo wombat question").save()
    b.TaskWriter(b.tasks_root(user, b.KILO_EXT, "VSCodium"), "0199-kilo").task("kilo wombat question").save()
    d.reconcile()
    hits = d.search("wombat question")["hits"]
    assert sorted((h["agent"], h["sessionId"]) for h in hits) == [("kilo", "0199-kilo"), ("roo", "0199-roo")]


# --- kill -9 of the scanner while task folders stream ------------------------------------------------
# Enough that several 4,000-message batches are in flight, and two tasks larger than one batch (a
# whole unit committed in parts that must resume at the right message).
SMALL_TASKS = 600
SMALL_TURNS = 30  # 2 UI messages each (command + output), plus the task and a reply
BIG_TASKS = 2
BIG_TURNS = 2600


def _crash_corpus(tasks: Path) -> int:
    total = 0
    for i in range(SMALL_TASKS + BIG_TASKS):
        turns = SMALL_TURNS if i < SMALL_TASKS else BIG_TURNS
        w = b.TaskWriter(tasks, f"17727{i:08d}", start_ms=1772700000000 + i * 10_000_000)
        w.task(f"task {i} about the ledger importer", cwd=f"/home/dev/p{i % 7}")
        for t in range(turns):
            w.command(f"make check-{i}-{t}", f"ok {i} {t} " + "lorem ipsum dolor sit amet " * 3)
        w.reply(f"task {i} is done").save()
        total += 2 + 2 * turns
    return total


def test_kill_9_of_the_scanner_mid_stream_loses_and_duplicates_no_task_message(
        home: Home, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """SIGKILL of the scanner while Cline task folders are committed batch by batch: the respawned
    scanner resumes, and the index equals a clean index of the same folders (nothing lost or doubled)."""

    tasks = b.tasks_root(tmp_path / "userhome")
    total = _crash_corpus(tasks)
    ref_home = Home.resolve(tmp_path_factory.mktemp("ref") / "home").ensure()
    policy.save(ref_home, policy.Policy(True, None))
    lexical_only(ref_home)
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--no-default-roots", "--root",
                           f"cline={tasks}"], env=cli_env(ref_home.path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    reference = fingerprint(ref_home.db_path)
    assert reference[2] == total and max(reference[0].values()) == 1

    with InprocDaemon(home, [f"cline={tasks}"]) as d:
        ix = d.service.indexer
        fut = ix.reconcile(full=True)
        assert wait_until(lambda: ix.generation >= 3, timeout=120), "no batch committed"
        scanner = ix.slots[0].proc
        assert scanner is not None and not fut.done(), "the pass ended before the kill"
        os.kill(scanner.pid, signal.SIGKILL)
        killed_at = ix.generation
        fut.result(300)
        assert ix.generation > killed_at
    assert_same_index(home.db_path, reference)
    restart_and_stop_cleanly(home, [])
    assert_same_index(home.db_path, reference)
