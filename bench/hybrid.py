"""Hybrid search latency at scale (part of ``bench.run --hybrid``).

Embedding a 1M-message corpus with the local model takes hours on 2 cores (~70 chunks/s), so
this measures latency, not quality (bench/quality measures quality with every vector real):
``SAMPLE`` eligible chunk texts are embedded for real, every other eligible chunk reuses one of
those vectors (picked by its text hash), and the vector state is written as if the background
worker had done it — except for the last ``LEFT_FOR_WORKER`` chunks, which the daemon's worker
embeds for real while latency is measured, so the figures include its load and its rate.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from aivault.home import Home, models_dir, write_private
from aivault.indexer import sql_write as q
from aivault.indexer.semantic import to_blob

SAMPLE = 2000
LEFT_FOR_WORKER = 6000


def inject_vectors(h: Home) -> dict[str, Any]:
    """Fill the vectors table for all but the last eligible chunks (see the module doc)."""
    from aivault.embed import make_embedder

    embedder = make_embedder(None, models_dir())
    con = duckdb.connect(str(h.db_path))
    try:
        ids = [r[0] for r in con.execute(f"SELECT chunk FROM chunks WHERE {q.VECTOR_ELIGIBLE} ORDER BY chunk"
                                         ).fetchall()]
        watermark = ids[-LEFT_FOR_WORKER - 1] if len(ids) > LEFT_FOR_WORKER else 0
        texts = [r[0] for r in con.execute(
            f"SELECT text FROM chunks WHERE {q.VECTOR_ELIGIBLE} USING SAMPLE {SAMPLE} ROWS").fetchall()]
        t0 = time.perf_counter()
        vecs = embedder.embed(texts)
        embed_s = time.perf_counter() - t0
        con.register("b_sample", pa.table({"id": pa.array(np.arange(len(texts)), pa.int64()),
                                           "vec": pa.array(to_blob(vecs), pa.binary())}))
        con.execute("BEGIN")
        con.execute("DELETE FROM vectors")
        con.execute(f"""INSERT INTO vectors SELECT c.hash, s.vec FROM
            (SELECT DISTINCT hash FROM chunks WHERE {q.VECTOR_ELIGIBLE} AND chunk <= ?) c
            JOIN b_sample s ON s.id = c.hash % {len(texts)}""", [watermark])
        con.execute("DELETE FROM vector_state")
        con.execute("INSERT INTO vector_state VALUES (?, ?, 1)", [embedder.fingerprint, watermark])
        con.execute("COMMIT")
        n = con.execute("SELECT count(*) FROM vectors").fetchone()[0]  # type: ignore[index]
        eligible = len(ids)
    finally:
        con.close()
    write_private(h.config_path, b'{"embed": {"enabled": true}}')
    return {"sample_texts": len(texts), "sample_embed_per_s": len(texts) / embed_s, "vectors": int(n),
            "eligible_chunks": eligible, "left_for_worker": eligible - sum(1 for i in ids if i <= watermark)}


def measure(h: Home, daemon_args: list[str], env: dict[str, str], queries: dict[str, list[str]],
            time_queries: Any) -> dict[str, Any]:
    """Start the daemon with vectors, wait for its index, time searches while the worker embeds."""
    from aivault.thin.client import RpcClient

    res: dict[str, Any] = {"injected": inject_vectors(h)}
    proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "serve", *daemon_args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rpc = RpcClient.for_home(h, timeout_s=300)
        t0 = time.monotonic()
        while rpc.ping() is None:
            time.sleep(0.1)
        while True:
            st = rpc.call("aiVault.indexStats", {})
            if st.get("vectorIndex") and st["vectorIndex"]["count"] > 0:
                break
            if time.monotonic() - t0 > 900:
                raise SystemExit(f"the vector index did not become ready: {st}")
            time.sleep(0.5)
        res["vector_index_ready_s"] = time.monotonic() - t0
        res["vector_index"] = st["vectorIndex"]
        from bench.common import quiet

        quiet(rpc)
        stats_before = rpc.call("aiVault.indexStats", {})
        t1 = time.monotonic()
        if stats_before["semanticEmbedded"] >= stats_before["semanticEligible"]:
            print("  (the worker finished before the searches: its rates below are not measured)", flush=True)
        res["daemon"] = time_queries(lambda qq: rpc.call("aiVault.searchSessions", {"query": qq, "limit": 20}),
                                     queries)
        elapsed = time.monotonic() - t1
        stats_after = rpc.call("aiVault.indexStats", {})
        res["worker_embedded_during"] = stats_after["semanticEmbedded"] - stats_before["semanticEmbedded"]
        res["worker_rate_per_s"] = (stats_after["semanticTextsEmbedded"] - stats_before["semanticTextsEmbedded"]) \
            / elapsed
        res["measure_s"] = elapsed
        route_sample = rpc.call("aiVault.searchSessions", {"query": queries["5-term"][0], "debug": True})
        res["route_of_5_term"] = route_sample.get("debug", {}).get("route")
        res["worker_idle_rate_per_s"] = idle_rate(rpc)
        rpc.close()
    finally:
        proc.terminate()
        proc.wait(120)
    res["vector_part"] = vector_part(h, queries)
    return res


def idle_rate(rpc: Any, settle_s: float = 3.0, window_s: float = 10.0) -> float | None:
    """Background embedding with no search running (the worker may then use a second thread)."""
    time.sleep(settle_s)  # past QUIET_AFTER_SEARCH_S and the call in flight
    before = rpc.call("aiVault.indexStats", {})
    t0 = time.monotonic()
    time.sleep(window_s)
    after = rpc.call("aiVault.indexStats", {})
    if after["semanticEmbedded"] >= after["semanticEligible"] or after.get("merging"):
        return None  # ran out of work, or a merge shared the window: no honest rate
    texts = after["semanticTextsEmbedded"] - before["semanticTextsEmbedded"]
    return float(texts / (time.monotonic() - t0))


def vector_part(h: Home, queries: dict[str, list[str]]) -> dict[str, float]:
    """Query embedding + FAISS search, in-process over the saved sidecar (the vector part alone)."""
    from aivault.config import embedder_factory
    from aivault.embed import configured_fingerprint
    from aivault.indexer.opening import open_reader
    from aivault.indexer.vector_service import ReadOnlyVectors

    con = open_reader(h)
    try:
        make = embedder_factory(h)
        assert make is not None
        vec = ReadOnlyVectors(h, con, make, configured_fingerprint(None))
        if not vec.ready():
            return {"p50": float("nan"), "p95": float("nan")}
        vec.search("warm up the model")
        lat = []
        for qs in queries.values():
            for qq in qs:
                t = time.perf_counter()
                vec.search(qq)
                lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        return {"p50": statistics.median(lat), "p95": lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]}
    finally:
        con.close()


def log_path(base: Path, label: str) -> Path:
    return base / f"hybrid-{label}.log"
