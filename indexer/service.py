"""The indexer: one thread owning the database writes, the scanner children and their socket.

It spawns ``python -m aivault.scanner`` once per shard (respawning with backoff if one dies), answers
their state requests, applies their batches (ACK after commit, NACK on refusal), schedules scan
passes, freezes and merges postings segments, applies retention, and keeps the observations
that ``searchStatus`` reports. Other threads talk to it only through ``reconcile()`` and
read-only properties.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any, cast

import duckdb
import zmq

from aivault import log
from aivault.embed import Embedder
from aivault.errors import HeaderInvalid, IndexerClosed, IndexWriteFailed, ProtocolError, Refused
from aivault.heap import release_free_memory, tune_for_bulk
from aivault.home import Home
from aivault.indexer import reclaim, sql_maint, sql_write
from aivault.indexer.duck import one
from aivault.indexer.mailbox import (
    CompactAsked,
    CopyMergeAsked,
    EndBulk,
    Mail,
    MergeDone,
    MergeFailed,
    ReconcileAsked,
    VectorsAlign,
    VectorsPublish,
    VectorsSwap,
)
from aivault.indexer.merges import MERGE_THREADS, Merges
from aivault.indexer.passes import Observations, Passes
from aivault.indexer.scanners import EXIT_USAGE, Progress, ScannerPool, Slot, default_scanners, shard_of
from aivault.indexer.segments import MergePlan, SegmentLock
from aivault.indexer.store import (
    BULK_MEMORY_LIMIT,
    BULK_PASS_THREADS,
    MEMORY_LIMIT,
    THREADS,
    Meta,
    WriteFailure,
    classify_write_error,
    now_ms,
)
from aivault.indexer.vector_service import VectorService
from aivault.indexer.writer import Writer
from aivault.ingest import (
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
    SCANNER_KINDS,
    Ack,
    Batch,
    GetStates,
    Hello,
    IngestMessage,
    Nack,
    PassDone,
    Ping,
    Reconcile,
    State,
    Stop,
    decode_ingest,
    encode_ingest,
)
from aivault.ingest import Progress as ProgressHeader
from aivault.protocol import PROTOCOL_VERSION

_log = log.get("indexer")

RECENT_PASS_INTERVAL_S = 5.0
FULL_PASS_INTERVAL_S = 600.0
IDLE_FREEZE_AFTER_S = 10.0
IDLE_FREEZE_MIN_ROWS = 50_000
SCANNER_STOP_GRACE_S = 5.0
WRITE_RETRY_MAX_S = 60.0
_SNAPSHOT_PAGE = 5000
_LOOP_TICK_MS = 50


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


class IndexerService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, meta: Meta, *, extra_roots: list[str],
                 default_roots: bool = True, schedule: bool = True, history_days: int | None = None,
                 scanners: int | None = None, make_embedder: Callable[[], Embedder] | None = None,
                 bulk: bool = False) -> None:
        self.home = home
        # Bulk load (a one-shot ``aivault index``): nobody is searching, so postings pile up in
        # the active segment and the final compaction sorts each once, instead of freezing and
        # merging tiers alongside the scanners on the same cores (1M messages: 59 -> 54 s).
        # A search (another client on the daemon socket) ends it.
        self.bulk = bulk
        self.lock = SegmentLock()
        self.con = con
        if bulk:
            tune_for_bulk("indexer")  # its batches' large buffers (aivault/heap.py)
            con.execute(sql_maint.SET_MEMORY_LIMIT.format(limit=BULK_MEMORY_LIMIT))
            con.execute(sql_maint.SET_THREADS.format(threads=BULK_PASS_THREADS))
        self.writer = Writer(con.cursor(), meta, self.lock)
        self.merges = Merges(con, self.writer, self._post)
        if bulk:
            self.merges.threads = None  # nobody searches a bulk load: its sort takes every thread
        self.extra_roots = extra_roots
        self.default_roots = default_roots
        self.schedule = schedule
        self.history_days = history_days
        # The polling pass behind the file watcher (AIVAULT_RECENT_PASS_S: benchmarks and tests
        # that prove the watcher alone finds a change set it long).
        self.recent_pass_s = _env_seconds("AIVAULT_RECENT_PASS_S", RECENT_PASS_INTERVAL_S)
        # Only a scheduled indexer (the daemon) keeps up with changes as they happen; a one-shot
        # run, or a test stepping passes by hand, reads exactly when asked.
        self.pool = ScannerPool(home, extra_roots, default_roots, scanners or default_scanners(), watch=schedule,
                                bulk=bulk)
        self.slots = self.pool.slots
        self.token = self.pool.token
        self.obs = Observations()
        self.restored_files = self._restore_if_retention_grew(history_days)
        self.started = False
        self.closed = False
        self._requests: queue.Queue[Mail] = queue.Queue()
        self.passes = Passes(self.slots, self._send_reconcile)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_batch_at = time.monotonic()
        self._refusals = 0
        self.write_failure: WriteFailure | None = None
        self.batches_ok = 0
        self.last_batch_ms = 0.0
        self._idle_compacted = False
        self.vec = VectorService(home, con, self.writer, self._post,
                                 make_embedder, busy=self._busy) if make_embedder is not None else None

    def _post(self, mail: Mail) -> None:
        self._requests.put(mail)

    def _busy(self) -> bool:
        """A scan pass or a merge is running (read from the embedding thread; a stale answer only
        delays its choice of thread count by one call)."""
        return self.writer.segments.merging or any(slot.progress.running for slot in self.slots)

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
        self._requests.put(ReconcileAsked(full, fut))
        # Checked after the put: `closed` is set before the loop's last drain, so a request put
        # while it was still False is handled (or failed) by that drain.
        if self.closed:
            with contextlib.suppress(InvalidStateError):  # the last drain may have failed it first
                fut.set_exception(IndexerClosed("the indexer is closed"))
        return fut

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.closed = True

    def _restore_if_retention_grew(self, history_days: int | None) -> int:
        """When retention is longer than the last sweep's (or off), forget the files whose sessions that sweep
        removed, so the next full pass reads them again and the sweep keeps only what is still too old: a
        one-shot ``aivault index`` after ``policy --forever`` brings the sessions back as a daemon does."""
        row = one(self.con, sql_write.SELECT_OBSERVATION, ["sweptHistoryDays"])
        self.obs.swept_days = str(row[0]) if row and row[0] else ""
        if not self.obs.swept_days or (history_days is not None and history_days <= int(self.obs.swept_days)):
            return 0
        restored = self.writer.forget_expired()
        if restored:
            _log.info("retention grew: the files of sessions it had removed are read again", files=restored,
                      history_days=history_days, swept_with=int(self.obs.swept_days))
        return restored

    def cutoff_ms(self) -> int | None:
        """Sessions last updated before this are outside the retention window (None: keep all)."""
        return now_ms() - self.history_days * 86_400_000 if self.history_days else None

    @property
    def progress(self) -> Progress:
        """All shards' progress added up."""
        total = Progress()
        for slot in self.slots:
            total.add(slot.progress)
        return total

    @property
    def scanner_peak_rss_kb(self) -> int:
        return self.pool.peak_rss_kb()

    def scanner_pids(self) -> list[int]:
        return self.pool.pids()

    def files_indexed(self) -> int:
        return sum(1 for f in self.writer.files.values() if f.present)

    def quiet(self) -> bool:
        """Idle after its merges: the idle compaction has run and nothing is merging, scanning, asked
        or waiting in the mailbox (read from another thread: a reclaim, aivault/vault/live.py, asks it
        before stopping this indexer, and a request that races it is handed to the next one)."""
        return (self._idle_compacted and not self.writer.segments.merging and self.merges.mode is None
                and not self.passes.pending and self._requests.empty()
                and not any(slot.progress.running for slot in self.slots))

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
            if self.vec is not None:
                self.vec.start()
            for slot in self.slots:
                self.pool.spawn(slot)
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
                if now - last_ping >= HEARTBEAT_INTERVAL_S:
                    for slot in self.slots:
                        self._send(slot.ident, K_PING, Ping())
                    last_ping = now
                self._supervise(now)
                self._housekeeping(now)
                if self.vec is not None:
                    self.vec.on_dropped()
                    self.vec.maybe_save()
        except Exception:
            _log.exception("indexer loop crashed")
            self.obs.write_error = "the indexer stopped after an internal error; see the daemon log"
        finally:
            self._shutdown()
            sock.close(linger=0)
            sock_path.unlink(missing_ok=True)

    def _send(self, ident: bytes | None, kind: bytes, header: Mapping[str, object]) -> None:
        if ident is None:
            return
        try:
            self.sock.send_multipart([ident, *encode_ingest(kind, header)], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            _log.warning("cannot reach scanner", error=str(exc))

    def _send_reconcile(self, slot: Slot, req_id: int, full: bool) -> None:
        self._send(slot.ident, K_RECONCILE, Reconcile(req=req_id, full=full, cutoff_ms=self.cutoff_ms()))

    def _on_frames(self, frames: list[bytes]) -> None:
        ident, rest = frames[0], frames[1:]
        try:
            msg = decode_ingest(rest, SCANNER_KINDS)
        except HeaderInvalid as exc:
            # A header without its record's fields or types (checked where decoded, aivault/codec.py): a
            # batch's is refused for good under its own number, so its sender sets only its files aside.
            _log.error("ingest message rejected", error=str(exc), seq=exc.seq)
            if any(s.ident == ident for s in self.slots):
                self._send(ident, K_NACK, Nack(seq=exc.seq, reason=f"invalid batch: {exc}", poison=True))
            return
        except ProtocolError as exc:
            _log.warning("dropped a bad ingest frame", error=str(exc))
            if any(s.ident == ident for s in self.slots):
                # One of our scanners sent something unreadable (perhaps a batch): it must not
                # wait for an ACK that will never come, nor send the same again.
                self._send(ident, K_NACK, Nack(seq=None, reason=f"unreadable message: {exc}", poison=True))
            return
        if msg.kind == K_HELLO:
            self._on_hello(ident, msg)
            return
        slot = next((s for s in self.slots if s.ident == ident), None)
        if slot is None:
            return  # a message from a scanner that has since been replaced
        if msg.kind == K_BATCH:
            self._on_batch(slot, msg)
        elif msg.kind == K_GET_STATES:
            ask = cast(GetStates, msg.header)
            self._send(ident, K_STATE, State(req=ask["req"], last=True, states=self.writer.states(ask["paths"])))
        elif msg.kind == K_PROGRESS:
            slot.progress.report(cast(ProgressHeader, msg.header))
        elif msg.kind == K_PASS_DONE:
            self._on_pass_done(slot, msg)

    def _on_hello(self, ident: bytes, msg: IngestMessage) -> None:
        h = cast(Hello, msg.header)
        shard, shards = h["shard"], h["shards"]
        if h["token"] != self.token:
            # A scanner another indexer started (one that outlived it): never ours to feed.
            _log.warning("refused a scanner this indexer did not start", pid=h["pid"])
            self._send(ident, K_STOP, Stop(reason="not started by this indexer"))
            return
        if h["protocol"] != PROTOCOL_VERSION or shards != len(self.slots) or not 0 <= shard < shards:
            _log.error("scanner does not match this indexer", protocol=h["protocol"], shard=shard, shards=shards)
            self._send(ident, K_STOP, Stop(reason="protocol version or shard mismatch"))
            return
        slot = self.slots[shard]
        slot.epoch += 1
        slot.ident = ident
        rows = [r for r in self.writer.snapshot() if shard_of(r.dev, r.ino, shards) == shard]
        pages = [rows[i : i + _SNAPSHOT_PAGE] for i in range(0, len(rows), _SNAPSHOT_PAGE)] or [[]]
        for i, page in enumerate(pages):
            self._send(ident, K_STATE, State(req=h["req"], epoch=slot.epoch, files=page, last=i == len(pages) - 1))
        _log.info("scanner connected", shard=shard, epoch=slot.epoch, files=len(rows), pid=h["pid"])
        # Whatever was asked of a previous scanner of this shard is asked again of this one.
        if not self.passes.pending and self.schedule and self.obs.full_passes == 0:
            self.passes.ask(True, None)
        self.passes.resend(slot)

    def _on_batch(self, slot: Slot, msg: IngestMessage) -> None:
        h = cast(Batch, msg.header)
        seq = h["seq"]
        if h["epoch"] != slot.epoch:
            return  # sent before the scanner re-synced; it will be re-sent
        if self.write_failure is not None and self.write_failure.fatal:
            # The database refused a commit for good (DuckDB invalidates it after a failed
            # checkpoint): nothing can be written until it is reopened (aivault/vault/live.py).
            self._send(slot.ident, K_NACK, Nack(seq=seq, reason=self.write_failure.message,
                                                retry_after_s=WRITE_RETRY_MAX_S))
            return
        t0 = time.perf_counter()
        try:
            applied = self.writer.apply(h, msg.payload)
        except Refused as exc:
            self._refusals += 1
            _log.warning("batch refused", shard=slot.shard, seq=seq, reason=str(exc))
            self._send(slot.ident, K_NACK, Nack(seq=seq, reason=str(exc)))
            return
        except ProtocolError as exc:
            # The batch itself is wrong: re-reading the same bytes would build it again, so the
            # scanner sets its files aside instead of re-sending it for ever.
            _log.error("batch rejected", shard=slot.shard, seq=seq, reason=str(exc))
            self._send(slot.ident, K_NACK, Nack(seq=seq, reason=f"invalid batch: {exc}", poison=True))
            return
        except duckdb.Error as exc:
            self._write_failed(slot, seq, exc, h["messages"])
            return
        except Exception as exc:  # a bug applying this batch: refuse it for good, keep serving the others
            _log.exception("batch could not be applied", shard=slot.shard, seq=seq)
            self._send(slot.ident, K_NACK, Nack(seq=seq, reason=f"the indexer could not apply it: "
                                                f"{exc.__class__.__name__}: {exc}"[:300], poison=True))
            return
        self._refusals = 0
        self.batches_ok += 1
        self.last_batch_ms = (time.perf_counter() - t0) * 1000
        self.obs.write_error = None
        self.write_failure = None
        self._last_batch_at = time.monotonic()
        self._idle_compacted = False
        slot.progress.messages_committed += applied.messages
        self._send(slot.ident, K_ACK, Ack(seq=seq, generation=applied.generation,
                                          messages=applied.messages))
        _log.info("batch", shard=slot.shard, seq=seq, files=len(h.get("files") or []), messages=applied.messages,
                  chunks=applied.chunks, postings=applied.postings, generation=applied.generation,
                  ms=round((time.perf_counter() - t0) * 1000, 1))
        if not self.bulk and self.writer.maybe_freeze():
            self.merges.start()

    def _write_failed(self, slot: Slot, seq: int | None, exc: duckdb.Error, messages: int) -> None:
        """A commit failed for a reason that is not the batch's (disk full, I/O error).

        The transaction rolled back, so the index is as it was. A scheduled indexer keeps asking
        its scanners to wait and retry (longer each time; the daemon is ``degraded`` meanwhile);
        a one-shot run has nobody to retry for it, so its requests fail at once with the reason.
        """
        self._refusals += 1
        failure = classify_write_error(exc, self.home)
        self.write_failure = failure
        self.obs.write_error = failure.message
        lost = max(0, self.progress.messages_read - self.progress.messages_committed, messages)
        delay = min(WRITE_RETRY_MAX_S, 0.5 * 2 ** min(self._refusals, 10))
        _log.error("batch failed", seq=seq, error=str(exc), disk_full=failure.disk_full, fatal=failure.fatal,
                   retry_in_s=delay)
        self._send(slot.ident, K_NACK, Nack(seq=seq, reason=failure.message, retry_after_s=delay))
        if not self.schedule:
            self.passes.fail_all(IndexWriteFailed(failure.summary(lost)))

    def _on_pass_done(self, slot: Slot, msg: IngestMessage) -> None:
        h = cast(PassDone, msg.header)
        slot.watch = h["watch"]
        if h["reqs"]:
            # A pass the file watcher started (no request) looked at a few files only: the last
            # requested pass's failures and root problems stay what status reports.
            slot.failed = list(h["failed"])
            slot.problems = list(h["problems"])
        if h["roots"]:
            self.obs.roots = list(h["roots"])
        slot.progress.running = False
        slot.progress.files_done = slot.progress.files_changed
        done = self.passes.absorb(slot, h)
        if not done:
            return
        self.obs.gather(self.slots)
        if any(r.full for r in done):
            self._sweep()
            self.obs.last_sweep_at = now_ms()
            self.obs.full_passes += 1
        # Persist first: whoever waits on the pass may read the observations (or write) next.
        try:
            self.writer.save_observations(self.obs.as_meta())
        except duckdb.Error as exc:
            _log.warning("cannot persist observations", error=str(exc))
        for request in done:
            summary = {**request.summary, "full": request.full, "failed": len(self.obs.failed),
                       "problems": len(self.obs.problems), "generation": self.generation}
            for fut in request.futures:
                if not fut.done():
                    fut.set_result(summary)
            _log.info("pass committed", **summary)
        if any(r.full for r in done):
            release_free_memory("full pass")  # its batches (aivault/heap.py); a watcher's small passes skip it

    # --- requests from other threads ----------------------------------------------------------
    def _drain_requests(self) -> None:
        while True:
            try:
                mail = self._requests.get_nowait()
            except queue.Empty:
                return
            self._handle(mail)

    def _handle(self, mail: Mail) -> None:
        """One request from another thread, on the indexer thread (the only writer)."""
        match mail:
            case ReconcileAsked(full, fut):
                self.passes.ask(full, fut)
            case VectorsPublish() | VectorsAlign() | VectorsSwap():
                if self.vec is not None:
                    self.vec.handle(mail)
            case MergeDone(plan, rows):
                self.merges.finished(plan, rows)
            case EndBulk():
                if self.bulk:
                    self.bulk = False
                    self.writer.con.execute(sql_maint.SET_MEMORY_LIMIT.format(limit=MEMORY_LIMIT))
                    self.writer.con.execute(sql_maint.SET_THREADS.format(threads=THREADS))
                    self.merges.threads = MERGE_THREADS
                    _log.info("bulk load ended: sorting its postings for searches")
                    self.merges.compact(self.merges.mode or "frozen")
            case CompactAsked(mode, fut):
                self.merges.compact(mode, fut)
            case CopyMergeAsked(fut):
                try:
                    planned = self._plan_copy_merge()
                except IndexWriteFailed as exc:
                    with contextlib.suppress(InvalidStateError):
                        fut.set_exception(exc)
                else:
                    with contextlib.suppress(InvalidStateError):
                        fut.set_result(planned)
            case MergeFailed(plan, err):
                self.merges.failed(plan, err)

    # --- scanner processes (indexer/scanners.py) ---------------------------------------------------
    def _supervise(self, now: float) -> None:
        for slot, code in self.pool.supervise(now, stopping=self._stop.is_set()):
            if code == EXIT_USAGE:
                self.obs.write_error = (f"the scanner (shard {slot.shard}) exited with a usage error: check the "
                                        "--root options and the \"roots\" in config.json, then restart")

    def _sweep(self) -> None:
        """Apply retention: remove sessions older than historyDays, in small transactions."""
        cutoff = self.cutoff_ms()
        if cutoff is None:
            return
        t0 = time.perf_counter()
        removed = self.writer.sweep(cutoff, should_stop=self._stop.is_set)
        self.obs.swept_days = str(self.history_days)
        if removed:
            _log.info("retention sweep", removed=removed, history_days=self.history_days, generation=self.generation,
                      ms=round((time.perf_counter() - t0) * 1000, 1))

    def _housekeeping(self, now: float) -> None:
        for slot in self.slots:
            if slot.ident is not None:
                slot.respawn_delay = 1.0
        if self.schedule and (full := self.passes.due(now, FULL_PASS_INTERVAL_S, self.recent_pass_s)) is not None:
            self.passes.ask(full, None)
        idle = now - self._last_batch_at
        if idle >= IDLE_FREEZE_AFTER_S and not self._idle_compacted and not self.writer.segments.merging:
            # Quiet for a while: leave the index in its fastest shape for queries.
            self._idle_compacted = True
            removed = self.writer.dedupe_vocab()
            if removed:
                _log.info("vocabulary deduplicated", removed=removed)
            if self.writer.segments.active.rows >= IDLE_FREEZE_MIN_ROWS:
                self.writer.maybe_freeze(force=True)
            self.merges.mode = "all"
            self.merges.start()

    # --- merges (indexer/merges.py) ---------------------------------------------------------------
    def end_bulk(self) -> None:
        """Searches have started: merge as usual from now on (thread-safe, idempotent)."""
        if self.bulk:
            self._requests.put(EndBulk())

    def plan_copy_merge(self) -> Future[MergePlan | None]:
        """The compaction ``all`` (the active segment among its inputs) for a reclaim's copy to run
        on the way (indexer/reclaim.py), or None: merge in place (``compact``) instead. A planned
        merge holds every other merge off until this indexer stops."""
        fut: Future[MergePlan | None] = Future()
        self._requests.put(CopyMergeAsked(fut))
        if self.closed:
            with contextlib.suppress(InvalidStateError):
                fut.set_result(None)
        return fut

    def _plan_copy_merge(self) -> MergePlan | None:
        """(indexer thread) Planned only when merging in place would leave the file due for a
        reclaim anyway: otherwise the copy is work a small index does not need. Raises
        IndexWriteFailed when the database cannot write its file at all (DuckDB invalidated it)."""
        if self.merges.mode is not None:
            return None  # a compaction is under way: it finishes in place
        plan = self.writer.plan_merge(with_active=True)
        if plan is None:
            return None
        worth = False
        try:
            if self.bulk:
                # The pass is over and the scanners idle: the checkpoint that follows (the pass's last
                # WAL, written into blocks so they can be counted) compresses its row groups on every
                # thread (at 1M messages 1.3-1.4 s instead of 1.5-2.1 on the pass's one thread).
                self.writer.con.execute(sql_maint.SET_THREADS.format(threads=THREADS))
            worth = reclaim.merge_worth_copying(self.writer.con, plan, self.home.db_path)
        except duckdb.Error as exc:
            worth = False
            failure = classify_write_error(exc, self.home)
            if failure.fatal:  # nothing more can be written by this process: say so, do not merge
                self.write_failure = failure
                self.obs.write_error = failure.message
                _log.error("the index file could not be written", error=str(exc), disk_full=failure.disk_full)
                raise IndexWriteFailed(failure.checkpoint_summary()) from exc
            _log.debug("the merge is not planned for a copy; it runs in place", error=str(exc))
        finally:
            if not worth:
                self.writer.segments.merging = False  # not planned after all: merges go on in place
        return plan if worth else None

    def compact(self, mode: str = "frozen") -> Future[None]:
        """Freeze the active segment and merge (``frozen``: the unsorted ones; ``all``: also tiers).

        The future resolves when no merge is left to run in that mode (or the indexer stops).
        """
        fut: Future[None] = Future()
        self._requests.put(CompactAsked(mode, fut))
        if self.closed:  # as in reconcile(): nothing will merge any more
            with contextlib.suppress(InvalidStateError):
                fut.set_result(None)
        return fut

    def wait_idle(self, timeout_s: float = 600.0) -> None:
        """Block until every requested pass has committed (nothing pending)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.passes.pending and not self.closed:
            time.sleep(0.05)

    # --- shutdown -------------------------------------------------------------------------------
    def _shutdown(self) -> None:
        # Nothing pending can complete any more: tell the waiters now, not after the scanner exits.
        self.passes.fail_all("the indexer stopped before the pass finished")
        if self.vec is not None:
            # The worker may be waiting on this thread for a commit: serve its requests while it stops.
            worker = self.vec.worker
            worker.request_stop()
            deadline = time.monotonic() + 30
            while worker.alive and time.monotonic() < deadline:
                self._drain_requests()
                worker.join(0.05)
            self.vec.on_dropped()
            self.vec.save()
        for slot in self.slots:
            self._send(slot.ident, K_STOP, Stop(reason="indexer stopping"))
        self.pool.reap_all(SCANNER_STOP_GRACE_S)
        self.merges.interrupt()
        self.closed = True  # before the last drain: see reconcile()
        self._drain_requests()
        self.passes.fail_all("the indexer stopped before the pass finished")
        self.merges.done()
