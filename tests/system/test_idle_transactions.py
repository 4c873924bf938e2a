"""No cursor of the daemon keeps a transaction open while it sits idle (indexer/duck.py).

DuckDB cannot clean up a committed write while an older transaction is still active, and until then
CHECKPOINT is refused; a cursor whose last statement's result was not read to the end is such a
transaction. CI of 910e8cb met it: the postings-sidecar thread's last statement was a ``fetchone()``,
and a daemon searched all along never reclaimed its free space.
"""

from __future__ import annotations

import ast
import shutil
import time
from pathlib import Path

import duckdb

from aivault.indexer.duck import one
from aivault.query.postings import PostingsSidecars, sidecar_dir
from tests.builders import ClaudeWriter
from tests.support.common import REPO, empty_roots
from tests.support.daemons import merged_daemon


def _write_elsewhere(con: duckdb.DuckDBPyConnection) -> None:
    """Commit a write on a cursor of its own (a table created and dropped)."""
    cur = con.cursor()
    try:
        cur.execute("CREATE TABLE scratch AS SELECT 1 AS x")
        cur.execute("DROP TABLE scratch")
    finally:
        cur.close()


def _checkpoint(con: duckdb.DuckDBPyConnection, tries: int = 1) -> str | None:
    """None when CHECKPOINT went through, else DuckDB's refusal (after ``tries`` attempts 0.2 s apart)."""
    error = None
    for _ in range(tries):
        try:
            con.execute("CHECKPOINT")
            return None
        except duckdb.Error as exc:
            error = str(exc)
            time.sleep(0.2)
    return error


def test_one_ends_its_statement_where_fetchone_leaves_it_open(tmp_path: Path) -> None:
    """A row read with ``one`` lets a later write be checkpointed; the same read with fetchone() does not."""
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    try:
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(10000)")
        reader = con.cursor()
        assert one(reader, "SELECT count(*) FROM t WHERE i >= ?", [5000]) == (5000,)
        assert one(reader, "SELECT i FROM t WHERE i < 0") is None
        _write_elsewhere(con)
        assert _checkpoint(con) is None
        # The hazard itself, so that this test shows what ``one`` avoids on this DuckDB.
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (10000,)
        _write_elsewhere(con)
        refused = _checkpoint(con)
        assert refused is not None and "other write transactions" in refused, refused
        reader.close()
        assert _checkpoint(con) is None
    finally:
        con.close()


def test_an_idle_daemon_pins_no_write(tmp_path: Path) -> None:
    """After indexing, merging and searches (sidecars built and pruned), a write commits and checkpoints."""
    roots = empty_roots(tmp_path)
    for i in range(6):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/s{i}")
        w.user(f"the duckdb lock error in service {i}")
        w.assistant("closed the read-only handle")
    d = merged_daemon(tmp_path / "home", roots)
    try:
        for q in ("duckdb lock", "handle", "service 3"):
            assert d.search(q)["kind"] == "results"
        svc = d.service
        assert svc.engine.postings is not None and svc.engine.postings.wait_built(60)
        # The sidecars built again by a manager of their own, and nothing else: its thread's last
        # statements are then a build's and the prune's reads (the daemon's maps stay valid).
        shutil.rmtree(sidecar_dir(svc.home.db_path))
        side = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
        try:
            cur = svc.con.cursor()
            try:
                identity = str(cur.execute("SELECT identity FROM meta").fetchall()[0][0])
                segments = [(str(a), str(b), int(c)) for a, b, c in
                            cur.execute("SELECT name, state, created_at FROM segments").fetchall()]
            finally:
                cur.close()
            assert side.arrays(identity, segments) is None and side.wait_built(60)
            assert side.arrays(identity, segments), "the sidecars were not built again"
            _write_elsewhere(svc.con)
            # A refusal for as long as ten tries is a transaction left open, not one in flight.
            assert _checkpoint(svc.con, tries=10) is None
        finally:
            side.close()
    finally:
        d.close()


def test_no_duckdb_result_is_read_with_fetchone() -> None:
    """The indexer's and the query layer's modules read single rows through ``one``, never fetchone()."""
    found = []
    for folder in ("indexer", "query"):
        for path in sorted((REPO / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Attribute) and node.attr == "fetchone":
                    found.append(f"{folder}/{path.name}:{node.lineno}")
    assert not found, found
