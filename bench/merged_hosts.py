"""A search merged over three hosts against each host searched alone (issue 35, item 8).

Three data directories on this machine, each indexed from its own generated corpus and served by its own
daemon: the laptop (the client) and two runtimes with a CurveZMQ listener on loopback, paired with the
laptop. Through the laptop's daemon (its host connections stay open between requests), for the same
queries, one run side by side:

* each host searched alone (``aiVault.searchSessions`` with ``host``): p50 and p95 per host;
* the merged search over all three (``aiVault.searchHosts``): p50 and p95; the goal is a merged p50 within
  25 ms of the slowest single host's p50, which needs the hosts asked in parallel;
* the statistics round alone (``aiVault.searchShard`` step ``stats``) per host: what the first round costs.

    .venv/bin/python -m bench.merged_hosts --messages 20000 --reps 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.home import Home
from aivault.protocol import METHOD_SEARCH, METHOD_SEARCH_HOSTS, METHOD_SHARD
from bench.common import corpus_for, env_for, pct, pick_queries, quiet, root_args, start_daemon


def _serve(home: Home, corpus: Path, listen: bool) -> tuple[subprocess.Popen[bytes], Any]:
    """The host's daemon (with a CurveZMQ listener on loopback for a runtime), its index current."""
    proc, rpc = start_daemon(corpus, env_for(home.path), home, ["--listen", "tcp://127.0.0.1:0"] if listen else [])
    rpc.call("aiVault.reconcile", {"full": True}, timeout_s=3600)
    return proc, rpc


def _cli(home: Home, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "aivault.cli", *args], env=env_for(home.path), capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"aivault {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def _timed(fn: Any, queries: list[str], reps: int) -> tuple[list[float], list[Any]]:
    lat, answers = [], []
    for _ in range(reps):
        for q in queries:
            t0 = time.perf_counter()
            answers.append(fn(q))
            lat.append((time.perf_counter() - t0) * 1000)
    return lat, answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000, help="messages in each host's corpus")
    ap.add_argument("--reps", type=int, default=2, help="times each query is asked")
    ap.add_argument("--queries", type=int, default=30, help="queries (drawn from the laptop's index)")
    ap.add_argument("--work", type=Path, default=None, help="a folder for the corpora and data directories")
    args = ap.parse_args()
    base = args.work or Path(tempfile.mkdtemp(prefix="aivault-merged-bench-"))
    homes, procs = [], []
    picked: dict[str, list[str]] = {}
    try:
        for i, name in enumerate(("laptop", "runtime-a", "runtime-b")):
            corpus, _ = corpus_for(base / "corpora", args.messages, seed=11 + i)
            home = Home.resolve(base / name).ensure()
            policy.save(home, policy.Policy(True, None))
            home.config_path.write_text(json.dumps({"embed": {"enabled": False}}))
            _cli(home, "index", *root_args(corpus))  # a one-shot index first: queries are drawn from it
            if i == 0:
                picked = pick_queries(home.db_path, seed=5)
            proc, rpc = _serve(home, corpus, listen=i > 0)
            homes.append(home)
            procs.append((proc, rpc))
        client, client_rpc = homes[0], procs[0][1]
        for home in homes[1:]:
            code = json.loads(_cli(home, "pair", "--json"))["code"]
            _cli(client, "hosts", "pair", code, "--name", "laptop")
        for _, rpc in procs:
            quiet(rpc)
        hosts = ["local", *(h["id"] for h in client_rpc.call("aiVault.listHosts", {"check": True})["hosts"])]
        queries = [q for qs in picked.values() for q in qs][: args.queries]
        print(f"{len(hosts)} hosts, {args.messages:,} messages each, {len(queries)} queries x {args.reps}", flush=True)
        # Warm every connection and every index first (sidecars mapped, links open).
        for q in queries[:5]:
            client_rpc.call(METHOD_SEARCH_HOSTS, {"query": q, "hosts": "all"})
            for h in hosts:
                client_rpc.call(METHOD_SEARCH, {"query": q}, host=None if h == "local" else h)
        single: dict[str, list[float]] = {}
        stats_round: dict[str, list[float]] = {}
        for h in hosts:
            target = None if h == "local" else h
            single[h], _ = _timed(lambda q, t=target: client_rpc.call(METHOD_SEARCH, {"query": q, "limit": 10},
                                                                      host=t), queries, args.reps)
            stats_round[h], _ = _timed(lambda q, t=target: client_rpc.call(
                METHOD_SHARD, {"step": "stats", "request": {"query": q}}, host=t), queries, args.reps)
        merged, answers = _timed(lambda q: client_rpc.call(METHOD_SEARCH_HOSTS, {"query": q, "limit": 10,
                                                                                 "hosts": "all"}),
                                 queries, args.reps)
        partial = sum(1 for a in answers if a.get("partial"))
        print(f"{'':<28}{'p50 ms':>9}{'p95 ms':>9}")
        for h in hosts:
            print(f"{'search ' + h:<28}{pct(single[h], 50):>9.1f}{pct(single[h], 95):>9.1f}")
        for h in hosts:
            print(f"{'stats round ' + h:<28}{pct(stats_round[h], 50):>9.1f}{pct(stats_round[h], 95):>9.1f}")
        print(f"{'merged (all hosts)':<28}{pct(merged, 50):>9.1f}{pct(merged, 95):>9.1f}")
        slowest = max(pct(single[h], 50) for h in hosts)
        gap = pct(merged, 50) - slowest
        print(f"merged p50 - slowest single p50 = {gap:+.1f} ms (goal <= +25 ms); {partial} partial answers")
    finally:
        for proc, rpc in procs:
            rpc.close()
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
