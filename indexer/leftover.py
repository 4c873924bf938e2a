"""A reclaim's temporary file left by a kill (indexer/reclaim.py): found and removed when the writer
opens the index. Apart from the reclaim so that the store can call it without importing the reclaim."""

from __future__ import annotations

from pathlib import Path

from aivault import log

_log = log.get("indexer.reclaim")

TMP_SUFFIX = ".reclaim"


def tmp_path(db_path: Path) -> Path:
    return Path(str(db_path) + TMP_SUFFIX)


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
    """Remove the temporary file of a reclaim that never finished (a kill before its rename).

    Called by the writer before it opens the database; returns the files removed (logged).
    """
    tmp = tmp_path(db_path)
    found = [p for p in (tmp, _wal(tmp)) if p.exists()]
    if not found:
        return 0
    global _leftovers_removed
    freed = _remove(tmp)
    _leftovers_removed += len(found)
    _log.warning("removed the temporary file of an interrupted reclaim (the database is the one from before it)",
                 files=[p.name for p in found], count=len(found), freed_bytes=freed)
    return len(found)


__all__ = ["TMP_SUFFIX", "_remove", "_wal", "clean_leftover", "leftovers_removed", "tmp_path"]
