"""pi sessions (scanner.pi over scanner.pitree): the live branch of the tree, mapping, roots, discovery, robustness.

The tree rules every reader of the family shares (branches, broken links, version-1 files, injected
context) are pinned here, on pi's files; test_omp, test_prime and test_openclaw pin what each adds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from aivault.errors import UnitChanged
from aivault.scanner.model import KINDS, ROLES
from aivault.scanner.parsers import pi
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import pi as pb
from tests.builders.common import BASE_TIME, epoch_ms
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "pi"
REAL = CORPUS / "irrlicht" / "full-lifecycle-toolcall" / "transcript.jsonl"
EDGES = CORPUS / "agentsview" / "session.jsonl"
SAMPLES = REPO / "samples" / "pi" / ".pi" / "agent"
OLD_NS = 1_600_000_000 * 1_000_000_000


def read(path: Path) -> Unit:
    return whole_unit("pi", path)


def sane(unit: Unit) -> None:
    assert unit.session.message_count == len(unit.messages)
    for m in unit.messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip() and m.ts is not None


def rows(unit: Unit) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in unit.messages]


def session(tmp_path: Path, sid: str = "0199c0de-0000-7000-8000-000000000001",
            cwd: str = "/home/dev/site") -> pb.PiWriter:
    return pb.PiWriter(pb.pi_session_path(tmp_path / "sessions", cwd, sid), session_id=sid, cwd=cwd)


# -- the copied corpus ------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The three pi-family corpus files are the ones tested here and in test_omp."""
    assert sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()) == [
        "agentsview/session.jsonl", "deja-vu/omp/session.jsonl", "irrlicht/full-lifecycle-toolcall/transcript.jsonl"]


def test_real_pi_session_with_a_bash_call() -> None:
    """The live pi 0.70 recording: prompt, bash call, its output, the answer; model, thinking-level and the
    extension's postmortem entry are bookkeeping; id and cwd from the header, times from its entries."""
    unit = read(REAL)
    sane(unit)
    assert rows(unit) == [
        ("user", "text", "Use the bash tool to run 'echo hello', then reply 'done'."),
        ("assistant", "tool_call", 'bash {"command":"echo hello"}'),
        ("tool", "tool_result", "hello\n"),
        ("assistant", "text", "done"),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.cwd, s.branch, s.parent_session_id) == (
        "pi", "019dc921-2cf0-733c-b91b-d3da5076cbb2", "/Users/ingo/projects/irrlicht/.claude/worktrees/228", None, None)
    assert s.title == "Use the bash tool to run 'echo hello', then reply 'done'."
    assert s.resume_command == ("cd /Users/ingo/projects/irrlicht/.claude/worktrees/228 && "
                                "pi --session 019dc921-2cf0-733c-b91b-d3da5076cbb2")
    assert s.started_at == 1777195887857 and s.updated_at == 1777195894185  # header .. the custom entry
    assert unit.skips == {"bookkeeping": 3}


def test_edge_case_session_from_agentsview() -> None:
    """branchedFrom names the parent by path (its id is the part after the time stamp); a redacted thinking
    block is counted, the compaction summary is system text, a malformed line and an unknown entry type are
    counted and the entries after them still read."""
    unit = read(EDGES)
    sane(unit)
    assert rows(unit) == [
        ("user", "text", "Fix the login bug"),
        ("assistant", "thinking", "Let me analyze this carefully."),
        ("assistant", "text", "Looking at the auth module."),
        ("assistant", "tool_call", 'read {"file_path":"auth.go"}'),
        ("tool", "tool_result", "package auth\nfunc Login() {}"),
        ("system", "text", "# Context Checkpoint\nThe user is fixing a login bug."),
        ("user", "text", "Look good to you?"),
        ("assistant", "text", "Looks good!"),
    ]
    s = unit.session
    assert (s.session_id, s.title, s.parent_session_id) == ("pi-test-session-uuid", "Fix the login bug", "parent-uuid")
    assert unit.skips == {"malformed-record": 1, "bookkeeping": 2, "redacted-thinking": 1,
                          "unknown_record:unknown_future_entry_type": 1}


