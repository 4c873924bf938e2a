"""Does this DuckDB keep a dead writer's rows in an ART index across a plain open and close?

Plain DuckDB, no aivault code: a table with an index and rows checkpointed into the file; a child
process commits more rows and dies without closing (their only copy is the WAL); then a process
opens the file read-write and closes it, running ``--reopen`` statements in between (none by
default). Every row must then be found through the index. DuckDB 1.5.5 finds none of the new rows
after a bare open and close (duckdb/duckdb#23848, #25771); a ``CHECKPOINT`` statement, or any query
that uses the index, avoids it. ``indexer/store.py`` and ``indexer/integrity.py`` work around it
(docs/design.md §10a); rerun this when upgrading DuckDB.

    .venv/bin/python -m bench.duckdb_art_replay [--rows 400] [--new 5] [--reopen "CHECKPOINT"]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

CHILD = """
import os, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("INSERT INTO t SELECT i, 'new' FROM range(?, ?) r(i)", [int(sys.argv[2]), int(sys.argv[3])])
os._exit(0)
"""


def run(rows: int, new: int, reopen: list[str]) -> tuple[int, int]:
    """(new rows in the table, of those found through the index) after the open and close."""
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "t.duckdb")
        con = duckdb.connect(db)
        con.execute("CREATE TABLE t (id BIGINT, s VARCHAR)")
        con.execute("CREATE INDEX t_id ON t (id)")
        con.execute("INSERT INTO t SELECT i, 'old' FROM range(?) r(i)", [rows])
        con.close()
        subprocess.run([sys.executable, "-c", CHILD, db, str(rows), str(rows + new)], check=True)
        assert Path(db + ".wal").exists(), "the child was meant to leave its rows in the WAL"
        con = duckdb.connect(db)
        for stmt in reopen:
            con.execute(stmt).fetchall()
        con.close()
        con = duckdb.connect(db, read_only=True)
        try:
            in_table = int(con.execute("SELECT count(*) FROM t WHERE s = 'new'").fetchall()[0][0])
            found = sum(int(con.execute("SELECT count(*) FROM t WHERE id = ?", [i]).fetchall()[0][0])
                        for i in range(rows, rows + new))
        finally:
            con.close()
        return in_table, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.duckdb_art_replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=400, help="rows checkpointed before the kill")
    ap.add_argument("--new", type=int, default=5, help="rows committed by the writer that dies")
    ap.add_argument("--reopen", action="append", default=[], help="a statement run between the open and the "
                                                                  "close (repeatable)")
    args = ap.parse_args(argv)
    in_table, found = run(args.rows, args.new, args.reopen)
    print(f"duckdb {duckdb.__version__}: {in_table} of {args.new} new rows in the table, {found} found through "
          f"the index ({'KEPT' if found == in_table == args.new else 'LOST'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
