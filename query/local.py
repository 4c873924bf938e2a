"""The production service of a daemon: the indexer plus the engine over its database.

It owns the index's life cycle (SPEC §8):
* consent off -> the indexer is closed, the index copy is kept, searches answer
  ``unavailable/disabled``; consent on again -> a new indexer resumes from the committed state;
* a retention change -> the same close-and-build flow (files whose sessions expired are read
  again, the sweep applies the new window);
* ``clear`` -> close everything, delete the database and every sidecar, create a new one with a
  new identity, and build again only if consent is still given.
Searches hold the shared side of a lock whose exclusive side these transitions take.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from aivault import log
from aivault import policy as policy_mod
from aivault.embed import Embedder
from aivault.home import Home, models_dir
from indexer.segments import SegmentLock
from indexer.service import IndexerService
from indexer.store import Meta, open_writer, read_meta
from query.engine import Engine
from query.request import parse_request
from query.service import degraded_roots, wait_for_reconcile

_log = log.get("service")


def embed_config(home: Home) -> dict[str, Any] | None:
    """The ``embed`` section of config.json; ``{"enabled": false}`` turns semantic search off."""
    cfg = home.config().get("embed")
    return cfg if isinstance(cfg, dict) else None


def embedder_factory(home: Home) -> Callable[[], Embedder] | None:
    cfg = embed_config(home)
    if cfg is not None and cfg.get("enabled") is False:
        return None

    def make() -> Embedder:
        from aivault.embed import make_embedder

        embedder: Embedder = make_embedder(cfg, models_dir())
        return embedder

    return make


def index_files(home: Home) -> list[Path]:
    """The database and every sidecar DuckDB or aivault writes next to it (WAL, spill, vectors)."""
    from indexer.vector_service import SIDECAR_NAME

    base = home.db_path
    sidecars = {SIDECAR_NAME, Path(SIDECAR_NAME).with_suffix(".json").name}
    return sorted(p for p in home.path.iterdir()
                  if p.name == base.name or p.name.startswith(base.name + ".") or p.name in sidecars)


class LocalService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, meta: Meta, *, extra_roots: list[str],
                 default_roots: bool = True, schedule: bool = True, semantic: bool = True,
                 bulk: bool = False) -> None:
        self.home = home
        self.semantic = semantic
        self._bulk = bulk  # the first indexer only (see IndexerService)
        self.con = con
        self.extra_roots = extra_roots
        self.default_roots = default_roots
        self.schedule = schedule
        self.lifecycle = SegmentLock()
        self._transition = threading.Lock()
        self.policy = policy_mod.load(home)
        self.indexer = self._new_indexer(meta)
        self._bulk = False
        self.engine = self._new_engine()

    def _new_indexer(self, meta: Meta) -> IndexerService:
        return IndexerService(self.home, self.con, meta, extra_roots=self.extra_roots,
                              default_roots=self.default_roots, schedule=self.schedule,
                              history_days=self.policy.history_days,
                              make_embedder=embedder_factory(self.home) if self.semantic else None,
                              bulk=self._bulk)

    def _new_engine(self) -> Engine:
        ix = self.indexer

        def committed() -> int | None:
            # Only a running writer can move the index under a page being assembled.
            return ix.generation if ix.started and not ix.closed else None

        return Engine(self.con, self.home.key(), lock=ix.lock, committed_generation=committed, vectors=ix.vec)

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        if self.policy.enabled and not self.indexer.started:
            self.indexer.start()

    def stop(self) -> None:
        with self._transition, self.lifecycle.exclusive():
            self.indexer.stop()
            self.engine.close()
            self.con.close()

    def apply_policy(self) -> bool:
        """Follow a changed policy file; returns True when the service changed state."""
        try:
            new = policy_mod.load(self.home)
        except policy_mod.PolicyError as exc:
            _log.warning("policy unreadable; keeping the current one", error=str(exc))
            return False
        with self._transition:
            old, self.policy = self.policy, new
            if new == old:
                return False
            _log.info("policy changed", enabled=new.enabled, history_days=new.history_days)
            if not new.enabled:
                self.indexer.stop()  # closes the indexer; the index copy stays
                return True
            if new.history_days != old.history_days or not self.indexer.started or self.indexer.closed:
                self._rebuild(forget_expired=new.history_days != old.history_days)
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
        if self.policy.enabled:
            self.indexer.start()

    def clear(self) -> dict[str, Any]:
        """Delete the index and every sidecar; a new database gets a new identity (SPEC §8)."""
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
                self.con, meta = open_writer(self.home)
                self.indexer = self._new_indexer(meta)
                self.engine = self._new_engine()
            rebuilt = self.policy.enabled
            if rebuilt:
                self.indexer.start()
        _log.info("index cleared", removed=removed, rebuilt=rebuilt)
        return {"cleared": True, "removed": removed, "rebuilding": rebuilt, "previousIdentity": old_identity,
                "identity": meta.identity}

    # --- endpoints ------------------------------------------------------------------------------
    def search(self, params: Any, *, force_route: str | None = None) -> dict[str, Any]:
        """aiVault.searchSessions. ``force_route`` ("lexical", "vector", "hybrid") is for benchmarks
        and tests comparing routes; clients always get the planner's choice."""
        if force_route not in (None, "lexical", "vector", "hybrid"):
            raise ValueError(f"unknown route {force_route!r}")
        req = parse_request(params)
        if not self.policy.enabled:
            return {"kind": "unavailable", "reason": "disabled"}
        ix = self.indexer
        if not ix.started or ix.closed or (ix.generation == 0 and ix.obs.full_passes == 0):
            return {"kind": "unavailable", "reason": "not-ready"}
        ix.end_bulk()
        fresh_cut = False
        if req.freshness == "wait-until-current":
            # Waiting is coordination, not search: it is outside durationMs.
            fresh_cut = not wait_for_reconcile(ix.reconcile(full=False))
        with self.lifecycle.shared():
            return self.engine.search(req, freshness_truncated=fresh_cut, force_route=force_route)

    def status(self) -> dict[str, Any]:
        ix = self.indexer
        obs, prog = ix.obs, ix.progress
        roots = [spec.partition("=")[2] for spec in ix.extra_roots] + [r.path for r in self.roots()]
        degraded = degraded_roots(obs.problems, obs.failed, roots)
        due = max(0, prog.files_changed - prog.files_done) if prog.running else 0
        if ix.closed:
            phase = "closed"
        elif not ix.started:
            phase = "idle"
        elif degraded or obs.write_error:
            phase = "degraded"
        elif due > 0 or obs.full_passes == 0:
            phase = "indexing"
        else:
            phase = "current"
        return {
            "enabled": self.policy.enabled,
            "phase": phase,
            "filesIndexed": ix.files_indexed(),
            "filesDue": due,
            "filesFailed": len(obs.failed),
            "degradedRoots": degraded,
            "lastReconcileAt": obs.last_reconcile_at,
            "lastSweepCompletedAt": obs.last_sweep_at,
            "generation": ix.generation,
        }

    def roots(self) -> list[Any]:
        from scanner.discover import default_roots

        return default_roots() if self.default_roots else []

    def stats(self) -> dict[str, Any]:
        """Progress and size figures for humans (`aivault status`, progress bars); not the contract."""
        ix = self.indexer
        p = ix.progress
        m = ix.writer.meta
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
            "sessions": m.next_sess - 1,
            "segments": [[s.name, s.state, s.rows] for s in ix.writer.segments.segments],
            "merging": ix.writer.segments.merging,
            "generation": m.generation,
            "identity": m.identity,
            "writeError": ix.obs.write_error,
            "scannerPeakRssKb": ix.scanner_peak_rss_kb,
            "lastBatchMs": round(ix.last_batch_ms, 2),
            "historyDays": self.policy.history_days,
            **(ix.vec.stats() if ix.vec is not None else {"semanticState": "off"}),
        }
