"""Giving freed blocks back to the disk: copy the database into a fresh file and rename it over the old.

DuckDB reuses the blocks that merges and deletes free but never shortens its file, so after a
one-shot index (the bulk segment is sorted into a new one, then dropped) or a daemon's merges the
file is about twice its used data. A *reclaim* copies every table, index, view, sequence and row
(``COPY FROM DATABASE``, which keeps each table's row order: a sorted segment stays sorted) into
``<db>.reclaim`` and renames that over the database. The meta row travels as a row, so the
identity, the generation and every id counter are the same afterwards; nothing a search, a cursor
or the vector sidecar depends on changes.

Steps, each safe against a kill -9 at any moment (``STEPS``, in order):

1. ``attached``: the temporary file exists, empty; the database is untouched.
2. ``copied``: every row is in the temporary file (partly still in its WAL).
3. ``detached``: DuckDB checkpointed and closed the temporary file (no WAL left) and it is fsynced;
   its catalog, row counts and meta row are checked against the database's.
4. ``closed``: the caller closed every connection to the database (DuckDB checkpoints on close, so
   no WAL of the old file is left that a later open could replay onto the new one).
5. ``renamed``: ``rename(tmp, db)`` (atomic), then the directory is fsynced.

A one-shot index ends with a merge of its bulk segment (and whatever else a compaction ``all``
takes) that would free the inputs' blocks for a reclaim to give back. When that merge is worth a
reclaim (``merge_worth_copying``), the copy runs it on the way instead (``copy(merge=plan)``): every
other table is copied as it is (the vocabulary without its repeated rows), the merged segment is
written straight into the copy from the database's inputs, and the copy's segment registry and
meta row name it. So the postings are written once, not sorted into the old file and then copied;
the steps, the check and the swap are the same, and until the rename the database is the old one
with its unmerged segments, which the next writer merges as usual.

Until 5 the database file is the old one, complete, and the temporary file is only ever a leftover
(``clean_leftover`` removes it when the writer next opens the index: counted and logged); from 5 on
it is the new one, complete. The temporary file never carries the database's name before it is
whole. Only the writer of the data directory (the holder of ``daemon.pid``, aivault/vault/session.py)
reclaims or cleans, so no other process opens the database read-write between 4 and 5; a reader
that opens it then reads the old file to its end.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from aivault import log
from aivault.indexer import schema, sql_maint, sql_write
from aivault.indexer.duck import one
from aivault.indexer.leftover import TMP_SUFFIX as TMP_SUFFIX
from aivault.indexer.leftover import _remove, _wal
from aivault.indexer.leftover import clean_leftover as clean_leftover
from aivault.indexer.leftover import leftovers_removed as leftovers_removed
from aivault.indexer.leftover import tmp_path as tmp_path
from aivault.indexer.segments import MergePlan, SegmentSet
from aivault.indexer.store import now_ms, transaction

_log = log.get("indexer.reclaim")

# Reclaim when the file is larger than this many times its used data ...
RECLAIM_RATIO = 1.3
# ... and the free part is at least this much (copying a small file to save a few MB is not worth it).
RECLAIM_MIN_FREE_BYTES = int(float(os.environ.get("AIVAULT_RECLAIM_MIN_FREE_MB", "32")) * (1 << 20))
# The copy needs about the used size on the same file system; this much is kept free besides.
SPACE_MARGIN_BYTES = 64 << 20
SPACE_FACTOR = 1.1

STEPS = ("attached", "copied", "detached", "closed", "renamed")
_ATTACHED_AS = "aivault_reclaim"
# Test hook: "STEP:PATH" writes STEP to PATH when the reclaim reaches STEP, then waits to be killed
# (tests/system/test_reclaim.py kills the process there with SIGKILL); "STEP:PATH:SECONDS" waits that long
# and goes on (a search or a reconcile is then sent while the reclaim is held there).
PAUSE_ENV = "AIVAULT_RECLAIM_PAUSE"

META_NEXT_SEGMENT = 7  # its place in SELECT_META's row


class ReclaimFailed(Exception):
    """The copy could not be made or did not match: the database is as it was, the copy is removed."""


@dataclass(frozen=True, slots=True)
class Usage:
    file_bytes: int
    used_bytes: int
    free_bytes: int  # blocks DuckDB has freed inside the file

    @property
    def ratio(self) -> float:
        return self.file_bytes / self.used_bytes if self.used_bytes else 1.0

    def due(self) -> bool:
        return self.ratio > RECLAIM_RATIO and self.file_bytes - self.used_bytes >= RECLAIM_MIN_FREE_BYTES

    def as_dict(self) -> dict[str, int]:
        return {"fileBytes": self.file_bytes, "usedBytes": self.used_bytes, "freeBytes": self.free_bytes}


def database_name(con: duckdb.DuckDBPyConnection) -> str:
    row = one(con, sql_maint.CURRENT_DATABASE)
    return str(row[0]) if row else "main"


def _blocks(con: duckdb.DuckDBPyConnection, name: str) -> tuple[int, int, int]:
    """DuckDB's block size, used and free blocks of the attached database ``name``."""
    row = one(con, sql_maint.DATABASE_SIZE, [name])
    block, _total, used, free = (int(v) for v in row) if row else (0, 0, 0, 0)
    return block, used, free


