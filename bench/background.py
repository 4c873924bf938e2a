"""Search latency while the daemon works in the background, against idle, on one index in one run.

    python -m bench.background --size 100k [--rounds 6] [--reps 1] [--before DIR] [--merges N]

A fresh one-shot (lexical) index of the generated corpus, then the daemon on it (``CHILD``: what
``aivault serve`` runs, plus "pause" / "resume" of the background embedder's model calls on
stdin). Once its first vectors are published (from then on every phase searches with the same
routes: the bench's queries prefer hybrid once vectors exist), the bench's queries are timed
through ``daemon.sock`` in turns on that one daemon:

* **idle**: the embedder paused -- no background work at all (no scan pass, no merge either);
* **embedding**: the embedder running, as a new user's does for hours after the first
  ``aivault serve``; its texts/s are reported while the searches run and, after the turns, over
  30 s with no search at all;
* **merge** (``--merges N`` times, 0 for none): new transcripts (a generated corpus of 30 % of the
  size over the N bursts, under a root of its own) arrive with the embedder paused; once they are
  committed the daemon's idle compaction merges everything into one segment, and the queries are
  timed while ``indexStats.merging`` is true, against **idle after merge** on the merged index
  (meanwhile the searches also visit the unsorted new segment). One merge at 1M gives ~10 queries
  a class in a 3-s window; several bursts give several windows, each followed by its idle turn;
* with ``--before DIR`` the idle / embedding turns again, from another source tree (e.g.
  ``git archive <commit> | tar -x -C DIR``), so a change is measured before and after in one run.

Turns of a few seconds alternate ``--rounds`` times, so a machine whose load drifts affects idle
and busy alike. Figures are p50/p95 of the round trip per query class, and the ratio of p50 to
idle. Compare within one run only.
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
from bench.common import REPO, SIZES, corpus_for, env_for, pct, pick_queries, root_args
from bench.gen_corpus import generate

MERGE_EXTRA = 0.3  # new messages for the merge phase, as a share of the corpus
SEARCH = "aiVault.searchSessions"


# The daemon, as `aivault serve` runs it, in a child process that also takes "pause" / "resume" on
# stdin: the background embedder's model calls wait while paused (a call under way finishes), so
# idle and embedding alternate in one daemon within seconds. Given as code, not a module, so that
# it runs the same from another source tree (--before).
CHILD = r"""
import os, sys, threading

acks = os.fdopen(os.dup(1), "w")  # the bench reads acks here; the daemon's log goes nowhere
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
from aivault.broker.daemon import Daemon
from aivault.embed.local import LocalEmbedder
from aivault.home import Home

go = threading.Event()
go.set()
real = LocalEmbedder.embed

def embed(self, texts):
    if threading.current_thread().name == "embedder":  # the background worker; not a query's
        go.wait()
    return real(self, texts)

LocalEmbedder.embed = embed
d = Daemon(Home.resolve(sys.argv[1]).ensure(), extra_roots=sys.argv[2:], default_roots=False, schedule=True)
d.start()
print("ok", file=acks, flush=True)
for line in sys.stdin:
    {"pause": go.clear, "resume": go.set}[line.strip()]()
    print("ok", file=acks, flush=True)
go.set()
d.close()
"""


class Daemon:
    """The bench's daemon (``CHILD``) on its data directory, with an RPC client."""

    def __init__(self, home: Home, roots: list[str], env: dict[str, str]) -> None:
        from aivault.thin.client import RpcClient

        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(home.path), *roots], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self._ack()
        self.rpc = RpcClient.for_home(home, timeout_s=600)
        self.rpc.call("aiVault.reconcile", {"full": True})

    def _ack(self) -> None:
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ok":
            raise SystemExit("the bench daemon did not start or answer")

    def embedding(self, on: bool) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("resume\n" if on else "pause\n")
        self.proc.stdin.flush()
        self._ack()

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
        assert self.proc.stdin is not None
        self.proc.stdin.close()
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


def _embedded(d: Daemon) -> int:
    return int(d.stats().get("semanticTextsEmbedded") or 0)


def alternate(d: Daemon, label: str, queries: dict[str, list[str]], rounds: int, reps: int, quiet_s: float,
              lat: dict[str, dict[str, list[float]]], res: dict[str, Any]) -> None:
    """Idle and embedding in turns on one daemon, then embedding with no search at all."""
    d.wait("embedding to begin", lambda s: s.get("semanticState") == "embedding" and _vectors(s) > 0)
    d.embedding(False)
    time.sleep(quiet_s)  # the daemon's own start-up work (its idle compaction, a sidecar save) is over
    d.wait("a settled index", _settled)
    emb = {"texts_searching": 0, "s_searching": 0.0}
    for _ in range(rounds):
        d.embedding(False)
        time.sleep(1.0)  # the model call under way, if any, has ended
        _add(lat, f"idle{label}", time_classes(d.rpc, queries, reps))
        d.embedding(True)
        time.sleep(1.0)  # embedding at full speed again when the searches start
        e0, w0 = _embedded(d), time.monotonic()
        _add(lat, f"embedding{label}", time_classes(d.rpc, queries, reps))
        emb["texts_searching"] += _embedded(d) - e0
        emb["s_searching"] += time.monotonic() - w0
    e0, w0 = _embedded(d), time.monotonic()
    time.sleep(30)
    emb["texts_quiet"], emb["s_quiet"] = _embedded(d) - e0, time.monotonic() - w0
    res["embedding"][f"embedding{label}"] = emb


