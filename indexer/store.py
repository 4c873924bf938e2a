"""Opening the DuckDB file: migrations, the meta row, and lock errors users can act on.

DuckDB lets one process open a file read-write or many read-only, never both. The indexer
(inside ``aivault serve`` or ``aivault index``) is the only read-write opener; its query
workers are threads using cursors of the same connection. The CLI without a daemon opens
read-only.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from aivault import log
from aivault.errors import IndexLocked
from aivault.home import Home
from aivault.text import TOKENIZER_VERSION
from indexer import schema as q

_log = log.get("indexer.store")

# DuckDB's own defaults take 80% of RAM; the indexer's budget (issue: <= 1.5 GB RSS) is far less.
MEMORY_LIMIT = os.environ.get("AIVAULT_DUCKDB_MEMORY", "1GB")
THREADS = int(os.environ.get("AIVAULT_DUCKDB_THREADS", "2"))
# A larger WAL between checkpoints keeps batch commits cheap; a checkpoint costs what changed.
CHECKPOINT_THRESHOLD = "256MB"


@dataclass(frozen=True, slots=True)
class Meta:
    identity: str
    generation: int
    created_at: int
    tokenizer: int
    next_file: int
    next_sess: int
    next_chunk: int
    next_segment: int
    n_chunks: int
    sum_dl: int

    def advanced(self, **changes: int) -> Meta:
        return replace(self, **changes)  # type: ignore[arg-type]


class IndexMissing(Exception):
    """No database file yet (read-only open)."""


def now_ms() -> int:
    return int(time.time() * 1000)


_LOCK_PID = re.compile(r"PID (\d+)")


def _lock_error(path: Path, exc: Exception) -> IndexLocked:
    text = str(exc)
    m = _LOCK_PID.search(text)
    who = f"process {m.group(1)}" if m else "another process"
    return IndexLocked(
        f"the index {path} is held read-write by {who}. Only one aivault indexer can write it at a time: "
        "use the running daemon (`aivault status`), or stop that process and retry."
    )


def connect(db_path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    config: dict[str, str | bool | int | float | list[str]] = {
        "threads": THREADS,
        "memory_limit": MEMORY_LIMIT,
        # Nothing may ever try the network for an extension.
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if read_only and not db_path.exists():
        raise IndexMissing(str(db_path))
    try:
        con = duckdb.connect(str(db_path), read_only=read_only, config=config)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise _lock_error(db_path, exc) from exc
        raise
    if not read_only:
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
        for suffix in ("", ".wal"):
            p = Path(str(db_path) + suffix)
            if p.exists():
                os.chmod(p, 0o600)
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK if anything in the block raises (then re-raise)."""
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def migrate(con: duckdb.DuckDBPyConnection) -> Meta:
    """Bring the schema to SCHEMA_VERSION and make sure the meta row exists."""
    con.execute("BEGIN")
    try:
        con.execute(q.CREATE_VERSION_TABLE)
        row = con.execute(q.SELECT_VERSION).fetchone()
        version = int(row[0]) if row else 0
        for v in range(version + 1, q.SCHEMA_VERSION + 1):
            for stmt in q.MIGRATIONS[v]:
                con.execute(stmt)
            con.execute(q.INSERT_VERSION, [v, now_ms()])
        if con.execute("SELECT count(*) FROM meta").fetchone() == (0,):
            con.execute(q.INSERT_META, [uuid.uuid4().hex, now_ms(), TOKENIZER_VERSION])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return read_meta(con)


def read_meta(con: duckdb.DuckDBPyConnection) -> Meta:
    row = con.execute(q.SELECT_META).fetchone()
    if row is None:
        raise RuntimeError("the index has no meta row; run `aivault clear` to rebuild it")
    return Meta(str(row[0]), *(int(r) for r in row[1:]))


# Rows every batch appends carry ids drawn from a counter in ``meta`` that advances in the same
# transaction, so a row whose id is at or past its counter belongs to a commit that never
# finished. (table, id column, meta counter)
_WATERMARKED = (("chunks", "chunk", "next_chunk"), ("sessions", "sess", "next_sess"),
                ("files", "file_id", "next_file"))