def usage(con: duckdb.DuckDBPyConnection, db_path: Path | None = None) -> Usage:
    """Used and free bytes of the open database (DuckDB's block counts) and its file's size."""
    name = database_name(con)
    block, used, free = _blocks(con, name)
    if db_path is None:
        found = one(con, sql_maint.DATABASE_PATH, [name])
        db_path = Path(str(found[0])) if found else Path()
    return Usage(db_path.stat().st_size, used * block, free * block)


def merge_worth_copying(con: duckdb.DuckDBPyConnection, plan: MergePlan, db_path: Path) -> bool:
    """Whether ``plan``'s merge, run in place, would leave the file due for a reclaim: its inputs'
    blocks freed on top of what is free now (the merged segment about their size).

    ``con``: the writer's. It is checkpointed first, so that the inputs' blocks are in the file to be
    counted, unless the file and its WAL together are too small to free RECLAIM_MIN_FREE_BYTES
    (then nothing is written: a small index merges in place as it always did).
    """
    wal = _wal(db_path)
    if db_path.stat().st_size + (wal.stat().st_size if wal.exists() else 0) < RECLAIM_MIN_FREE_BYTES:
        return False
    con.execute(sql_maint.CHECKPOINT)
    block, used, free = _blocks(con, database_name(con))
    u = Usage(db_path.stat().st_size, used * block, free * block)
    inputs = 0
    for seg in plan.inputs:
        found = one(con, sql_maint.TABLE_BLOCKS.format(table=seg.name))
        inputs += (int(found[0]) if found else 0) * block
    after = Usage(u.file_bytes + max(0, inputs - u.free_bytes), u.used_bytes, u.free_bytes + inputs)
    return after.due()


def disk_problem(db_path: Path, used_bytes: int) -> str | None:
    """Why there is not room for the copy next to the database, or None."""
    try:
        vfs = os.statvfs(db_path.parent)
    except OSError as exc:
        return f"cannot read the free space of {db_path.parent}: {exc}"
    free = vfs.f_bavail * vfs.f_frsize
    need = int(used_bytes * SPACE_FACTOR) + SPACE_MARGIN_BYTES
    if free < need:
        return (f"not enough free disk space in {db_path.parent} to copy the index: {free / 1e6:,.0f} MB free, "
                f"{need / 1e6:,.0f} MB needed")
    return None


