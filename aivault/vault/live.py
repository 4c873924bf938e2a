"""The production service of a daemon: the indexer plus the engine over its database.

It owns the index's life cycle (docs/contract.md §8) as one state machine over ``LocalService.phase``
(``Phase`` below; every move is in ``MOVES`` and goes through ``LocalService._move``):
* consent off -> the indexer is closed, the index copy is kept, searches answer
  ``unavailable/disabled``; consent on again -> a new indexer resumes from the committed state;
* a retention change -> the same close-and-build flow (files whose sessions expired are read
  again, the sweep applies the new window);
* ``clear`` -> close everything, delete the database and every sidecar, create a new one with a
  new identity, and build again only if consent is still given;
* a reclaim -> the indexer stops while the file is copied, searches go on from the old file;
* a write DuckDB refused for good (a full disk) -> an outage: the file is reopened every
  REOPEN_RETRY_S, searched read-only while no writer can open it.
Searches hold the shared side of a lock whose exclusive side these transitions take.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import shutil
import threading
import time
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

import duckdb

from aivault import config, log
from aivault import policy as policy_mod
from aivault.errors import AivaultError, IndexerClosed, IndexLocked, PolicyInvalid, ReconcileFailed
from aivault.home import Home, unusable
from aivault.indexer import reclaim as reclaim_mod
from aivault.indexer import sql_maint
from aivault.indexer.merges import MERGE_QUIET_S
from aivault.indexer.opening import open_writer
from aivault.indexer.segments import MergePlan, SegmentLock
from aivault.indexer.service import IndexerService
from aivault.indexer.store import (
    THREADS,
    UNREADABLE,
    WRITES,
    Meta,
    close_writer,
    connect,
    damaged,
    lock_holder,
    now_ms,
    read_meta,
)
from aivault.protocol import FRESHNESS_DEADLINE_S, ReadResult, SearchResult, Status, Unavailable, status, unavailable
from aivault.query.engine import Engine
from aivault.query.reports import degraded_roots, index_counts, root_report, silent_roots
from aivault.query.request import parse_request
from aivault.query.transcript import ReadRequest, read_messages
from aivault.redact import Policy
from aivault.vault.endpoints import ShardRequest, shard_step

_log = log.get("service")

HEALTH_POLL_S = 1.0
# How often a database DuckDB invalidated (a failed write: disk full) is reopened to try again.
REOPEN_RETRY_S = 10.0


class Phase(enum.Enum):
    """Where the live service is in the index's life cycle; ``status`` reports each as a contract phase."""

    READY = "ready"  # built, its indexer not started (not yet, or consent was off): "idle"
    RUNNING = "running"  # the indexer runs: "indexing", "current" or "degraded" from what it observed
    DISABLED = "disabled"  # consent withdrawn: the indexer closed, the index kept: "closed"
    RECLAIMING = "reclaiming"  # the indexer stopped while the file is copied; searches read the committed index
    OUTAGE = "outage"  # a write was refused for good: reopened every REOPEN_RETRY_S until batches commit: "degraded"
    READ_ONLY = "read-only"  # no writer could open the file: searched read-only, reopen retried: "degraded"
    STOPPED = "stopped"  # the service stopped (the daemon is closing): "closed"


# The moves the life cycle may make; anything else is a bug (IllegalMove).
MOVES: dict[Phase, frozenset[Phase]] = {
    # started (consent given), consent withdrawn, a reclaim of the one-shot index, cleared again
    Phase.READY: frozenset({Phase.RUNNING, Phase.DISABLED, Phase.RECLAIMING, Phase.READY}),
    # rebuilt (retention, clear), consent withdrawn, a reclaim, a write refused for good, cleared while stopping
    Phase.RUNNING: frozenset({Phase.RUNNING, Phase.DISABLED, Phase.RECLAIMING, Phase.OUTAGE, Phase.READY}),
    # consent given again, cleared with consent still off, a write failure noticed after consent went
    Phase.DISABLED: frozenset({Phase.RUNNING, Phase.READY, Phase.OUTAGE, Phase.RECLAIMING}),
    # back to where it was or to a new indexer, or no writer could open the swapped file
    Phase.RECLAIMING: frozenset({Phase.RUNNING, Phase.READY, Phase.DISABLED, Phase.READ_ONLY}),
    # batches commit again, reopened (still waiting for a batch), no writer opens, consent off, cleared
    Phase.OUTAGE: frozenset({Phase.RUNNING, Phase.OUTAGE, Phase.READ_ONLY, Phase.DISABLED, Phase.READY}),
    # a writer opened again, still none, consent off meanwhile, cleared
    Phase.READ_ONLY: frozenset({Phase.OUTAGE, Phase.READ_ONLY, Phase.DISABLED, Phase.READY, Phase.RUNNING}),
    Phase.STOPPED: frozenset(),
}
for _phase in Phase:  # stopping is allowed from anywhere but a stop
    if _phase is not Phase.STOPPED:
        MOVES[_phase] |= {Phase.STOPPED}