# -- the tree -----------------------------------------------------------------------------------------
def test_an_abandoned_branch_is_left_out_and_its_summary_kept(tmp_path: Path) -> None:
    """/tree back to before a prompt and a new prompt: the live path is the new branch; the old reply is
    counted dead-branch, the branch summary pi wrote onto the live path is system text."""
    w = session(tmp_path).model()
    w.user("the build is red")
    base = w.last
    w.assistant("Try pinning esbuild to 0.19.")
    dead = w.last
    assert dead is not None
    w.branch(base).branch_summary(dead, "Pinning esbuild did not help.").assistant("The lockfile is stale; run npm ci.")
    unit = read(w.file)
    assert rows(unit) == [("user", "text", "the build is red"), ("system", "text", "Pinning esbuild did not help."),
                          ("assistant", "text", "The lockfile is stale; run npm ci.")]
    assert unit.skips == {"bookkeeping": 1, "dead-branch": 1}


def test_re_prompting_from_an_earlier_entry_starts_a_sibling(tmp_path: Path) -> None:
    """Editing an earlier prompt hangs the new prompt beside the old one: only the newest branch is read, and
    the session's times are those of the live path."""
    w = session(tmp_path)
    root = w.last
    w.user("first wording").assistant("answer to the first wording")
    t_dead = w.t
    w.branch(root).user("second wording").assistant("answer to the second wording")
    unit = read(w.file)
    assert [m.text for m in unit.messages] == ["second wording", "answer to the second wording"]
    assert unit.skips == {"dead-branch": 2} and unit.session.title == "second wording"
    assert unit.session.updated_at == epoch_ms(w.t) and epoch_ms(t_dead) < unit.session.updated_at


def test_links_that_do_not_form_a_tree_are_read_in_file_order(tmp_path: Path) -> None:
    """A parentId naming no entry (a lost line, a writer's slip) makes the file a list: everything is read
    in order and counted broken-tree once, where pi's own loader would drop what precedes the gap."""
    w = session(tmp_path).user("before the gap").assistant("reply before the gap")
    w.branch("deadbeef").user("after the gap")
    unit = read(w.file)
    assert [m.text for m in unit.messages] == ["before the gap", "reply before the gap", "after the gap"]
    assert unit.skips == {"broken-tree": 1}


def test_a_parent_cycle_is_read_in_file_order(tmp_path: Path) -> None:
    """Two entries naming each other as parent: no root is reachable, so the file is read as a list."""
    path = tmp_path / "c.jsonl"
    lines = [pb.header("c-1", "/home/dev/c", BASE_TIME),
             {"type": "message", "id": "a", "parentId": "b", "timestamp": "2026-03-01T10:00:02Z",
              "message": {"role": "user", "content": "one"}},
             {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-03-01T10:00:04Z",
              "message": {"role": "user", "content": "two"}}]
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    unit = read(path)
    assert [m.text for m in unit.messages] == ["one", "two"] and unit.skips == {"broken-tree": 1}


def test_a_version_1_file_is_a_list_and_its_name_gives_the_id(tmp_path: Path) -> None:
    """Header version 1 entries have no ids: they are read in order; with no id in the header the session id
    is the one in the file name."""
    path = tmp_path / "--home-dev-old--" / "2025-01-02T03-04-05-000Z_0194aaaa-0000-7000-8000-000000000009.jsonl"
    path.parent.mkdir()
    lines = [{"type": "session", "timestamp": "2025-01-02T03:04:05Z", "cwd": "/home/dev/old"},
             {"type": "message", "timestamp": "2025-01-02T03:04:06Z", "message": {"role": "user", "content": "hi"}},
             {"type": "message", "timestamp": "2025-01-02T03:04:07Z",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}}]
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    unit = read(path)
    assert [m.text for m in unit.messages] == ["hi", "hello"] and unit.skips == {}
    assert unit.session.session_id == "0194aaaa-0000-7000-8000-000000000009"


