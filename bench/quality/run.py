"""Retrieval-quality benchmark: each route and a plain BM25 baseline on labelled session searches.

    python -m bench.quality.run [--datasets incidents,locomo] [--out bench/out/quality] [--filler 20000]

Two data sets: the hand-written ``incidents`` (exact / paraphrase / mixed queries over a corpus with
filler) and ``locomo`` (LoCoMo's questions over its conversations, read from ``--locomo``; skipped
with a note when that directory is absent). For each, the corpus is indexed by an in-process daemon
(real scanners, real DuckDB), background embedding is waited for when a vector route is asked, and
every query runs through each route: ``auto`` is the public path, ``aiVault.searchSessions`` over the
daemon's RPC socket (the planner's own choice; its chosen route is read from ``debug``), ``lexical``,
``vector`` and ``hybrid`` force one family in-process, and ``bm25-session`` is the baseline of
``bench.quality.baseline`` over the same indexed text. Recall_any@5 / @10, MRR@10 and nDCG@10 are
printed per route and query kind (LoCoMo: per category), ``auto`` also per planner route, with
latency p50/p95. A route the index cannot serve is "not available", never estimated. Results go to
``<out>/results.json`` (LoCoMo: ``<out>/locomo/results.json``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.quality import locomo
from bench.quality.baseline import SessionBM25
from bench.quality.corpus import build
from bench.quality.incident import Incident
from bench.quality.labels import KINDS, LabelledQuery
from bench.quality.metrics import mrr_at_k, ndcg_at_k, percentile, recall_any_at_k

# "auto" is what users get: the planner picks lexical or hybrid per query, through the RPC.
ROUTES: tuple[str, ...] = ("lexical", "vector", "hybrid", "auto", "bm25-session")
DATASETS: tuple[str, ...] = ("incidents", "locomo")
BASELINE = "bm25-session"
LIMIT = 10
METRICS: tuple[str, ...] = ("recall_any@5", "recall_any@10", "mrr@10", "ndcg@10")
DEFAULT_OUT = Path("bench/out/quality")
# Routes that need vectors; the lexical ones never wait for embeddings.
_VECTOR_ROUTES = ("vector", "hybrid", "auto")
# Every chunk text of every session, in order: the baseline's documents.
_SESSION_TEXTS = """SELECT s.session_id, s.cwd, string_agg(c.text, chr(10) ORDER BY c.chunk)
    FROM chunks c JOIN sessions s USING (sess) GROUP BY s.session_id, s.cwd"""

Search = Callable[[dict[str, Any]], dict[str, Any]]


def score(ranked: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    """The metrics of one ranked list against its relevant set."""
    return {
        "recall_any@5": recall_any_at_k(ranked, relevant, 5),
        "recall_any@10": recall_any_at_k(ranked, relevant, 10),
        "mrr@10": mrr_at_k(ranked, relevant, 10),
        "ndcg@10": ndcg_at_k(ranked, relevant, 10),
    }


def summarize(rows: Sequence[dict[str, Any]], kinds: Sequence[str] = KINDS, key: str = "kind") -> dict[str, Any]:
    """Mean of each metric over the per-query rows, per value of ``key`` in ``kinds`` and over all."""
    out: dict[str, Any] = {}
    for kind in (*kinds, "all"):
        sel = [r for r in rows if kind == "all" or r[key] == kind]
        out[kind] = {"n": len(sel), **{m: (sum(r[m] for r in sel) / len(sel) if sel else None) for m in METRICS}}
    return out


def by_planner_route(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``auto``'s rows grouped by the route the planner chose (debug.route)."""
    routes = sorted({str(r.get("plannerRoute")) for r in rows})
    return {k: v for k, v in summarize(rows, routes, key="plannerRoute").items() if k != "all"}


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


def request(q: LabelledQuery) -> dict[str, Any]:
    """The searchSessions body of a labelled query (debug on: the planner's route is read from it)."""
    body: dict[str, Any] = {"query": q.query, "limit": LIMIT, "debug": True}
    if q.scope_paths:
        body["filters"] = {"scopePaths": list(q.scope_paths)}
    return body


def run_route(search: Search, queries: Sequence[LabelledQuery], kinds: Sequence[str] = KINDS) -> dict[str, Any]:
    """Every query through one search function: per-query ranks and metrics, latency, availability."""
    try:
        # One untimed query first: the first search of a route pays one-off set-up costs
        # (statement preparation, caches) that would otherwise land in the p95.
        search(request(queries[0]))
    except ValueError as e:
        if "not available" in str(e):
            return {"available": False, "reason": str(e)}
        raise
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    failures: dict[str, int] = {}
    for q in queries:
        t0 = time.perf_counter()
        result = search(request(q))
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
                     "plannerRoute": (result.get("debug") or {}).get("route"), **score(hits, q.relevant)})
    return {
        "available": True,
        "reason": None,
        "failures": failures,
        "metrics": summarize(rows, kinds),
        "plannerRoutes": by_planner_route(rows),
        "latencyMs": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                      "mean": sum(latencies) / len(latencies), "n": len(latencies)},
        "perQuery": rows,
    }


