"""aiVault.readSession (docs/protocol.md §1.8): windows of a session's messages from the index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aivault import policy
from aivault.errors import InvalidParams, SessionNotFound
from aivault.home import Home
from aivault.protocol import METHOD_READ
from aivault.thin.client import Connection
from tests.builders import ClaudeWriter
from tests.support.common import answer, run_cli
from tests.support.daemons import DaemonProcess, InprocDaemon


def _session(roots: dict[str, Path], n: int = 30) -> ClaudeWriter:
    c = ClaudeWriter(roots["claude"], cwd="/home/dev/vault", branch="main")
    for i in range(n):
        if i == 17:
            c.user("the duckdb lock error is back: Could not set lock on file index.duckdb")
        else:
            c.user(f"question number {i} about the parser")
        c.assistant(f"answer number {i} " + "x" * (300 if i == 3 else 5))
    c.tool("Bash", {"command": "ls"}, "README.md\nsetup.py")
    return c


def _read(d: InprocDaemon, **params: Any) -> dict[str, Any]:
    from aivault.query.transcript import read_session

    value: dict[str, Any] = answer(read_session(d.service, params))
    return value


def test_a_window_around_the_hit_of_a_query(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """With query, the window is centred on the message holding its words, with the session's metadata."""
    c = _session(roots)
    inproc_daemon.reconcile()
    r = _read(inproc_daemon, sessionId=c.session_id, query="duckdb lock", count=5)
    assert r["session"]["sessionId"] == c.session_id and r["session"]["cwd"] == "/home/dev/vault"
    assert r["session"]["resumeCommand"]
    texts = [m["text"] for m in r["messages"]]
    assert len(texts) == 5 and "duckdb lock error" in texts[2]
    assert r["anchor"] == r["messages"][2]["position"]
    assert r["before"] == r["messages"][0]["position"] - 1 and r["after"] == r["messages"][-1]["position"] + 1


def test_forward_and_backward_pages_meet_without_gaps(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Following ``after`` forward visits every message once; ``before`` walks back the same way."""
    c = _session(roots, n=6)
    inproc_daemon.reconcile()
    seen: list[int] = []
    start: int | None = None
    while True:
        r = _read(inproc_daemon, sessionId=c.session_id, direction="forward", count=4,
                  **({"from": start} if start is not None else {}))
        seen += [m["position"] for m in r["messages"]]
        if r["after"] is None:
            break
        start = r["after"]
    assert seen == sorted(set(seen)) and len(seen) == r["total"] == 14
    back = _read(inproc_daemon, sessionId=c.session_id, direction="backward", count=3)
    assert [m["position"] for m in back["messages"]] == seen[-3:] and back["after"] is None


def test_each_message_is_cut_and_says_so(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """maxChars cuts a long message's text, sets truncated and keeps its full length in chars."""
    c = _session(roots, n=5)
    inproc_daemon.reconcile()
    r = _read(inproc_daemon, sessionId=c.session_id, maxChars=50, count=50)
    long = [m for m in r["messages"] if m["truncated"]]
    assert len(long) == 1 and len(long[0]["text"]) == 50 and long[0]["chars"] > 300
    assert all(len(m["text"]) <= 50 for m in r["messages"])


def test_conversation_scope_leaves_tool_messages_out(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """scope=conversation returns only user and assistant text; positions stay those of scope all."""
    c = _session(roots, n=2)
    inproc_daemon.reconcile()
    every = _read(inproc_daemon, sessionId=c.session_id, count=50)
    talk = _read(inproc_daemon, sessionId=c.session_id, count=50, scope="conversation")
    assert {m["kind"] for m in every["messages"]} >= {"tool_call", "tool_result"}
    assert {m["role"] for m in talk["messages"]} == {"user", "assistant"} and talk["total"] < every["total"]
    assert {m["position"] for m in talk["messages"]} < {m["position"] for m in every["messages"]}


def test_refusals_say_what_is_valid(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A missing id, a bad direction or count are invalid-params; an unknown id is session-not-found."""
    _session(roots, n=1)
    inproc_daemon.reconcile()
    with pytest.raises(InvalidParams, match="sessionId"):
        _read(inproc_daemon)
    with pytest.raises(InvalidParams, match="forward, backward, around"):
        _read(inproc_daemon, sessionId="x", direction="sideways")
    with pytest.raises(InvalidParams, match="whole number"):
        _read(inproc_daemon, sessionId="x", count="many")
    with pytest.raises(SessionNotFound, match="search hit"):
        _read(inproc_daemon, sessionId="no-such-session")


def test_disabled_consent_answers_unavailable(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Without consent readSession answers unavailable/disabled, as search does."""
    c = _session(roots, n=1)
    inproc_daemon.reconcile()
    policy.save(inproc_daemon.home, policy.Policy(False, None))
    inproc_daemon.service.apply_policy()
    assert _read(inproc_daemon, sessionId=c.session_id) == {"kind": "unavailable", "reason": "disabled"}


def test_daemon_and_direct_mode_answer_alike(home: Home, roots: dict[str, Path]) -> None:
    """The RPC through a daemon process and the read-only direct answer return the same window."""
    c = _session(roots, n=3)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        over_rpc = d.call(METHOD_READ, {"sessionId": c.session_id, "count": 4})
    finally:
        d.stop()
    direct = Connection(home)
    assert direct.mode == "direct"
    assert direct.call(METHOD_READ, {"sessionId": c.session_id, "count": 4}) == over_rpc
    assert len(over_rpc["messages"]) == 4


def test_no_index_yet_is_not_ready(home: Home) -> None:
    """Direct mode without an index file answers unavailable/not-ready (consent given)."""
    r = run_cli(home.path, "rpc", METHOD_READ, '{"sessionId": "abc"}', check=True)
    assert '"not-ready"' in r.stdout
