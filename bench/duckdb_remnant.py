"""Does this DuckDB bring back part of a commit that a kill interrupted?

A child process commits, in a loop, transactions shaped like the indexer's batches: 4,000 rows
into ``a``, 240,000 rows into ``b`` (over one row group, so DuckDB writes them straight into
the file) and a counter update. It is killed with SIGKILL at a random moment; the database is
then reopened and checked: ``a`` and ``b`` must both hold exactly the rows of the committed
counter. ``indexer/store.py`` removes such remnants on open; when this prints ``0 remnant``
for a new DuckDB version over many runs, that repair may no longer be needed.

    .venv/bin/python -m bench.duckdb_remnant --runs 20 [--kills 2] [--indexer-settings]
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

ROWS_A = 4000
PER_ROW_B = 60


def child(db: str, settings: list[str]) -> None:
    """Commit batches until killed."""
    con = duckdb.connect(db)
    for kv in settings:
        con.execute(f"SET {kv}")
    con.execute("CREATE TABLE IF NOT EXISTS a (id BIGINT, txt VARCHAR)")
    con.execute("CREATE TABLE IF NOT EXISTS b (id BIGINT, term BIGINT, tf USMALLINT)")
    con.execute("CREATE TABLE IF NOT EXISTS m (next BIGINT)")
    if con.execute("SELECT count(*) FROM m").fetchone() == (0,):
        con.execute("INSERT INTO m VALUES (0)")
    row = con.execute("SELECT next FROM m").fetchone()
    nxt = int(row[0]) if row else 0
    rng = np.random.default_rng()
    while True:
        ids = np.arange(nxt, nxt + ROWS_A, dtype=np.int64)
        ta = pa.table({"id": ids, "txt": pa.array(["x" * 100] * ROWS_A)})
        pid = np.repeat(ids, PER_ROW_B)
        tb = pa.table({"id": pid, "term": rng.integers(-2**62, 2**62, len(pid)),
                       "tf": np.ones(len(pid), np.uint16)})
        con.register("ta", ta)
        con.register("tb", tb)
        con.execute("BEGIN")
        con.execute("INSERT INTO a SELECT * FROM ta")
        con.execute("INSERT INTO b SELECT * FROM tb")
        con.execute("UPDATE m SET next = ?", [nxt + ROWS_A])
        con.execute("COMMIT")
        con.unregister("ta")
        con.unregister("tb")
        nxt += ROWS_A


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kills", type=int, default=1, help="kills per run, each after a reopen")
    ap.add_argument("--indexer-settings", action="store_true",
                    help="the indexer's settings (256MB checkpoint threshold, 1GB memory, 2 threads)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.set)
        return 0
    settings = ["checkpoint_threshold='256MB'", "memory_limit='1GB'", "threads=2"] if args.indexer_settings else []
    remnants = 0
    print(f"duckdb {duckdb.__version__}; {args.runs} runs x {args.kills} kill(s)")
    for run in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="aivault-remnant-"))
        db = work / "x.duckdb"
        try:
            for _ in range(args.kills):
                cmd = [sys.executable, "-m", "bench.duckdb_remnant", "--child", str(db),
                       *[a for kv in settings for a in ("--set", kv)]]
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(random.uniform(1.0, 4.0))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            if not db.exists():
                continue
            con = duckdb.connect(str(db), read_only=True)
            try:
                committed, rows_a, rows_b = con.execute(
                    "SELECT (SELECT next FROM m), (SELECT count(*) FROM a), (SELECT count(*) FROM b)").fetchone() \
                    or (0, 0, 0)
            finally:
                con.close()
            extra_b = rows_b - committed * PER_ROW_B
            bad = rows_a != committed or extra_b != 0
            remnants += bad
            print(f"run {run}: committed {committed:,} | a {rows_a:,} | b {rows_b:,} "
                  f"({extra_b:+,} rows){'  REMNANT' if bad else ''}", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{remnants} remnant(s) in {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
