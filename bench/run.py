"""The lexical benchmark: indexing, search latency, memory, size, and batch cost vs corpus size.

    python -m bench.run --sizes 10k,100k,1m [--agentsview] [--out bench/out]
    python -m bench.run --mix-compare [--size 100k] [--reps 3]   (bench/mix_compare.py)

For each size it generates (or reuses) a corpus with bench.gen_corpus, then measures:
* indexing: a fresh `aivault index` (subprocess): messages/s, MB/s, peak RSS of the indexer
  and of the scanner, index size on disk;
* search latency p50/p95 for 1-term (rare, mid, common), 2-term and 5-term queries, through
  the daemon (`aivault serve`, RPC over ZeroMQ) and in direct mode (read-only, in-process);
* batch cost: with the daemon running on the full corpus, a new 1,000-message transcript is
  written and the time until it is searchable is measured (reconcile RPC + search); the
  figure must stay flat from 10k to 1M;
* optionally AgentsView (PyPI `agentsview`) side by side: sync time and HTTP search latency.

Timings are noisy here: compare ratios within one run, never assert them in tests.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from aivault import policy
from aivault.home import Home, write_private
from aivault.indexer.reclaim import RECLAIM_RATIO
from bench import mix_compare
from bench.common import (
    REPO,
    SIZES,
    corpus_for,
    env_for,
    pick_queries,
    quiet,
    root_args,
    start_daemon,
    time_queries,
)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file() and p.name.startswith("index.duckdb"))


def used_size(db: Path) -> int:
    """Bytes in used blocks: DuckDB reuses but never returns the blocks merges free."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT block_size, used_blocks FROM pragma_database_size()").fetchone()
        return int(row[0]) * int(row[1]) if row else 0
    finally:
        con.close()


# --- one size ----------------------------------------------------------------------------------
def bench_size(label: str, n: int, base: Path, seed: int, agentsview: bool, hybrid: bool = False,
               daemon_disk: bool = True) -> dict[str, Any]:
    print(f"== {label}: {n:,} messages", flush=True)
    corpus, manifest = corpus_for(base, n, seed)
    home = base / f"home-{label}"
    if home.exists():
        shutil.rmtree(home)
    h = Home.resolve(home).ensure()
    policy.save(h, policy.Policy(True, None))
    # Lexical figures first, with no embedding running beside them.
    write_private(h.config_path, b'{"embed": {"enabled": false}}')
    res: dict[str, Any] = {"messages": manifest["messages"], "corpus_mb": manifest["bytes"] / 1e6,
                           "sessions": manifest["sessions"]}

    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(corpus)],
                          env=env_for(home), capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr}")
    summary = json.loads(proc.stdout)
    res["index_s"] = wall
    res["index_msgs_per_s"] = manifest["messages"] / wall
    res["index_mb_per_s"] = manifest["bytes"] / 1e6 / wall
    res["indexer_peak_rss_mb"] = summary["peakRssKb"] / 1024
    res["scanner_peak_rss_mb"] = summary["scannerPeakRssKb"] / 1024
    res["index_size_mb"] = dir_size(home) / 1e6
    res["index_used_mb"] = used_size(h.db_path) / 1e6
    res["reclaim"] = reclaim_figures(summary.get("reclaim"))
    print(f"  indexed in {wall:.1f} s: {res['index_msgs_per_s']:,.0f} msg/s, {res['index_mb_per_s']:.1f} MB/s; "
          f"RSS indexer {res['indexer_peak_rss_mb']:.0f} MB, scanner {res['scanner_peak_rss_mb']:.0f} MB; "
          f"index {res['index_size_mb']:.0f} MB", flush=True)
    print(f"  disk after the one-shot index: file {res['index_size_mb']:.0f} MB, data {res['index_used_mb']:.0f} MB "
          f"({res['index_size_mb'] / res['index_used_mb']:.2f}x); {_reclaim_text(res['reclaim'])}", flush=True)

    queries = pick_queries(h.db_path, seed)
    res["queries"] = {k: len(v) for k, v in queries.items()}

    # Direct mode first: it needs the file without a daemon holding it.
    from aivault.indexer.opening import open_reader
    from aivault.vault.readonly import DirectService

    con = open_reader(h)
    svc = DirectService(h, con)
    res["direct"] = time_queries(lambda q: svc.search({"query": q, "limit": 20}), queries)
    svc.close()
    con.close()

    daemon, rpc = start_daemon(corpus, env_for(home), h)
    try:
        rpc.call("aiVault.reconcile", {"full": True})
        quiet(rpc)
        res["daemon"] = time_queries(lambda q: rpc.call("aiVault.searchSessions", {"query": q, "limit": 20}),
                                     queries)
        res["batch"] = batch_cost(rpc, corpus)
        import psutil

        res["daemon_rss_mb"] = psutil.Process(daemon.pid).memory_info().rss / 1e6
        rpc.close()
    finally:
        daemon.terminate()
        daemon.wait(60)
    for mode in ("daemon", "direct"):
        for qname, v in res[mode].items():
            print(f"  {mode:6} {qname:14} p50 {v['p50']:7.1f} ms  p95 {v['p95']:7.1f} ms  (engine p50 "
                  f"{v['engine_p50']:.1f} ms)", flush=True)
    b = res["batch"]
    print(f"  new batch searchable: {b['searchable_ms']:.0f} ms (reconcile {b['reconcile_ms']:.0f} ms)", flush=True)
    if daemon_disk:
        res["daemon_disk"] = daemon_built_disk(label, corpus, base)
    if agentsview:
        from bench.agentsview import run_agentsview

        res["agentsview"] = run_agentsview(corpus, base / f"agentsview-{label}", queries)
    if hybrid:
        from bench.hybrid import measure

        hy = measure(h, root_args(corpus), env_for(home), queries, time_queries)
        res["hybrid"] = hy
        inj = hy["injected"]
        print(f"  vectors: {inj['vectors']:,} for {inj['eligible_chunks']:,} eligible chunks "
              f"({inj['sample_texts']} real texts reused; {inj['left_for_worker']:,} left to the worker); "
              f"index {hy['vector_index']} ready in {hy['vector_index_ready_s']:.0f} s", flush=True)
        for qname, v in hy["daemon"].items():
            print(f"  hybrid {qname:14} p50 {v['p50']:7.1f} ms  p95 {v['p95']:7.1f} ms", flush=True)
        print(f"  vector part p50 {hy['vector_part']['p50']:.1f} ms p95 {hy['vector_part']['p95']:.1f} ms; "
              f"worker embedded {hy['worker_embedded_during']:,} chunks meanwhile "
              f"({hy['worker_rate_per_s']}/s); with no search running: {hy.get('worker_idle_rate_per_s')}/s",
              flush=True)
    return res


