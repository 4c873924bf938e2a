"""What a kill can leave of a reclaim (indexer/reclaim.py), resolved when the writer opens the index.
Apart from the reclaim so that the store can call it without importing the reclaim.

* ``<db>.reclaim`` alone: a copy that never reached its swap. Removed; the database is the old one.
* ``<db>.reclaim`` and ``<db>.reclaim-wal`` (the old file's WAL, set aside by the swap): the copy was
  complete and checked, and the swap had begun. Finished: the copy is renamed over the database and
  the old WAL removed. Until then a reader opens the copy (``live_path``): the old file without its
  WAL is not the index any more.
* ``<db>.reclaim-wal`` alone: the swap was done; the old WAL is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from aivault import log

_log = log.get("indexer.reclaim")

TMP_SUFFIX = ".reclaim"
RETIRED_SUFFIX = ".reclaim-wal"


def tmp_path(db_path: Path) -> Path:
    return Path(str(db_path) + TMP_SUFFIX)


def retired_wal_path(db_path: Path) -> Path:
    """Where a swap sets the old file's WAL aside: once it is there, the copy is the index."""
    return Path(str(db_path) + RETIRED_SUFFIX)


def live_path(db_path: Path) -> Path:
    """The file that holds the index now: the copy while a swap a kill interrupted is unfinished."""
    tmp = tmp_path(db_path)
    return tmp if retired_wal_path(db_path).exists() and tmp.exists() else db_path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _wal(path: Path) -> Path:
    return Path(str(path) + ".wal")


def _remove(path: Path) -> int:
    """Remove ``path`` and its WAL; the bytes they held."""
    freed = 0
    for p in (path, _wal(path)):
        try:
            freed += p.stat().st_size
            p.unlink()
        except FileNotFoundError:
            pass
    return freed


_leftovers_removed = 0  # by clean_leftover in this process (indexStats shows it)


def leftovers_removed() -> int:
    return _leftovers_removed


def clean_leftover(db_path: Path) -> int:
    """Resolve what a killed reclaim left (the module's docstring): finish a swap that had begun,
    remove a copy that never reached it, and the old WAL of a swap that was done.

    Called by the writer before it opens the database; returns the files removed or moved (logged).
    """
    tmp = tmp_path(db_path)
    retired = retired_wal_path(db_path)
    global _leftovers_removed
    if retired.exists():
        if tmp.exists():
            os.replace(tmp, db_path)
            fsync_dir(db_path.parent)
            _log.warning("finished an interrupted reclaim: its checked copy is now the database",
                         copy=tmp.name, old_wal_bytes=retired.stat().st_size)
        else:
            _log.info("removed the old write-ahead log a finished reclaim left", file=retired.name,
                      freed_bytes=retired.stat().st_size)
        retired.unlink()
        fsync_dir(db_path.parent)
        _leftovers_removed += 1
        return 1
    found = [p for p in (tmp, _wal(tmp)) if p.exists()]
    if not found:
        return 0
    freed = _remove(tmp)
    _leftovers_removed += len(found)
    _log.warning("removed the temporary file of an interrupted reclaim (the database is the one from before it)",
                 files=[p.name for p in found], count=len(found), freed_bytes=freed)
    return len(found)


__all__ = ["RETIRED_SUFFIX", "TMP_SUFFIX", "_remove", "_wal", "clean_leftover", "fsync_dir", "leftovers_removed",
           "live_path", "retired_wal_path", "tmp_path"]
