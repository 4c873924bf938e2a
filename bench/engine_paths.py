"""The engine's two lexical paths side by side on one index: every posting read in DuckDB (a one-shot CLI
search) against BM25 scored in NumPy over the memory-mapped sidecars (the daemon; docs/design.md §4a).

    python -m bench.engine_paths --home DATA_DIR [--reps 5] [--out FILE]

Opens the index of ``DATA_DIR`` read-only in this process, builds the postings sidecars beside it if
they are missing (``index.duckdb.postings/``, as a daemon would), then

1. asks both engines every query of the bench's classes (``bench.common.pick_queries``), a few
   questions and phrases, each plainly and with conversation scope, newest-first sort, an agent
   filter, a short page and the debug trace, and the second page wherever there is one, and counts
   the answers that differ (they must not: durationMs aside, answers are compared whole);
2. times each class on both paths (engine ``durationMs``, p50 / p95 over ``--reps`` rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import duckdb

from aivault.home import Home
from aivault.query.engine import Engine
from aivault.query.postings import PostingsSidecars
from aivault.query.request import parse_request
from bench.common import pick_queries, plain

QUESTIONS = ["what did we decide about the cache?", "where did I fix the lock error?",
             "how do we deploy the service to staging?", "why does the build fail on arm64?"]
VARIANTS: list[dict[str, Any]] = [{}, {"scope": "conversation"}, {"filters": {"sort": "newest"}},
                                  {"filters": {"agents": ["codex"]}}, {"limit": 3}, {"debug": True}]


def _plain(r: dict[str, Any]) -> Any:
    out = json.loads(json.dumps(r))
    out.pop("durationMs", None)
    return out


def compare(slow: Engine, fast: Engine, classes: dict[str, list[str]]) -> tuple[int, list[str]]:
    """(answers compared, the requests whose answers differ)."""
    asked, differ = 0, []
    for queries in classes.values():
        for q in queries:
            for v in VARIANTS:
                params = {"query": q, **v}
                a, b = plain(slow.search(parse_request(params))), plain(fast.search(parse_request(params)))
                asked += 1
                if _plain(a) != _plain(b):
                    differ.append(json.dumps(params))
                cursor = a.get("page", {}).get("cursor")
                if cursor:
                    later = {**params, "cursor": cursor}
                    asked += 1
                    req = parse_request(later)
                    if _plain(plain(slow.search(req))) != _plain(plain(fast.search(req))):
                        differ.append(json.dumps(later))
    return asked, differ


def timings(engine: Engine, queries: list[str], reps: int) -> tuple[float, float]:
    ms = sorted(plain(engine.search(parse_request({"query": q})))["durationMs"] for _ in range(reps) for q in queries)
    return statistics.median(ms), ms[max(int(len(ms) * 0.95) - 1, 0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True, type=Path)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    home = Home.resolve(args.home)
    con = duckdb.connect(str(home.db_path), read_only=True)
    side = PostingsSidecars(home.db_path, con, None)
    slow, fast = Engine(con, home.key()), Engine(con, home.key(), postings=side)
    t0 = time.monotonic()
    fast.search(parse_request({"query": "warm"}))
    side.wait_built(600)
    print(f"sidecars ready in {time.monotonic() - t0:.2f} s ({side.built} built now)", flush=True)
    classes = pick_queries(home.db_path, args.seed)
    classes["questions"] = QUESTIONS
    classes["phrase"] = [" ".join(x.split()[:2]) for x in classes["5-term"][:10]]
    asked, differ = compare(slow, fast, classes)
    print(f"compared {asked} answers: {len(differ)} differ", flush=True)
    for d in differ[:10]:
        print("  differs:", d)
    rows: dict[str, Any] = {}
    print(f"{'class':16s} {'DuckDB p50/p95 ms':>20s} {'sidecars p50/p95 ms':>22s}")
    for name, queries in classes.items():
        a, b = timings(slow, queries, args.reps), timings(fast, queries, args.reps)
        rows[name] = {"duckdb": a, "sidecars": b}
        print(f"{name:16s} {a[0]:9.1f} / {a[1]:6.1f} {b[0]:11.1f} / {b[1]:6.1f}")
    out = args.out or home.path.parent / "engine_paths.json"
    out.write_text(json.dumps({"home": str(home.path), "compared": asked, "differ": differ, "classes": rows},
                              indent=2))
    print(f"wrote {out}")
    fast.close()
    slow.close()


if __name__ == "__main__":
    main()