# -- messages and session fields ---------------------------------------------------------------------------
def test_every_message_shape(tmp_path: Path) -> None:
    """Images are counted, a failed tool result is marked, a user's !command and its output are a tool result,
    hidden extension context and Oh My Pi's developer messages are injected context, shown extension
    messages are system text, a failed turn's error is system text, unknown roles and blocks are counted."""
    w = session(tmp_path)
    w.user([pb.text("what is in this screenshot?"), {"type": "image", "data": "iVBOR", "mimeType": "image/png"}])
    w.tool("bash", {"command": "make test"}, "exit status 2", is_error=True, say="Running the tests.")
    w.entry("message", message={"role": "bashExecution", "command": "git status", "output": "clean", "exitCode": 0})
    w.custom_message("Hidden reminder for the model.", display=False)
    w.custom_message("Plan mode is on.", display=True)
    w.entry("message", message={"role": "developer", "content": "# Rules\nbe brief"})
    w.entry("message", message={"role": "assistant", "content": [], "stopReason": "error",
                                "errorMessage": "429 rate limit exceeded"})
    w.entry("message", message={"role": "narrator", "content": "?"})
    w.entry("message", message={"role": "assistant", "content": [{"type": "hologram"}, pb.text("ok")]})
    unit = read(w.file)
    sane(unit)
    assert rows(unit) == [
        ("user", "text", "what is in this screenshot?"),
        ("assistant", "text", "Running the tests."),
        ("assistant", "tool_call", 'bash {"command":"make test"}'),
        ("tool", "tool_result", "[error] exit status 2"),
        ("tool", "tool_result", "$ git status\nclean"),
        ("system", "text", "Plan mode is on."),
        ("system", "text", "[error] 429 rate limit exceeded"),
        ("assistant", "text", "ok"),
    ]
    assert unit.skips == {"attachment:image": 1, "injected-context": 2, "unknown_role:narrator": 1,
                          "unknown_block:hologram": 1}
    assert unit.session.title == "what is in this screenshot?"


def test_title_is_the_latest_name_else_the_first_prompt(tmp_path: Path) -> None:
    """The first prompt's first line until /name; the latest session_info name wins, even one set on a
    branch later abandoned (pi's session list reads names from the whole file)."""
    w = session(tmp_path).user("  \nfix the flaky e2e test\nit times out")
    assert read(w.file).session.title == "fix the flaky e2e test"
    before = w.last
    w.name("flaky e2e").assistant("on it")
    w.branch(before).name("playwright timeout")
    w.branch(before).assistant("Raise the navigation timeout.")
    unit = read(w.file)
    assert unit.session.title == "playwright timeout" and unit.skips["dead-branch"] == 3


def test_a_fork_names_its_parent_by_path(tmp_path: Path) -> None:
    """/fork writes parentSession = the parent's file: its header id when the file is there, else the id in its
    name; a session without one has no parent."""
    parent = session(tmp_path, sid="0199c0de-0000-7000-8000-0000000000aa").user("parent prompt")
    assert parent.path is not None
    renamed = parent.path.with_name("2026-03-01T10-00-00-000Z_not-the-header-id.jsonl")
    os.link(parent.path, renamed)
    child = pb.PiWriter(tmp_path / "child.jsonl", session_id="child-1", cwd="/home/dev/site",
                        header_extra={"parentSession": str(renamed)})
    child.user("child prompt")
    assert read(child.file).session.parent_session_id == "0199c0de-0000-7000-8000-0000000000aa"
    gone = pb.PiWriter(tmp_path / "gone.jsonl", session_id="gone-1", cwd="/x",
                       header_extra={"parentSession": "/nowhere/2026-01-01T00-00-00-000Z_0199-gone.jsonl"})
    gone.user("orphan")
    assert read(gone.file).session.parent_session_id == "0199-gone"


