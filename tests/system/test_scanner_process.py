"""The scanner child's life: tied to the indexer that started it, and refusals that never loop or crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import zmq

from aivault.home import Home
from aivault.ingest import (
    _COLUMNS,
    K_BATCH,
    K_HELLO,
    K_NACK,
    K_PASS_DONE,
    K_RECONCILE,
    K_STATE,
    K_STOP,
    SCANNER_KINDS,
    decode_ingest,
    encode_ingest,
)
from tests.builders import ClaudeWriter
from tests.support.common import REPO, cli_env, pid_alive, wait_until
from tests.support.daemons import DaemonProcess, restart_and_stop_cleanly


class FakeIndexer:
    """A real ROUTER socket speaking the indexer's side of the ingest protocol to a real scanner."""

    def __init__(self, tmp: Path, roots: dict[str, Path], *extra: str) -> None:
        self.endpoint = f"ipc://{tmp / 'ingest.sock'}"
        self.router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind(self.endpoint)
        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.scanner", "--connect", self.endpoint,
                                      "--no-default-roots", "--root", f"claude={roots['claude']}", *extra],
                                     env=cli_env(tmp), cwd=REPO, stderr=subprocess.PIPE, text=True)
        self.ident = b""

    def recv(self, timeout_s: float = 10.0) -> Any:
        if not self.router.poll(int(timeout_s * 1000), zmq.POLLIN):
            return None
        frames = self.router.recv_multipart()
        self.ident = frames[0]
        return decode_ingest(frames[1:], SCANNER_KINDS)

    def send(self, kind: bytes, header: dict[str, Any]) -> None:
        self.router.send_multipart([self.ident, *encode_ingest(kind, header)])

    def until(self, kind: bytes, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = self.recv(max(0.1, deadline - time.monotonic()))
            if msg is not None and msg.kind == kind:
                return msg
        raise AssertionError(f"no {kind!r} within {timeout_s} s")

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.router.close(0)
        return self.proc.stderr.read() if self.proc.stderr else ""


def test_a_refused_batch_is_set_aside_and_reported_instead_of_resent_for_ever(tmp_path: Path,
                                                                              roots: dict[str, Path]) -> None:
    """A poisoned NACK (and a second NACK arriving while the scanner waits) sets the batch's file aside:
    the next passes report it as failed and send no batch for it, and the scanner never crashes."""
    c = ClaudeWriter(roots["claude"])
    c.user("a line the indexer will refuse")
    fake = FakeIndexer(tmp_path, roots)
    try:
        hello = fake.until(K_HELLO)
        fake.send(K_STATE, {"req": hello.header["req"], "epoch": 1, "files": [], "last": True})
        fake.send(K_RECONCILE, {"req": 1, "full": True, "cutoff_ms": None})
        batch = fake.until(K_BATCH)
        fake.send(K_NACK, {"seq": batch.header["seq"], "reason": "invalid batch: test", "poison": True,
                           "retry_after_s": 0.5})
        fake.send(K_NACK, {"seq": None, "reason": "a second refusal while waiting", "retry_after_s": 0.5})
        again = fake.until(K_HELLO)  # it reloads state after the refusals
        fake.send(K_STATE, {"req": again.header["req"], "epoch": 2, "files": [], "last": True})
        done = fake.until(K_PASS_DONE)
        assert [f["path"] for f in done.header["failed"]] == [str(c.path)]
        assert "the indexer refused it: invalid batch: test" in done.header["failed"][0]["reason"]
        fake.send(K_RECONCILE, {"req": 2, "full": True, "cutoff_ms": None})
        while (msg := fake.recv(3.0)) is not None and msg.kind != K_PASS_DONE:
            assert msg.kind != K_BATCH, "a set-aside file was sent again"
        assert fake.proc.poll() is None
        fake.send(K_STOP, {})
        assert fake.proc.wait(10) == 0
    finally:
        stderr = fake.close()
    assert "Traceback" not in stderr


def test_a_scanner_whose_parent_is_already_gone_exits_at_once(tmp_path: Path, roots: dict[str, Path]) -> None:
    """Started for an indexer that has died (its pid no longer our parent), a scanner exits at once."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aivault.scanner", "--connect", f"ipc://{tmp_path / 'none.sock'}",
                           "--no-default-roots", "--parent", str(dead.pid)], env=cli_env(tmp_path), cwd=REPO,
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 10  # far from the 30 s silence timeout it relied on before


def test_a_scanner_without_its_indexers_token_is_refused(home: Home, roots: dict[str, Path]) -> None:
    """A scanner some other process started (wrong token) is told to stop; the daemon goes on indexing."""
    ClaudeWriter(roots["claude"]).user("the daemon indexes wombats")
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        stray = subprocess.run([sys.executable, "-m", "aivault.scanner", "--connect", home.ingest_endpoint,
                                "--no-default-roots", "--root", f"claude={roots['claude']}", "--token", "forged"],
                               env=cli_env(home.path), cwd=REPO, capture_output=True, text=True, timeout=30)
        assert stray.returncode == 0
        ClaudeWriter(roots["claude"], cwd="/home/dev/other").user("and then numbats")
        d.reconcile()
        assert len(d.search("numbats")["hits"]) == 1
    finally:
        assert d.stop() == 0


def test_killing_index_while_its_scanners_start_leaves_no_orphan(home: Home, roots: dict[str, Path]) -> None:
    """kill -9 of `aivault index` takes its scanner children with it at once (they used to live 30 s
    and could attach to the next indexer)."""
    for s in range(20):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{s}")
        for i in range(400):
            c.user(f"message {i} of session {s} about kinkajous")
    args = [sys.executable, "-m", "aivault.cli", "index", "--no-default-roots", "--root", f"claude={roots['claude']}"]
    proc = subprocess.Popen(args, env=cli_env(home.path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[int] = []

    def started() -> bool:
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout
        children[:] = [int(x) for x in out.split()]
        return bool(children)

    try:
        assert wait_until(started, timeout=30, interval=0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_until(lambda: not any(pid_alive(p) for p in children), timeout=5)
    finally:
        for pid in children:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    restart_and_stop_cleanly(home, [])
    out = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", "--no-default-roots", "--root",
                          f"claude={roots['claude']}"], env=cli_env(home.path), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    found = subprocess.run([sys.executable, "-m", "aivault.cli", "search", "kinkajous", "--json", "--limit", "100"],
                           env=cli_env(home.path), capture_output=True, text=True, timeout=60)
    hits = json.loads(found.stdout)["hits"]
    assert len(hits) == 20 and all(h["messageCount"] == 400 for h in hits)


def _fake_scanner(daemon: Any) -> tuple[zmq.Socket[bytes], int]:
    """A socket that greets the daemon's indexer as its scanner of shard 0 would, and the epoch it is given."""
    ix = daemon.service.indexer
    s: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(daemon.home.ingest_endpoint)
    s.send_multipart(encode_ingest(K_HELLO, {"protocol": 1, "pid": os.getpid(), "shard": 0,
                                             "shards": len(ix.slots), "roots": [], "token": ix.token, "req": 1}))
    while True:
        assert s.poll(10_000)
        msg = decode_ingest(s.recv_multipart(), (K_STATE, b"PING", b"RECONCILE"))
        if msg.kind == K_STATE:
            return s, int(msg.header["epoch"])


def test_the_indexer_answers_an_invalid_batch_with_a_poisoned_nack(inproc_daemon: Any, roots: dict[str, Path]) -> None:
    """A batch the writer cannot accept as sent (not a state mismatch) is refused with `poison`, so its
    sender sets the files aside instead of re-sending them for ever; unreadable frames from a known
    scanner get the same answer instead of silence (the scanner would wait for an ACK for ever)."""
    s, epoch = _fake_scanner(inproc_daemon)
    try:
        s.send_multipart(encode_ingest(K_BATCH, {"seq": 7, "epoch": epoch, "files": [], "chunks": 0, "postings": 0,
                                                 "messages": 0}, [b"", b"", b""]))
        s.send_multipart([b"AIVI1", K_BATCH, b"\xc1"])
        nacks: list[dict[str, Any]] = []
        while len(nacks) < 2:
            assert s.poll(10_000)
            msg = decode_ingest(s.recv_multipart(), (K_NACK, b"PING", b"RECONCILE", K_STATE))
            if msg.kind == K_NACK:
                nacks.append(msg.header)
        assert nacks[0]["seq"] == 7 and nacks[0]["poison"] is True and "invalid batch" in nacks[0]["reason"]
        assert nacks[1]["seq"] is None and nacks[1]["poison"] is True
    finally:
        s.close(0)


def test_a_file_part_missing_a_field_is_refused_and_the_indexer_goes_on(inproc_daemon: Any,
                                                                         roots: dict[str, Path]) -> None:
    """A batch whose file part lacks `end` is a poisoned NACK naming the problem, not a crash of the indexer's loop."""
    s, epoch = _fake_scanner(inproc_daemon)
    try:
        part = {"path": "/nowhere/x.jsonl", "agent": "claude", "mode": "lines", "reset": True, "renamed_from": None,
                "dev": 1, "ino": 2, "size": 10, "mtime_ns": 3, "start": 0}
        s.send_multipart(encode_ingest(K_BATCH, {"seq": 9, "epoch": epoch, "files": [part], "chunks": 0,
                                                 "postings": 0, "messages": 0},
                                       [msgpack.packb({c: [] for c in _COLUMNS}), b"", b"", b"", msgpack.packb([])]))
        nack = None
        while nack is None:
            assert s.poll(10_000)
            msg = decode_ingest(s.recv_multipart(), (K_NACK, b"PING", b"RECONCILE", K_STATE))
            if msg.kind == K_NACK:
                nack = msg.header
        assert nack["seq"] == 9 and nack["poison"] is True and "'end'" in nack["reason"]
    finally:
        s.close(0)
    ClaudeWriter(roots["claude"]).user("the indexer still takes batches after that")
    assert inproc_daemon.reconcile()["messages"] == 1


def test_a_one_shot_index_commits_bulk_sized_batches_and_a_daemon_the_protocols(tmp_path: Path) -> None:
    """`aivault index` runs its scanners with --bulk (BULK_BATCH_SCALE x larger batches, so fewer commits and
    generations); a daemon's scanners keep BATCH_MAX_MESSAGES, so each of its commits stays short."""
    from aivault import policy
    from aivault.ingest import BATCH_MAX_MESSAGES, BULK_BATCH_SCALE, shard_of
    from tests.support.common import lexical_only, run_cli
    from tests.support.daemons import InprocDaemon

    roots = {"claude": tmp_path / "claude" / "projects", "codex": tmp_path / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    messages = 5 * BATCH_MAX_MESSAGES
    for s in range(10):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/bulk{s}")
        for i in range(messages // 10):
            w.user(f"message {i} of session {s} about wombats")
    homes = []
    for name in ("one-shot", "daemon"):
        h = Home.resolve(tmp_path / name).ensure()
        policy.save(h, policy.Policy(True, None))
        lexical_only(h)
        homes.append(h)
    out = run_cli(homes[0].path, "index", "--json", "--no-default-roots", "--root", f"claude={roots['claude']}",
                  check=True)
    one_shot = json.loads(out.stdout)
    with InprocDaemon(homes[1], roots) as d:
        daemon = d.reconcile()
        scanners = len(d.service.indexer.pool.slots)
    assert one_shot["messages"] == daemon["messages"] == messages
    # Each scanner commits its files in bulk batches of BULK_BATCH_SCALE x BATCH_MAX_MESSAGES: as many as its
    # share needs (files go to scanners by inode, so one may hold more than half of them).
    per_scanner: dict[int, int] = {}
    for f in roots["claude"].rglob("*.jsonl"):
        st = f.stat()
        shard = shard_of(st.st_dev, st.st_ino, scanners)
        per_scanner[shard] = per_scanner.get(shard, 0) + messages // 10
    bulk = BULK_BATCH_SCALE * BATCH_MAX_MESSAGES
    assert one_shot["generation"] <= sum(-(-n // bulk) for n in per_scanner.values()), (one_shot, per_scanner)
    assert daemon["generation"] >= messages // BATCH_MAX_MESSAGES, daemon
