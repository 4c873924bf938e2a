"""Opening the DuckDB file: migrations, the meta row, and lock errors users can act on.

DuckDB lets one process open a file read-write or many read-only, never both. The indexer
(inside ``aivault serve`` or ``aivault index``) is the only read-write opener; its query
workers are threads using cursors of the same connection. The CLI without a daemon opens
read-only.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from aivault import log
from aivault.envvars import env_int
from aivault.errors import AivaultError, DataDirUnusable, IndexDamaged, IndexLocked, IndexMissing
from aivault.home import Home
from aivault.indexer import schema, sql_maint, sql_write
from aivault.indexer.duck import one
from aivault.text import TOKENIZER_VERSION

_log = log.get("indexer.store")

# DuckDB's own defaults take 80% of RAM; the indexer's budget (issue: <= 1.5 GB RSS) is far less.
MEMORY_LIMIT = os.environ.get("AIVAULT_DUCKDB_MEMORY", "1GB")
# A one-shot index's bulk load (indexer/service.py) only appends and finally sorts once; DuckDB
# keeps what it wrote cached up to its limit, which at 1M messages put the indexer at 1.6 GB RSS
# (600 MB: 1.2 GB, no more CPU; the final sort spills to disk instead). Searches get MEMORY_LIMIT back.
BULK_MEMORY_LIMIT = os.environ.get("AIVAULT_DUCKDB_BULK_MEMORY", "512MB")
THREADS = env_int("AIVAULT_DUCKDB_THREADS", 2)
# A bulk load's batches commit with this many DuckDB threads, and its final sort with THREADS: the
# scanners keep the other cores busy during the pass, where a second DuckDB thread only contends
# with them (1M messages on 2 cores: a pass of 27.6-33.5 s with two threads, 25.1 s with one).
BULK_PASS_THREADS = env_int("AIVAULT_DUCKDB_BULK_THREADS", 1)
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


def now_ms() -> int:
    return int(time.time() * 1000)


def lock_holder(path: Path) -> int | None:
    """The pid of another process holding a POSIX lock on ``path`` (DuckDB's file lock), or None.

    Read from /proc/locks, so that no file descriptor of ``path`` is opened and closed here:
    closing one would drop every POSIX lock this process holds on the file.
    """
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks a waiter)
        if len(fields) < 6 or fields[1] != "POSIX" or "->" in fields:
            continue
        pid, dev_ino = fields[4], fields[5].split(":")
        if len(dev_ino) != 3 or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            major, minor, ino = int(dev_ino[0], 16), int(dev_ino[1], 16), int(dev_ino[2])
        except ValueError:
            continue
        if ino == st.st_ino and (major, minor) == (os.major(st.st_dev), os.minor(st.st_dev)):
            return int(pid)
    return None


def _locked(path: Path, pid: int | None) -> IndexLocked:
    who = f"process {pid}" if pid else "another process"
    return IndexLocked(
        f"the index {path} is held read-write by {who}. Only one aivault indexer can write it at a time: "
        "use the running daemon (`aivault status`), or stop that process and retry."
    )


# What DuckDB raises when the file cannot be read back (a block failing its checksum, a truncated
# file) once it is open: the index is damaged, which `aivault clear` fixes. A lock cannot be the
# cause by then.
UNREADABLE = (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException, duckdb.FatalException)


def damaged(path: Path, exc: BaseException) -> IndexDamaged:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else exc.__class__.__name__
    return IndexDamaged(
        f"the index {path} is damaged and cannot be read ({first}). Rebuild it from the transcripts with "
        "`aivault clear` (it deletes only the index, never a transcript)."
    )


def open_error(path: Path, exc: duckdb.Error, *, read_only: bool) -> AivaultError:
    """What a failed open means, decided by facts rather than by the error's wording: another
    process holding the file's lock, then permissions, then a file DuckDB cannot read."""
    pid = lock_holder(path)
    if pid is not None or (path.exists() and _lock_conflict(path)):
        return _locked(path, pid)
    problem = access_problem(path, write=not read_only)
    if problem is not None:
        return problem
    if path.exists():
        return damaged(path, exc)
    return IndexDamaged(f"cannot open the index {path}: {exc}")


def _lock_conflict(path: Path) -> bool:
    """Another process holds a conflicting POSIX lock (where /proc/locks is not available)."""
    if Path("/proc/locks").exists():
        return False  # lock_holder already looked, without touching the file
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fmt = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, fcntl.F_WRLCK, 0, 0, 0, 0))
        return bool(struct.unpack(fmt, answer)[0] != fcntl.F_UNLCK)
    except OSError:
        return False
    finally:
        os.close(fd)