def baseline_search(service: Any) -> Search:
    """``bm25-session`` as a search function over the texts the index holds (one collection per scope)."""
    cur = service.con.cursor()
    try:
        rows = cur.execute(_SESSION_TEXTS).fetchall()
    finally:
        cur.close()
    texts = {str(sid): str(text) for sid, _, text in rows}
    cwd = {str(sid): (str(c) if c is not None else "") for sid, c, _ in rows}
    models: dict[tuple[str, ...], SessionBM25] = {}

    def within(sid: str, scope: tuple[str, ...]) -> bool:
        return not scope or any(cwd[sid] == p or cwd[sid].startswith(p.rstrip("/") + "/") for p in scope)

    def search(body: dict[str, Any]) -> dict[str, Any]:
        scope = tuple((body.get("filters") or {}).get("scopePaths") or ())
        if scope not in models:
            models[scope] = SessionBM25({s: t for s, t in texts.items() if within(s, scope)})
        ranked = models[scope].rank(str(body["query"]), int(body.get("limit", LIMIT)))
        return {"kind": "results", "hits": [{"sessionId": s} for s in ranked]}

    return search


def _fmt(v: float | None) -> str:
    return "    -" if v is None else f"{v:5.3f}"


def print_report(report: dict[str, Any]) -> None:
    kinds = report["config"].get("kinds", list(KINDS))
    q = report["queries"]
    print(f"\n[{report['config'].get('dataset', 'incidents')}] queries (accepted / written):")
    for kind in kinds:
        print(f"  {kind:<12} {q[kind]['accepted']:>4} / {q[kind]['total']}")
    print(f"\n{'route':<13} {'kind':<12} {'n':>4}  {'R@5':>5}  {'R@10':>5}  {'MRR@10':>6}  {'nDCG@10':>7}")
    for route, r in report["routes"].items():
        if not r["available"]:
            print(f"{route:<13} not available: {r['reason']}")
            continue
        for kind in (*kinds, "all"):
            m = r["metrics"][kind]
            print(f"{route:<13} {kind:<12} {m['n']:>4}  {_fmt(m['recall_any@5'])}  {_fmt(m['recall_any@10'])}  "
                  f"{_fmt(m['mrr@10']):>6}  {_fmt(m['ndcg@10']):>7}")
    auto = report["routes"].get("auto")
    if auto and auto["available"]:
        print("\nauto, by the planner's route:")
        for route, m in auto["plannerRoutes"].items():
            print(f"  {route:<11} {m['n']:>4}  R@5 {_fmt(m['recall_any@5'])}  MRR@10 {_fmt(m['mrr@10'])}")
    print(f"\n{'latency':<13} {'p50 ms':>8} {'p95 ms':>8} {'n':>5}")
    for route, r in report["routes"].items():
        if not r["available"]:
            continue
        lat = r["latencyMs"]
        fails = sum(r["failures"].values())
        print(f"{route:<13} {lat['p50']:8.2f} {lat['p95']:8.2f} {lat['n']:>5}"
              + (f"   ({fails} searches did not return results: {r['failures']})" if fails else ""))


def measure(out: Path, queries: Sequence[LabelledQuery], roots: list[str], *, routes: Sequence[str],
            kinds: Sequence[str], embed_timeout_s: float, reuse_index: bool) -> dict[str, Any]:
    """Index the corpus under ``out`` with an in-process daemon and run every route over ``queries``."""
    from aivault import policy
    from aivault.broker.daemon import Daemon
    from aivault.home import Home, write_private
    from aivault.protocol import METHOD_SEARCH
    from aivault.thin.client import RpcClient

    home_dir = out / "home"
    if home_dir.exists() and not reuse_index:
        shutil.rmtree(home_dir)  # a fresh index every run: numbers never mix two corpora
    home = Home.resolve(home_dir).ensure()
    policy.save(home, policy.Policy(True, None))
    if not any(r in _VECTOR_ROUTES for r in routes):
        # Nothing will be asked of the vectors, so do not spend the CPU embedding the corpus.
        write_private(home.config_path, json.dumps({"embed": {"enabled": False}}).encode())
    d = Daemon(home, extra_roots=roots, default_roots=False, schedule=False)
    d.start()
    rpc = RpcClient.for_home(home, timeout_s=120)
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
            if route in ("vector", "hybrid") and not semantic["available"]:
                results[route] = {"available": False, "reason": f"vectors not available ({semantic['reason']})"}
                continue
            search: Search
            if route == "auto":
                def search(body: dict[str, Any]) -> dict[str, Any]:
                    answer: dict[str, Any] = rpc.call(METHOD_SEARCH, body)
                    return answer
            elif route == BASELINE:
                search = baseline_search(d.service)
            else:
                def search(body: dict[str, Any], _r: str = route) -> dict[str, Any]:
                    answer: dict[str, Any] = dict(d.service.search(body, force_route=_r))
                    return answer
            results[route] = run_route(search, queries, kinds)
    finally:
        rpc.close()
        d.close()
    return {"stats": stats, "indexSeconds": round(index_s, 2), "semantic": semantic, "results": results}


