"""Search latency while the daemon works in the background, against idle, on one index in one run.

    python -m bench.background --size 100k [--rounds 2] [--reps 2] [--before DIR] [--no-merge]

A fresh one-shot (lexical) index of the generated corpus, then ``aivault serve`` on it in turns,
each daemon started anew on the same database:

* **warm-up**: the daemon embeds until its first vectors are published, so that every later phase
  searches with the same routes (the bench's queries prefer hybrid once vectors exist);
* **idle**: ``AIVAULT_EMBED_PAUSED=1`` -- the model and the stored vectors load and searches use
  them, but nothing is embedded, scanned or merged meanwhile (no background work at all);
* **embedding**: the daemon embeds in the background, as a new user's does for hours after the
  first ``aivault serve``; embedding texts/s is reported while the searches run and, after them,
  with no search at all;
* **embedding (before)**, with ``--before DIR``: the same, run from another source tree (e.g.
  ``git archive <commit> | tar -x -C DIR``), so a change is measured before and after in one run;
* **merge** (unless ``--no-merge``): new transcripts (a second generated corpus, 30 % of the size,
  under a root of its own) arrive while an idle daemon runs; once they are committed the daemon's
  idle compaction merges everything into one segment, and the queries are timed while
  ``indexStats.merging`` is true, against **idle after merge** on the merged index (the merge's
  inputs include the unsorted new segment, which searches visit meanwhile).

The phases alternate over ``--rounds`` so a machine whose load drifts affects all of them alike;
figures are p50/p95 of the round trip through the daemon per query class, and the ratio of p50
to idle. Compare within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.home import Home, write_private
from bench.gen_corpus import generate
from bench.run import REPO, SIZES, corpus_for, env_for, pct, pick_queries, root_args

MERGE_EXTRA = 0.3  # new messages for the merge phase, as a share of the corpus
SEARCH = "aiVault.searchSessions"


class Daemon:
    """``aivault serve`` on the bench's data directory, with an RPC client."""

    def __init__(self, home: Home, roots: list[str], env: dict[str, str]) -> None:
        from aivault.broker.client import RpcClient

        self.proc = subprocess.Popen([sys.executable, "-m", "aivault.cli", "serve", *roots], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.rpc = RpcClient.for_home(home, timeout_s=600)
        deadline = time.monotonic() + 120
        while self.rpc.ping() is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the daemon did not start")
            time.sleep(0.1)
        self.rpc.call("aiVault.reconcile", {"full": True})

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self.rpc.call("aiVault.indexStats", {})
        return result

    def wait(self, what: str, ok: Callable[[dict[str, Any]], bool], timeout_s: float = 3600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            s = self.stats()
            if ok(s):
                return s
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}: {s}")
            time.sleep(0.5)

    def close(self) -> None:
        self.rpc.close()
        self.proc.terminate()
        self.proc.wait(120)


def _vectors(s: dict[str, Any]) -> int:
    return int((s.get("vectorIndex") or {}).get("count") or 0)


def _settled(s: dict[str, Any]) -> bool:
    """No scan pass, no merge."""
    return not s.get("running") and not s.get("merging")


def time_classes(rpc: Any, queries: dict[str, list[str]], reps: int,
                 go_on: Callable[[], bool] = lambda: True) -> dict[str, list[float]]:
    """Round-trip ms per class; the classes interleave (one query of each in turn) so that a phase
    cut short by ``go_on`` (the merge ends) still samples every class."""
    lat: dict[str, list[float]] = {k: [] for k in queries}
    longest = max(len(qs) for qs in queries.values())
    for _ in range(reps):
        for i in range(longest):
            if not go_on():
                return lat
            for name, qs in queries.items():
                if i < len(qs):
                    t0 = time.perf_counter()
                    rpc.call(SEARCH, {"query": qs[i], "limit": 20})
                    lat[name].append((time.perf_counter() - t0) * 1000)
    return lat


def _add(acc: dict[str, dict[str, list[float]]], phase: str, lat: dict[str, list[float]]) -> None:
    into = acc.setdefault(phase, {})
    for k, v in lat.items():
        into.setdefault(k, []).extend(v)


def _route(rpc: Any, query: str) -> str:
    r = rpc.call(SEARCH, {"query": query, "limit": 20, "debug": True})
    return str((r.get("debug") or {}).get("route"))


def run(size: str, base: Path, seed: int, rounds: int, reps: int, before: Path | None, merge: bool,
        quiet_s: float) -> dict[str, Any]:
    n = SIZES[size]
    corpus, manifest = corpus_for(base, n, seed)
    home_dir = base / f"background-home-{size}"
    extra = base / f"background-extra-{size}"
    for old in (home_dir, extra):
        if old.exists():
            shutil.rmtree(old)
    home = Home.resolve(home_dir).ensure()
    policy.save(home, policy.Policy(True, None))
    write_private(home.config_path, json.dumps({"embed": {"enabled": True}}).encode())
    env = env_for(home_dir)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(corpus)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr}")
    print(f"== {size}: {manifest['messages']:,} messages indexed in {time.monotonic() - t0:.1f} s", flush=True)
    queries = pick_queries(home.db_path, seed)
    roots = root_args(corpus)
    (extra / "claude" / "projects").mkdir(parents=True)
    merge_roots = [*roots, "--root", f"claude={extra}/claude/projects"]
    paused = {**env, "AIVAULT_EMBED_PAUSED": "1"}
    res: dict[str, Any] = {"messages": manifest["messages"], "rounds": rounds, "reps": reps, "embedding": {}}

    d = Daemon(home, roots, env)
    try:
        s = d.wait("the first published vectors", lambda s: _vectors(s) > 0)
        res["warm_vectors"] = _vectors(s)
        res["route"] = {k: _route(d.rpc, qs[0]) for k, qs in queries.items() if qs}
    finally:
        d.close()
    print(f"  warm-up: {res['warm_vectors']} vectors; routes {res['route']}", flush=True)

    lat: dict[str, dict[str, list[float]]] = {}
    phases: list[tuple[str, dict[str, str]]] = [("idle", paused), ("embedding", env)]
    if before is not None:
        phases.append(("embedding (before)", {**env, "PYTHONPATH": str(before)}))
    for r in range(rounds):
        for phase, penv in phases:
            d = Daemon(home, roots, penv)
            try:
                want = "paused" if phase == "idle" else "embedding"
                d.wait(f"{phase} to begin", lambda s, w=want: s.get("semanticState") == w  # type: ignore[misc]
                       and _vectors(s) > 0 and _settled(s))
                time.sleep(quiet_s)  # the daemon's own start-up work (idle compaction, sidecar save) is over
                d.wait("a settled index", _settled)
                e0, w0 = int(d.stats().get("semanticTextsEmbedded") or 0), time.monotonic()
                _add(lat, phase, time_classes(d.rpc, queries, reps))
                if phase != "idle":
                    e1, w1 = int(d.stats().get("semanticTextsEmbedded") or 0), time.monotonic()
                    time.sleep(20)  # no search: embedding at full speed
                    e2, w2 = int(d.stats().get("semanticTextsEmbedded") or 0), time.monotonic()
                    emb = res["embedding"].setdefault(phase, {"texts_searching": 0, "s_searching": 0.0,
                                                              "texts_quiet": 0, "s_quiet": 0.0})
                    emb["texts_searching"] += e1 - e0
                    emb["s_searching"] += w1 - w0
                    emb["texts_quiet"] += e2 - e1
                    emb["s_quiet"] += w2 - w1
            finally:
                d.close()
            print(f"  round {r + 1}: {phase} done", flush=True)

    if merge:
        d = Daemon(home, merge_roots, paused)
        try:
            d.wait("a settled index", lambda s: s.get("semanticState") == "paused" and _settled(s))
            t0 = time.monotonic()
            generate(base / f"background-gen-{size}", int(n * MERGE_EXTRA), seed=seed + 1)
            for p in (base / f"background-gen-{size}" / "claude" / "projects").iterdir():
                shutil.copytree(p, extra / "claude" / "projects" / f"x{p.name}")
            shutil.rmtree(base / f"background-gen-{size}")
            d.rpc.call("aiVault.reconcile", {"full": False})
            d.wait("the merge to start", lambda s: bool(s.get("merging")))
            merge_lat = time_classes(d.rpc, queries, 1000, go_on=lambda: bool(d.stats().get("merging")))
            _add(lat, "merge", merge_lat)
            res["merge_s_after_arrival"] = time.monotonic() - t0
            d.wait("the merge to end", _settled)
            time.sleep(quiet_s)
            for _ in range(rounds):
                _add(lat, "idle after merge", time_classes(d.rpc, queries, reps))
        finally:
            d.close()
        print("  merge done", flush=True)

    res["phases"] = {ph: {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)} for k, v in per.items()}
                     for ph, per in lat.items()}
    return res


