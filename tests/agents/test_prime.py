"""Prime Agent sessions (scanner.prime over scanner.pitree): a flat folder, the header's id, its roots."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aivault.scanner.parsers import prime
from aivault.scanner.sources import Root, Unit
from tests.builders import prime as prb
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import whole_unit

SAMPLES = REPO / "samples" / "prime" / ".prime" / "agent"


def read(path: Path) -> Unit:
    return whole_unit("prime", path)


def test_the_header_id_names_the_session_whatever_the_file_is_called(tmp_path: Path) -> None:
    """The file name may differ from the header's id: the header's is the session id and what --session takes;
    child_usage_attributed entries are bookkeeping."""
    w = prb.new_session(tmp_path, "0197aaaa-0000-7000-8000-000000000001", file_id="renamed-on-disk",
                        cwd="/home/dev/tern")
    w.user("why is the join slow").assistant("It is a cross join.")
    w.entry("child_usage_attributed", targetId=w.last, aggregateUsage={"input": 10, "output": 2})
    unit = read(w.file)
    s = unit.session
    assert (s.agent, s.session_id, s.title) == ("prime", "0197aaaa-0000-7000-8000-000000000001", "why is the join slow")
    assert s.resume_command == "cd /home/dev/tern && prime-agent --session 0197aaaa-0000-7000-8000-000000000001"
    assert unit.skips == {"bookkeeping": 1} and len(unit.messages) == 2


def test_default_roots(tmp_path: Path) -> None:
    """~/.prime/agent/sessions everywhere; PRIME_AGENT_CODING_AGENT_DIR moves the agent folder, the session-folder
    variables (current and older spelling) add theirs; a leading ~ is the home."""
    home = tmp_path / "home"
    assert [r.path for r in prime.default_roots({}, home)] == [str(home / ".prime" / "agent" / "sessions")]
    env = {"PRIME_AGENT_CODING_AGENT_DIR": "~/pa", "PRIME_AGENT_SESSION_DIR": str(tmp_path / "s1"),
           "PRIME_AGENT_CODING_AGENT_SESSION_DIR": "~/s2"}
    assert [r.path for r in prime.default_roots(env, home)] == [
        str(tmp_path / "s1"), str(home / "s2"), str(home / "pa" / "sessions")]


def test_discovery_is_flat(tmp_path: Path) -> None:
    """Only <sessions>/*.jsonl: the folder is flat (archives and artifacts live elsewhere)."""
    w = prb.new_session(tmp_path, "s-1")
    w.user("hi")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "x.jsonl").write_text("{}\n")
    assert [Path(f.path) for f in prime.SPEC.discover(Root("prime", str(tmp_path)), [], {}, True)] == [w.file]


def test_sample_session() -> None:
    """samples/prime (PRIME_AGENT_CODING_AGENT_DIR=samples/prime/.prime/agent): the zip-code session."""
    [root] = prime.default_roots({"PRIME_AGENT_CODING_AGENT_DIR": str(SAMPLES)}, Path("/nonexistent"))
    [f] = prime.SPEC.discover(root, [], {}, True)
    unit = prime.read_unit(f)
    s = unit.session
    assert s.message_count == len(unit.messages) == 10 and s.cwd == "/home/dev/tern-etl"
    assert s.title == "The nightly load writes zip codes like 2134 instead of 02134 for the Boston cus…"
    assert "lpad" in unit.messages[-1].text


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".prime" / "agent" / "sessions"
    sessions.mkdir(parents=True)
    return {"prime": sessions}


def test_daemon_indexes_a_prime_session_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                        roots: dict[str, Path]) -> None:
    """Through a real daemon: found, searchable, right metadata; a second pass reads nothing; an append is read
    once by a recent pass."""
    w = prb.new_session(roots["prime"], "0197bbbb-0000-7000-8000-000000000001", cwd="/home/dev/finch")
    w.user("finch export truncates unicode names").assistant("Open the CSV with encoding utf-8-sig.")
    assert inproc_daemon.reconcile()["messages"] == 2
    [hit] = inproc_daemon.search("finch")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["cwd"]) == ("prime", w.session_id, "/home/dev/finch")
    assert inproc_daemon.reconcile()["messages"] == 0
    time.sleep(0.01)
    w.user("and the goldfinch report")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 3
    [hit] = inproc_daemon.search("goldfinch")["hits"]
    assert hit["messageCount"] == 3
