"""The session search service and its process-local registry (SPEC §4, §5, §7).

``set_session_search_service(service | None)`` wires the endpoints to a service; with none
registered, search answers ``unavailable/no-service`` and status the sentinel. Registering
grants no consent: a service whose policy is disabled answers ``unavailable/disabled``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import duckdb

from aivault import policy as policy_mod
from aivault.errors import ReconcileFailed
from aivault.home import Home
from aivault.protocol import FRESHNESS_DEADLINE_S
from indexer import schema as q
from indexer.store import UNREADABLE, damaged
from query.engine import Engine
from query.request import parse_request

STATUS_SENTINEL: dict[str, Any] = {
    "enabled": False,
    "phase": "idle",
    "filesIndexed": 0,
    "filesDue": 0,
    "filesFailed": 0,
    "degradedRoots": [],
    "lastReconcileAt": None,
    "lastSweepCompletedAt": None,
    "generation": 0,
}


class SessionSearchService(Protocol):
    def search(self, params: Any) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...


_lock = threading.Lock()
_service: SessionSearchService | None = None


def set_session_search_service(service: SessionSearchService | None) -> None:
    global _service
    with _lock:
        _service = service


def get_session_search_service() -> SessionSearchService | None:
    with _lock:
        return _service


def search_sessions(params: Any) -> dict[str, Any]:
    """The aiVault.searchSessions endpoint."""
    svc = get_session_search_service()
    if svc is None:
        parse_request(params)  # invalid payloads stay errors even with no service
        return {"kind": "unavailable", "reason": "no-service"}
    with reading(svc):
        return svc.search(params)


def search_status() -> dict[str, Any]:
    """The aiVault.searchStatus endpoint."""
    svc = get_session_search_service()
    if svc is None:
        return dict(STATUS_SENTINEL)
    with reading(svc):
        return svc.status()


@contextmanager
def reading(svc: object) -> Iterator[None]:
    """Turn a read failure of the database into IndexDamaged naming the file and the rebuild command."""
    try:
        yield
    except UNREADABLE as exc:
        home = getattr(svc, "home", None)
        raise damaged(home.db_path if isinstance(home, Home) else Path("index.duckdb"), exc) from exc


def degraded_roots(problems: list[dict[str, str]], failed: list[dict[str, str]],
                   roots: list[str]) -> list[dict[str, str]]:
    """Root problems as reported, plus unreadable files grouped under the root holding them."""
    out = [{"root": p["root"], "reason": p["reason"]} for p in problems]
    by_root: dict[str, list[dict[str, str]]] = {}
    for f in failed:
        root = next((r for r in sorted(roots, key=len, reverse=True) if f["path"].startswith(r.rstrip("/") + "/")),
                    f["path"])
        by_root.setdefault(root, []).append(f)
    for root, files in sorted(by_root.items()):
        first = files[0]
        more = f" (and {len(files) - 1} more)" if len(files) > 1 else ""
        out.append({"root": root, "reason": f"{len(files)} file(s) could not be read: {first['path']}: "
                                            f"{first['reason']}{more}"})
    return out


def index_counts(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Sessions in the index and everything left out of it, per agent and reason (for humans:
    `aivault status`); the meta counters only ever grow, so they are not counts."""
    cur = con.cursor()
    try:
        row = cur.execute(q.COUNT_SESSIONS).fetchone()
        skipped: dict[str, dict[str, int]] = {}
        for agent, malformed, oversized, maps in cur.execute(q.SELECT_SKIPS).fetchall():
            reasons: dict[str, int] = {}
            if malformed:
                reasons["malformed-line"] = int(malformed)
            if oversized:
                reasons["line-too-long"] = int(oversized)
            for text in maps or []:
                for k, v in json.loads(text).items():
                    reasons[k] = reasons.get(k, 0) + int(v)
            if reasons:
                skipped[str(agent)] = reasons
    finally:
        cur.close()
    return {"sessions": int(row[0]) if row else 0, "skipped": skipped}