def table(res: dict[str, Any]) -> str:
    ph = res["phases"]
    refs = {"embedding": "idle", "embedding (before)": "idle", "merge": "idle after merge"}
    lines = ["| query class | " + " | ".join(f"{p} p50 / p95 ms" for p in ph) + " | "
             + " | ".join(f"{p} / {refs[p]}" for p in ph if p in refs) + " |"]
    lines.append("|" + " --- |" * (1 + len(ph) + sum(1 for p in ph if p in refs)))
    for k in ph["idle"]:
        cells = [f"{ph[p][k]['p50']:.1f} / {ph[p][k]['p95']:.1f}" if ph[p].get(k, {}).get("n") else "-" for p in ph]
        ratios = [f"{ph[p][k]['p50'] / ph[refs[p]][k]['p50']:.2f}×" if ph[p].get(k, {}).get("n") else "-"
                  for p in ph if p in refs]
        lines.append(f"| {k} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    for phase, e in res["embedding"].items():
        lines.append(f"\n{phase}: {e['texts_searching'] / max(e['s_searching'], 1e-9):.1f} texts/s while searching, "
                     f"{e['texts_quiet'] / max(e['s_quiet'], 1e-9):.1f} texts/s with no search")
    if "merge" in ph:
        lines.append(f"merge: {min(v['n'] for v in ph['merge'].values())}+ queries per class while merging")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--size", default="100k", choices=sorted(SIZES))
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="idle / embedding turns (each a daemon of its own)")
    ap.add_argument("--reps", type=int, default=2, help="passes over the query set per phase and round")
    ap.add_argument("--before", type=Path, default=None,
                    help="also embed from this source tree (an export of an earlier commit)")
    ap.add_argument("--no-merge", action="store_true")
    ap.add_argument("--quiet-s", type=float, default=12.0,
                    help="wait after a daemon starts, past its idle compaction (IDLE_FREEZE_AFTER_S)")
    args = ap.parse_args(argv)
    base = Path(args.out)
    base.mkdir(parents=True, exist_ok=True)
    if args.before is not None and not (args.before / "aivault").is_dir():
        raise SystemExit(f"--before {args.before}: no aivault package there")
    os.environ.setdefault("AIVAULT_LOG_LEVEL", "warning")
    res = run(args.size, base, args.seed, args.rounds, args.reps, args.before, not args.no_merge, args.quiet_s)
    (base / f"background-{args.size}.json").write_text(json.dumps(res, indent=2))
    print()
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