def _watermark_checks(con: duckdb.DuckDBPyConnection, meta: Meta) -> list[tuple[str, str, int]]:
    """(table, id column, first id no commit has handed out) for every table a batch appends to."""
    checks = [(t, col, int(getattr(meta, counter))) for t, col, counter in _WATERMARKED]
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    checks += [(name, "chunk", meta.next_chunk) for name, _ in con.execute(q.SELECT_SEGMENTS).fetchall()
               if name in tables]
    return checks


def _unfinished(con: duckdb.DuckDBPyConnection, meta: Meta) -> list[tuple[str, str, int, int]]:
    out = []
    for table, col, watermark in _watermark_checks(con, meta):
        row = con.execute(f"SELECT count(*) FROM {table} WHERE {col} >= ?", [watermark]).fetchone()
        if row and row[0]:
            out.append((table, col, watermark, int(row[0])))
    return out


def unfinished_rows(con: duckdb.DuckDBPyConnection, meta: Meta) -> dict[str, int]:
    """Rows of a commit that never finished, per table (normally none).

    DuckDB 1.5.5 can bring them back: a process killed while committing a batch large enough
    for DuckDB to write its rows straight into the file (over one row group, 122,880 rows:
    every batch's postings) may, on the next open, show that batch's postings although the
    rest of the transaction (its chunks, the meta row) is gone. Measured here: kill -9 at a
    random moment of a loop of such commits left one in 8-15 such openings with exactly one
    extra batch of rows (and never a rolled-back transaction's rows). Each counted table is
    scanned with a filter DuckDB answers from row-group min/max, so a clean index costs ~ms.
    """
    return {table: n for table, _, _, n in _unfinished(con, meta)}


def repair_unfinished(con: duckdb.DuckDBPyConnection, meta: Meta) -> dict[str, int]:
    """Delete the rows of an unfinished commit (see ``unfinished_rows``); returns what went."""
    found = _unfinished(con, meta)
    if not found:
        return {}
    with transaction(con):
        for table, col, watermark, _ in found:
            con.execute(f"DELETE FROM {table} WHERE {col} >= ?", [watermark])
    con.execute("CHECKPOINT")
    removed = {table: n for table, _, _, n in found}
    _log.warning("removed the rows of a commit that never finished (the last writer was killed while "
                 "committing; DuckDB had kept part of that commit)", rows=removed)
    return removed


def open_writer(home: Home) -> tuple[duckdb.DuckDBPyConnection, Meta]:
    home.ensure()
    old = os.umask(0o077)
    try:
        con = connect(home.db_path, read_only=False)
    finally:
        os.umask(old)
    meta = migrate(con)
    repair_unfinished(con, meta)
    return con, meta


def _wal(home: Home) -> Path:
    return Path(str(home.db_path) + ".wal")


def open_reader(home: Home) -> duckdb.DuckDBPyConnection:
    """A read-only handle. If the last writer died (its WAL is still there) and left rows of an
    unfinished commit, and no writer holds the file now, those rows are removed first (a read-only
    handle cannot remove them, and a search would count them)."""
    con = connect(home.db_path, read_only=True)
    if not _wal(home).exists():
        return con
    try:
        dirty = bool(unfinished_rows(con, read_meta(con)))
    except duckdb.Error:
        return con  # a schema this version cannot read is reported by the caller's own queries
    if not dirty:
        return con
    con.close()
    try:
        wcon, _ = open_writer(home)
    except IndexLocked:
        pass  # a writer holds it, and repaired it when it opened
    except (duckdb.Error, OSError) as exc:
        _log.warning("the index holds rows of a commit that never finished and could not be opened to remove "
                     "them; searches may count them until `aivault index` or `aivault serve` runs",
                     error=str(exc))
    else:
        wcon.close()
    return connect(home.db_path, read_only=True)