def pause_at(step: str) -> None:
    """The test hook (PAUSE_ENV): announce ``step`` and wait to be killed there."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec or spec.partition(":")[0] != step:
        return
    where, _, seconds = spec.partition(":")[2].partition(":")
    Path(where).write_text(step)
    if seconds:
        time.sleep(float(seconds))
        return
    while True:
        time.sleep(1)


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _signature(con: duckdb.DuckDBPyConnection, db: str) -> tuple[list[tuple[str, str, str]], dict[str, int],
                                                                    tuple[object, ...] | None]:
    """What must be equal in both files: the catalog (as SQL), each table's rows, the meta row."""
    catalog = [(str(a), str(b), str(c)) for a, b, c in con.execute(sql_maint.CATALOG, {"db": db}).fetchall()]
    counts = {}
    for (table,) in con.execute(sql_maint.TABLES_OF, [db]).fetchall():
        row = one(con, sql_maint.TABLE_ROWS.format(db=db, table=table))
        counts[str(table)] = int(row[0]) if row else -1
    meta = one(con, schema.SELECT_META.replace("FROM meta", f'FROM "{db}".meta'))
    return catalog, counts, tuple(meta) if meta else None


def _copy_merging(con: duckdb.DuckDBPyConnection, src: str, plan: MergePlan) -> int:
    """Step 2 of a merging copy: the tables besides ``plan``'s inputs, then the merged segment
    written into the copy from them, and the copy's registry naming it (with a new, empty active
    segment if the active one was merged, as a compaction's freeze leaves). Returns its rows."""
    inputs = {s.name for s in plan.inputs}
    fresh = _fresh_active(plan)
    con.execute(sql_maint.COPY_SCHEMA.format(src=src, name=_ATTACHED_AS))
    con.execute(sql_maint.USE_COPY.format(name=_ATTACHED_AS))  # unqualified names below are the copy's
    try:
        for (table,) in con.execute(sql_maint.TABLES_OF, [src]).fetchall():
            if table in inputs:
                con.execute(schema.DROP_SEGMENT.format(name=table))  # its empty twin: the merge replaces it
            else:
                copy_rows = sql_maint.COPY_VOCAB if table == "vocab_log" else sql_maint.COPY_TABLE
                con.execute(copy_rows.format(db=src, table=table))
        rows = SegmentSet.run_merge(con, plan, source=f'"{src}".')  # sessions: the copy's, the same rows
        plan.created_at = now_ms()
        con.execute(sql_maint.ORDERED_INSERTS)
        with transaction(con):
            for name in sorted(inputs):
                con.execute(sql_maint.DELETE_SEGMENT_ROW, [name])
            con.execute(sql_write.INSERT_SEGMENT_ROW, [plan.target, "sorted", plan.created_at])
            if fresh is not None:
                con.execute(schema.CREATE_SEGMENT.format(name=fresh))
                con.execute(sql_write.INSERT_SEGMENT_ROW, [fresh, "active", plan.created_at])
            con.execute(sql_maint.RAISE_NEXT_SEGMENT, [_next_segment(plan)])
    finally:
        con.execute(sql_maint.USE_SOURCE.format(src=src))
    return rows


def _number(segment: str) -> int:
    return int(segment.rpartition("_")[2])


def _fresh_active(plan: MergePlan) -> str | None:
    """The copy's new active segment when the active one is among the inputs (numbered after the target)."""
    return f"seg_{_number(plan.target) + 1}" if any(s.state == "active" for s in plan.inputs) else None


def _next_segment(plan: MergePlan) -> int:
    return _number(plan.target) + (2 if _fresh_active(plan) else 1)