def run(size: str, base: Path, seed: int, rounds: int, reps: int, before: Path | None, merges: int,
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
    (extra / "claude" / "projects").mkdir(parents=True)
    roots = [f"claude={corpus}/claude/projects", f"codex={corpus}/codex/sessions",
             f"codex={corpus}/codex/archived_sessions", f"claude={extra}/claude/projects"]
    res: dict[str, Any] = {"messages": manifest["messages"], "rounds": rounds, "reps": reps, "embedding": {}}
    lat: dict[str, dict[str, list[float]]] = {}

    d = Daemon(home, roots, env)
    try:
        # The first vectors published: from here on every phase searches with the same routes.
        res["warm_vectors"] = _vectors(d.wait("the first published vectors", lambda s: _vectors(s) > 0))
        res["route"] = {k: _route(d.rpc, qs[0]) for k, qs in queries.items() if qs}
        print(f"  {res['warm_vectors']} vectors published; routes {res['route']}", flush=True)
        alternate(d, "", queries, rounds, reps, quiet_s, lat, res)
        print("  idle / embedding done", flush=True)
        d.embedding(False)
        res["merges"] = []
        for i in range(merges):
            t0 = time.monotonic()
            gen = base / f"background-gen-{size}"
            generate(gen, int(n * MERGE_EXTRA / merges), seed=seed + 1 + i)
            for p in (gen / "claude" / "projects").iterdir():
                shutil.copytree(p, extra / "claude" / "projects" / f"x{i}-{p.name}")
            shutil.rmtree(gen)
            d.rpc.call("aiVault.reconcile", {"full": False})
            d.wait("the merge to start", lambda s: bool(s.get("merging")))
            t1 = time.monotonic()
            during = time_classes(d.rpc, queries, 1000, go_on=lambda: bool(d.stats().get("merging")))
            _add(lat, "merge", during)
            merge_s = time.monotonic() - t1
            d.wait("the merge to end", _settled)
            time.sleep(quiet_s)
            _add(lat, "idle after merge", time_classes(d.rpc, queries, reps))
            res["merges"].append({"merge_s": round(merge_s, 2), "started_after_s": round(t1 - t0, 2),
                                  "queries": min(len(v) for v in during.values())})
            print(f"  merge {i + 1}/{merges} done ({merge_s:.1f} s)", flush=True)
    finally:
        d.close()
    if before is not None:
        d = Daemon(home, roots, {**env, "PYTHONPATH": str(before)})
        try:
            alternate(d, " (before)", queries, rounds, reps, quiet_s, lat, res)
        finally:
            d.close()
        print("  idle / embedding (before) done", flush=True)
    res["phases"] = {ph: {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)} for k, v in per.items()}
                     for ph, per in lat.items()}
    return res


def table(res: dict[str, Any]) -> str:
    ph = res["phases"]
    refs = {"embedding": "idle", "embedding (before)": "idle (before)", "merge": "idle after merge"}
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
    ap.add_argument("--rounds", type=int, default=6, help="idle / embedding turns on one daemon")
    ap.add_argument("--reps", type=int, default=1, help="passes over the query set per phase and turn")
    ap.add_argument("--before", type=Path, default=None,
                    help="also embed from this source tree (an export of an earlier commit)")
    ap.add_argument("--merges", type=int, default=1,
                    help="bursts of new transcripts, each merged while searched (0: none); together "
                         "they add MERGE_EXTRA of the corpus")
    ap.add_argument("--quiet-s", type=float, default=12.0,
                    help="wait after a daemon starts, past its idle compaction (IDLE_FREEZE_AFTER_S)")
    args = ap.parse_args(argv)
    if args.merges < 0:
        raise SystemExit(f"--merges {args.merges}: a count of bursts, 0 for none")
    base = Path(args.out)
    base.mkdir(parents=True, exist_ok=True)
    if args.before is not None and not (args.before / "aivault").is_dir():
        raise SystemExit(f"--before {args.before}: no aivault package there")
    os.environ.setdefault("AIVAULT_LOG_LEVEL", "warning")
    res = run(args.size, base, args.seed, args.rounds, args.reps, args.before, args.merges, args.quiet_s)
    (base / f"background-{args.size}.json").write_text(json.dumps(res, indent=2))
    print()
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