def _report(config: dict[str, Any], corpus: dict[str, Any], counts: dict[str, Any], run: dict[str, Any],
            out: Path) -> dict[str, Any]:
    stats = run["stats"]
    results = run["results"]
    report = {
        "config": config,
        "corpus": corpus | {"indexedMessages": stats["messagesCommitted"], "indexedSessions": stats["sessions"],
                            "chunks": stats["chunks"], "indexSeconds": run["indexSeconds"]},
        "queries": counts,
        "semantic": run["semantic"],
        "routes": {route: {k: v for k, v in r.items() if k != "perQuery"} for route, r in results.items()},
        "perQuery": {route: r["perQuery"] for route, r in results.items() if r.get("perQuery") is not None},
    }
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def evaluate(out: Path, *, filler_messages: int, seed: int, routes: Sequence[str] = ROUTES,
             embed_timeout_s: float = 1800.0, incidents: Sequence[Incident] | None = None,
             reuse_index: bool = False) -> dict[str, Any]:
    """The incident benchmark: build, index, query; the report (also written to ``out/results.json``)."""
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
    run = measure(out, accepted, [f"claude={out}/claude/projects", f"codex={out}/codex/sessions"], routes=routes,
                  kinds=KINDS, embed_timeout_s=embed_timeout_s, reuse_index=reuse_index)
    config = {"dataset": "incidents", "out": str(out), "seed": seed, "fillerMessages": filler_messages,
              "limit": LIMIT, "routes": list(routes), "kinds": list(KINDS)}
    return _report(config, {k: v for k, v in corpus.items() if k != "sessions"}, counts, run, out)


def evaluate_locomo(out: Path, data: Path, *, seed: int = 1, routes: Sequence[str] = ROUTES,
                    embed_timeout_s: float = 1800.0, reuse_index: bool = False) -> dict[str, Any]:
    """The LoCoMo benchmark (bench.quality.locomo): the report (also written to ``out/results.json``)."""
    conversations = locomo.load(data)
    queries = locomo.build(out, conversations, seed=seed)
    print(f"locomo: {len(conversations)} conversations, {sum(len(c.sessions) for c in conversations)} sessions, "
          f"{len(queries)} questions from {data}", flush=True)
    counts = {k: {"total": sum(1 for q in queries if q.kind == k),
                  "accepted": sum(1 for q in queries if q.kind == k)} for k in locomo.KINDS}
    run = measure(out, queries, [f"claude={out}/claude/projects"], routes=routes, kinds=locomo.KINDS,
                  embed_timeout_s=embed_timeout_s, reuse_index=reuse_index)
    config = {"dataset": "locomo", "data": str(data), "out": str(out), "seed": seed, "limit": LIMIT,
              "routes": list(routes), "kinds": list(locomo.KINDS)}
    return _report(config, {"conversations": [c.key for c in conversations]}, counts, run, out)


def _split(value: str, allowed: Sequence[str], what: str, ap: argparse.ArgumentParser) -> list[str]:
    items = [r.strip() for r in value.split(",") if r.strip()]
    unknown = [r for r in items if r not in allowed]
    if unknown:
        ap.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return items


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated subset of " + ",".join(DATASETS))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="work directory (corpus, index, results.json)")
    ap.add_argument("--filler", type=int, default=20_000, help="incidents: filler messages from bench.gen_corpus")
    ap.add_argument("--locomo", type=Path, default=locomo.DEFAULT_DIR, help="the LoCoMo conversations' directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--routes", default=",".join(ROUTES), help="comma-separated subset of " + ",".join(ROUTES))
    ap.add_argument("--reuse-index", action="store_true",
                    help="keep <out>/home: texts already embedded there are not embedded again")
    ap.add_argument("--embed-timeout", type=float, default=1800.0,
                    help="seconds to wait for background embedding before the vector routes run")
    args = ap.parse_args(argv)
    routes = _split(args.routes, ROUTES, "route(s)", ap)
    datasets = _split(args.datasets, DATASETS, "dataset(s)", ap)

    from aivault import log

    log.configure("warning", process="bench")
    # A run can take a while (embedding); on SIGTERM leave through the normal exit path so the
    # daemon closes the index and stops its scanner children.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    out = args.out.absolute()
    if "incidents" in datasets:
        report = evaluate(out, filler_messages=args.filler, seed=args.seed, routes=routes,
                          embed_timeout_s=args.embed_timeout, reuse_index=args.reuse_index)
        print_report(report)
        print(f"\nwrote {out / 'results.json'}", file=sys.stderr)
    if "locomo" in datasets:
        if not args.locomo.is_dir():
            print(f"locomo: skipped, {args.locomo} is not a directory (the data set is not part of the repository)",
                  file=sys.stderr)
        else:
            report = evaluate_locomo(out / "locomo", args.locomo, seed=args.seed, routes=routes,
                                     embed_timeout_s=args.embed_timeout, reuse_index=args.reuse_index)
            print_report(report)
            print(f"\nwrote {out / 'locomo' / 'results.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
