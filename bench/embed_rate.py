"""Embedding throughput of the local model by thread count, on texts from an aivault index.

    .venv/bin/python -m bench.embed_rate [--db bench/out/home-100k/index.duckdb] [--texts 240]

Two sets of distinct texts are drawn from the chunks background embedding works on (user and
assistant text and thinking): ~200-character ones (the size docs/design.md §7 measures) and a
sample of all of them. Each set is embedded in calls of ``EMBED_CALL`` texts, as the worker
does, at one thread and at the worker's idle boost, twice, alternating (timings here are noisy:
read the ratio).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import duckdb

from aivault.embed import make_embedder
from aivault.embed.local import LocalEmbedder
from aivault.home import models_dir
from aivault.indexer import sql_write as q
from aivault.indexer.semantic import EMBED_CALL

REPO = Path(__file__).resolve().parent.parent


def texts_from(db: Path, n: int, seed: int = 1) -> dict[str, list[str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SELECT setseed(?)", [seed / 100])
        eligible = f"SELECT DISTINCT text FROM chunks WHERE {q.VECTOR_ELIGIBLE}"
        return {
            "~200 chars": [r[0] for r in con.execute(
                f"SELECT text FROM ({eligible} AND length(text) BETWEEN 180 AND 220) ORDER BY random() LIMIT ?",
                [n]).fetchall()],
            "all eligible": [r[0] for r in con.execute(
                f"SELECT text FROM ({eligible}) ORDER BY random() LIMIT ?", [n]).fetchall()],
        }
    finally:
        con.close()


def rate(embedder: LocalEmbedder, texts: list[str], threads: int) -> float:
    embedder.set_threads(threads)
    t0 = time.perf_counter()
    for i in range(0, len(texts), EMBED_CALL):
        embedder.embed(texts[i : i + EMBED_CALL])
    return len(texts) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=str(REPO / "bench" / "out" / "home-100k" / "index.duckdb"),
                    help="an aivault index.duckdb (bench.run leaves one per size in bench/out)")
    ap.add_argument("--texts", type=int, default=240)
    args = ap.parse_args(argv)
    db = Path(args.db)
    if not db.exists():
        raise SystemExit(f"{db} does not exist: run `python -m bench.run --sizes 100k` first, or pass --db")
    sets = texts_from(db, args.texts)
    embedder = make_embedder({"enabled": True}, models_dir())
    if not isinstance(embedder, LocalEmbedder):
        raise SystemExit("this measures the local model; the configured embedder is not local")
    counts = sorted({1, embedder.boost_threads})
    embedder.embed(sets["all eligible"][:EMBED_CALL])  # warm up
    print(f"{'texts':14} {'n':>4} {'avg chars':>9}  " + "  ".join(f"{c} thread(s)/s" for c in counts))
    for name, texts in sets.items():
        runs: dict[int, list[float]] = {c: [] for c in counts}
        for _ in range(2):
            for c in counts:
                runs[c].append(rate(embedder, texts, c))
        avg = sum(map(len, texts)) / max(len(texts), 1)
        print(f"{name:14} {len(texts):>4} {avg:>9.0f}  " + "  ".join(
            f"{statistics.mean(runs[c]):>13.1f}" for c in counts))
    embedder.set_threads(1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
