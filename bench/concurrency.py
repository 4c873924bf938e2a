"""Search latency through the daemon socket with many clients, while the daemon indexes and idle.

    python -m bench.concurrency [--messages 50000] [--clients 20] [--idle-s 10] [--out bench/out]

A fresh data directory is served by a real `aivault serve` over a generated corpus
(bench.gen_corpus, lexical only). From the first committed batch until the first full pass is
current, N client threads (one RpcClient each) search back to back; the same is then measured
with the index idle, and both again with one client. Each phase reports client wall-time p50/p95,
the engine's own `durationMs` p50 (wall minus engine is time spent queueing in the daemon), the
number of searches and of `busy` answers. Figures go to stdout and `<out>/concurrency.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.errors import AivaultError
from aivault.home import Home, write_private
from bench.common import REPO, corpus_for, env_for, pct, root_args

# Words the generator writes often enough to match, mixed with rarer pairs: the planner's routes
# (phrase, all, any) all get exercised.
QUERIES = ("error handler", "cache session", "function return value", "merge branch", "parse config",
           "test failing", "index query", "missing field", "request response", "update module",
           "default option", "server client", "rename file", "loop variable", "string number")
START_TIMEOUT_S = 60.0
INDEX_TIMEOUT_S = 900.0


@dataclass
class Phase:
    wall_ms: list[float] = field(default_factory=list)
    engine_ms: list[float] = field(default_factory=list)
    busy: int = 0
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self, seconds: float) -> dict[str, Any]:
        return {"searches": len(self.wall_ms), "seconds": round(seconds, 1),
                "p50_ms": round(pct(self.wall_ms, 50), 1), "p95_ms": round(pct(self.wall_ms, 95), 1),
                "engine_p50_ms": round(pct(self.engine_ms, 50), 1),
                "engine_p95_ms": round(pct(self.engine_ms, 95), 1), "busy": self.busy, "errors": self.errors}


def run_clients(home: Home, clients: int, until: threading.Event, seed: int) -> Phase:
    """``clients`` threads searching back to back until ``until`` is set."""
    from aivault.thin.client import RpcClient

    phase = Phase()

    def client(i: int) -> None:
        rnd = random.Random(seed * 1000 + i)
        rpc = RpcClient.for_home(home, timeout_s=120)
        try:
            while not until.is_set():
                q = rnd.choice(QUERIES)
                t0 = time.perf_counter()
                try:
                    r = rpc.call("aiVault.searchSessions", {"query": q, "limit": 20})
                except AivaultError as exc:
                    with phase.lock:
                        if exc.code == -32005:
                            phase.busy += 1
                        else:
                            phase.errors += 1
                    continue
                wall = (time.perf_counter() - t0) * 1000
                if r.get("kind") != "results":
                    continue  # not-ready before the first batch: not a search
                with phase.lock:
                    phase.wall_ms.append(wall)
                    phase.engine_ms.append(float(r.get("durationMs", 0.0)))
        finally:
            rpc.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return phase


class Served:
    """`aivault serve` over a fresh data directory; indexing starts at once."""

    def __init__(self, base: Path, corpus: Path, label: str) -> None:
        from aivault.thin.client import RpcClient

        path = base / f"home-concurrency-{label}"
        if path.exists():
            shutil.rmtree(path)
        self.home = Home.resolve(path).ensure()
        policy.save(self.home, policy.Policy(True, None))
        write_private(self.home.config_path, b'{"embed": {"enabled": false}}')
        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "serve", *root_args(corpus)],
                                     env=env_for(path), cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.rpc = RpcClient.for_home(self.home, timeout_s=120)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.rpc.ping() is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the daemon did not start")
            time.sleep(0.05)

    def wait_first_batch(self) -> None:
        deadline = time.monotonic() + INDEX_TIMEOUT_S
        while self.rpc.call("aiVault.searchSessions", {"query": QUERIES[0]})["kind"] != "results":
            if time.monotonic() > deadline:
                raise SystemExit("no batch committed")
            time.sleep(0.02)

    def current(self) -> bool:
        return bool(self.rpc.call("aiVault.searchStatus", {})["phase"] == "current")

    def quiet(self) -> None:
        """Wait until nothing is merging (the daemon compacts after 10 s without batches)."""
        time.sleep(11)
        while self.rpc.call("aiVault.indexStats", {}).get("merging"):
            time.sleep(0.5)

    def stop(self) -> None:
        self.rpc.close()
        self.proc.terminate()
        self.proc.wait(60)


def during_indexing(base: Path, corpus: Path, clients: int, seed: int) -> tuple[Served, dict[str, Any]]:
    served = Served(base, corpus, f"{clients}")
    served.wait_first_batch()
    until = threading.Event()
    t0 = time.monotonic()
    box: dict[str, Phase] = {}
    runner = threading.Thread(target=lambda: box.setdefault("p", run_clients(served.home, clients, until, seed)))
    runner.start()
    while not served.current() and time.monotonic() - t0 < INDEX_TIMEOUT_S:
        time.sleep(0.2)
    until.set()
    runner.join()
    return served, box["p"].summary(time.monotonic() - t0)


def idle(served: Served, clients: int, seconds: float, seed: int) -> dict[str, Any]:
    until = threading.Event()
    timer = threading.Timer(seconds, until.set)
    timer.start()
    t0 = time.monotonic()
    phase = run_clients(served.home, clients, until, seed)
    return phase.summary(time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--idle-s", type=float, default=10.0, help="length of each idle phase")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = ap.parse_args(argv)
    base = Path(args.out)
    base.mkdir(parents=True, exist_ok=True)
    corpus, manifest = corpus_for(base, args.messages, args.seed)
    res: dict[str, Any] = {"messages": manifest["messages"], "clients": args.clients}

    served, res[f"indexing, {args.clients} clients"] = during_indexing(base, corpus, args.clients, args.seed)
    try:
        served.quiet()
        res[f"idle, {args.clients} clients"] = idle(served, args.clients, args.idle_s, args.seed)
        res["idle, 1 client"] = idle(served, 1, args.idle_s, args.seed)
    finally:
        served.stop()
    served, res["indexing, 1 client"] = during_indexing(base, corpus, 1, args.seed)
    served.stop()

    (base / "concurrency.json").write_text(json.dumps(res, indent=2))
    print(f"{res['messages']:,} messages")
    print("| phase | searches | p50 ms | p95 ms | engine p50 / p95 ms | busy |")
    print("|---|---|---|---|---|---|")
    for name, v in res.items():
        if isinstance(v, dict):
            print(f"| {name} | {v['searches']} in {v['seconds']} s | {v['p50_ms']} | {v['p95_ms']} | "
                  f"{v['engine_p50_ms']} / {v['engine_p95_ms']} | {v['busy']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
