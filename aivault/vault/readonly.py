"""Answering from the index file without a daemon: read-only, for one-shot CLI use.

``DirectService`` opens the database read-only in this process; ``MissingIndexService`` answers by
the contract while there is no database yet. A ``wait-until-current`` search becomes the writer
for that one request (``WriterSession``), exactly as a daemon would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import duckdb

from aivault import config
from aivault import policy as policy_mod
from aivault.home import Home
from aivault.indexer.duck import one
from aivault.protocol import ReadResult, SearchResult, Status, Unavailable, status, unavailable
from aivault.query import sql as q
from aivault.query.engine import Engine
from aivault.query.hybrid import VECTOR_CANDIDATES, VectorSource
from aivault.query.reports import degraded_roots, root_report, silent_roots
from aivault.query.request import parse_request
from aivault.query.transcript import ReadRequest, read_messages
from aivault.vault.endpoints import ShardRequest, shard_step

if TYPE_CHECKING:
    import numpy as np

    from aivault.embed import Embedder


class MissingIndexService:
    """The data directory holds no index yet (never indexed, or cleared while disabled).

    Answers by the contract rather than failing: search is ``unavailable`` -- ``disabled``
    without consent, else ``not-ready`` -- and status reports zero counts and generation 0.
    """

    def __init__(self, home: Home) -> None:
        self.home = home

    def search(self, params: Any) -> SearchResult:
        parse_request(params)  # invalid payloads stay errors
        enabled = policy_mod.load(self.home).enabled
        return unavailable("not-ready" if enabled else "disabled")

    def status(self) -> Status:
        return status(enabled=policy_mod.load(self.home).enabled, phase="idle")

    def read_session(self, req: ReadRequest) -> ReadResult | Unavailable:
        enabled = policy_mod.load(self.home).enabled
        return unavailable("not-ready" if enabled else "disabled")

    def shard(self, ask: ShardRequest) -> dict[str, Any]:
        enabled = policy_mod.load(self.home).enabled
        return dict(unavailable("not-ready" if enabled else "disabled"))

    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]:
        return {r: {"units": 0, "sessions": 0, "skipped": {}} for r in roots}


class _DeferredVectors:
    """The daemon's vectors for this read-only process, loaded when a search first asks whether they
    are ready: a query the planner answers lexically (a quoted phrase, an identifier) never loads
    NumPy's vector code, pyarrow, FAISS or the model. An embedding configuration that cannot be
    used (an unknown model name) leaves them not ready, and searches answer lexically."""

    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, make: Callable[[], Embedder]) -> None:
        self._home = home
        self._con = con
        self._make = make
        self._real: VectorSource | None = None
        self._failed = False

    def _load(self) -> VectorSource | None:
        if self._real is None and not self._failed:
            from aivault.embed import EmbedError, configured_fingerprint
            from aivault.indexer.vector_service import ReadOnlyVectors

            try:
                fingerprint = configured_fingerprint(config.embed_config(self._home))
            except EmbedError:
                self._failed = True  # e.g. an unknown model name: lexical only, the daemon reports why
                return None
            self._real = ReadOnlyVectors(self._home, self._con, self._make, fingerprint)
        return self._real

    def ready(self) -> bool:
        real = self._load()
        return real is not None and real.ready()

    def search(self, text: str, k: int = VECTOR_CANDIDATES) -> tuple[np.ndarray, np.ndarray] | None:
        real = self._load()
        return real.search(text, k) if real is not None else None

    def model(self) -> str | None:
        real = self._load()
        return real.model() if real is not None else None


class DirectService:
    """A read-only service over the database file, for one-shot CLI use without a daemon."""

    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection) -> None:
        self.home = home
        self.con = con
        self.engine = self._engine()

    def _engine(self) -> Engine:
        make = config.embedder_factory(self.home)
        vectors = _DeferredVectors(self.home, self.con, make) if make is not None else None
        return Engine(self.con, self.home.key(), vectors=vectors, redaction=config.redact_settings(self.home))

    def search(self, params: Any) -> SearchResult:
        req = parse_request(params)
        if not policy_mod.load(self.home).enabled:
            return unavailable("disabled")
        if req.freshness == "wait-until-current":
            return self._search_fresh(params)
        return self.engine.search(req)

    def _search_fresh(self, params: Any) -> SearchResult:
        """wait-until-current without a daemon: become the indexer for this one request.

        The read-only handle is closed, the database opened read-write (an error if another
        process holds it), a bounded recent reconcile runs with the usual 5 s deadline, the search
        answers, and the reconcile is allowed to finish before the handle goes back to read-only.
        """
        from aivault.indexer.opening import open_reader
        from aivault.vault.session import WriterSession

        self.engine.close()
        self.con.close()
        try:
            session = WriterSession(self.home, schedule=False, semantic=False)  # a one-request writer: no embedding
            try:
                session.start()
                result = session.service.search(params)
                session.service.indexer.wait_idle()
            finally:
                session.close()
        finally:
            self.con = open_reader(self.home)
            self.engine = self._engine()
        return result

    def status(self) -> Status:
        enabled = policy_mod.load(self.home).enabled
        cur = self.con.cursor()
        try:
            obs = dict(cur.execute(q.SELECT_OBSERVATIONS).fetchall())
            row = one(cur, q.COUNT_PRESENT_FILES)
            gen = one(cur, q.SELECT_GENERATION)
        finally:
            cur.close()
        from aivault.scanner.discover import default_roots

        failed = json.loads(obs.get("failed") or "[]")
        problems = degraded_roots(json.loads(obs.get("problems") or "[]"), failed,
                                  [r.path for r in default_roots()])
        census = json.loads(obs.get("roots") or "[]")
        if census:
            problems += silent_roots(census, root_report(self.con, [str(c["root"]) for c in census]))
        return status(enabled=enabled, phase="idle", files_indexed=int(row[0]) if row else 0,
                      files_failed=len(failed), degraded_roots=problems,
                      last_reconcile_at=int(obs["lastReconcileAt"]) if obs.get("lastReconcileAt") else None,
                      last_sweep_completed_at=int(obs["lastSweepCompletedAt"])
                      if obs.get("lastSweepCompletedAt") else None,
                      generation=int(gen[0]) if gen else 0)

    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]:
        return root_report(self.con, roots)

    def shard(self, ask: ShardRequest) -> dict[str, Any]:
        """aiVault.searchShard from the read-only handle (consent as for search). No indexer runs here to
        reconcile: a wait-until-current request's first step says ``freshnessTruncated``."""
        if not policy_mod.load(self.home).enabled:
            return dict(unavailable("disabled"))
        out = shard_step(self.engine, ask)
        return {**out, "freshnessTruncated": True} if ask.step == "stats" and \
            ask.request.freshness == "wait-until-current" else out

    def read_session(self, req: ReadRequest) -> ReadResult | Unavailable:
        """aiVault.readSession from the read-only handle (consent is checked as for search)."""
        if not policy_mod.load(self.home).enabled:
            return unavailable("disabled")
        cur = self.con.cursor()
        try:
            return read_messages(cur, req, redactor=self.engine.redaction.redactor())
        finally:
            cur.close()

    def close(self) -> None:
        self.engine.close()
