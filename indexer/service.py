"""The indexer: one thread owning the database writes, the scanner child and its socket.

It spawns ``python -m scanner`` (respawning it with backoff if it dies), answers its state
requests, applies its batches (ACK after commit, NACK on refusal), schedules scan passes,
freezes and merges postings segments, and keeps the observations that ``searchStatus``
reports. Other threads talk to it only through ``reconcile()`` and read-only properties.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import zmq

from aivault import log
from aivault.codec import IngestMessage, decode_ingest, encode_ingest
from aivault.errors import ProtocolError
from aivault.home import Home
from aivault.protocol import (
    HEARTBEAT_INTERVAL_S,
    K_ACK,
    K_BATCH,
    K_GET_STATES,
    K_HELLO,
    K_NACK,
    K_PASS_DONE,
    K_PING,
    K_PROGRESS,
    K_RECONCILE,
    K_STATE,
    K_STOP,
    PROTOCOL_VERSION,
    SCANNER_KINDS,
)
from indexer.segments import MergePlan, SegmentLock
from indexer.store import Meta, now_ms
from indexer.writer import Refused, Writer

_log = log.get("indexer")

RECENT_PASS_INTERVAL_S = 5.0
FULL_PASS_INTERVAL_S = 600.0
IDLE_FREEZE_AFTER_S = 10.0
IDLE_FREEZE_MIN_ROWS = 50_000
SCANNER_RESPAWN_MAX_S = 30.0
SCANNER_STOP_GRACE_S = 5.0
_SNAPSHOT_PAGE = 5000
_LOOP_TICK_MS = 50


@dataclass(slots=True)
class Progress:
    """What the current (or last) pass reported, for status and progress bars."""

    running: bool = False
    full: bool = False
    files_seen: int = 0
    files_changed: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    messages_read: int = 0
    messages_committed: int = 0
    started_at: float = 0.0


@dataclass(slots=True)
class Observations:
    last_reconcile_at: int | None = None
    last_sweep_at: int | None = None
    failed: list[dict[str, str]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)
    write_error: str | None = None
    full_passes: int = 0


class IndexerService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, meta: Meta, *, extra_roots: list[str],
                 default_roots: bool = True, schedule: bool = True, history_days: int | None = None) -> None:
        self.home = home
        self.lock = SegmentLock()
        self.con = con
        self.writer = Writer(con.cursor(), meta, self.lock)
        self.extra_roots = extra_roots
        self.default_roots = default_roots
        self.schedule = schedule
        self.history_days = history_days
        self.progress = Progress()
        self.obs = Observations()
        self.started = False
        self.closed = False
        self._requests: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._pending: dict[int, tuple[bool, list[Future[dict[str, Any]]]]] = {}
        self._sent: set[int] = set()
        self._req_seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._scanner: subprocess.Popen[bytes] | None = None
        self._scanner_id: bytes | None = None
        self._epoch = 0
        self._respawn_at = 0.0
        self._respawn_delay = 1.0
        self._merge_thread: threading.Thread | None = None
        self._last_batch_at = time.monotonic()
        self._last_recent = 0.0
        self._last_full = 0.0
        self._refusals = 0
        self.scanner_peak_rss_kb = 0
        self._compacting = False
        self._idle_compacted = False

    # --- public, thread-safe ------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.writer.meta.generation

    @property
    def identity(self) -> str:
        return self.writer.meta.identity

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="indexer", daemon=True)
        self._thread.start()
        self.started = True

    def reconcile(self, full: bool) -> Future[dict[str, Any]]:
        """Ask for a scan pass that starts after this call; the future resolves when it is committed."""
        fut: Future[dict[str, Any]] = Future()
        if self.closed:
            fut.set_exception(RuntimeError("the indexer is closed"))
            return fut
        self._requests.put(("reconcile", (full, fut)))
        return fut

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.closed = True

    def cutoff_ms(self) -> int | None:
        """Sessions last updated before this are outside the retention window (None: keep all)."""
        return now_ms() - self.history_days * 86_400_000 if self.history_days else None

    def files_indexed(self) -> int:
        return sum(1 for f in self.writer.files.values() if f.present)

    # --- the loop -------------------------------------------------------------------------------
    def _run(self) -> None:
        ctx: zmq.Context[Any] = zmq.Context.instance()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        sock_path = Path(self.home.ingest_endpoint.removeprefix("ipc://"))
        sock_path.unlink(missing_ok=True)
        sock.bind(self.home.ingest_endpoint)
        os.chmod(sock_path, 0o600)
        self.sock = sock
        last_ping = time.monotonic()
        try:
            self._sweep()
            self._spawn_scanner()
            while not self._stop.is_set():
                if sock.poll(_LOOP_TICK_MS, zmq.POLLIN):
                    for _ in range(64):
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._on_frames(frames)
                self._drain_requests()
                now = time.monotonic()
                if now - last_ping >= HEARTBEAT_INTERVAL_S and self._scanner_id is not None:
                    self._send(K_PING, {})
                    last_ping = now
                self._supervise(now)
                self._housekeeping(now)
        except Exception:
            _log.exception("indexer loop crashed")
            self.obs.write_error = "the indexer stopped after an internal error; see the daemon log"
        finally:
            self._shutdown()
            sock.close(linger=0)
            sock_path.unlink(missing_ok=True)

    def _send(self, kind: bytes, header: dict[str, Any], ident: bytes | None = None) -> None:
        target = ident or self._scanner_id
        if target is None:
            return
        try:
            self.sock.send_multipart([target, *encode_ingest(kind, header)], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            _log.warning("cannot reach scanner", error=str(exc))

    def _on_frames(self, frames: list[bytes]) -> None:
        ident, rest = frames[0], frames[1:]
        try:
            msg = decode_ingest(rest, SCANNER_KINDS)
        except ProtocolError as exc:
            _log.warning("dropped a bad ingest frame", error=str(exc))
            return
        if msg.kind == K_HELLO:
            self._on_hello(ident, msg)
        elif ident != self._scanner_id:
            return  # a message from a scanner that has since been replaced
        elif msg.kind == K_BATCH:
            self._on_batch(msg)
        elif msg.kind == K_GET_STATES:
            paths = [p for p in msg.header.get("paths", []) if isinstance(p, str)]
            self._send(K_STATE, {"req": msg.header.get("req"), "last": True, "states": self.writer.states(paths)})
        elif msg.kind == K_PROGRESS:
            self._on_progress(msg)
        elif msg.kind == K_PASS_DONE:
            self._on_pass_done(msg)

    def _on_hello(self, ident: bytes, msg: IngestMessage) -> None:
        if msg.header.get("protocol") != PROTOCOL_VERSION:
            _log.error("scanner speaks another protocol version", theirs=msg.header.get("protocol"))
            self._send(K_STOP, {"reason": "protocol version mismatch"}, ident)
            return
        self._epoch += 1
        self._scanner_id = ident
        rows = self.writer.snapshot()
        req = msg.header.get("req")
        pages = [rows[i : i + _SNAPSHOT_PAGE] for i in range(0, len(rows), _SNAPSHOT_PAGE)] or [[]]
        for i, page in enumerate(pages):
            self._send(K_STATE, {"req": req, "epoch": self._epoch, "files": page, "last": i == len(pages) - 1})
        _log.info("scanner connected", epoch=self._epoch, files=len(rows), pid=msg.header.get("pid"))
        # Whatever was asked of a previous scanner is asked again of this one.
        self._sent.clear()
        if not self._pending and self.schedule and self.obs.full_passes == 0:
            self._enqueue_pass(True, None)
        for req_id, (full, _) in sorted(self._pending.items()):
            self._send(K_RECONCILE, {"req": req_id, "full": full, "cutoff_ms": self.cutoff_ms()})
            self._sent.add(req_id)

    def _on_batch(self, msg: IngestMessage) -> None:
        h = msg.header
        seq = h.get("seq")
        if h.get("epoch") != self._epoch:
            return  # sent before the scanner re-synced; it will be re-sent
        t0 = time.perf_counter()
        try:
            applied = self.writer.apply(h, msg.payload)
        except (Refused, ProtocolError) as exc:
            self._refusals += 1
            _log.warning("batch refused", seq=seq, reason=str(exc))
            self._send(K_NACK, {"seq": seq, "reason": str(exc)})
            return
        except duckdb.Error as exc:
            self._refusals += 1
            self.obs.write_error = f"cannot write the index: {exc}"
            _log.error("batch failed", seq=seq, error=str(exc))
            self._send(K_NACK, {"seq": seq, "reason": "the index could not be written"})
            return
        self._refusals = 0
        self.obs.write_error = None
        self._last_batch_at = time.monotonic()
        self._idle_compacted = False
        self.progress.messages_committed += applied.messages
        self._send(K_ACK, {"seq": seq, "generation": applied.generation, "messages": applied.messages})
        _log.info("batch", seq=seq, files=len(h.get("files") or []), messages=applied.messages,
                  chunks=applied.chunks, postings=applied.postings, generation=applied.generation,
                  ms=round((time.perf_counter() - t0) * 1000, 1))
        if self.writer.maybe_freeze():
            self._start_merge()

    def _on_progress(self, msg: IngestMessage) -> None:
        h = msg.header
        p = self.progress
        if not p.running:
            p.running = True
            p.started_at = time.monotonic()
            p.messages_committed = 0
        p.files_seen = int(h.get("files_seen", 0))
        p.files_changed = int(h.get("files_changed", 0))
        p.files_done = int(h.get("files_done", 0))
        p.bytes_total = int(h.get("bytes_total", 0))
        p.bytes_done = int(h.get("bytes_done", 0))
        p.messages_read = int(h.get("messages", 0))

    def _on_pass_done(self, msg: IngestMessage) -> None:
        h = msg.header
        full = bool(h.get("full"))
        now = now_ms()
        self.obs.last_reconcile_at = now
        self.obs.failed = list(h.get("failed") or [])
        self.obs.problems = list(h.get("problems") or [])
        if full:
            self._sweep()
            self.obs.last_sweep_at = now_ms()
            self.obs.full_passes += 1
        self.progress.running = False
        self.progress.files_done = self.progress.files_changed
        summary = {k: h.get(k) for k in ("full", "files_seen", "files_changed", "messages", "malformed",
                                          "oversized")}
        summary["failed"] = len(self.obs.failed)
        summary["problems"] = len(self.obs.problems)
        summary["generation"] = self.generation
        for req in h.get("reqs") or []:
            entry = self._pending.pop(req, None)
            self._sent.discard(req)
            if entry:
                for fut in entry[1]:
                    if not fut.done():
                        fut.set_result(summary)
        try:
            self.writer.save_observations({
                "lastReconcileAt": str(self.obs.last_reconcile_at or ""),
                "lastSweepCompletedAt": str(self.obs.last_sweep_at or ""),
                "failed": json.dumps(self.obs.failed),
                "problems": json.dumps(self.obs.problems),
            })
        except duckdb.Error as exc:
            _log.warning("cannot persist observations", error=str(exc))
        _log.info("pass committed", **summary)

    # --- requests from other threads ----------------------------------------------------------
    def _drain_requests(self) -> None:
        while True:
            try:
                kind, arg = self._requests.get_nowait()
            except queue.Empty:
                return
            if kind == "reconcile":
                full, fut = arg
                self._enqueue_pass(full, fut)
            elif kind == "merged":
                plan, rows = arg
                self.writer.finish_merge(plan, rows)
                _log.info("merged segments", target=plan.target, inputs=[s.name for s in plan.inputs], rows=rows)
                self._start_merge(compact=self._compacting)
            elif kind == "compact":
                self.writer.maybe_freeze(force=True)
                self._compacting = True
                self._start_merge(compact=True)
            elif kind == "merge_failed":
                plan, err = arg
                _log.error("segment merge failed", target=plan.target, error=err)
                self.writer.segments.abandon(self.writer.con, plan)

    def _enqueue_pass(self, full: bool, fut: Future[dict[str, Any]] | None) -> None:
        # Coalesce with a request not yet handed to the scanner.
        for req_id, (f, futs) in self._pending.items():
            if req_id not in self._sent and (f or not full):
                if fut:
                    futs.append(fut)
                return
        self._req_seq += 1
        req_id = self._req_seq
        self._pending[req_id] = (full, [fut] if fut else [])
        if self._scanner_id is not None:
            self._send(K_RECONCILE, {"req": req_id, "full": full, "cutoff_ms": self.cutoff_ms()})
            self._sent.add(req_id)
        if full:
            self._last_full = time.monotonic()
        self._last_recent = time.monotonic()

    # --- scanner process ------------------------------------------------------------------------
    def scanner_command(self) -> list[str]:
        cmd = [sys.executable, "-m", "scanner", "--connect", self.home.ingest_endpoint]
        for spec in self.extra_roots:
            cmd += ["--root", spec]
        if not self.default_roots:
            cmd.append("--no-default-roots")
        return cmd

    def _spawn_scanner(self) -> None:
        env = dict(os.environ)
        env.setdefault("AIVAULT_LOG_LEVEL", log.current_level_name())
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._scanner = subprocess.Popen(self.scanner_command(), env=env, stdin=subprocess.DEVNULL)
        _log.info("scanner started", pid=self._scanner.pid)

    def _supervise(self, now: float) -> None:
        proc = self._scanner
        if proc is None:
            if now >= self._respawn_at and not self._stop.is_set():
                self._spawn_scanner()
            return
        code = self._reap(proc, block=False)
        if code is None:
            return
        _log.warning("scanner exited; restarting", code=code, delay_s=self._respawn_delay)
        self._scanner = None
        self._scanner_id = None
        self._sent.clear()
        self.progress.running = False
        self._respawn_at = now + self._respawn_delay
        self._respawn_delay = min(self._respawn_delay * 2, SCANNER_RESPAWN_MAX_S)

    def _reap(self, proc: subprocess.Popen[bytes], *, block: bool) -> int | None:
        """The scanner's exit code once it has exited (recording its peak RSS), else None."""
        if proc.returncode is not None:
            return proc.returncode
        try:
            pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return proc.poll() if proc.returncode is None else proc.returncode
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.scanner_peak_rss_kb = max(self.scanner_peak_rss_kb, int(usage.ru_maxrss))
        return proc.returncode

    def _sweep(self) -> None:
        """Apply retention: remove sessions older than historyDays, in small transactions."""
        cutoff = self.cutoff_ms()
        if cutoff is None:
            return
        t0 = time.perf_counter()
        removed = self.writer.sweep(cutoff, should_stop=self._stop.is_set)
        if removed:
            _log.info("retention sweep", removed=removed, history_days=self.history_days, generation=self.generation,
                      ms=round((time.perf_counter() - t0) * 1000, 1))

    def _housekeeping(self, now: float) -> None:
        if self._scanner_id is not None and self._scanner is not None:
            self._respawn_delay = 1.0
        if self.schedule and self._scanner_id is not None and not self._pending:
            if now - self._last_full >= FULL_PASS_INTERVAL_S:
                self._enqueue_pass(True, None)
            elif now - self._last_recent >= RECENT_PASS_INTERVAL_S:
                self._enqueue_pass(False, None)
        idle = now - self._last_batch_at
        if idle >= IDLE_FREEZE_AFTER_S and not self._idle_compacted and not self.writer.segments.merging:
            # Quiet for a while: leave the index in its fastest shape for queries.
            self._idle_compacted = True
            if self.writer.segments.active.rows >= IDLE_FREEZE_MIN_ROWS:
                self.writer.maybe_freeze(force=True)
            self._compacting = True
            self._start_merge(compact=True)

    # --- merges ---------------------------------------------------------------------------------
    def _start_merge(self, *, compact: bool = False) -> None:
        if self._merge_thread is not None and self._merge_thread.is_alive():
            return
        plan = self.writer.plan_merge(compact=compact)
        if plan is None:
            self._compacting = False
            return
        self._merge_thread = threading.Thread(target=self._merge, args=(plan,), name="merge", daemon=True)
        self._merge_thread.start()

    def _merge(self, plan: MergePlan) -> None:
        cur = self.con.cursor()
        try:
            rows = self.writer.segments.run_merge(cur, plan)
            self._requests.put(("merged", (plan, rows)))
        except Exception as exc:
            self._requests.put(("merge_failed", (plan, str(exc))))
        finally:
            cur.close()

    def compact(self) -> None:
        """Ask for the active segment to be frozen and merged (e.g. when a one-shot index ends)."""
        self._requests.put(("compact", None))

    def wait_idle(self, timeout_s: float = 600.0) -> None:
        """Block until every requested pass has committed (nothing pending)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._pending and not self.closed:
            time.sleep(0.05)

    def wait_merges(self, timeout_s: float = 600.0) -> None:
        """Block until no merge is running (used by `aivault index` and the bench)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            t = self._merge_thread
            if (t is None or not t.is_alive()) and self._requests.empty() and not self.writer.segments.merging:
                return
            time.sleep(0.05)

    # --- shutdown -------------------------------------------------------------------------------
    def _fail_pending(self, reason: str) -> None:
        for _, futs in self._pending.values():
            for fut in futs:
                if not fut.done():
                    fut.set_exception(RuntimeError(reason))
        self._pending.clear()

    def _shutdown(self) -> None:
        # Nothing pending can complete any more: tell the waiters now, not after the scanner exits.
        self._fail_pending("the indexer stopped before the pass finished")
        proc = self._scanner
        if proc is not None and proc.poll() is None:
            self._send(K_STOP, {"reason": "indexer stopping"})
            deadline = time.monotonic() + SCANNER_STOP_GRACE_S
            while self._reap(proc, block=False) is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    self._reap(proc, block=True)
                    break
                time.sleep(0.02)
        self._scanner = None
        t = self._merge_thread
        if t is not None and t.is_alive():
            self.con.interrupt()
            t.join(30)
        self._drain_requests()
        self._fail_pending("the indexer stopped before the pass finished")
        self.closed = True