class IllegalMove(RuntimeError):
    """A life-cycle move MOVES does not allow: a bug in this module, never a user's doing."""


def index_files(home: Home) -> list[Path]:
    """The database and every sidecar DuckDB or aivault writes next to it (WAL, spill, vectors)."""
    from aivault.indexer.vector_service import SIDECAR_NAME

    base = home.db_path
    sidecars = {SIDECAR_NAME, Path(SIDECAR_NAME).with_suffix(".json").name}
    return sorted(p for p in home.path.iterdir()
                  if p.name == base.name or p.name.startswith(base.name + ".") or p.name in sidecars)


def clear_offline(home: Home) -> list[str]:
    """Delete the index and its sidecars without opening them (no daemon runs).

    Opening is exactly what a damaged file cannot do, so clear never needs to. A file another
    process holds is left alone (IndexLocked); the caller builds a new database afterwards.
    """
    if home.db_path.exists():
        pid = lock_holder(home.db_path)
        if pid is not None:
            raise IndexLocked(f"the index {home.db_path} is held by process {pid}; stop it (`kill -TERM {pid}`) "
                              "or use its daemon (`aivault clear` talks to a running one)")
    removed = []
    for path in index_files(home):
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:  # a read-only file system, another user's directory
            raise unusable(path, exc, "delete") from exc
        removed.append(path.name)
    _log.info("index cleared (offline)", removed=removed)
    return removed


