"""The index's life cycle and availability (docs/contract.md §3–5, §7–8): fences, identity, freshness,
status phases, registry, old peers, consent, clear and retention."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import zmq

from aivault import policy
from aivault.codec import RpcReply, decode_request, encode_reply
from aivault.errors import AuthenticationError, DaemonUnreachable, ReconcileFailed
from aivault.home import Home
from aivault.protocol import METHOD_CLEAR
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import answer, wait_until
from tests.support.daemons import DaemonProcess, InprocDaemon


def _seed(roots: dict[str, Path], n: int = 12, word: str = "gizmo") -> list[ClaudeWriter]:
    out = []
    for i in range(n):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/s{i}")
        w.user(f"{word} number {i}")
        out.append(w)
    return out


# --- generation fence and identity (docs/contract.md §3) --------------------------------------------------------
def test_a_write_during_page_assembly_answers_stale_cursor(inproc_daemon: InprocDaemon,
                                                           roots: dict[str, Path]) -> None:
    """A batch committed while a page (page 1 too) is being assembled makes that page stale-cursor."""
    _seed(roots)
    inproc_daemon.reconcile()
    engine = inproc_daemon.service.engine
    fired: list[int] = []

    def land_a_write() -> None:
        if fired:
            return
        fired.append(1)
        ClaudeWriter(roots["claude"], cwd="/home/dev/intruder").user("gizmo written mid-page")
        inproc_daemon.reconcile(full=False)

    engine.assembly_hook = land_a_write
    try:
        r = inproc_daemon.search("gizmo", limit=3)
    finally:
        engine.assembly_hook = None
    assert r["kind"] == "stale-cursor" and r["generation"] == r["expectedGeneration"] + 1
    page1 = inproc_daemon.search("gizmo", limit=3)
    assert page1["kind"] == "results" and len(page1["hits"]) == 3
    fired.clear()
    engine.assembly_hook = land_a_write
    try:
        r2 = inproc_daemon.search("gizmo", limit=3, cursor=page1["page"]["cursor"])
    finally:
        engine.assembly_hook = None
    assert r2["kind"] == "stale-cursor"


def test_a_search_that_reuses_the_snapshot_sees_a_write_that_ended_before_its_first_statement(
        inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A batch committed after a search took the snapshot rows of the last one (no write since) and before its
    first statement makes it read the page again in a transaction of its own: results of the new generation
    with the new session, not a mix of two states (answered stale-cursor by the fence)."""
    _seed(roots)
    inproc_daemon.reconcile()
    engine = inproc_daemon.service.engine
    assert inproc_daemon.search("gizmo", limit=20)["kind"] == "results"  # reads the rows the next one reuses
    fired: list[int] = []

    def land_a_write() -> None:
        if not fired:
            fired.append(1)
            ClaudeWriter(roots["claude"], cwd="/home/dev/intruder").user("gizmo written before the first statement")
            inproc_daemon.reconcile(full=False)

    engine.reuse_hook = land_a_write
    try:
        r = inproc_daemon.search("gizmo", limit=20, debug=True)
    finally:
        engine.reuse_hook = None
    assert fired, "the search did not reuse the snapshot rows"
    assert r["kind"] == "results", r
    assert r["generation"] == inproc_daemon.service.indexer.generation
    assert "/home/dev/intruder" in {h["cwd"] for h in r["hits"]}


def test_a_write_after_a_reused_snapshot_is_found_by_the_next_search(inproc_daemon: InprocDaemon,
                                                                     roots: dict[str, Path]) -> None:
    """Searches that reuse the snapshot rows stop doing so at the next commit: the next search answers the
    new generation and finds what the batch added."""
    _seed(roots)
    inproc_daemon.reconcile()
    engine = inproc_daemon.service.engine
    reused: list[int] = []
    engine.reuse_hook = lambda: reused.append(1)
    try:
        for _ in range(3):
            r = inproc_daemon.search("gizmo", limit=20, debug=True)
        assert reused, "no search reused the snapshot rows"
        gen = r["generation"]
        ClaudeWriter(roots["claude"], cwd="/home/dev/later").user("gizmo written after the reused searches")
        inproc_daemon.reconcile(full=False)
        after = inproc_daemon.search("gizmo", limit=20, debug=True)
    finally:
        engine.reuse_hook = None
    assert after["kind"] == "results", after
    assert after["generation"] == inproc_daemon.service.indexer.generation > gen
    assert "/home/dev/later" in {h["cwd"] for h in after["hits"]}


