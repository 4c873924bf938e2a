"""Retrieval-quality benchmark: lexical vs vector vs hybrid on a labelled multi-agent corpus.

    python -m bench.quality.run [--out bench/out/quality] [--filler 20000] [--seed 1]

Builds the corpus (bench.quality.corpus), indexes it with an in-process daemon, waits for
background embedding to cover it when the index has vectors, runs every accepted labelled query
through each route with ``force_route`` and prints Recall@5, Recall@10, MRR@10 and nDCG@10 per
route and query kind, and per-route latency p50/p95. A route the service does not offer is
reported as "not available": its numbers are never estimated. Results go to ``out/results.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality.corpus import KINDS, LabelledQuery, build
from bench.quality.incident import Incident
from bench.quality.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k

# "auto" is what users get: the planner picks lexical or hybrid per query.
ROUTES: tuple[str, ...] = ("lexical", "vector", "hybrid", "auto")
LIMIT = 10
METRICS: tuple[str, ...] = ("recall@5", "recall@10", "mrr@10", "ndcg@10")
DEFAULT_OUT = Path("bench/out/quality")
# Routes that need vectors; the lexical route never waits for embeddings.
_VECTOR_ROUTES = ("vector", "hybrid", "auto")


def score(ranked: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    """The four metrics of one ranked list against its relevant set."""
    return {
        "recall@5": recall_at_k(ranked, relevant, 5),
        "recall@10": recall_at_k(ranked, relevant, 10),
        "mrr@10": mrr_at_k(ranked, relevant, 10),
        "ndcg@10": ndcg_at_k(ranked, relevant, 10),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each metric over the per-query rows (which carry ``kind`` and the metric keys)."""
    out: dict[str, Any] = {}
    for kind in (*KINDS, "all"):
        sel = [r for r in rows if kind == "all" or r["kind"] == kind]
        out[kind] = {"n": len(sel), **{m: (sum(r[m] for r in sel) / len(sel) if sel else None) for m in METRICS}}
    return out


def wait_for_vectors(service: Any, timeout_s: float, poll_s: float = 2.0) -> dict[str, Any]:
    """Poll ``stats()`` until every eligible chunk is embedded, or ``timeout_s`` passes.

    The keys only exist once the index has vectors: their absence means vectors are not
    available at all, which is reported rather than waited for.
    """
    t0 = time.monotonic()
    last_print = 0.0
    while True:
        stats = service.stats()
        if "semanticEligible" not in stats or "semanticEmbedded" not in stats:
            return {"available": False, "reason": "the index reports no semanticEligible/semanticEmbedded"}
        eligible, embedded = int(stats["semanticEligible"]), int(stats["semanticEmbedded"])
        waited = time.monotonic() - t0
        done = eligible > 0 and embedded >= eligible
        if done or waited >= timeout_s:
            print(f"  embeddings: {embedded:,} / {eligible:,} chunks after {waited:.0f} s"
                  + ("" if done else " (timed out: vector routes run on partial coverage)"), flush=True)
            return {"available": True, "eligible": eligible, "embedded": embedded, "complete": done,
                    "waitedSeconds": round(waited, 1)}
        if waited - last_print >= 10.0:
            last_print = waited
            print(f"  embeddings: {embedded:,} / {eligible:,} chunks ({waited:.0f} s)", flush=True)
        time.sleep(poll_s)


def _forced(route: str) -> str | None:
    return None if route == "auto" else route


def run_route(service: Any, route: str, queries: Sequence[LabelledQuery]) -> dict[str, Any]:
    """Every query through one forced route: per-query ranks and metrics, latency, availability."""
    try:
        # One untimed query first: the first search of a route pays one-off set-up costs
        # (statement preparation, caches) that would otherwise land in the p95.
        service.search({"query": queries[0].query, "limit": LIMIT}, force_route=_forced(route))
    except ValueError as e:
        if "not available" in str(e):
            return {"available": False, "reason": str(e)}
        raise
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    failures: dict[str, int] = {}
    for q in queries:
        t0 = time.perf_counter()
        result = service.search({"query": q.query, "limit": LIMIT}, force_route=_forced(route))
        ms = (time.perf_counter() - t0) * 1000.0
        latencies.append(ms)
        if result.get("kind") != "results":
            # Counted and scored as an empty list: a failing route must not look better by skipping.
            failures[str(result.get("kind"))] = failures.get(str(result.get("kind")), 0) + 1
            hits: list[str] = []
        else:
            hits = [h["sessionId"] for h in result["hits"]]
        rank = next((i for i, s in enumerate(hits, 1) if s in q.relevant), None)
        rows.append({"id": q.id, "kind": q.kind, "rank": rank, "ms": round(ms, 3), "top": hits,
                     **score(hits, q.relevant)})
    return {
        "available": True,
        "reason": None,
        "failures": failures,
        "metrics": summarize(rows),
        "latencyMs": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                      "mean": sum(latencies) / len(latencies), "n": len(latencies)},
        "perQuery": rows,
    }


def _fmt(v: float | None) -> str:
    return "    -" if v is None else f"{v:5.3f}"


