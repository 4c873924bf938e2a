"""What the speed benchmarks share: a corpus per size and seed, a data directory's CLI environment, the
corpus's roots, query classes drawn from an index, timing them, and a daemon started and left to settle.

bench.run (the lexical benchmark) and the benchmarks beside it (background, cli_latency, concurrency,
freshness, hybrid, engine_paths, profile_search) import these from here, so that none imports another.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from aivault.home import Home
from aivault.text import query_terms, term_hash
from bench.gen_corpus import generate

REPO = Path(__file__).resolve().parent.parent
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["AIVAULT_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["AIVAULT_LOG_LEVEL"] = "warning"
    return env


def root_args(corpus: Path) -> list[str]:
    return ["--no-default-roots", "--root", f"claude={corpus}/claude/projects", "--root",
            f"codex={corpus}/codex/sessions", "--root", f"codex={corpus}/codex/archived_sessions"]


def corpus_for(base: Path, n: int, seed: int) -> tuple[Path, dict[str, Any]]:
    out = base / f"corpus-{n}-{seed}"
    manifest = out / "manifest.json"
    if manifest.exists():
        return out, json.loads(manifest.read_text())
    if out.exists():
        shutil.rmtree(out)
    t0 = time.monotonic()
    m = generate(out, n, seed=seed)
    print(f"  generated {n:,} messages in {time.monotonic() - t0:.1f} s ({m['bytes'] / 1e6:.0f} MB)", flush=True)
    return out, m


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def pick_queries(db: Path, seed: int) -> dict[str, list[str]]:
    """Query sets drawn from the indexed text itself, bucketed by document frequency."""
    rnd = random.Random(seed)
    con = duckdb.connect(str(db), read_only=True)
    try:
        n_chunks = con.execute("SELECT max(chunk) FROM chunks").fetchone()[0] or 1  # type: ignore[index]
        ids = sorted(rnd.sample(range(1, n_chunks + 1), min(400, n_chunks)))
        id_list = ",".join(map(str, ids))
        texts = [r[0] for r in con.execute(f"SELECT text FROM chunks WHERE chunk IN ({id_list})").fetchall()]
        segs = [r[0] for r in con.execute("SELECT name FROM segments").fetchall()]
        words: dict[str, None] = {}
        per_text: list[list[str]] = []
        for t in texts:
            ws = [w for w in query_terms(t) if w.isalpha() and 3 <= len(w) <= 20]
            per_text.append(ws)
            for w in ws:
                words.setdefault(w, None)
        cand = list(words)[:3000]
        hashes = {term_hash(w): w for w in cand}
        lst = ",".join(str(h) for h in hashes)
        union = " UNION ALL ".join(f"SELECT term FROM {s} WHERE term IN ({lst})" for s in segs)
        rows = con.execute(f"SELECT term, count(*) FROM ({union}) GROUP BY term").fetchall()
        df = {hashes[int(t)]: int(c) for t, c in rows}
    finally:
        con.close()
    ranked = sorted(df, key=lambda w: df[w])
    total = max(n_chunks, 1)
    rare = [w for w in ranked if df[w] <= max(5, total // 20000)]
    mid = [w for w in ranked if total // 2000 <= df[w] <= total // 50]
    common = sorted(df, key=lambda w: -df[w])[:10]
    multi = [ws for ws in per_text if len(set(ws)) >= 5]
    two = [" ".join(rnd.sample(sorted(set(ws)), 2)) for ws in rnd.sample(multi, min(30, len(multi)))]
    five = [" ".join(rnd.sample(sorted(set(ws)), 5)) for ws in rnd.sample(multi, min(30, len(multi)))]
    return {
        "1-term rare": rnd.sample(rare, min(20, len(rare))),
        "1-term mid": rnd.sample(mid, min(20, len(mid))),
        "1-term common": common,
        "2-term": two,
        "5-term": five,
    }


def time_queries(search: Any, queries: dict[str, list[str]], reps: int = 2) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, qs in queries.items():
        lat: list[float] = []
        engine: list[float] = []
        for _ in range(reps):
            for q in qs:
                t0 = time.perf_counter()
                r = search(q)
                lat.append((time.perf_counter() - t0) * 1000)
                engine.append(float(r.get("durationMs", 0)))
        out[name] = {"p50": pct(lat, 50), "p95": pct(lat, 95), "engine_p50": pct(engine, 50), "n": len(lat)}
    return out


def start_daemon(corpus: Path, env: dict[str, str], home: Home,
                 extra: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], Any]:
    """``aivault serve`` over the corpus in the background (``extra``: more of its options), and an RPC
    client once it answers ping."""
    from aivault.thin.client import RpcClient

    daemon = subprocess.Popen([sys.executable, "-m", "aivault.cli", "serve", *root_args(corpus), *extra], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rpc = RpcClient.for_home(home, timeout_s=120)
    deadline = time.monotonic() + 60
    while rpc.ping() is None:
        if time.monotonic() > deadline or daemon.poll() is not None:
            daemon.kill()
            raise SystemExit(f"the daemon did not start (exit code {daemon.poll()})")
        time.sleep(0.1)
    return daemon, rpc


def quiet(rpc: Any, timeout_s: float = 600) -> None:
    """Wait until the daemon merges nothing, so latency is not measured against a compaction."""
    deadline = time.monotonic() + timeout_s
    time.sleep(11)  # the daemon compacts after 10 s without batches
    while rpc.call("aiVault.indexStats", {}).get("merging") and time.monotonic() < deadline:
        time.sleep(0.5)
    # ... and its sorted segments are mapped and its chunk texts written (query/postings.py), not searched
    # through DuckDB meanwhile.
    time.sleep(2)  # the daemon's health loop queues the builds within a second
    while time.monotonic() < deadline:
        side = rpc.call("aiVault.indexStats", {}).get("postingsSidecars") or {}
        if not side.get("building") and not (side.get("texts") or {}).get("writing"):
            break
        time.sleep(0.5)


def plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """A contract value (aivault/protocol.py's records) as the plain dict it is on the wire, any field readable."""
    return dict(value)
