"""The broker under abuse: bursts, many clients, churn, oversized frames, and its own death.

Every test talks to a real daemon (`aivault serve` as a child process) over its real socket
and ends with an ordinary search, which must still work.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from aivault import policy
from aivault.codec import RpcReply, RpcRequest, decode_reply, encode_request, packb
from aivault.home import Home
from aivault.protocol import (
    ERR_BUSY,
    ERR_INVALID_PARAMS,
    ERR_METHOD_NOT_FOUND,
    ERR_PARSE,
    METHOD_PING,
    METHOD_SEARCH,
    METHOD_STATUS,
    RPC_ECHO_MAX_CHARS,
    RPC_MAGIC,
    RPC_MAX_FRAME_BYTES,
)
from tests.builders import ClaudeWriter
from tests.support.common import lexical_only, log_events, pid_alive, run_cli, wait_until
from tests.support.daemons import DaemonProcess

# Descriptors the daemon may open beyond its count at rest while under test (a few client
# connections still closing); a leak per request would be hundreds.
FD_SLACK = 16


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("broker")
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    for i in range(5):
        ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{i}").user(f"the quokka number{i} hops along")
    home = Home.resolve(base / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    d = DaemonProcess(home, roots)
    d.reconcile()
    try:
        yield d
    finally:
        assert d.stop() == 0, d.read_log()


def _dealer(endpoint: str) -> zmq.Socket[bytes]:
    ctx: zmq.Context[Any] = zmq.Context.instance()
    s: zmq.Socket[bytes] = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    return s


def _drain(sock: zmq.Socket[bytes], key: bytes, n: int, timeout_s: float) -> list[RpcReply]:
    """Up to ``n`` decoded replies, waiting at most ``timeout_s`` for each next one."""
    out: list[RpcReply] = []
    while len(out) < n and sock.poll(int(timeout_s * 1000), zmq.POLLIN):
        out.append(decode_reply(key, sock.recv_multipart()))
    return out


def _still_serves(d: DaemonProcess) -> None:
    assert d.proc.poll() is None, d.read_log()
    hits = d.search("quokka")["hits"]
    assert len(hits) == 5


def test_a_burst_of_garbage_gets_every_answer_and_leaks_nothing(served: DaemonProcess) -> None:
    """1,500 one-frame garbage messages sent without waiting: 1,500 parse-errors, fds unchanged, search works."""
    proc = psutil.Process(served.proc.pid)
    fds = proc.num_fds()
    s = _dealer(served.home.rpc_endpoint)
    try:
        for i in range(1500):
            s.send_multipart([b"garbage %d" % i])
        replies = _drain(s, served.home.key(), 1500, 5)
    finally:
        s.close(0)
    assert len(replies) == 1500
    assert {r.value["code"] for r in replies} == {ERR_PARSE}
    assert proc.num_fds() <= fds + FD_SLACK
    _still_serves(served)


def test_a_burst_of_signed_requests_is_never_dropped(served: DaemonProcess) -> None:
    """3,000 signed pings and 500 status calls sent without reading: each id gets one reply, a result or busy."""
    key = served.home.key()
    s = _dealer(served.home.rpc_endpoint)
    sent: dict[str, str] = {}
    try:
        for i in range(3500):
            method = METHOD_STATUS if i % 7 == 0 else METHOD_PING
            rid = f"r{i}"
            sent[rid] = method
            s.send_multipart(encode_request(key, RpcRequest(rid, method, {})))
        replies = _drain(s, key, len(sent), 5)
        replies += _drain(s, key, 1, 0.3)  # and nothing more
    finally:
        s.close(0)
    ids = [r.id for r in replies]
    assert sorted(ids) == sorted(sent)  # every request answered, exactly once
    for r in replies:
        assert r.ok or r.value["code"] == ERR_BUSY, r
        if sent[r.id] == METHOD_PING:
            assert r.ok and r.value["pong"] is True  # the probe is answered by the loop, never busy
    _still_serves(served)


def test_fifty_clients_at_once_all_get_their_answers(served: DaemonProcess) -> None:
    """50 clients each send 30 garbage frames and a search at the same moment; each gets 30 errors and its results."""
    key = served.home.key()
    socks = [_dealer(served.home.rpc_endpoint) for _ in range(50)]
    try:
        for i, s in enumerate(socks):
            for _ in range(30):
                s.send_multipart([b"noise"])
            s.send_multipart(encode_request(key, RpcRequest(f"search{i}", METHOD_SEARCH, {"query": "quokka"})))
        for i, s in enumerate(socks):
            replies = _drain(s, key, 31, 10)
            assert len(replies) == 31, i
            assert [r.value["code"] for r in replies[:30]] == [ERR_PARSE] * 30
            assert replies[30].id == f"search{i}" and replies[30].ok
            assert replies[30].value["kind"] == "results" and len(replies[30].value["hits"]) == 5
    finally:
        for s in socks:
            s.close(0)
    _still_serves(served)


def test_connect_send_disconnect_churn_leaves_the_daemon_as_it_was(served: DaemonProcess) -> None:
    """Four threads connecting, sending bursts of up to 1,200 frames and leaving (reading or not) for 5 s:
    fds and threads bounded."""
    proc = psutil.Process(served.proc.pid)
    fds, threads = proc.num_fds(), proc.num_threads()
    key = served.home.key()
    stop = time.monotonic() + 5
    rounds = [0] * 4

    def churn(n: int) -> None:
        rnd = random.Random(n)
        while time.monotonic() < stop:
            s = _dealer(served.home.rpc_endpoint)
            # Some clients burst more than ZeroMQ's default high-water mark, then leave unread.
            for _ in range(rnd.choice((1, 5, 40, 300, 1200))):
                choice = rnd.random()
                if choice < 0.5:
                    s.send_multipart([os.urandom(rnd.randrange(0, 64))])
                elif choice < 0.8:
                    s.send_multipart(encode_request(key, RpcRequest("p", METHOD_PING, {})))
                elif choice < 0.9:
                    s.send_multipart([RPC_MAGIC, b"x" * 64, packb({"v": 1, "id": "half"})])
                else:
                    s.send_multipart(encode_request(key, RpcRequest("s", METHOD_SEARCH, {"query": "quokka"})))
            if rnd.random() < 0.3:
                _drain(s, key, 1, 0.2)
            s.close(0)
            rounds[n] += 1

    workers = [threading.Thread(target=churn, args=(n,)) for n in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(30)
    assert sum(rounds) > 100
    _still_serves(served)
    # A gone client's connection closes once the broker has read the requests it left queued.
    assert wait_until(lambda: proc.num_fds() <= fds + FD_SLACK, timeout=10), proc.num_fds()
    assert proc.num_threads() <= threads + 2


def _peak_rss_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_an_oversized_frame_is_refused_before_it_is_buffered(served: DaemonProcess) -> None:
    """A 128 MiB body frame is cut off by the socket (no reply, no memory spike); the client then goes on."""
    key = served.home.key()
    pid = served.proc.pid
    _peak_rss_reset(pid)
    rss_kb = psutil.Process(pid).memory_info().rss // 1024
    s = _dealer(served.home.rpc_endpoint)
    try:
        header = packb({"v": 1, "id": "huge", "method": METHOD_SEARCH, "host": None})
        s.send_multipart([RPC_MAGIC, b"0" * 64, header, b"\x00" * (128 * 1024 * 1024)])
        assert _drain(s, key, 1, 3) == []
        assert _peak_rss_kb(pid) - rss_kb < 32 * 1024
        # The DEALER reconnected on its own: the same socket is served again.
        s.send_multipart(encode_request(key, RpcRequest("after", METHOD_PING, {})))
        replies = _drain(s, key, 1, 5)
        assert [r.id for r in replies] == ["after"] and replies[0].ok
    finally:
        s.close(0)
    with pytest.raises(Exception, match="exceeds"):
        encode_request(key, RpcRequest("big", METHOD_SEARCH, {"query": "x" * (RPC_MAX_FRAME_BYTES + 1)}))
    _still_serves(served)


def test_an_unknown_method_is_echoed_cut_short(served: DaemonProcess) -> None:
    """A 100,000-character method name comes back as method-not-found quoting at most 64 characters of it."""
    key = served.home.key()
    name = "aiVault." + "x" * 100_000
    s = _dealer(served.home.rpc_endpoint)
    try:
        s.send_multipart(encode_request(key, RpcRequest("long", name, {})))
        replies = _drain(s, key, 1, 5)
    finally:
        s.close(0)
    assert len(replies) == 1 and replies[0].ok is False
    err = replies[0].value
    assert err["code"] == ERR_METHOD_NOT_FOUND
    assert len(err["message"]) < RPC_ECHO_MAX_CHARS + 80
    assert "100008 characters" in err["message"]
    assert all("x" * 1000 not in json.dumps(e) for e in log_events(served.home.path / "daemon.log"))
    _still_serves(served)


def test_a_long_host_id_and_since_are_echoed_cut_short(served: DaemonProcess) -> None:
    """A 1 MB execution host id, and a 1 MB filters.since, come back as invalid-params quoting at most 64
    characters of it."""
    key = served.home.key()
    s = _dealer(served.home.rpc_endpoint)
    try:
        s.send_multipart(encode_request(key, RpcRequest("host", METHOD_SEARCH, {"query": "quokka"},
                                                        host="h" * 1_000_000)))
        s.send_multipart(encode_request(key, RpcRequest("since", METHOD_SEARCH,
                                                        {"query": "quokka", "filters": {"since": "s" * 1_000_000}})))
        replies = {r.id: r for r in _drain(s, key, 2, 10)}
    finally:
        s.close(0)
    for rid, value in (("host", "h"), ("since", "s")):
        assert replies[rid].ok is False and replies[rid].value["code"] == ERR_INVALID_PARAMS
        message = replies[rid].value["message"]
        assert len(message) < RPC_ECHO_MAX_CHARS + 120
        assert value * RPC_ECHO_MAX_CHARS + "… (1000000 characters)" in message
    _still_serves(served)


def test_a_dead_broker_thread_takes_the_daemon_down(home: Home, roots: dict[str, Path]) -> None:
    """When the broker thread dies (daemon.sock is a directory: it cannot bind), the daemon exits non-zero."""
    (home.path / "daemon.sock").mkdir()
    d = DaemonProcess(home, [f"claude={roots['claude']}"], wait=False)
    proc = d.proc
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        d.kill()
        raise AssertionError("the daemon stayed up without its broker") from None
    d.stop()  # it has exited: this closes its client and log
    events = log_events(home.path / "daemon.log")
    assert code != 0, events
    assert any(e["event"] == "daemon failing, shutting down" and e["failure"].startswith("the broker thread died")
               for e in events), events
    assert not pid_alive(proc.pid)
    # Nothing holds the index any more: the CLI works directly.
    (home.path / "daemon.sock").rmdir()
    assert run_cli(home.path, "status", "--json").returncode == 0


def test_status_names_a_daemon_that_holds_the_index_but_does_not_answer(home: Home, roots: dict[str, Path]) -> None:
    """A stopped (SIGSTOP) daemon: `aivault status` fails with its pid, that it holds the index, and `kill -TERM`."""
    ClaudeWriter(roots["claude"]).user("hello there")
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            out = run_cli(home.path, "status", timeout=60)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        assert out.returncode != 0
        assert f"pid {d.proc.pid}" in out.stderr
        assert "holds the index" in out.stderr
        assert f"kill -TERM {d.proc.pid}" in out.stderr
        # Answering again, it is used again.
        assert json.loads(run_cli(home.path, "status", "--json", check=True).stdout)["enabled"] is True
    finally:
        assert d.stop() == 0