class LocalService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, meta: Meta, *, extra_roots: list[str],
                 default_roots: bool = True, schedule: bool = True, semantic: bool = True,
                 bulk: bool = False, fast_postings: bool = False) -> None:
        self.home = home
        self.semantic = semantic
        # Searches score BM25 over the postings sidecars (query/postings.py): the daemon's choice.
        self.fast_postings = fast_postings
        self._bulk = bulk  # the first indexer only (see IndexerService)
        self.con = con
        self.extra_roots = extra_roots
        self.default_roots = default_roots
        self.schedule = schedule
        self.lifecycle = SegmentLock()
        self._transition = threading.Lock()
        self.policy = policy_mod.load(home)
        # The life cycle (Phase, MOVES): changed by _move only, with _transition held.
        self.phase = Phase.READY
        # Why the database cannot be written: set exactly in the OUTAGE and READ_ONLY phases.
        self.outage: str | None = None
        self._next_reopen = 0.0
        # A retention change made during an outage: the expired files are forgotten at the reopen.
        self._forget_pending = False
        self._health: threading.Thread | None = None
        self._health_stop = threading.Event()
        # A reclaim (indexer/reclaim.py) stops the indexer while it copies the index: searches are
        # answered from the old file meanwhile, and reconcile requests wait for the next indexer.
        # Moves into and out of RECLAIMING also hold this gate, which reconcile() reads the phase under.
        self._reclaim_gate = threading.Lock()
        self._deferred: list[tuple[bool, Future[dict[str, Any]]]] = []
        self._reclaim_checked: tuple[object, ...] | None = None
        self.last_reclaim: dict[str, Any] | None = None
        self._copying: duckdb.DuckDBPyConnection | None = None  # the cursor a reclaim copies through
        try:
            self.indexer = self._new_indexer(meta)
        except UNREADABLE as exc:
            raise damaged(home.db_path, exc) from exc
        self._bulk = False
        self.engine = self._new_engine()

    @property
    def identity(self) -> str:
        """The database's identity (a clear gives a new one)."""
        return self.indexer.identity

    def _new_indexer(self, meta: Meta) -> IndexerService:
        return IndexerService(self.home, self.con, meta, extra_roots=self.extra_roots,
                              default_roots=self.default_roots, schedule=self.schedule,
                              history_days=self.policy.history_days,
                              make_embedder=config.embedder_factory(self.home) if self.semantic else None,
                              bulk=self._bulk)

    def _redaction(self) -> Policy:
        """What is shown is redacted as config.json says (aivault/redact.py); a file that cannot be read keeps
        redaction on, with the user's allow-list unknown."""
        try:
            return config.redact_settings(self.home)
        except AivaultError as exc:
            _log.warning("redaction settings unreadable: redacting everything shown", error=str(exc))
            return Policy()

    def _new_engine(self) -> Engine:
        ix = self.indexer

        def committed() -> int | None:
            # Only a running writer can move the index under a page being assembled.
            return ix.generation if ix.started and not ix.closed else None

        from aivault.query.postings import PostingsSidecars

        postings = PostingsSidecars(self.home.db_path, self.con, ix.lock) if self.fast_postings else None
        # One gate counts the searches for the merges and for the background embedding.
        engine = Engine(self.con, self.home.key(), lock=ix.lock, committed_generation=committed, vectors=ix.vec,
                        postings=postings, fence=WRITES, activity=ix.vec.gate if ix.vec is not None else None,
                        redaction=self._redaction())
        # A merge's output gets its sidecar before it is registered, and a merge sorts with fewer
        # threads while people search (indexer/merges.py).
        ix.merges.prepare = postings.prebuild if postings is not None else None
        ix.merges.searching = lambda: engine.activity.recent(MERGE_QUIET_S)
        engine.on_search = ix.merges.search_began
        return engine

    # --- life cycle ------------------------------------------------------------------------------
    def _move(self, to: Phase, why: str) -> None:
        """The one place the phase changes (with ``_transition`` held); IllegalMove if MOVES has no such move."""
        if to not in MOVES[self.phase]:
            raise IllegalMove(f"the index's life cycle cannot go from {self.phase.value} to {to.value} ({why})")
        if to is not self.phase:
            _log.info("life cycle", was=self.phase.value, now=to.value, why=why)
        self.phase = to

    def _run_indexer(self, why: str) -> None:
        """Start the current indexer if consent is given (RUNNING), else leave it built (READY)."""
        if self.policy.enabled and not self._health_stop.is_set():
            self.indexer.start()
            self._move(Phase.RUNNING, why)
        else:
            self._move(Phase.READY, why)

    def start(self) -> None:
        """Start indexing (if consent is given) and the health watch; again after a reclaim left the indexer stopped."""
        with self._transition:
            if self.phase is Phase.READY and self.policy.enabled:
                self._run_indexer("started")
        if self._health is None:
            self._health = threading.Thread(target=self._watch_health, name="index-health", daemon=True)
            self._health.start()

    def stop(self) -> None:
        self._health_stop.set()
        copying = self._copying
        if copying is not None:
            # Shutting down in the middle of a reclaim's copy: it is abandoned (the index stays as it was).
            with contextlib.suppress(duckdb.Error):
                copying.interrupt()
        if self._health is not None:
            self._health.join(10)
        with self._transition, self.lifecycle.exclusive():
            self.indexer.stop()
            self.engine.close()
            if self.phase is Phase.READ_ONLY:
                self.con.close()
            else:
                close_writer(self.con)
            self._move(Phase.STOPPED, "service stopped")

    # --- a database DuckDB gave up on ------------------------------------------------------------
    def _watch_health(self) -> None:
        while not self._health_stop.wait(HEALTH_POLL_S):
            try:
                self.check_health()
            except Exception:
                _log.exception("index health check failed")
            try:
                self.maybe_reclaim()
            except Exception:
                _log.exception("reclaiming the index's free space failed")
            self._prepare_postings()

    def _prepare_postings(self) -> None:
        """Have the sorted segments' sidecars built before searches need them (query/postings.py)."""
        if self.phase not in (Phase.READY, Phase.RUNNING, Phase.DISABLED) or self.engine.postings is None:
            return
        try:
            with self.lifecycle.shared():
                self.engine.prepare_postings()
        except duckdb.Error as exc:
            _log.debug("postings sidecars not prepared this time", error=str(exc))

    def check_health(self) -> None:
        """Reopen a database that DuckDB invalidated after a failed write (a full disk), and resume.

        DuckDB refuses every statement on an invalidated database until it is opened again, so
        the indexer is closed and the file reopened every REOPEN_RETRY_S; until a writer opens,
        searches are answered from a read-only handle and status says ``degraded`` with the reason.
        Nothing committed is lost: DuckDB's WAL holds it, and it is read back on reopening.
        """
        ix = self.indexer
        failure = ix.write_failure
        if self.phase is Phase.OUTAGE and ix.started and not ix.closed and failure is None and ix.batches_ok:
            with self._transition:
                if self.phase is Phase.OUTAGE and self.indexer is ix:
                    _log.info("index writable again: indexing resumed", was=self.outage)
                    self.outage = None
                    self._move(Phase.RUNNING, "batches commit again")
            return
        if failure is not None and failure.fatal and self.phase in (Phase.RUNNING, Phase.OUTAGE, Phase.DISABLED):
            with self._transition:
                if self.indexer is ix and self.phase in (Phase.RUNNING, Phase.OUTAGE, Phase.DISABLED):
                    self.outage = failure.message
                    self._move(Phase.OUTAGE, "a write was refused")
        if self.phase not in (Phase.OUTAGE, Phase.READ_ONLY) or time.monotonic() < self._next_reopen:
            return
        self._next_reopen = time.monotonic() + REOPEN_RETRY_S
        self._reopen()

    def _reopen(self) -> None:
        """Close everything and open the file again: a writer (OUTAGE until a batch commits, or DISABLED
        without consent), else a read-only handle (READ_ONLY)."""
        with self._transition:
            if self.phase not in (Phase.OUTAGE, Phase.READ_ONLY):
                return  # cleared or stopped meanwhile
            with self.lifecycle.exclusive():
                self.indexer.stop()
                self.engine.close()
                with contextlib.suppress(duckdb.Error):
                    self.con.close()
                try:
                    self.con, meta = open_writer(self.home)
                except (AivaultError, duckdb.Error) as exc:
                    _log.warning("the index cannot be opened for writing yet; searching it read-only",
                                 error=str(exc), retry_in_s=REOPEN_RETRY_S)
                    self.con = connect(self.home.db_path, read_only=True)
                    self.engine = Engine(self.con, self.home.key(), redaction=self._redaction())
                    self._move(Phase.READ_ONLY, "no writer could open the index")
                    return
                self.indexer = self._new_indexer(meta)
                if self._forget_pending:
                    self.indexer.writer.forget_expired()
                    self._forget_pending = False
                self.engine = self._new_engine()
            _log.info("index reopened after a write failure", outage=self.outage)
            if self.policy.enabled:
                self.indexer.start()
                self._move(Phase.OUTAGE, "reopened: indexing until a batch commits")
            else:  # nothing will be written: the outage is over
                self.outage = None
                self._move(Phase.DISABLED, "reopened with consent off")

    # --- giving freed blocks back (indexer/reclaim.py) ------------------------------------------------
    def reconcile(self, full: bool) -> Future[dict[str, Any]]:
        """A scan pass (aiVault.reconcile); one asked while a reclaim runs goes to the indexer after it."""
        with self._reclaim_gate:
            if self.phase is not Phase.RECLAIMING:
                return self.indexer.reconcile(full)
            fut: Future[dict[str, Any]] = Future()
            self._deferred.append((full, fut))
            return fut

    def maybe_reclaim(self) -> dict[str, Any] | None:
        """After the daemon's merges (its indexer idle), reclaim if the free blocks are worth it.

        Looked at once per state of the index (generation and segment set), so a reclaim refused
        or not due is not retried until something has changed.
        """
        ix = self.indexer
        if self.phase is not Phase.RUNNING or not self.policy.enabled:
            return None
        if not ix.quiet():
            return None
        state = (ix.identity, ix.generation, tuple(s.name for s in ix.writer.segments.segments))
        if state == self._reclaim_checked:
            return None
        self._reclaim_checked = state
        return self.reclaim()

    def reclaim(self, *, restart: bool = True, merge: MergePlan | None = None) -> dict[str, Any] | None:
        """Copy the index into a fresh file and rename it over the old one when the file is over
        RECLAIM_RATIO times its used data; None when it is not. Returns what was done (kept as
        ``last_reclaim`` for indexStats).

        The indexer is stopped for the copy (nothing may be written that the copy would miss) and
        searches go on from the old file; only the close-rename-reopen holds searches back, briefly.
        ``restart``: start a new indexer afterwards if one ran (a one-shot index passes False).
        ``merge``: a plan of the indexer's ``plan_copy_merge``, run by the copy on the way (whatever
        the ratio now); the record's ``merged`` says it was. If the copy fails, the index keeps its
        unmerged segments and the caller merges in place.
        """
        db = self.home.db_path
        with self._transition:
            ix = self.indexer
            prior = self.phase
            if prior not in (Phase.READY, Phase.RUNNING, Phase.DISABLED) or ix.write_failure is not None:
                return None
            with self.lifecycle.shared():
                # Blocks a commit freed (a dropped segment) count as free only once checkpointed.
                # On the connection itself: after a merge, one from a cursor is refused ("other
                # write transactions are active"; DuckDB 1.5.5) while this one goes through. If it
                # is refused all the same, the free blocks are not counted yet: this state of the
                # index is looked at again at the next tick instead of being judged not worth it
                # (CI of 910e8cb once saw a daemon that was searched all along never reclaim).
                try:
                    self.con.execute(sql_maint.CHECKPOINT)
                except duckdb.Error as exc:
                    _log.debug("checkpoint refused; the reclaim is looked at again", error=str(exc))
                    self._reclaim_checked = None
                    return None
                cur = self.con.cursor()
                try:
                    before = reclaim_mod.usage(cur, db)
                finally:
                    cur.close()
            if merge is None and not before.due():
                return None
            record: dict[str, Any] = {"at": now_ms(), "done": False, "before": before.as_dict()}
            if merge is not None:
                record["merged"] = {"target": merge.target, "inputs": [s.name for s in merge.inputs]}
            problem = reclaim_mod.disk_problem(db, before.used_bytes)
            if problem is not None:
                _log.warning("reclaim refused: the index keeps its free blocks", reason=problem, **before.as_dict())
                self.last_reclaim = {**record, "reason": problem}
                return self.last_reclaim
            t0 = time.monotonic()
            with self._reclaim_gate:
                self._move(Phase.RECLAIMING, "reclaim: copying the index")
            running = ix.started and not ix.closed
            try:
                ix.stop()
                t_copy = time.monotonic()
                try:
                    with self.lifecycle.shared():
                        cur = self._copying = self.con.cursor()
                        try:
                            if merge is not None:  # a bulk load committed with fewer: the merge sorts
                                cur.execute(sql_maint.SET_THREADS.format(threads=THREADS))
                            tmp = reclaim_mod.copy(cur, db, merge)
                        finally:
                            self._copying = None
                            cur.close()
                except (reclaim_mod.ReclaimFailed, OSError) as exc:
                    if self._health_stop.is_set():
                        _log.info("reclaim abandoned: the service is stopping (the index is as it was)")
                    else:
                        _log.error("reclaim failed: the index is as it was", reason=str(exc))
                    self.last_reclaim = {**record, "reason": str(exc)}
                    self._follow(ix, read_meta(self.con))
                    return self.last_reclaim
                copy_s = time.monotonic() - t_copy
                if merge is not None:
                    record["merged"]["sortParts"] = merge.sort_parts
                t_swap = time.monotonic()
                with self.lifecycle.exclusive():
                    self.engine.close()
                    self.con.close()
                    reason = None
                    try:
                        reclaim_mod.swap(tmp, db)
                    except reclaim_mod.ReclaimFailed as exc:
                        reason = str(exc)
                    self._reopen_after_reclaim(ix)
                swap_s = time.monotonic() - t_swap
            finally:
                self._end_reclaim(restart and running, prior)
            if reason is not None:
                _log.error("reclaim failed: the index is as it was", reason=reason)
                self.last_reclaim = {**record, "reason": reason}
                return self.last_reclaim
            with self.lifecycle.shared():
                cur = self.con.cursor()
                try:
                    after = reclaim_mod.usage(cur, db)
                finally:
                    cur.close()
            self.last_reclaim = {**record, "done": True, "after": after.as_dict(),
                                 "seconds": round(time.monotonic() - t0, 3), "copySeconds": round(copy_s, 3),
                                 "swapSeconds": round(swap_s, 3)}
        _log.info("reclaimed the index's free blocks", before=before.file_bytes, after=after.file_bytes,
                  used=before.used_bytes, seconds=self.last_reclaim["seconds"], generation=self.indexer.generation,
                  merged=record.get("merged"))
        return self.last_reclaim

    def _follow(self, old: IndexerService, meta: Meta) -> None:
        """A new indexer over the current connection, carrying on from ``old`` (what status shows)."""
        with self.lifecycle.exclusive():  # no search is using the engine that is replaced
            self.indexer = self._new_indexer(meta)
            self.indexer.obs = old.obs
            self.engine.close()
            self.engine = self._new_engine()

    def _reopen_after_reclaim(self, old: IndexerService) -> None:
        """Open the index again after the swap (the new file, or the old one if the swap was refused)."""
        try:
            self.con, meta = open_writer(self.home)
        except (AivaultError, duckdb.Error) as exc:
            # As after a failed write (check_health retries): searched read-only meanwhile.
            _log.error("the index cannot be opened for writing after a reclaim; searching it read-only",
                       error=str(exc))
            self.outage = f"the index could not be opened for writing after a reclaim: {exc}"
            self.con = connect(self.home.db_path, read_only=True)
            self.engine = Engine(self.con, self.home.key(), redaction=self._redaction())
            with self._reclaim_gate:
                self._move(Phase.READ_ONLY, "no writer could open the reclaimed index")
            return
        self.indexer = self._new_indexer(meta)
        self.indexer.obs = old.obs
        self.engine = self._new_engine()

    def _end_reclaim(self, start: bool, prior: Phase) -> None:
        """Start the next indexer (if one ran) and hand it the reconcile requests that waited.

        Back to RUNNING with the indexer started; else to where the reclaim began (READY where that was
        RUNNING: the caller starts it again when it wants, as the one-shot index does).
        """
        ix = self.indexer
        with self._reclaim_gate:
            if self.phase is Phase.RECLAIMING:
                if start and self.policy.enabled and not ix.started and not self._health_stop.is_set():
                    ix.start()
                    self._move(Phase.RUNNING, "reclaim ended")
                else:
                    self._move(Phase.READY if prior is Phase.RUNNING else prior, "reclaim ended")
            deferred, self._deferred = self._deferred, []
        for full, fut in deferred:
            if ix.started and not ix.closed:
                ix.reconcile(full).add_done_callback(functools.partial(_settle, fut))
            else:
                with contextlib.suppress(InvalidStateError):
                    fut.set_exception(IndexerClosed("the indexer stopped while the index was being compacted"))

    def apply_policy(self) -> bool:
        """Follow a changed policy file; returns True when the service changed state."""
        try:
            new = policy_mod.load(self.home)
        except PolicyInvalid as exc:
            _log.warning("policy unreadable; keeping the current one", error=str(exc))
            return False
        with self._transition:
            old, self.policy = self.policy, new
            if new == old or self.phase is Phase.STOPPED:
                return False
            _log.info("policy changed", enabled=new.enabled, history_days=new.history_days)
            retention = new.history_days != old.history_days
            if self.phase in (Phase.OUTAGE, Phase.READ_ONLY):
                # The file cannot be written now: the next reopen builds the indexer with this policy.
                if not new.enabled:
                    self.indexer.stop()
                self._forget_pending |= retention
                return True
            if not new.enabled:
                self.indexer.stop()  # closes the indexer; the index copy stays
                self._move(Phase.DISABLED, "consent withdrawn")
                return True
            if retention or self.phase is not Phase.RUNNING:
                self._rebuild(forget_expired=retention)
            return True

    def _rebuild(self, *, forget_expired: bool) -> None:
        """Close the indexer and build a new one over the same database."""
        with self.lifecycle.exclusive():
            self.indexer.stop()
            self.engine.close()
            if forget_expired:
                self.indexer.writer.forget_expired()
            meta = read_meta(self.con)
            self.indexer = self._new_indexer(meta)
            self.engine = self._new_engine()
        self._run_indexer("consent given" if not forget_expired else "retention changed")

    def clear(self) -> dict[str, Any]:
        """Delete the index and every sidecar; a new database gets a new identity (docs/contract.md §8)."""
        with self._transition:
            with self.lifecycle.exclusive():
                old_identity = self.indexer.identity
                self.indexer.stop()
                self.engine.close()
                self.con.close()
                removed = []
                for path in index_files(self.home):
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
                    removed.append(path.name)
                try:
                    self.con, meta = open_writer(self.home)
                except (AivaultError, duckdb.Error) as exc:
                    # The reopen loop (check_health) tries again; until then searches are not ready.
                    self.outage = f"the new index could not be created: {exc}"
                    self._move(Phase.OUTAGE, "no new index after a clear")
                    raise
                self.indexer = self._new_indexer(meta)
                self.engine = self._new_engine()
            self.outage = None  # a new file: whatever refused the old one is for the next write to tell
            self._forget_pending = False
            self._run_indexer("cleared")
            rebuilt = self.phase is Phase.RUNNING
        _log.info("index cleared", removed=removed, rebuilt=rebuilt)
        return {"cleared": True, "removed": removed, "rebuilding": rebuilt, "previousIdentity": old_identity,
                "identity": meta.identity}

    # --- endpoints ------------------------------------------------------------------------------
    def search(self, params: Any, *, force_route: str | None = None) -> SearchResult:
        """aiVault.searchSessions. ``force_route`` ("lexical", "vector", "hybrid") is for benchmarks
        and tests comparing routes; clients always get the planner's choice."""
        if force_route not in (None, "lexical", "vector", "hybrid"):
            raise ValueError(f"unknown route {force_route!r}")
        req = parse_request(params)
        if not self.policy.enabled:
            return unavailable("disabled")
        ix, phase = self.indexer, self.phase
        if phase is Phase.READ_ONLY:
            with self.lifecycle.shared():
                return self.engine.search(req)
        if phase is Phase.RECLAIMING:
            # The indexer is stopped for a reclaim: answered from the index as committed (the old
            # file, or the new one once swapped in); no pass can run to make it current.
            with self.lifecycle.shared():
                return self.engine.search(req, freshness_truncated=req.freshness == "wait-until-current",
                                          force_route=force_route)
        if not self._ready(phase, ix):
            return unavailable("not-ready")
        ix.end_bulk()
        fresh_cut = False
        if req.freshness == "wait-until-current":
            # Waiting is coordination, not search: it is outside durationMs.
            fresh_cut = not wait_for_reconcile(ix.reconcile(full=False))
        with self.lifecycle.shared():
            return self.engine.search(req, freshness_truncated=fresh_cut, force_route=force_route)

    def read_session(self, req: ReadRequest) -> ReadResult | Unavailable:
        """aiVault.readSession: consent and readiness as for search; never waits for the indexer."""
        if not self.policy.enabled:
            return unavailable("disabled")
        phase = self.phase
        if phase not in (Phase.READ_ONLY, Phase.RECLAIMING) and not self._ready(phase, self.indexer):
            return unavailable("not-ready")
        with self.lifecycle.shared():
            cur = self.con.cursor()
            try:
                return read_messages(cur, req, redactor=self.engine.redaction.redactor())
            finally:
                cur.close()

    def shard(self, ask: ShardRequest) -> dict[str, Any]:
        """aiVault.searchShard: one step of a merged search over this index, with consent and readiness as for
        search. The first step waits for a reconcile when the request asks wait-until-current, at most
        ``ask.wait_s`` (what the coordinator's deadline leaves, FRESHNESS_DEADLINE_S at the most);
        ``freshnessTruncated`` says the wait ran out."""
        if not self.policy.enabled:
            return dict(unavailable("disabled"))
        ix, phase = self.indexer, self.phase
        if phase not in (Phase.READ_ONLY, Phase.RECLAIMING) and not self._ready(phase, ix):
            return dict(unavailable("not-ready"))
        fresh_cut = None
        if ask.step == "stats" and ask.request.freshness == "wait-until-current":
            fresh_cut = phase is Phase.RECLAIMING or (
                phase is not Phase.READ_ONLY and not wait_for_reconcile(ix.reconcile(full=False), ask.wait_s))
        with self.lifecycle.shared():
            out = shard_step(self.engine, ask)
        return out if fresh_cut is None else {**out, "freshnessTruncated": fresh_cut}

    @staticmethod
    def _ready(phase: Phase, ix: IndexerService) -> bool:
        """Whether a running indexer's index can be searched: it committed once or finished a pass."""
        return (phase in (Phase.RUNNING, Phase.OUTAGE) and ix.started and not ix.closed
                and (ix.generation > 0 or ix.obs.full_passes > 0))

    def status(self) -> Status:
        ix, state = self.indexer, self.phase
        obs, prog = ix.obs, ix.progress
        roots = [spec.partition("=")[2] for spec in ix.extra_roots] + [r.path for r in self.roots()]
        degraded = degraded_roots(obs.problems, obs.failed, roots)
        if obs.roots and state is not Phase.READ_ONLY:
            with self.lifecycle.shared():
                report = root_report(self.con, [str(c["root"]) for c in obs.roots])
            degraded += silent_roots(obs.roots, report)
        due = max(0, prog.files_changed - prog.files_done) if prog.running else 0
        if state in (Phase.OUTAGE, Phase.READ_ONLY):
            phase = "degraded"
        elif state in (Phase.DISABLED, Phase.STOPPED):
            phase = "closed"
        elif state is Phase.READY:
            phase = "idle"
        elif degraded or obs.write_error:
            phase = "degraded"
        elif due > 0 or obs.full_passes == 0:
            phase = "indexing"
        else:
            phase = "current"
        return status(enabled=self.policy.enabled, phase=phase, files_indexed=ix.files_indexed(), files_due=due,
                      files_failed=len(obs.failed), degraded_roots=degraded, last_reconcile_at=obs.last_reconcile_at,
                      last_sweep_completed_at=obs.last_sweep_at, generation=ix.generation)

    def roots(self) -> list[Any]:
        from aivault.scanner.discover import default_roots

        return default_roots() if self.default_roots else []

    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]:
        with self.lifecycle.shared():
            return root_report(self.con, roots)

    def stats(self) -> dict[str, Any]:
        """Progress and size figures for humans (`aivault status`, progress bars); not the contract."""
        ix = self.indexer
        p = ix.progress
        m = ix.writer.meta
        with self.lifecycle.shared():
            counts = index_counts(self.con)
        return {
            "running": p.running,
            "full": p.full,
            "filesSeen": p.files_seen,
            "filesChanged": p.files_changed,
            "filesDone": p.files_done,
            "bytesTotal": p.bytes_total,
            "bytesDone": p.bytes_done,
            "messagesRead": p.messages_read,
            "messagesCommitted": p.messages_committed,
            "chunks": m.n_chunks,
            **counts,
            "lastReclaim": self.last_reclaim,
            "reclaimLeftoversRemoved": reclaim_mod.leftovers_removed(),
            "segments": [[s.name, s.state, s.rows] for s in ix.writer.segments.segments],
            "merging": ix.writer.segments.merging,
            "generation": m.generation,
            "identity": m.identity,
            "writeError": ix.obs.write_error or self.outage,
            "scannerPeakRssKb": ix.scanner_peak_rss_kb,
            "watch": [slot.watch for slot in ix.slots if slot.watch],
            "lastBatchMs": round(ix.last_batch_ms, 2),
            "historyDays": self.policy.history_days,
            "postingsSidecars": self.engine.postings.state() if self.engine.postings is not None else None,
            **(ix.vec.stats() if ix.vec is not None else {"semanticState": "off"}),
        }


def wait_for_reconcile(fut: Future[dict[str, Any]], deadline_s: float = FRESHNESS_DEADLINE_S) -> bool:
    """docs/contract.md §5: True if the reconcile finished in time, False if the deadline passed.

    The reconcile is not cancelled when the deadline passes. An error it raises before the
    deadline propagates as ReconcileFailed.
    """
    t0 = time.monotonic()
    try:
        fut.result(timeout=deadline_s)
        return True
    except TimeoutError:  # concurrent.futures.TimeoutError is the builtin since Python 3.11
        return False
    except Exception as exc:
        if time.monotonic() - t0 <= deadline_s:
            raise ReconcileFailed(f"the reconcile before this search failed: {exc}") from exc
        return False


def _settle(fut: Future[dict[str, Any]], done: Future[dict[str, Any]]) -> None:
    """Give ``fut`` the outcome of ``done``."""
    with contextlib.suppress(InvalidStateError):
        exc = done.exception()
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(done.result())
