"""The production service of a daemon: the indexer plus the engine over its database."""

from __future__ import annotations

from typing import Any

import duckdb

from aivault import policy as policy_mod
from aivault.home import Home
from indexer.service import IndexerService
from indexer.store import Meta
from query.engine import Engine
from query.request import parse_request
from query.service import degraded_roots, wait_for_reconcile


class LocalService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, meta: Meta, *, extra_roots: list[str],
                 default_roots: bool = True, schedule: bool = True) -> None:
        self.home = home
        self.con = con
        self.indexer = IndexerService(home, con, meta, extra_roots=extra_roots, default_roots=default_roots,
                                      schedule=schedule)
        self.engine = Engine(con, home.key(), lock=self.indexer.lock,
                             committed_generation=lambda: self.indexer.generation)

    def start(self) -> None:
        if policy_mod.load(self.home).enabled and not self.indexer.started:
            self.indexer.start()

    def stop(self) -> None:
        self.indexer.stop()
        self.engine.close()

    # --- endpoints ------------------------------------------------------------------------------
    def search(self, params: Any) -> dict[str, Any]:
        req = parse_request(params)
        if not policy_mod.load(self.home).enabled:
            return {"kind": "unavailable", "reason": "disabled"}
        if not self.indexer.started or (self.indexer.generation == 0 and self.indexer.obs.full_passes == 0):
            return {"kind": "unavailable", "reason": "not-ready"}
        fresh_cut = False
        if req.freshness == "wait-until-current":
            fresh_cut = not wait_for_reconcile(self.indexer.reconcile(full=False))
        return self.engine.search(req, freshness_truncated=fresh_cut)

    def status(self) -> dict[str, Any]:
        pol = policy_mod.load(self.home)
        ix = self.indexer
        obs, prog = ix.obs, ix.progress
        roots = [spec.partition("=")[2] for spec in ix.extra_roots] + [r.path for r in self.roots()]
        degraded = degraded_roots(obs.problems, obs.failed, roots)
        due = max(0, prog.files_changed - prog.files_done) if prog.running else 0
        if not ix.started:
            phase = "idle"
        elif ix.closed:
            phase = "closed"
        elif degraded or obs.write_error:
            phase = "degraded"
        elif due > 0 or obs.full_passes == 0:
            phase = "indexing"
        else:
            phase = "current"
        return {
            "enabled": pol.enabled,
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

        return default_roots() if self.indexer.default_roots else []

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
            "generation": m.generation,
            "identity": m.identity,
            "writeError": ix.obs.write_error,
            "scannerPeakRssKb": ix.scanner_peak_rss_kb,
        }