def test_clear_gives_a_new_identity_so_old_cursors_are_stale_even_at_an_equal_generation(
        home: Home, roots: dict[str, Path]) -> None:
    """After clear and rebuild to the same generation number, a pre-clear cursor is stale-cursor."""
    _seed(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        r = d.search("gizmo", limit=2)
        cursor, gen = r["page"]["cursor"], r["generation"]
        ident = d.call("aiVault.indexStats")["identity"]
        cleared = d.call(METHOD_CLEAR, {})
        assert cleared["rebuilding"] is True and cleared["previousIdentity"] == ident != cleared["identity"]
        assert wait_until(lambda: d.status()["phase"] == "current", timeout=30)
        r2 = d.search("gizmo", limit=2)
        assert r2["generation"] == gen, "precondition: the rebuilt index reached the same generation"
        assert d.search("gizmo", limit=2, cursor=cursor) == {"kind": "stale-cursor", "generation": gen,
                                                             "expectedGeneration": gen}
        # Reopening the same database keeps its identity: cursors minted now survive a restart.
        c2 = r2["page"]["cursor"]
    finally:
        d.stop()
    d = DaemonProcess(home, roots)
    try:
        assert wait_until(lambda: d.status()["phase"] == "current", timeout=30)
        assert d.search("gizmo", limit=2, cursor=c2)["kind"] == "results"
    finally:
        d.stop()


# --- freshness (docs/contract.md §5) ----------------------------------------------------------------------------
def test_wait_until_current_sees_a_file_written_just_before(inproc_daemon: InprocDaemon,
                                                            roots: dict[str, Path]) -> None:
    """A reconcile that finishes in time leaves truncated.freshness false and finds the new file."""
    _seed(roots, 2)
    inproc_daemon.reconcile()
    ClaudeWriter(roots["claude"], cwd="/home/dev/new").user("hyperfresh content")
    assert inproc_daemon.search("hyperfresh")["hits"] == []
    r = inproc_daemon.search("hyperfresh", freshness="wait-until-current")
    assert len(r["hits"]) == 1 and r["truncated"]["freshness"] is False


def test_wait_until_current_gives_up_after_five_seconds_without_cancelling(inproc_daemon: InprocDaemon,
                                                                           roots: dict[str, Path]) -> None:
    """A reconcile slower than 5 s: the search answers anyway, flags freshness, and the pass completes."""
    _seed(roots, 2)
    inproc_daemon.reconcile()
    ix = inproc_daemon.service.indexer
    scanner = ix.slots[0].proc
    assert scanner is not None
    ClaudeWriter(roots["claude"], cwd="/home/dev/late").user("latecomer words")
    os.kill(scanner.pid, signal.SIGSTOP)  # the scanner is alive but makes no progress
    try:
        t0 = time.monotonic()
        r = inproc_daemon.search("gizmo", freshness="wait-until-current")
        waited = time.monotonic() - t0
    finally:
        os.kill(scanner.pid, signal.SIGCONT)
    assert r["kind"] == "results" and r["truncated"]["freshness"] is True and len(r["hits"]) == 2
    assert 5.0 <= waited < 8 and r["durationMs"] < 1000
    assert ix.passes.pending, "the reconcile was cancelled"
    ix.wait_idle(60)
    assert len(inproc_daemon.search("latecomer")["hits"]) == 1


def test_a_reconcile_error_before_the_deadline_propagates(inproc_daemon: InprocDaemon,
                                                          roots: dict[str, Path]) -> None:
    """If the reconcile fails before 5 s (here: the indexer stops under it), the search raises."""
    _seed(roots, 1)
    inproc_daemon.reconcile()
    ix = inproc_daemon.service.indexer
    scanner = ix.slots[0].proc
    assert scanner is not None
    os.kill(scanner.pid, signal.SIGSTOP)
    outcome: dict[str, Any] = {}

    def search() -> None:
        try:
            outcome["value"] = inproc_daemon.search("gizmo", freshness="wait-until-current")
        except Exception as exc:
            outcome["error"] = exc

    t = threading.Thread(target=search)
    t0 = time.monotonic()
    t.start()
    time.sleep(1.0)
    stopper = threading.Thread(target=ix.stop)  # the pending pass can no longer complete
    stopper.start()
    t.join(10)
    elapsed = time.monotonic() - t0
    os.kill(scanner.pid, signal.SIGCONT)
    stopper.join(30)
    assert isinstance(outcome.get("error"), ReconcileFailed), outcome
    assert elapsed < 5.0


# --- status (docs/contract.md §4) -------------------------------------------------------------------------------
STATUS_FIELDS = {"enabled", "phase", "filesIndexed", "filesDue", "filesFailed", "degradedRoots", "lastReconcileAt",
                 "lastSweepCompletedAt", "generation"}


def test_status_phases_idle_indexing_current_and_closed(home: Home, roots: dict[str, Path]) -> None:
    """idle before start, indexing while files are due, current after a full sweep, closed when disabled."""
    from aivault.vault.endpoints import search_status
    from bench.gen_corpus import generate
    from tests.support.common import root_args

    generate(roots["claude"].parent.parent / "g", 40_000, seed=2)
    g = roots["claude"].parent.parent / "g"
    with InprocDaemon(home, [*root_args(roots), f"claude={g}/claude/projects", f"codex={g}/codex/sessions"],
                      schedule=True, start=False) as d:
        st = answer(search_status(d.service))
        assert set(st) == STATUS_FIELDS and st["phase"] == "idle" and st["enabled"] is True
        d.start()
        phases: set[str] = set()
        due: list[int] = []

        def watch() -> bool:
            s = answer(search_status(d.service))
            phases.add(s["phase"])
            due.append(s["filesDue"])
            return bool(s["phase"] == "current")

        assert wait_until(watch, timeout=120, interval=0.02)
        assert "indexing" in phases and max(due) > 0
        st = answer(search_status(d.service))
        assert st["filesDue"] == 0 and st["filesIndexed"] > 100 and st["lastSweepCompletedAt"] is not None
        policy.save(home, policy.Policy(False, None))
        d.service.apply_policy()
        st = answer(search_status(d.service))
        assert st["phase"] == "closed" and st["enabled"] is False


# --- availability (docs/contract.md §4, §7) ---------------------------------------------------------------------
def test_no_registered_service_means_no_service_and_the_sentinel() -> None:
    """With no service (the null service), search answers unavailable/no-service and status the exact
    sentinel; an invalid payload is still an error."""
    from aivault.errors import InvalidParams
    from aivault.vault.endpoints import NULL_SERVICE, search_sessions, search_status

    assert answer(search_sessions(NULL_SERVICE, {"query": "x"})) == {"kind": "unavailable", "reason": "no-service"}
    with pytest.raises(InvalidParams):
        answer(search_sessions(NULL_SERVICE, {"query": 42}))
    assert answer(search_status(NULL_SERVICE)) == {"enabled": False, "phase": "idle", "filesIndexed": 0, "filesDue": 0,
                                           "filesFailed": 0, "degradedRoots": [], "lastReconcileAt": None,
                                           "lastSweepCompletedAt": None, "generation": 0}


def test_a_registered_service_answers_disabled_or_not_ready(home: Home, roots: dict[str, Path]) -> None:
    """Registering grants no consent (disabled); a service that never indexed answers not-ready."""
    from aivault.vault.endpoints import search_sessions

    with InprocDaemon(home, roots, start=False) as d:
        assert answer(search_sessions(d.service, {"query": "x"})) == {"kind": "unavailable", "reason": "not-ready"}
        policy.save(home, policy.Policy(False, None))
        d.service.apply_policy()
        assert answer(search_sessions(d.service, {"query": "x"})) == {"kind": "unavailable", "reason": "disabled"}


class OldPeer:
    """A real ZeroMQ peer that answers every request like an older host: -32601 method not found."""

    def __init__(self, home: Home, code: int = -32601) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(home.rpc_endpoint)
        self.key = home.key()
        self.code = code
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.sock.poll(50):
                frames = self.sock.recv_multipart()
                req = decode_request(self.key, frames[1:])
                err = {"code": self.code, "name": "method-not-found", "message": f"Method not found: {req.method}"}
                self.sock.send_multipart([frames[0], *encode_reply(self.key, RpcReply(req.id, False, err))])

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close(0)


def test_an_older_peer_without_the_method_means_no_service(home: Home) -> None:
    """-32601 from an old host maps to unavailable/no-service and the status sentinel; nothing else does."""
    from aivault.errors import MethodNotFound
    from aivault.protocol import METHOD_PING, METHOD_READ, STATUS_SENTINEL
    from aivault.thin.client import Connection, RpcClient

    peer = OldPeer(home)
    client = Connection(home, rpc=RpcClient.for_home(home, timeout_s=5))
    try:
        assert client.search({"query": "x"}) == {"kind": "unavailable", "reason": "no-service"}
        assert client.status() == STATUS_SENTINEL
        assert client.call(METHOD_READ, {"sessionId": "s"}) == {"kind": "unavailable", "reason": "no-service"}
        with pytest.raises(MethodNotFound):  # the probe has no answer standing for it
            client.call(METHOD_PING, {})
    finally:
        client.close()
        peer.close()
    other = OldPeer(home, code=-32602)
    client = Connection(home, rpc=RpcClient.for_home(home, timeout_s=5))
    try:
        from aivault.errors import InvalidParams

        with pytest.raises(InvalidParams):
            client.search({"query": "x"})
    finally:
        client.close()
        other.close()


def test_transport_and_authentication_failures_stay_errors(home: Home, roots: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """No daemon on the socket is an error, and so is a peer signing with another key."""
    from aivault.thin.client import Connection, RpcClient

    client = Connection(home, rpc=RpcClient(home.rpc_endpoint, home.key(), timeout_s=0.5))
    with pytest.raises(DaemonUnreachable):
        client.search({"query": "x"})
    client.close()
    _seed(roots, 1)
    d = DaemonProcess(home, roots)
    try:
        wrong = Connection(home, rpc=RpcClient(home.rpc_endpoint, b"k" * 32, timeout_s=5))
        with pytest.raises(AuthenticationError):
            answer(wrong.search({"query": "x"}))
        wrong.close()
    finally:
        d.stop()


# --- consent, clear, retention (docs/contract.md §8) -----------------------------------------------------------
def _hash_tree(roots: dict[str, Path]) -> dict[str, str]:
    """sha256 of every file under the transcript roots (the agents' folders, not aivault's)."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots.values() for p in sorted(root.parent.rglob("*")) if p.is_file()}


def test_disable_keeps_the_index_and_enable_resumes_without_reindexing(home: Home, roots: dict[str, Path]) -> None:
    """Disabling closes the indexer (search: disabled); enabling again resumes from the kept index."""
    _seed(roots, 6)
    d = DaemonProcess(home, roots)
    try:
        # `serve` starts its own pass, which may index the six before this one starts: count the
        # index, not what this reconcile added.
        d.reconcile()
        assert d.status()["filesIndexed"] == 6 and len(d.search("gizmo")["hits"]) == 6
        policy.save(home, policy.Policy(False, None))
        assert wait_until(lambda: d.status()["phase"] == "closed", timeout=10)
        assert d.search("gizmo") == {"kind": "unavailable", "reason": "disabled"}
        assert home.db_path.exists()
        policy.save(home, policy.Policy(True, None))
        assert wait_until(lambda: d.status()["phase"] == "current", timeout=20)
        again = d.reconcile()
        assert again["files_changed"] == 0 and again["messages"] == 0
        assert len(d.search("gizmo")["hits"]) == 6
    finally:
        d.stop()


def test_clear_deletes_the_index_and_sidecars_but_never_a_transcript(home: Home, roots: dict[str, Path]) -> None:
    """clear removes the database and its sidecars, keeps every transcript byte, rebuilds only if enabled."""
    from tests.support.common import run_cli

    _seed(roots, 5)
    CodexWriter(roots["codex"]).user("gizmo from codex")
    transcripts = roots
    before = _hash_tree(transcripts)
    assert len(before) == 6
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        old = d.call("aiVault.indexStats")["identity"]
        policy.save(home, policy.Policy(False, None))
        assert wait_until(lambda: d.status()["phase"] == "closed", timeout=10)
        out = d.call(METHOD_CLEAR, {})
        assert out["rebuilding"] is False and out["identity"] != old
        assert "index.duckdb" in out["removed"]
        st = d.status()
        assert st["generation"] == 0 and st["filesIndexed"] == 0
        assert d.call("aiVault.indexStats")["chunks"] == 0
    finally:
        d.stop()
    assert _hash_tree(transcripts) == before
    policy.save(home, policy.Policy(True, None))
    res = run_cli(home.path, "clear", "--no-default-roots", "--root", f"claude={roots['claude']}",
                  "--root", f"codex={roots['codex']}", check=True)
    assert "rebuilt: 6 messages from 6 files" in res.stdout
    assert _hash_tree(transcripts) == before
    assert len(json.loads(run_cli(home.path, "search", "gizmo", "--json", check=True).stdout)["hits"]) == 6


def test_retention_sweeps_old_sessions_in_small_transactions(home: Home, roots: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions older than historyDays go, generation advances per transaction, sweep time is recorded."""
    import aivault.indexer.service

    # The test drives one sweep on the writer itself: keep the idle clean-up off that connection.
    monkeypatch.setattr(aivault.indexer.service, "IDLE_FREEZE_AFTER_S", 1e9)
    from aivault.vault.endpoints import search_sessions, search_status

    old_start = datetime.now(UTC) - timedelta(days=100)
    for i in range(450):
        ClaudeWriter(roots["claude"], cwd=f"/home/dev/old{i}", start=old_start).user(f"ancient gizmo {i}")
    ClaudeWriter(roots["claude"], cwd="/home/dev/recent", start=datetime.now(UTC) - timedelta(hours=1)).user(
        "recent gizmo")
    with InprocDaemon(home, roots) as d:
        d.service.indexer.reconcile(True).result(60)
        assert len(answer(search_sessions(d.service, {"query": "gizmo", "limit": 100}))["hits"]) == 100
        g0 = answer(search_status(d.service))["generation"]
        w = d.service.indexer.writer
        # Interrupt a sweep after one transaction, as a stop would: it keeps what it did.
        calls: list[int] = []

        def stop_after_one() -> bool:
            calls.append(1)
            return len(calls) > 1

        removed = w.sweep(int((datetime.now(UTC) - timedelta(days=30)).timestamp() * 1000), batch=200,
                          should_stop=stop_after_one)
        assert removed == 200 and w.meta.generation == g0 + 1
        policy.save(home, policy.Policy(True, 30))
        d.service.apply_policy()  # close-and-build with the new window; the sweep resumes
        d.service.indexer.reconcile(True).result(60)
        hits = answer(search_sessions(d.service, {"query": "gizmo", "limit": 100}))["hits"]
        assert [h["cwd"] for h in hits] == ["/home/dev/recent"]
        st = answer(search_status(d.service))
        assert st["generation"] >= g0 + 3 and st["lastSweepCompletedAt"] is not None
        again = d.service.indexer.reconcile(True).result(60)
        assert again["messages"] == 0, "expired files must not be read again while unchanged"
        policy.save(home, policy.Policy(True, None))
        d.service.apply_policy()  # forever: expired sessions come back
        d.service.indexer.reconcile(True).result(60)
        assert len(answer(search_sessions(d.service, {"query": "ancient", "limit": 100}))["hits"]) == 100