def reclaim_figures(r: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a reclaim (indexer/reclaim.py) reported, in MB and seconds; None when none ran."""
    if not r:
        return None
    out: dict[str, Any] = {"done": bool(r.get("done")), "before_file_mb": r["before"]["fileBytes"] / 1e6,
                           "before_used_mb": r["before"]["usedBytes"] / 1e6, "reason": r.get("reason")}
    if r.get("done"):
        out.update(after_file_mb=r["after"]["fileBytes"] / 1e6, after_used_mb=r["after"]["usedBytes"] / 1e6,
                   seconds=r["seconds"], copy_s=r["copySeconds"], swap_s=r["swapSeconds"])
    return out


def _reclaim_text(r: dict[str, Any] | None) -> str:
    if r is None:
        return "no reclaim (not due)"
    if not r["done"]:
        return f"reclaim refused: {r['reason']}"
    return (f"reclaimed {r['before_file_mb']:.0f} -> {r['after_file_mb']:.0f} MB in {r['seconds']:.1f} s "
            f"(copy {r['copy_s']:.1f} s, swap and reopen {r['swap_s']:.2f} s)")


def daemon_built_disk(label: str, corpus: Path, base: Path, timeout_s: float = 1800) -> dict[str, Any]:
    """Disk after a daemon built the index from nothing: `aivault serve` freezes and merges as it
    indexes (no bulk load), and reclaims once idle after its merges. The file and used sizes are
    read from indexStats: before the reclaim (as its record says) and after it."""

    home = base / f"home-{label}-daemon"
    if home.exists():
        shutil.rmtree(home)
    h = Home.resolve(home).ensure()
    policy.save(h, policy.Policy(True, None))
    write_private(h.config_path, b'{"embed": {"enabled": false}}')
    daemon, rpc = start_daemon(corpus, env_for(home), h)
    try:
        t0 = time.monotonic()
        rpc.call("aiVault.reconcile", {"full": True}, timeout_s=timeout_s)
        indexed_s = time.monotonic() - t0
        deadline = time.monotonic() + timeout_s
        stats = rpc.call("aiVault.indexStats", {})
        # Done when a reclaim has run, or when it is idle after its merges with nothing to reclaim.
        idle_since: float | None = None
        while stats.get("lastReclaim") is None and time.monotonic() < deadline:
            disk = stats["disk"]
            idle = not stats.get("merging") and disk["fileBytes"] <= RECLAIM_RATIO * disk["usedBytes"]
            idle_since = (idle_since or time.monotonic()) if idle else None
            if idle_since is not None and time.monotonic() - idle_since > 30:
                break
            time.sleep(0.5)
            stats = rpc.call("aiVault.indexStats", {})
        rpc.close()
    finally:
        daemon.terminate()
        daemon.wait(60)
    disk = stats["disk"]
    out = {"indexed_s": indexed_s, "file_mb": disk["fileBytes"] / 1e6, "used_mb": disk["usedBytes"] / 1e6,
           "reclaim": reclaim_figures(stats.get("lastReclaim"))}
    print(f"  disk after the daemon built it: file {out['file_mb']:.0f} MB, data {out['used_mb']:.0f} MB "
          f"({out['file_mb'] / out['used_mb']:.2f}x); {_reclaim_text(out['reclaim'])}", flush=True)
    return out


def batch_cost(rpc: Any, corpus: Path, messages: int = 1000, reps: int = 3) -> dict[str, float]:
    """Write a new transcript of ``messages`` messages and time how long until it is searchable."""
    from tests.builders import ClaudeWriter

    root = corpus / "claude" / "projects"
    searchable: list[float] = []
    reconcile: list[float] = []
    applied: list[float] = []
    for rep in range(reps):
        token = f"flatcheck{rep}x{random.randrange(10**9)}"
        w = ClaudeWriter(root, cwd=f"/home/dev/bench-batch-{rep}")
        lines = []
        for i in range(messages // 2):
            lines.append(f"batch probe {i} about merging segments {token if i == 0 else ''}")
        for i, text in enumerate(lines):
            w.user(text)
            w.assistant(f"answer {i}")
        t1 = time.perf_counter()
        rpc.call("aiVault.reconcile", {"full": False})
        t2 = time.perf_counter()
        while not rpc.call("aiVault.searchSessions", {"query": token})["hits"]:
            time.sleep(0.01)
        t3 = time.perf_counter()
        reconcile.append((t2 - t1) * 1000)
        searchable.append((t3 - t1) * 1000)
        applied.append(float(rpc.call("aiVault.indexStats", {})["lastBatchMs"]))
        w.path.unlink()
        shutil.rmtree(w.path.parent, ignore_errors=True)
    return {"searchable_ms": statistics.median(searchable), "reconcile_ms": statistics.median(reconcile),
            "apply_ms": statistics.median(applied)}


Row = tuple[str, Callable[[dict[str, Any]], str]]


def _latency(mode: str, q: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        v = r[mode]["search"][q] if mode == "agentsview" else r[mode][q]
        return f"{v['p50']:.1f} / {v['p95']:.1f}"

    def guarded(r: dict[str, Any]) -> str:
        return cell(r) if mode in r else "-"

    return guarded


def _hybrid_latency(q: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        if "hybrid" not in r:
            return "-"
        v = r["hybrid"]["daemon"][q]
        return f"{v['p50']:.1f} / {v['p95']:.1f}"

    return cell


def _dig(r: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in a result, or None where a level is missing."""
    v: Any = r
    for key in path:
        if not isinstance(v, dict) or key not in v:
            return None
        v = v[key]
    return v


def _field_pair(*path: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        v = _dig(r, path)
        return "-" if v is None else f"{v['p50']:.1f} / {v['p95']:.1f}"

    return cell


def _field(fmt: str, *path: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        v = _dig(r, path)
        return "-" if v is None else fmt.format(v)

    return cell


def _reclaim_cell(*path: str) -> Callable[[dict[str, Any]], str]:
    def cell(r: dict[str, Any]) -> str:
        v = _dig(r, path)
        return "-" if not v or not v.get("done") else f"{v['seconds']:.1f} ({v['copy_s']:.1f})"

    return cell


def _embed_rates(r: dict[str, Any]) -> str:
    hy = r.get("hybrid") or {}
    during, idle = hy.get("worker_rate_per_s"), hy.get("worker_idle_rate_per_s")
    return " / ".join("-" if v is None else f"{v:.0f}" for v in (during, idle))


QUERY_KINDS = ("1-term rare", "1-term mid", "1-term common", "2-term", "5-term")


def table(results: dict[str, dict[str, Any]]) -> str:
    labels = list(results)
    rows: list[Row] = [
        ("messages", _field("{:,}", "messages")),
        ("corpus MB", _field("{:.0f}", "corpus_mb")),
        ("index time s", _field("{:.1f}", "index_s")),
        ("index msg/s", _field("{:,.0f}", "index_msgs_per_s")),
        ("index MB/s", _field("{:.1f}", "index_mb_per_s")),
        ("indexer peak RSS MB", _field("{:.0f}", "indexer_peak_rss_mb")),
        ("scanner peak RSS MB", _field("{:.0f}", "scanner_peak_rss_mb")),
        ("daemon RSS MB (serving)", _field("{:.0f}", "daemon_rss_mb")),
        ("index file MB", _field("{:.0f}", "index_size_mb")),
        ("index data MB (used blocks)", _field("{:.0f}", "index_used_mb")),
        ("  file MB before the reclaim", _field("{:.0f}", "reclaim", "before_file_mb")),
        ("  reclaim s (copy s)", _reclaim_cell("reclaim")),
        ("daemon-built index file MB", _field("{:.0f}", "daemon_disk", "file_mb")),
        ("  data MB (used blocks)", _field("{:.0f}", "daemon_disk", "used_mb")),
        ("  file MB before the reclaim", _field("{:.0f}", "daemon_disk", "reclaim", "before_file_mb")),
        ("  reclaim s (copy s)", _reclaim_cell("daemon_disk", "reclaim")),
        ("new batch searchable ms", _field("{:.0f}", "batch", "searchable_ms")),
        ("  of which indexer commit ms", _field("{:.1f}", "batch", "apply_ms")),
    ]
    for mode in ("daemon", "direct"):
        rows += [(f"{mode} {q} p50/p95 ms", _latency(mode, q)) for q in QUERY_KINDS]
    if any("hybrid" in r for r in results.values()):
        rows += [(f"hybrid {q} p50/p95 ms", _hybrid_latency(q)) for q in QUERY_KINDS]
        rows.append(("vector part p50/p95 ms", _field_pair("hybrid", "vector_part")))
        rows.append(("embedding /s: searching / idle", _embed_rates))
    if any("agentsview" in r for r in results.values()):
        rows.append(("agentsview sync s", _field("{:.1f}", "agentsview", "sync_s")))
        rows.append(("agentsview db MB", _field("{:.0f}", "agentsview", "db_mb")))
        rows += [(f"agentsview {q} p50/p95 ms", _latency("agentsview", q)) for q in QUERY_KINDS]
    w0 = max(len(r[0]) for r in rows)
    widths = [max(len(lb), *(len(fn(results[lb])) for _, fn in rows)) for lb in labels]
    out = ["| " + "metric".ljust(w0) + " | " + " | ".join(lb.ljust(w) for lb, w in zip(labels, widths, strict=True))
           + " |",
           "|" + "-" * (w0 + 2) + "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for name, fn in rows:
        cells = " | ".join(fn(results[lb]).rjust(w) for lb, w in zip(labels, widths, strict=True))
        out.append("| " + name.ljust(w0) + " | " + cells + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10k,100k", help="comma-separated: 10k, 100k, 1m")
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--agentsview", action="store_true", help="also run AgentsView on the same corpus")
    ap.add_argument("--hybrid", action="store_true",
                    help="also measure hybrid latency with vectors (see bench/hybrid.py)")
    ap.add_argument("--no-daemon-disk", action="store_true",
                    help="skip building the index a second time through `aivault serve` for its disk figures")
    ap.add_argument("--mix-compare", action="store_true",
                    help="instead: index time of a Claude+Codex corpus vs the same size split across agents")
    ap.add_argument("--size", default="100k", help="--mix-compare: the corpus size (10k, 100k, 1m)")
    ap.add_argument("--reps", type=int, default=3, help="--mix-compare: index runs of each corpus (interleaved)")
    ap.add_argument("--mix", default=mix_compare.DEFAULT_MIX, help="--mix-compare: the mixed corpus's session shares")
    ap.add_argument("--codex-zst-share", type=float, default=mix_compare.DEFAULT_ZST_SHARE,
                    help="--mix-compare: fraction of the mixed corpus's Codex rollouts written as .jsonl.zst")
    args = ap.parse_args(argv)
    base = Path(args.out)
    base.mkdir(parents=True, exist_ok=True)
    if args.mix_compare:
        return mix_compare.run(base, SIZES[args.size], args.seed, args.reps, args.mix, args.codex_zst_share,
                               env_for(base))
    results: dict[str, dict[str, Any]] = {}
    for label in args.sizes.split(","):
        results[label] = bench_size(label, SIZES[label], base, args.seed, args.agentsview, args.hybrid,
                                    not args.no_daemon_disk)
    (base / "results.json").write_text(json.dumps(results, indent=2))
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
