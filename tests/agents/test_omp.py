"""Oh My Pi sessions (scanner.omp over scanner.pitree): its folders and profiles, title slot, sub-agents."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aivault.scanner.model import KINDS, ROLES
from aivault.scanner.parsers import omp
from aivault.scanner.sources import Root, RootProblem, Unit, file_signature
from tests.builders import omp as ob
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "pi" / "deja-vu" / "omp" / "session.jsonl"
SAMPLES = REPO / "samples" / "omp" / ".omp" / "agent" / "sessions"


def read(path: Path) -> Unit:
    return whole_unit("omp", path)


def test_corpus_session_with_a_header_title() -> None:
    """deja-vu's Oh My Pi file: the header's title names it, model_change carries "provider/model", the
    thinking block and the answer follow the prompt; resume with omp --resume in its cwd."""
    unit = read(CORPUS)
    assert [(m.role, m.kind, m.text) for m in unit.messages] == [
        ("user", "text", "registry conformance question"),
        ("assistant", "thinking", "reasoning"),
        ("assistant", "text", "registry conformance answer"),
    ]
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.parent_session_id) == (
        "omp", "reg-omp-001", "registry conformance", "/workspace/registry-demo", None)
    assert s.resume_command == "cd /workspace/registry-demo && omp --resume reg-omp-001"
    assert unit.skips == {"bookkeeping": 2}


def test_the_title_slot_outranks_every_other_name_and_is_rewritten_in_place(tmp_path: Path) -> None:
    """The fixed-width first line names the session over title_change, /name and the header's title; a
    rename rewrites its 256 bytes in place, which changes the file's signature and the title read."""
    w = ob.new_session(tmp_path, "/home/dev/kite", "k-1", slot="kite: flaky upload", title="Auto title")
    w.user("uploads fail at random").assistant("Retry with backoff.")
    w.entry("title_change", title="renamed once", previousTitle="Auto title", source="user")
    before = file_signature(str(w.file))
    assert read(w.file).session.title == "kite: flaky upload"
    time.sleep(0.01)
    ob.rewrite_title_slot(w.file, "kite: S3 multipart retry")
    assert read(w.file).session.title == "kite: S3 multipart retry"
    assert file_signature(str(w.file)) != before and w.file.stat().st_size == len(w.file.read_bytes())
    plain = ob.new_session(tmp_path, "/home/dev/kite", "k-2", title="Auto title")
    plain.user("second")
    assert read(plain.file).session.title == "Auto title"
    plain.entry("title_change", title="named by /rename", source="user")
    assert read(plain.file).session.title == "named by /rename"


def test_a_sub_agent_is_its_own_session_linked_to_its_parent(tmp_path: Path) -> None:
    """<parent stem>/<agent>.jsonl beside the parent file (and nested below it): a session linked to the
    parent's header id, titled by its first prompt or its task, never resumable."""
    parent = ob.new_session(tmp_path, "/home/dev/kite", "0198aaaa-0000-7000-8000-0000000000p1")
    parent.user("review the upload module")
    scout = ob.subagent(parent, "scout", "0198aaaa-0000-7000-8000-0000000000c1")
    scout.user("scout: look around the upload module").assistant("upload.py retries without jitter")
    nested = ob.subagent(scout, "reader", "0198aaaa-0000-7000-8000-0000000000c2")
    nested.assistant("read 3 files")
    s = read(scout.file).session
    assert (s.parent_session_id, s.resume_command, s.title) == (
        "0198aaaa-0000-7000-8000-0000000000p1", None, "scout: look around the upload module")
    n = read(nested.file).session
    assert (n.parent_session_id, n.title) == ("0198aaaa-0000-7000-8000-0000000000c1", "reader: look around")
    assert read(parent.file).session.resume_command == \
        "cd /home/dev/kite && omp --resume 0198aaaa-0000-7000-8000-0000000000p1"
    found = {Path(f.path) for f in omp.SPEC.discover(Root("omp", str(tmp_path)), [], {}, True)}
    assert found == {parent.file, scout.file, nested.file}


def test_a_fork_names_its_parent_by_id_and_developer_messages_are_dropped(tmp_path: Path) -> None:
    """Oh My Pi's parentSession is a session id; its developer-role instructions are injected context."""
    w = ob.new_session(tmp_path, "/home/dev/kite", "fork-1", parentSession="0198bbbb-0000-7000-8000-000000000001")
    w.entry("message", message={"role": "developer", "content": [{"type": "text", "text": "# AGENTS.md\nbe brief"}]})
    w.user("continue from the fork").entry("reset_boundary")
    unit = read(w.file)
    assert unit.session.parent_session_id == "0198bbbb-0000-7000-8000-000000000001"
    assert [m.text for m in unit.messages] == ["continue from the fork"]
    assert unit.skips == {"injected-context": 1, "bookkeeping": 1}


