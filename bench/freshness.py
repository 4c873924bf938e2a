"""Freshness and search under background work, through a running daemon.

    python -m bench.freshness --sizes 10k,100k [--appends 20] [--embed]

For each size: a fresh one-shot index of the generated corpus, then ``aivault serve`` on it.
(1) **Freshness**: one line with a unique word is appended to a random existing transcript (most
last written long ago), and the time until ``aiVault.searchSessions`` finds it is taken, without
asking for a pass — what the user feels. ``AIVAULT_RECENT_PASS_S`` is left at its default, so
the polling pass is the bound when the watcher misses. (2) **Search while the daemon works**:
the bench's queries timed with the daemon idle, then while it embeds in the background
(``--embed``: the semantic worker runs over the whole corpus, as after a new user's first
``aivault serve``). Figures are medians and 95th percentiles; compare within one run.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.home import Home, write_private
from bench.common import REPO, SIZES, corpus_for, env_for, pct, pick_queries, root_args, start_daemon, time_queries
from tests.builders.claude import ClaudeWriter


def _index(home: Home, corpus: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(corpus)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr}")


def freshness(rpc: Any, corpus: Path, appends: int, seed: int) -> dict[str, Any]:
    """Seconds from appending a line to an existing transcript until a search finds it."""
    r = random.Random(seed)
    files = sorted((corpus / "claude" / "projects").rglob("*.jsonl"))
    files = [f for f in files if "subagents" not in f.parts]
    waits: list[float] = []
    missed = 0
    for i in range(appends):
        path = r.choice(files)
        token = f"fresh{i}q{r.randrange(10**9)}"
        w = ClaudeWriter(path.parent.parent, path.stem)
        w.path = path  # append to this very file (the writer's path is derived from cwd otherwise)
        t0 = time.perf_counter()
        w.user(f"the {token} probe line")
        while True:
            hits = rpc.call("aiVault.searchSessions", {"query": token, "limit": 1}).get("hits")
            if hits:
                waits.append(time.perf_counter() - t0)
                break
            if time.perf_counter() - t0 > 30:
                missed += 1
                break
            time.sleep(0.01)
        time.sleep(r.uniform(0.2, 0.6))  # appends arrive spread out, as a person's agent writes them
    return {"appends": appends, "missed_30s": missed, "p50_ms": statistics.median(waits) * 1000 if waits else None,
            "p95_ms": pct(waits, 95) * 1000 if waits else None, "max_ms": max(waits) * 1000 if waits else None}


def bench_size(label: str, n: int, base: Path, seed: int, appends: int, embed: bool) -> dict[str, Any]:
    print(f"== {label}: {n:,} messages", flush=True)
    corpus, manifest = corpus_for(base, n, seed)
    home_dir = base / f"fresh-home-{label}"
    if home_dir.exists():
        shutil.rmtree(home_dir)
    home = Home.resolve(home_dir).ensure()
    policy.save(home, policy.Policy(True, None))
    write_private(home.config_path, json.dumps({"embed": {"enabled": embed}}).encode())
    env = env_for(home_dir)
    _index(home, corpus, env)
    queries = pick_queries(home.db_path, seed)
    res: dict[str, Any] = {"messages": manifest["messages"], "embed": embed}
    daemon, rpc = start_daemon(corpus, env, home)
    try:
        rpc.call("aiVault.reconcile", {"full": True})
        if embed:
            time.sleep(2)  # the semantic worker has started on the corpus
            stats = rpc.call("aiVault.indexStats", {})
            res["embedding_at_start"] = {k: stats.get(k) for k in ("semanticState", "semanticEmbedded",
                                                                   "semanticEligible")}
            res["search_busy"] = time_queries(lambda q: rpc.call("aiVault.searchSessions",
                                                                 {"query": q, "limit": 20}), queries)
        res["freshness"] = freshness(rpc, corpus, appends, seed)
        if embed:
            stats = rpc.call("aiVault.indexStats", {})
            res["embedding_after"] = {k: stats.get(k) for k in ("semanticState", "semanticEmbedded")}
        rpc.close()
    finally:
        daemon.terminate()
        daemon.wait(60)
    f = res["freshness"]
    print(f"  appended line searchable: p50 {f['p50_ms']:.0f} ms, p95 {f['p95_ms']:.0f} ms, max {f['max_ms']:.0f} ms "
          f"({f['appends']} appends, {f['missed_30s']} not found within 30 s)", flush=True)
    for qname, v in (res.get("search_busy") or {}).items():
        print(f"  search while embedding {qname:14} p50 {v['p50']:7.1f} ms p95 {v['p95']:7.1f} ms", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument("--embed", action="store_true", help="the daemon embeds in the background meanwhile")
    args = ap.parse_args(argv)
    base = Path(args.out)
    base.mkdir(parents=True, exist_ok=True)
    results = {label: bench_size(label, SIZES[label], base, args.seed, args.appends, args.embed)
               for label in args.sizes.split(",")}
    (base / f"freshness{'-embed' if args.embed else ''}.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
