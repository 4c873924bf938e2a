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

from aivault.errors import IndexLocked
from aivault.home import Home
from aivault.text import TOKENIZER_VERSION
from indexer import schema as q

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


def open_writer(home: Home) -> tuple[duckdb.DuckDBPyConnection, Meta]:
    home.ensure()
    old = os.umask(0o077)
    try:
        con = connect(home.db_path, read_only=False)
    finally:
        os.umask(old)
    meta = migrate(con)
    return con, meta


def open_reader(home: Home) -> duckdb.DuckDBPyConnection:
    return connect(home.db_path, read_only=True)