def test_default_roots_and_profiles(tmp_path: Path) -> None:
    """~/.omp/agent/sessions and ~/.omp/profiles (PI_CONFIG_DIR renames .omp, under the home), plus
    $XDG_DATA_HOME/omp/sessions and …/omp/profiles when XDG_DATA_HOME is set; the same on macOS."""
    home = tmp_path / "home"
    assert [r.path for r in omp.default_roots({}, home)] == [
        str(home / ".omp" / "agent" / "sessions"), str(home / ".omp" / "profiles")]
    env = {"PI_CONFIG_DIR": ".omp-work", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert [r.path for r in omp.default_roots(env, home)] == [
        str(home / ".omp-work" / "agent" / "sessions"), str(home / ".omp-work" / "profiles"),
        str(tmp_path / "xdg" / "omp" / "sessions"), str(tmp_path / "xdg" / "omp" / "profiles")]
    assert [r.path for r in omp.default_roots({"XDG_DATA_HOME": "relative"}, home)][2:] == []


@pytest.mark.parametrize("layout", ["agent/sessions", "sessions"])
def test_discovery_walks_every_profile(tmp_path: Path, layout: str) -> None:
    """A profiles root holds a sessions folder per profile (<p>/agent/sessions, or <p>/sessions under XDG);
    other files of a profile are not sessions, and a profile made later is found by a recent pass."""
    profiles = tmp_path / "profiles"
    work = ob.new_session(profiles / "work" / layout, "/Users/dev/Code/kite", "w-1")
    work.user("profile session")
    (profiles / "work" / "agent").mkdir(parents=True, exist_ok=True)
    (profiles / "work" / "agent" / "history.jsonl").write_text("{}\n")
    problems: list[RootProblem] = []
    dirs: dict[str, int] = {}
    found = [Path(f.path) for f in omp.SPEC.discover(Root("omp", str(profiles)), problems, dirs, True)]
    assert problems == [] and found == [work.file]
    later = ob.new_session(profiles / "play" / layout, "/Users/dev/Code/kite", "p-1")
    later.user("new profile")
    recent = {Path(f.path) for f in omp.SPEC.discover(Root("omp", str(profiles)), [], dirs, False)}
    assert later.file in recent


def test_sample_session() -> None:
    """samples/omp (indexed with --root omp=samples/omp/.omp/agent/sessions): the title slot's name, cwd and resume."""
    [f] = omp.SPEC.discover(Root("omp", str(SAMPLES)), [], {}, True)
    unit = omp.read_unit(f)
    assert unit.session.message_count == len(unit.messages) == 10
    assert all(m.role in ROLES and m.kind in KINDS for m in unit.messages)
    s = unit.session
    assert (s.title, s.cwd) == ("redis refused inside docker compose", "/home/dev/orbit-cache")
    assert s.resume_command == f"cd /home/dev/orbit-cache && omp --resume {s.session_id}"
    assert "service_healthy" in unit.messages[-1].text


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".omp" / "agent" / "sessions"
    sessions.mkdir(parents=True)
    return {"omp": sessions}


def test_daemon_indexes_an_omp_session_and_its_sub_agent(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Through a real daemon: the session and its sub-agent are two sessions, the sub-agent linked and not
    resumable; a second pass reads nothing; a slot rename is read once and changes the title; a session moved
    to another project (previousSessionFiles) replaces its old file's rows instead of doubling them."""
    w = ob.new_session(roots["omp"], "/home/dev/wren", "0198cccc-0000-7000-8000-000000000001", slot="wren ingest")
    w.user("the wren ingest drops rows after a schema change").assistant("The Avro reader caches the old schema.")
    sub = ob.subagent(w, "scout", "0198cccc-0000-7000-8000-000000000002")
    sub.assistant("found the schema cache in wren/avro.py")
    assert inproc_daemon.reconcile()["messages"] == 3
    hits = {h["sessionId"]: h for h in inproc_daemon.search("wren", limit=10)["hits"]}
    assert set(hits) == {w.session_id, sub.session_id}
    assert (hits[w.session_id]["agent"], hits[w.session_id]["title"]) == ("omp", "wren ingest")
    assert hits[w.session_id]["resumeCommand"] == f"cd /home/dev/wren && omp --resume {w.session_id}"
    assert not hits[sub.session_id].get("resumeCommand")
    assert inproc_daemon.reconcile()["messages"] == 0
    time.sleep(0.01)
    ob.rewrite_title_slot(w.file, "wren avro schema cache")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 2
    [hit] = [h for h in inproc_daemon.search("avro")["hits"] if h["sessionId"] == w.session_id]
    assert hit["title"] == "wren avro schema cache"
    ob.move(w, roots["omp"], "/home/dev/wren-v2")
    inproc_daemon.reconcile()
    [hit] = [h for h in inproc_daemon.search("avro", limit=10)["hits"] if h["sessionId"] == w.session_id]
    assert hit["cwd"] == "/home/dev/wren-v2" and hit["messageCount"] == 2