class MissingIndexService:
    """The data directory holds no index yet (never indexed, or cleared while disabled).

    Answers by the contract rather than failing: search is ``unavailable`` -- ``disabled``
    without consent, else ``not-ready`` -- and status reports zero counts and generation 0.
    """

    def __init__(self, home: Home) -> None:
        self.home = home

    def search(self, params: Any) -> dict[str, Any]:
        parse_request(params)  # invalid payloads stay errors
        enabled = policy_mod.load(self.home).enabled
        return {"kind": "unavailable", "reason": "not-ready" if enabled else "disabled"}

    def status(self) -> dict[str, Any]:
        return {**STATUS_SENTINEL, "enabled": policy_mod.load(self.home).enabled}


class DirectService:
    """A read-only service over the database file, for one-shot CLI use without a daemon."""

    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection) -> None:
        self.home = home
        self.con = con
        self.engine = self._engine()

    def _engine(self) -> Engine:
        from query.local import embed_config, embedder_factory

        make = embedder_factory(self.home)
        vectors = None
        if make is not None:
            from aivault.embed import EmbedError, configured_fingerprint
            from indexer.vector_service import ReadOnlyVectors

            try:
                vectors = ReadOnlyVectors(self.home, self.con, make, configured_fingerprint(embed_config(self.home)))
            except EmbedError:
                vectors = None  # e.g. an unknown model name: lexical only, the daemon reports why
        return Engine(self.con, self.home.key(), vectors=vectors)

    def search(self, params: Any) -> dict[str, Any]:
        req = parse_request(params)
        if not policy_mod.load(self.home).enabled:
            return {"kind": "unavailable", "reason": "disabled"}
        if req.freshness == "wait-until-current":
            return self._search_fresh(params)
        return self.engine.search(req)

    def _search_fresh(self, params: Any) -> dict[str, Any]:
        """wait-until-current without a daemon: become the indexer for this one request.

        The read-only handle is closed, the database opened read-write (an error if another
        process holds it), a bounded recent reconcile runs with the usual 5 s deadline, the search
        answers, and the reconcile is allowed to finish before the handle goes back to read-only.
        """
        from broker.daemon import Daemon
        from indexer.store import open_reader

        self.engine.close()
        self.con.close()
        try:
            daemon = Daemon(self.home, schedule=False, semantic=False)  # a one-request writer: no embedding
            try:
                daemon.service.start()
                result = daemon.service.search(params)
                daemon.service.indexer.wait_idle()
            finally:
                daemon.close()
        finally:
            self.con = open_reader(self.home)
            self.engine = self._engine()
        return result

    def status(self) -> dict[str, Any]:
        enabled = policy_mod.load(self.home).enabled
        cur = self.con.cursor()
        try:
            obs = dict(cur.execute(q.SELECT_OBSERVATIONS).fetchall())
            row = cur.execute(q.COUNT_PRESENT_FILES).fetchone()
            gen = cur.execute("SELECT generation FROM meta").fetchone()
        finally:
            cur.close()
        from scanner.discover import default_roots

        failed = json.loads(obs.get("failed") or "[]")
        problems = degraded_roots(json.loads(obs.get("problems") or "[]"), failed,
                                  [r.path for r in default_roots()])
        return {
            "enabled": enabled,
            "phase": "idle",
            "filesIndexed": int(row[0]) if row else 0,
            "filesDue": 0,
            "filesFailed": len(failed),
            "degradedRoots": problems,
            "lastReconcileAt": int(obs["lastReconcileAt"]) if obs.get("lastReconcileAt") else None,
            "lastSweepCompletedAt": int(obs["lastSweepCompletedAt"]) if obs.get("lastSweepCompletedAt") else None,
            "generation": int(gen[0]) if gen else 0,
        }

    def close(self) -> None:
        self.engine.close()


def wait_for_reconcile(fut: Future[dict[str, Any]], deadline_s: float = FRESHNESS_DEADLINE_S) -> bool:
    """SPEC §5: True if the reconcile finished in time, False if the deadline passed.

    The reconcile is not cancelled when the deadline passes. An error it raises before the
    deadline propagates as ReconcileFailed.
    """
    t0 = time.monotonic()
    try:
        fut.result(timeout=deadline_s)
        return True
    except FutureTimeout:
        return False
    except Exception as exc:
        if time.monotonic() - t0 <= deadline_s:
            raise ReconcileFailed(f"the reconcile before this search failed: {exc}") from exc
        return False