def _merged_signature(con: duckdb.DuckDBPyConnection, src: str, plan: MergePlan,
                      ours: tuple[list[tuple[str, str, str]], dict[str, int], tuple[object, ...] | None]
                      ) -> tuple[list[tuple[str, str, str]], dict[str, int], tuple[object, ...] | None]:
    """What the merging copy's signature must be: the database's, with the inputs replaced by the
    merged segment (their rows whose session is still indexed), one registry row for them, the
    vocabulary's distinct terms and the segment counter past the merged one."""
    catalog, counts, meta = ours
    inputs = {s.name for s in plan.inputs}
    first = plan.inputs[0].name
    sql = next(c for kind, name, c in catalog if kind == "table" and name == first)
    made = [plan.target] + ([fresh] if (fresh := _fresh_active(plan)) else [])
    catalog = sorted([e for e in catalog if not (e[0] == "table" and e[1] in inputs)]
                     + [("table", name, sql.replace(sql_maint.CATALOG_CREATE_TABLE.format(name=first),
                                                  sql_maint.CATALOG_CREATE_TABLE.format(name=name), 1))
                        for name in made])
    counts = {t: n for t, n in counts.items() if t not in inputs}
    if fresh:
        counts[fresh] = 0
    union = " UNION ALL ".join(sql_maint.SEGMENT_SESSIONS.format(db=src, name=s.name) for s in plan.inputs)
    merged = one(con, sql_maint.COUNT_MERGED.format(union=union, db=src))
    counts[plan.target] = int(merged[0]) if merged else -1
    terms = one(con, sql_maint.COUNT_VOCAB_TERMS.format(db=src))
    counts["vocab_log"] = int(terms[0]) if terms else -1
    counts["segments"] += len(made) - len(inputs)
    if meta is not None:
        row = list(meta)
        row[META_NEXT_SEGMENT] = max(int(str(row[META_NEXT_SEGMENT])), _next_segment(plan))
        meta = tuple(row)
    return catalog, counts, meta


def copy(con: duckdb.DuckDBPyConnection, db_path: Path, merge: MergePlan | None = None) -> Path:
    """Steps 1-3: the whole database, checked, in ``<db>.reclaim``; returns that path.

    ``con`` is a connection to the database with no write running (the caller stopped the
    writer): what is copied is what the swap puts in place. ``merge``: run that merge on the way
    (the module's docstring); its inputs are not copied, its merged segment is, registered. On any
    failure the temporary file is removed and ReclaimFailed raised; the database is untouched.
    """
    tmp = tmp_path(db_path)
    _remove(tmp)
    src = database_name(con)
    attached = False
    try:
        con.execute(sql_maint.NO_PROGRESS_BAR)  # stdout is the command's (--json)
        con.execute(sql_maint.ATTACH.format(path=tmp, name=_ATTACHED_AS))
        attached = True
        pause_at("attached")
        if merge is None:
            con.execute(sql_maint.COPY_DATABASE.format(src=src, name=_ATTACHED_AS))
        else:
            _copy_merging(con, src, merge)
        pause_at("copied")
        theirs = _signature(con, _ATTACHED_AS)
        ours = _signature(con, src)
        if merge is not None:
            ours = _merged_signature(con, src, merge, ours)
            theirs = (sorted(theirs[0]), theirs[1], theirs[2])
        con.execute(sql_maint.DETACH.format(name=_ATTACHED_AS))
        attached = False
        if theirs != ours:
            raise ReclaimFailed("the copy does not match the database (catalog, row counts or meta row differ)")
        if _wal(tmp).exists():
            raise ReclaimFailed("the copy still has a write-ahead log after it was closed")
        _fsync(tmp)
        pause_at("detached")
    except BaseException as exc:
        if attached:
            with contextlib.suppress(duckdb.Error):
                con.execute(sql_maint.DETACH.format(name=_ATTACHED_AS))
        _remove(tmp)
        if isinstance(exc, duckdb.Error):
            raise ReclaimFailed(f"copying the index failed: {str(exc).splitlines()[0][:300]}") from exc
        raise
    return tmp


def swap(tmp: Path, db_path: Path) -> None:
    """Steps 4-5, once every connection to ``db_path`` is closed: rename the copy over it.

    Refused (ReclaimFailed, the copy removed) if the database still has a WAL: it belongs to the
    old file and must never be replayed onto the new one.
    """
    pause_at("closed")
    if _wal(db_path).exists() or _wal(tmp).exists():
        _remove(tmp)
        raise ReclaimFailed("the index still has a write-ahead log after its connections were closed; "
                            "it was left as it was")
    try:
        os.chmod(tmp, 0o600)
        os.replace(tmp, db_path)
    except OSError as exc:
        _remove(tmp)
        raise ReclaimFailed(f"cannot rename the copy over the index: {exc}") from exc
    pause_at("renamed")
    _fsync(db_path.parent, directory=True)