def access_problem(path: Path, *, write: bool) -> DataDirUnusable | None:
    """A clear error when ``path`` (or its directory, to create it) cannot be read or written."""
    target = path if path.exists() else path.parent
    mode = os.R_OK | (os.W_OK if write else 0)
    if os.access(target, mode):
        return None
    need = "read and write" if write else "read"
    return DataDirUnusable(f"cannot {need} {target}: permission denied (owner uid {_owner(target)}, you are uid "
                           f"{os.getuid()}). Use a data directory of your own (`--home` or $AIVAULT_HOME).")


def _owner(path: Path) -> str:
    try:
        return str(path.stat().st_uid)
    except OSError:
        return "?"


def verify_readable(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Read every column of every table once; IndexDamaged if any block fails its checksum.

    Counting rows is answered from metadata, so each column is hashed to make DuckDB read it.
    """
    try:
        for (table,) in con.execute(sql_maint.LIST_TABLES).fetchall():
            con.execute(sql_maint.READ_EVERY_COLUMN.format(table=table)).fetchall()
    except duckdb.Error as exc:
        raise damaged(path, exc) from exc


@dataclass(frozen=True, slots=True)
class WriteFailure:
    """Why the last commit failed, as the user should hear it."""

    message: str
    disk_full: bool
    fatal: bool  # DuckDB invalidated the database: nothing more can be written until it is reopened

    def summary(self, not_indexed: int) -> str:
        lead = "disk full" if self.disk_full else "the index could not be written"
        return (f"{lead}: {not_indexed:,} message(s) read in this pass are not indexed (nor the files not read "
                "yet); the index is intact and nothing already indexed was lost. "
                + ("Free some space and run the command again." if self.disk_full else
                   "Check the disk and run the command again.") + f" ({self.message})")


    def checkpoint_summary(self) -> str:
        """The same, when every batch committed (to the write-ahead log) but writing them into the file failed."""
        lead = "disk full" if self.disk_full else "the index could not be written"
        return (f"{lead}: every message read was committed to the index's write-ahead log, which the next run "
                "writes into the index file; nothing already indexed was lost. "
                + ("Free some space and run the command again." if self.disk_full else
                   "Check the disk and run the command again.") + f" ({self.message})")


_DISK_FULL = tuple(os.strerror(e) for e in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT))
_LOW_SPACE_BYTES = 16 << 20


def classify_write_error(exc: duckdb.Error, home: Home) -> WriteFailure:
    """A failed commit: the OS error DuckDB passes on (ENOSPC, EFBIG, EDQUOT) or a nearly full
    file system mean disk full; a FatalException means DuckDB gave up on the open database."""
    text = str(exc).strip()
    try:
        vfs = os.statvfs(home.path)
        low = vfs.f_bavail * vfs.f_frsize < _LOW_SPACE_BYTES
    except OSError:
        low = False
    disk_full = low or any(t in text for t in _DISK_FULL)
    fatal = isinstance(exc, duckdb.FatalException)
    first = text.splitlines()[0][:300] if text else exc.__class__.__name__
    what = "the disk is full" if disk_full else first
    return WriteFailure(f"cannot write the index in {home.path}: {what}", disk_full, fatal)


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
    problem = access_problem(db_path, write=not read_only)
    if problem is not None:
        raise problem
    try:
        con = duckdb.connect(str(db_path), read_only=read_only, config=config)
    except duckdb.Error as exc:
        raise open_error(db_path, exc, read_only=read_only) from exc
    if not read_only:
        con.execute(sql_maint.SET_CHECKPOINT_THRESHOLD.format(threshold=CHECKPOINT_THRESHOLD))
        for suffix in ("", ".wal"):
            p = Path(str(db_path) + suffix)
            if p.exists():
                os.chmod(p, 0o600)
    return con


def close_writer(con: duckdb.DuckDBPyConnection) -> None:
    """Close the read-write handle after a CHECKPOINT statement of its own.

    DuckDB checkpoints when the last connection closes, but without a client context, which
    writes an index still unbound since the open as it was before the WAL (indexer/integrity.py);
    a statement binds every index first. A database DuckDB invalidated refuses it: then only the
    close, which leaves the WAL for the next writer.
    """
    try:
        con.execute(sql_maint.CHECKPOINT)
    except duckdb.Error as exc:
        _log.debug("no checkpoint before closing the index; its WAL is replayed by the next writer", error=str(exc))
    con.close()


class WriteFence:
    """Tells a reader whether any write transaction began in this process since it last looked.

    ``token()`` is None while a write transaction is open, else a number that changes with every
    one that ended: a search that read the meta row and the segment list under token T may answer
    from those two again, without a statement, for as long as ``token()`` is still T
    (query/engine.py; docs/design.md §4a). Every write transaction of the process goes through
    ``transaction()`` or ``migrate()``, which hold the fence open from before BEGIN until after
    COMMIT or ROLLBACK, so a commit is never visible to a reader under a token that predates it.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._open = 0
        self._ended = 0
        self._token: int | None = 0

    def token(self) -> int | None:
        return self._token  # one attribute read: atomic

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._mutex:
            self._open += 1
            self._token = None
        try:
            yield
        finally:
            with self._mutex:
                self._open -= 1
                self._ended += 1
                if self._open == 0:
                    self._token = self._ended


# One per process (several databases in one process, as in tests, only invalidate more often).
WRITES = WriteFence()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK if anything in the block raises (then re-raise)."""
    with WRITES.held():
        con.execute(sql_write.BEGIN)
        try:
            yield
        except BaseException:
            con.execute(sql_write.ROLLBACK)
            raise
        con.execute(sql_write.COMMIT)


def migrate(con: duckdb.DuckDBPyConnection) -> Meta:
    """Bring the schema to SCHEMA_VERSION and make sure the meta row exists."""
    return migrate_from(con)[0]


def migrate_from(con: duckdb.DuckDBPyConnection) -> tuple[Meta, int]:
    """``migrate``, also returning the schema version the file had (0: a new file)."""
    with WRITES.held():
        return _migrate(con)


def _migrate(con: duckdb.DuckDBPyConnection) -> tuple[Meta, int]:
    con.execute(sql_write.BEGIN)
    try:
        con.execute(schema.CREATE_VERSION_TABLE)
        row = one(con, schema.SELECT_VERSION)
        version = int(row[0]) if row else 0
        for v in range(version + 1, schema.SCHEMA_VERSION + 1):
            for stmt in schema.MIGRATIONS[v]:
                con.execute(stmt)
            con.execute(schema.INSERT_VERSION, [v, now_ms()])
        if one(con, schema.COUNT_META) == (0,):
            import uuid  # here: a read-only search never creates an identity (uuid imports platform)

            con.execute(schema.INSERT_META, [uuid.uuid4().hex, now_ms(), TOKENIZER_VERSION])
        con.execute(sql_write.COMMIT)
    except BaseException:
        con.execute(sql_write.ROLLBACK)
        raise
    return read_meta(con), version


def read_meta(con: duckdb.DuckDBPyConnection) -> Meta:
    row = one(con, schema.SELECT_META)
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
    tables = {r[0] for r in con.execute(sql_maint.LIST_TABLES).fetchall()}
    checks += [(name, "chunk", meta.next_chunk) for name, _ in con.execute(sql_write.SELECT_SEGMENTS).fetchall()
               if name in tables]
    return checks


def _unfinished(con: duckdb.DuckDBPyConnection, meta: Meta) -> list[tuple[str, str, int, int]]:
    out = []
    for table, col, watermark in _watermark_checks(con, meta):
        row = one(con, sql_maint.COUNT_UNFINISHED.format(table=table, col=col), [watermark])
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
            con.execute(sql_maint.DELETE_UNFINISHED.format(table=table, col=col), [watermark])
    removed = {table: n for table, _, _, n in found}
    con.execute(sql_maint.CHECKPOINT)
    _log.warning("removed the rows of a commit that never finished (the last writer was killed while "
                 "committing; DuckDB had kept part of that commit)", rows=removed)
    return removed


def reindex_if_stale(con: duckdb.DuckDBPyConnection, meta: Meta) -> Meta:
    """Empty an index whose terms another tokenizer cut, so that the next full pass rebuilds it.

    Its identity stays (this is not ``aivault clear``: no sidecar is deleted, the vectors are kept);
    its generation advances, since results change. Returns the new meta row.
    """
    if meta.tokenizer == TOKENIZER_VERSION:
        return meta
    segments = [str(name) for name, _ in con.execute(sql_write.SELECT_SEGMENTS).fetchall()]
    with transaction(con):
        for name in segments:
            con.execute(schema.DROP_SEGMENT.format(name=name))
        for stmt in schema.FORGET_INDEXED:
            con.execute(stmt)
        con.execute(schema.RESET_META, [TOKENIZER_VERSION])
        con.execute(schema.NEW_VECTOR_EPOCH)
    new = read_meta(con)
    _log.warning("the index was built by another tokenizer version: its text index was emptied and every "
                 "transcript is read again by this indexing pass", indexed=meta.tokenizer, current=TOKENIZER_VERSION,
                 generation=new.generation)
    return new