def print_report(report: dict[str, Any]) -> None:
    q = report["queries"]
    print("\nqueries (accepted by their kind's check / written):")
    for kind in KINDS:
        print(f"  {kind:<10} {q[kind]['accepted']:>4} / {q[kind]['total']}")
    print(f"\n{'route':<8} {'kind':<10} {'n':>4}  {'R@5':>5}  {'R@10':>5}  {'MRR@10':>6}  {'nDCG@10':>7}")
    for route, r in report["routes"].items():
        if not r["available"]:
            print(f"{route:<8} not available: {r['reason']}")
            continue
        for kind in (*KINDS, "all"):
            m = r["metrics"][kind]
            print(f"{route:<8} {kind:<10} {m['n']:>4}  {_fmt(m['recall@5'])}  {_fmt(m['recall@10'])}  "
                  f"{_fmt(m['mrr@10']):>6}  {_fmt(m['ndcg@10']):>7}")
    print(f"\n{'latency':<8} {'p50 ms':>8} {'p95 ms':>8} {'n':>5}")
    for route, r in report["routes"].items():
        if not r["available"]:
            print(f"{route:<8} {'not available':>17}")
            continue
        lat = r["latencyMs"]
        fails = sum(r["failures"].values())
        print(f"{route:<8} {lat['p50']:8.2f} {lat['p95']:8.2f} {lat['n']:>5}"
              + (f"   ({fails} searches did not return results: {r['failures']})" if fails else ""))


def evaluate(out: Path, *, filler_messages: int, seed: int, routes: Sequence[str] = ROUTES,
             embed_timeout_s: float = 1800.0, incidents: Sequence[Incident] | None = None,
             reuse_index: bool = False) -> dict[str, Any]:
    """Build, index, query; return the report (also written to ``out/results.json``)."""
    from aivault import policy
    from aivault.broker.daemon import Daemon
    from aivault.home import Home, write_private

    t0 = time.monotonic()
    queries = build(out, filler_messages=filler_messages, seed=seed, incidents=incidents)
    corpus = json.loads((out / "corpus.json").read_text())
    print(f"corpus: {corpus['incidents']} incidents, {corpus['distractors']} distractors, "
          f"{corpus['fillerSessions']} filler sessions ({filler_messages:,} filler messages) "
          f"in {time.monotonic() - t0:.1f} s", flush=True)
    counts = {k: {"total": sum(1 for q in queries if q.kind == k),
                  "accepted": sum(1 for q in queries if q.kind == k and q.accepted)} for k in KINDS}
    for q in queries:
        if not q.accepted:
            print(f"  rejected {q.id}: {q.reason}", flush=True)
    accepted = [q for q in queries if q.accepted]

    home_dir = out / "home"
    if home_dir.exists() and not reuse_index:
        shutil.rmtree(home_dir)  # a fresh index every run: numbers never mix two corpora
    home = Home.resolve(home_dir).ensure()
    policy.save(home, policy.Policy(True, None))
    if not any(r in _VECTOR_ROUTES for r in routes):
        # Nothing will be asked of the vectors, so do not spend the CPU embedding the corpus.
        write_private(home.config_path, json.dumps({"embed": {"enabled": False}}).encode())
    d = Daemon(home, extra_roots=[f"claude={out}/claude/projects", f"codex={out}/codex/sessions"],
               default_roots=False, schedule=False)
    d.start()
    try:
        t1 = time.monotonic()
        d.service.indexer.reconcile(full=True).result()
        index_s = time.monotonic() - t1
        stats = d.service.stats()
        print(f"indexed {stats['messagesCommitted']:,} messages, {stats['sessions']:,} sessions, "
              f"{stats['chunks']:,} chunks in {index_s:.1f} s", flush=True)
        semantic: dict[str, Any] = {"available": False, "reason": "no vector route requested"}
        if any(r in _VECTOR_ROUTES for r in routes):
            semantic = wait_for_vectors(d.service, embed_timeout_s)
            if not semantic["available"]:
                print(f"  vectors not available: {semantic['reason']}", flush=True)
        results: dict[str, Any] = {}
        for route in routes:
            if route in _VECTOR_ROUTES and not semantic["available"]:
                results[route] = {"available": False, "reason": f"vectors not available ({semantic['reason']})"}
                continue
            results[route] = run_route(d.service, route, accepted)
    finally:
        d.close()

    report = {
        "config": {"out": str(out), "seed": seed, "fillerMessages": filler_messages, "limit": LIMIT,
                   "routes": list(routes)},
        "corpus": {k: v for k, v in corpus.items() if k != "sessions"}
        | {"indexedMessages": stats["messagesCommitted"], "indexedSessions": stats["sessions"],
           "chunks": stats["chunks"], "indexSeconds": round(index_s, 2)},
        "queries": counts,
        "semantic": semantic,
        "routes": {route: {k: v for k, v in r.items() if k != "perQuery"} for route, r in results.items()},
        "perQuery": {route: r["perQuery"] for route, r in results.items() if r.get("perQuery") is not None},
    }
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="work directory (corpus, index, results.json)")
    ap.add_argument("--filler", type=int, default=20_000, help="filler messages from bench.gen_corpus")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--routes", default=",".join(ROUTES), help="comma-separated subset of " + ",".join(ROUTES))
    ap.add_argument("--reuse-index", action="store_true",
                    help="keep out/home: texts already embedded there are not embedded again")
    ap.add_argument("--embed-timeout", type=float, default=1800.0,
                    help="seconds to wait for background embedding before the vector routes run")
    args = ap.parse_args(argv)
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    unknown = [r for r in routes if r not in ROUTES]
    if unknown:
        ap.error(f"unknown route(s) {', '.join(unknown)}; choose from {', '.join(ROUTES)}")

    from aivault import log

    log.configure("warning", process="bench")
    # A run can take a while (embedding); on SIGTERM leave through the normal exit path so the
    # daemon closes the index and stops its scanner children.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    report = evaluate(args.out.absolute(), filler_messages=args.filler, seed=args.seed, routes=routes,
                      embed_timeout_s=args.embed_timeout, reuse_index=args.reuse_index)
    print_report(report)
    print(f"\nwrote {args.out / 'results.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