def test_an_entry_without_a_time_has_the_time_before_it(tmp_path: Path) -> None:
    """Every message carries a time: an entry without one (and without message.timestamp) inherits the
    previous entry's, the first ones the header's."""
    path = tmp_path / "t.jsonl"
    lines = [pb.header("t-1", "/home/dev/t", BASE_TIME),
             {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "no time"}},
             {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-03-01T10:05:00Z",
              "message": {"role": "assistant", "content": "timed"}},
             {"type": "message", "id": "c", "parentId": "b", "message": {"role": "user", "content": "again none"}}]
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    unit = read(path)
    assert [m.ts for m in unit.messages] == [epoch_ms(BASE_TIME), 1772359500000, 1772359500000]


# -- roots and discovery --------------------------------------------------------------------------------
def test_default_roots_follow_the_agent_dir_the_session_dir_and_settings(tmp_path: Path) -> None:
    """~/.pi/agent/sessions on Linux and macOS alike; PI_CODING_AGENT_DIR moves the agent folder (a leading ~ is
    the home), PI_CODING_AGENT_SESSION_DIR and settings.json's sessionDir add the folder sessions moved to."""
    home = tmp_path / "home"
    assert [r.path for r in pi.default_roots({}, home)] == [str(home / ".pi" / "agent" / "sessions")]
    agent = home / "pi-agent"
    agent.mkdir(parents=True)
    (agent / "settings.json").write_text('{"sessionDir": "~/pi-sessions", "theme": "dark"}')
    env = {"PI_CODING_AGENT_DIR": "~/pi-agent", "PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "elsewhere")}
    assert [r.path for r in pi.default_roots(env, home)] == [
        str(tmp_path / "elsewhere"), str(home / "pi-sessions"), str(agent / "sessions")]
    (agent / "settings.json").write_text('{"sessionDir": "relative/dir"}')
    assert [r.path for r in pi.default_roots({"PI_CODING_AGENT_DIR": str(agent)}, home)] == [str(agent / "sessions")]


@pytest.mark.parametrize("cwd", ["/home/dev/site", "/Users/dev/Code/site"])
def test_discovery_finds_sessions_per_cwd_folder(tmp_path: Path, cwd: str) -> None:
    """Linux and macOS homes: every <timestamp>_<id>.jsonl under its --<cwd>-- folder, nothing else."""
    root = tmp_path / ".pi" / "agent" / "sessions"
    w = pb.PiWriter(pb.pi_session_path(root, cwd, "s-1"), session_id="s-1", cwd=cwd).user("hello")
    (root / "notes.txt").write_text("not a session")
    problems: list[RootProblem] = []
    found = list(pi.SPEC.discover(Root("pi", str(root)), problems, {}, True))
    assert problems == [] and [f.path for f in found] == [str(w.path)] and found[0].mode == "whole"
    assert w.path is not None and w.path.parent.name == "--" + cwd[1:].replace("/", "-") + "--"


def test_a_recent_pass_sees_an_appended_entry(tmp_path: Path) -> None:
    """An append changes neither the folder nor the mode: a recent pass lists known folders again and offers
    the file with its new signature, and a new session folder is found too."""
    root = tmp_path / "sessions"
    w = pb.PiWriter(pb.pi_session_path(root, "/home/dev/a", "a-1"), session_id="a-1", cwd="/home/dev/a").user("one")
    dirs: dict[str, int] = {}
    [first] = pi.SPEC.discover(Root("pi", str(root)), [], dirs, True)
    time.sleep(0.01)
    w.assistant("two")
    other = pb.PiWriter(pb.pi_session_path(root, "/home/dev/b", "b-1"), session_id="b-1", cwd="/home/dev/b")
    other.user("three")
    again = {f.path: f for f in pi.SPEC.discover(Root("pi", str(root)), [], dirs, False)}
    assert set(again) == {str(w.path), str(other.path)}
    assert again[str(w.path)].mtime_ns != first.mtime_ns


# -- robustness ------------------------------------------------------------------------------------------
def test_a_last_line_being_written_waits_then_is_counted(tmp_path: Path) -> None:
    """A cut-off last entry is UnitChanged while the file is fresh, counted truncated-record once it settled."""
    w = session(tmp_path).user("hello pi")
    assert w.path is not None
    with w.path.open("ab") as f:
        f.write(b'{"type":"message","id":"zz","parentId":"00000001","message":{"role":"assis')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["hello pi"] and unit.skips == {"truncated-record": 1}


def test_bad_lines_and_bytes_are_counted_never_fatal(tmp_path: Path) -> None:
    """Non-objects and objects without a type are malformed, invalid UTF-8 is repaired, an empty file is an
    empty session named by its file."""
    w = session(tmp_path).user("caf\u00e9")
    assert w.path is not None
    data = w.path.read_bytes().replace("caf\u00e9".encode(), b"caf\xe9")
    w.path.write_bytes(data + b'[1, 2]\n{"id": "x"}\n\n')
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["caf\ufffd"] and unit.skips == {"malformed-record": 2}
    empty = tmp_path / "2026-01-01T00-00-00-000Z_e-1.jsonl"
    empty.write_bytes(b"")
    unit = read(empty)
    assert (unit.messages, unit.session.session_id, unit.skips) == ([], "e-1", {"empty-file": 1})


# -- the shipped sample ------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/pi (PI_CODING_AGENT_DIR=samples/pi/.pi/agent): the live branch of the jest open-handle session, its
    /name title, the abandoned --forceExit branch left out but summarised."""
    [root] = pi.default_roots({"PI_CODING_AGENT_DIR": str(SAMPLES)}, Path("/nonexistent"))
    [f] = pi.SPEC.discover(root, [], {}, True)
    unit = pi.read_unit(f)
    sane(unit)
    s = unit.session
    assert (s.title, s.cwd) == ("jest open handle from undici keep-alive", "/home/dev/quill-notify")
    assert s.resume_command == f"cd /home/dev/quill-notify && pi --session {s.session_id}"
    assert unit.skips["dead-branch"] == 2
    assert not any("quickest way" in m.text or m.text.startswith("ok, add") for m in unit.messages)
    assert any(m.role == "system" and "--forceExit" in m.text for m in unit.messages)
    assert any(m.kind == "tool_call" for m in unit.messages) and "dispatcher" in unit.messages[-1].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".pi" / "agent" / "sessions"
    sessions.mkdir(parents=True)
    return {"pi": sessions}


def test_daemon_indexes_a_pi_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                     roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: found under a default-shaped root, searchable, right metadata; a second
    pass reads nothing; an appended entry is seen by a recent pass and read once, still one session; a branch
    abandoned later drops its messages from the index."""
    sid = "0199c0de-0000-7000-8000-0000000000e2"
    w = pb.PiWriter(pb.pi_session_path(roots["pi"], "/home/dev/heron", sid), session_id=sid, cwd="/home/dev/heron")
    w.model().user("the heron importer skips rows with a BOM")
    w.tool("read", {"path": "importer.ts"}, "fs.readFileSync(p, 'utf8')").assistant("Strip the \\uFEFF first.")
    w.name("Heron importer BOM")
    assert inproc_daemon.reconcile()["messages"] == 4
    [hit] = inproc_daemon.search("heron")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "pi", sid, 4, "Heron importer BOM", "/home/dev/heron")
    assert hit["resumeCommand"] == f"cd /home/dev/heron && pi --session {sid}"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.user("does the egret importer need it too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("egret")["hits"]
    assert hit["sessionId"] == sid and hit["messageCount"] == 5
    assert len(inproc_daemon.search("heron", limit=10)["hits"]) == 1
