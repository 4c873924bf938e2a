"""Opening the index: the writer's handle (after a crash: its WAL checkpointed, an unfinished commit's
rows removed, its indexes checked and rebuilt) and a reader's (which hands a dead writer's leftovers
to a writer first). Apart from ``indexer/store.py`` so that the store stays below the integrity
checks that use it (indexer/integrity.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from aivault import log
from aivault.errors import IndexLocked, IndexWriteFailed
from aivault.home import Home
from aivault.indexer import integrity, sql_maint
from aivault.indexer.store import (
    UNREADABLE,
    Meta,
    classify_write_error,
    connect,
    damaged,
    migrate_from,
    read_meta,
    reindex_if_stale,
    repair_unfinished,
    unfinished_rows,
)

_log = log.get("indexer.store")


def open_writer(home: Home) -> tuple[duckdb.DuckDBPyConnection, Meta]:
    """The read-write handle: migrated, cleared of an unfinished commit's rows, and emptied for
    re-indexing if another tokenizer built it. A reclaim's temporary file left by a kill is removed
    first (indexer/reclaim.py): only the writer, which holds daemon.pid, ever calls this."""
    from aivault.indexer.leftover import clean_leftover

    clean_leftover(home.db_path)
    return _open_read_write(home, reindex=True)


# Files of an older schema were written by versions that did not look after the indexes
# (indexer/integrity.py): they are checked and rebuilt once.
INDEXES_CHECKED_SINCE = 4


def _open_read_write(home: Home, *, reindex: bool) -> tuple[duckdb.DuckDBPyConnection, Meta]:
    """The read-write handle. A file whose WAL is there was not closed cleanly (its writer was killed,
    or DuckDB invalidated it): its WAL is checkpointed first and its indexes checked and rebuilt."""
    home.ensure()
    unclean = _wal(home).exists()
    old = os.umask(0o077)
    try:
        con = connect(home.db_path, read_only=False)
    finally:
        os.umask(old)
    try:
        if unclean:
            # First, before any statement could leave an index unbound until the close: see
            # indexer/integrity.py (DuckDB's shutdown checkpoint drops a replayed WAL's index entries).
            con.execute(sql_maint.CHECKPOINT)
        meta, version = migrate_from(con)
        for table, n in repair_unfinished(con, meta).items():
            integrity.record(con, "unfinished-commit", f"{table}: {n:,} row(s) of a commit that never finished "
                                                       "removed", n)
        if unclean or 0 < version < INDEXES_CHECKED_SINCE:
            integrity.verify_and_rebuild(con, why="the last writer did not close the index" if unclean else
                                         f"first opened by a version that checks indexes (schema {version})")
        if reindex:
            meta = reindex_if_stale(con, meta)
    except UNREADABLE as exc:
        con.close()
        # The opening writes (the WAL into the file, an unfinished commit's removal, the indexes
        # rebuilt): a full disk refusing them is not damage, and `aivault clear` is not its cure.
        failure = classify_write_error(exc, home)
        if failure.disk_full:
            raise IndexWriteFailed(failure.checkpoint_summary()) from exc
        raise damaged(home.db_path, exc) from exc
    return con, meta


def _wal(home: Home) -> Path:
    return Path(str(home.db_path) + ".wal")


def open_reader(home: Home) -> duckdb.DuckDBPyConnection:
    """A read-only handle. If the last writer died (its WAL is still there) and left rows of an
    unfinished commit, and no writer holds the file now, those rows are removed first (a read-only
    handle cannot remove them, and a search would count them)."""
    con = connect(home.db_path, read_only=True)
    try:
        meta = read_meta(con)
    except UNREADABLE as exc:
        con.close()
        raise damaged(home.db_path, exc) from exc
    except duckdb.Error:
        return con  # a schema this version cannot read is reported by the caller's own queries
    if not _wal(home).exists():
        return con
    try:
        dirty = bool(unfinished_rows(con, meta))
    except duckdb.Error:
        return con
    if not dirty:
        return con
    con.close()
    try:
        # Only the repair: emptying a stale tokenizer's index is for a writer that then re-indexes,
        # while this search is answered not-ready (query/engine.py) and points at `aivault index`.
        wcon, _ = _open_read_write(home, reindex=False)
    except IndexLocked:
        pass  # a writer holds it, and repaired it when it opened
    except (duckdb.Error, OSError) as exc:
        _log.warning("the index holds rows of a commit that never finished and could not be opened to remove "
                     "them; searches may count them until `aivault index` or `aivault serve` runs",
                     error=str(exc))
    else:
        wcon.close()
    return connect(home.db_path, read_only=True)
