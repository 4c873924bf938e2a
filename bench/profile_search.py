"""Where the milliseconds of a lexical search go, per query class (issue step 8, item 2: profile first).

    python -m bench.profile_search --home DATA_DIR [--reps 3] [--top 12] [--seed 1] [--sidecars]

Opens the index of ``DATA_DIR`` read-only in this process (no daemon, no RPC: engine time only),
draws the bench's query classes from the indexed text (``bench.common.pick_queries``: 1-term rare /
mid / common, 2-term, 5-term) and runs each query ``--reps`` times, first plainly for the
latency, then under ``cProfile``. Per class it prints the p50 / p95 engine time, how many DuckDB
statements one search runs and how much of its time is spent inside DuckDB (``execute`` and the
fetches) against Python, the planner's chosen route, and the aivault functions with the most
cumulative time per search. Results go to ``<DATA_DIR>/../profile_search.json`` unless ``--out``.

``--sidecars`` profiles the daemon's path instead of a one-shot CLI's: the sorted segments' postings
sidecars (built first if missing, in ``DATA_DIR``) scored in NumPy (query/fastrank.py). The timed
pass runs after one untimed pass over the class, so what the daemon keeps per generation (sessions,
titles, page rows) is warm, as in a daemon that has answered a while.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from aivault.home import Home
from aivault.query.engine import Engine
from aivault.query.postings import PostingsSidecars
from aivault.query.request import parse_request
from bench.common import pick_queries, plain

# DuckDB's connection methods that run SQL or move its rows to Python.
_DUCKDB_CALLS = ("execute", "fetchall", "fetchone", "fetchnumpy", "fetch_arrow_table", "fetchdf", "arrow")


def _duckdb_time(stats: pstats.Stats) -> tuple[int, float]:
    """(statements executed, seconds inside DuckDB's execute and fetch calls)."""
    statements, seconds = 0, 0.0
    for (path, _line, name), (_cc, nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        # pybind11 methods show as "<built-in method _duckdb.execute>"
        if path != "~" or "_duckdb." not in name:
            continue
        method = name.rstrip(">").rsplit(".", 1)[-1]
        if method in _DUCKDB_CALLS:
            seconds += tt
            if method == "execute":
                statements += nc
    return statements, seconds


def _ours(stats: pstats.Stats, top: int) -> list[tuple[str, float, int]]:
    """The aivault functions with the most cumulative time: (module:function, seconds, calls)."""
    rows: list[tuple[str, float, int]] = []
    for (path, _line, name), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        parts = Path(path).parts
        for root in ("query", "aivault"):
            if root in parts:
                mod = "/".join(parts[parts.index(root):])
                break
        else:
            continue
        rows.append((f"{mod}:{name}", ct, nc))
    rows.sort(key=lambda r: -r[1])
    return rows[1:top + 1]  # the first is Engine.search itself


def profile_class(engine: Engine, queries: list[str], reps: int, top: int) -> dict[str, Any]:
    """Latency and profile of one query class."""
    reqs = [parse_request({"query": q, "limit": 10, "debug": True}) for q in queries]
    lat: list[float] = []
    routes: Counter[str] = Counter()
    for _ in range(reps):
        for req in reqs:
            t0 = time.perf_counter()
            res = plain(engine.search(req))
            lat.append((time.perf_counter() - t0) * 1000)
            routes[str((res.get("debug") or {}).get("route"))] += 1
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        for req in reqs:
            engine.search(req)
    prof.disable()
    stats = pstats.Stats(prof)
    n = reps * len(reqs)
    statements, in_duckdb = _duckdb_time(stats)
    total: float = stats.total_tt  # type: ignore[attr-defined]
    lat.sort()
    return {
        "queries": len(queries), "searches": n,
        "p50_ms": statistics.median(lat), "p95_ms": lat[min(len(lat) - 1, int(0.95 * len(lat)))],
        "profiled_ms_per_search": total * 1000 / n,
        "statements_per_search": statements / n,
        "duckdb_ms_per_search": in_duckdb * 1000 / n,
        "python_ms_per_search": (total - in_duckdb) * 1000 / n,
        "routes": dict(routes),
        "top": [{"function": f, "ms_per_search": s * 1000 / n, "calls_per_search": c / n}
                for f, s, c in _ours(stats, top)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="a data directory holding an index")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--sidecars", action="store_true", help="the daemon's path: postings sidecars scored in NumPy")
    args = ap.parse_args()
    home = Home.resolve(args.home)
    queries = pick_queries(home.db_path, args.seed)
    con = duckdb.connect(str(home.db_path), read_only=True)
    side = PostingsSidecars(home.db_path, con, None) if args.sidecars else None
    engine = Engine(con, home.key(), vectors=None, postings=side)
    out: dict[str, Any] = {"home": str(args.home), "sidecars": args.sidecars, "classes": {}}
    try:
        if side is not None:
            engine.search(parse_request({"query": "warm"}))  # queues the builds of missing sidecars
            if not side.wait_built(600):
                raise SystemExit("the postings sidecars were not built within 10 minutes")
        for name, qs in queries.items():
            if side is not None:
                for q in qs:
                    engine.search(parse_request({"query": q, "limit": 10, "debug": True}))
            r = profile_class(engine, qs, args.reps, args.top)
            out["classes"][name] = r
            print(f"\n== {name}: {r['queries']} queries x {args.reps}: p50 {r['p50_ms']:.1f} ms,"
                  f" p95 {r['p95_ms']:.1f} ms;"
                  f" profiled {r['profiled_ms_per_search']:.1f} ms/search = DuckDB {r['duckdb_ms_per_search']:.1f}"
                  f" ({r['statements_per_search']:.1f} statements) + Python {r['python_ms_per_search']:.1f};"
                  f" routes {r['routes']}")
            for t in r["top"]:
                print(f"   {t['ms_per_search']:7.2f} ms  {t['calls_per_search']:6.1f}x  {t['function']}")
    finally:
        engine.close()
        if side is not None:
            side.close()
        con.close()
    path = args.out or args.home.parent / "profile_search.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
