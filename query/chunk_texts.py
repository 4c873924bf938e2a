"""Chunk texts beside the database, memory-mapped: the daemon's evidence rows without DuckDB.

A search reads the texts of a few dozen chunks picked by id: a phrase route's candidates (to test
the words' order) and a page's evidence chunks (for snippets). DuckDB fetches each such row through
the chunk-id index at ~40 µs a row whatever the columns (measured at 100k messages: 50 ids 2.3 ms
with or without the text, one id 0.3 ms), which made that statement the largest single cost of a
two- or five-term search (~27 % of one in the daemon, by py-spy).

What makes a copy safe: a chunk id is handed out once (``meta.next_chunk`` only grows, a rebuild
keeps it, a clear deletes this folder with the database), and a committed chunk's row never
changes; a chunk is deleted only with its session (a re-read file gets a new session id), and a
session id is handed out once too. So a *text segment* -- the chunks with ids in ``[lo, hi)``
where ``hi`` was ``next_chunk`` in the transaction that read them -- stays right for ever about
every id in its range: an id it lacks is gone (or was never committed), and an id it holds is
still there exactly when its session still is (the caller's SessionTable of the generation says).
Ids from ``hi`` on are read in DuckDB.

Layout of ``<db>.postings/texts-<lo>-<hi>/``: ``chunk.npy`` (ascending), ``sess.npy``, ``role.npy``,
``ts.npy`` with ``tsnull.npy``, ``offsets.npy`` (n + 1 byte offsets) and ``text.bin`` (the texts,
UTF-8, one after another), and ``header.json`` naming the database identity. Written by the
postings sidecar thread (query/postings.py) in slices, into a temporary folder renamed into place.
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from aivault.indexer.duck import one
from aivault.query import sql

TEXTS_PREFIX = "texts-"
TEXTS_FORMAT = 1
# Chunks read from DuckDB per statement while a text segment is written.
TEXT_BUILD_SLICE = 20_000
# A new text segment is written once this many chunk ids (and a quarter of those covered) are not
# covered: few segments (their number grows with the log of the index), little rewritten.
TEXT_MIN_CHUNKS = 10_000
# The rows of an evidence read: (chunk, role, ts, text), as query/sql.py SELECT_EVIDENCE gives them.
Row = tuple[int, int, int | None, str]
_COLUMNS = {"chunk": np.int64, "sess": np.int32, "role": np.uint8, "ts": np.int64, "tsnull": np.bool_}


class TextSegment:
    """One text segment, mapped read-only."""

    __slots__ = ("_blob", "_file", "chunk", "hi", "lo", "offsets", "role", "sess", "ts", "tsnull")

    def __init__(self, folder: Path, identity: str) -> None:
        header = json.loads((folder / "header.json").read_text())
        if header.get("identity") != identity or header.get("format") != TEXTS_FORMAT:
            raise ValueError(f"{folder.name} belongs to another database or format")
        self.lo, self.hi = int(header["lo"]), int(header["hi"])

        def load(name: str) -> Any:
            return np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray)

        self.chunk, self.sess, self.role, self.ts, self.tsnull = (load(c) for c in _COLUMNS)
        self.offsets = load("offsets")
        n = len(self.chunk)
        if any(len(a) != n for a in (self.sess, self.role, self.ts, self.tsnull)) or len(self.offsets) != n + 1 \
                or n != int(header["rows"]):
            raise ValueError(f"the text segment {folder.name} is inconsistent")
        self._file = open(folder / "text.bin", "rb")  # noqa: SIM115 -- held as long as the map
        size = int(self.offsets[-1])
        if size != (folder / "text.bin").stat().st_size:
            self._file.close()
            raise ValueError(f"the text segment {folder.name} is cut short")
        self._blob = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def close(self) -> None:
        if isinstance(self._blob, mmap.mmap):
            self._blob.close()
        self._file.close()

    def rows(self, ids: Any, live: Any) -> list[Row]:
        """The rows of those of ``ids`` (all in ``[lo, hi)``) this segment holds and whose session
        ``live`` (a function of session ids, giving a boolean array) says is still there."""
        pos = np.searchsorted(self.chunk, ids)
        pos_c = np.minimum(pos, max(len(self.chunk) - 1, 0))
        held = (pos < len(self.chunk)) & (self.chunk[pos_c] == ids) if len(self.chunk) else np.zeros(len(ids), bool)
        at = pos_c[held]
        if not len(at):
            return []
        at = at[live(self.sess[at].astype(np.int64))]
        out: list[Row] = []
        for i in at.tolist():
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            out.append((int(self.chunk[i]), int(self.role[i]), None if self.tsnull[i] else int(self.ts[i]),
                        self._blob[a:b].decode("utf-8")))
        return out


def write_segment(cur: duckdb.DuckDBPyConnection, identity: str, lo: int, tmp: Path,
                  stopping: Any) -> tuple[int, int, int]:
    """Write the text segment from chunk id ``lo`` up to ``next_chunk`` into ``tmp``, read in one
    transaction; (hi, rows, text bytes). ``stopping()`` true abandons it (raises InterruptedError)."""
    with sql.read_transaction(cur):
        row = one(cur, sql.SELECT_NEXT_CHUNK)
        hi = int(row[0]) if row else lo
        parts: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
        offsets = [np.zeros(1, np.int64)]
        size = 0
        with open(tmp / "text.bin", "wb") as blob:
            for start in range(lo, hi, TEXT_BUILD_SLICE):
                if stopping():
                    raise InterruptedError
                got = cur.execute(sql.SELECT_CHUNK_TEXTS, [start, min(start + TEXT_BUILD_SLICE, hi)]).fetchnumpy()
                if not len(got["chunk"]):
                    continue
                ts = got["ts"]
                null = np.ma.getmaskarray(ts)
                parts["chunk"].append(np.asarray(got["chunk"], np.int64))
                parts["sess"].append(np.asarray(got["sess"], np.int32))
                parts["role"].append(np.asarray(got["role"], np.uint8))
                parts["ts"].append(np.where(null, 0, np.ma.getdata(ts)).astype(np.int64))
                parts["tsnull"].append(null.astype(np.bool_))
                encoded = [str(t).encode("utf-8") for t in got["text"]]
                blob.write(b"".join(encoded))
                lengths = np.fromiter((len(e) for e in encoded), np.int64, len(encoded))
                offsets.append(size + np.cumsum(lengths))
                size += int(lengths.sum())
    rows = 0
    for c, t in _COLUMNS.items():
        col: Any = np.concatenate(parts[c]).astype(t) if parts[c] else np.zeros(0, t)
        rows = len(col)
        np.save(tmp / f"{c}.npy", col)
    np.save(tmp / "offsets.npy", np.concatenate(offsets))
    (tmp / "header.json").write_text(json.dumps({"identity": identity, "lo": lo, "hi": hi, "rows": rows,
                                                  "bytes": size, "format": TEXTS_FORMAT}))
    return hi, rows, size


def folder_name(lo: int, hi: int) -> str:
    return f"{TEXTS_PREFIX}{lo}-{hi}"


def covered(segments: list[TextSegment]) -> int:
    """Where the chain of segments from chunk id 0 ends (ids from there are not covered)."""
    end = 0
    for s in sorted(segments, key=lambda s: s.lo):
        if s.lo != end:
            break
        end = s.hi
    return end


def due(end: int, next_chunk: int) -> bool:
    """Whether enough chunk ids from ``end`` (where the segments' cover stops) are uncovered for a new one."""
    return next_chunk - end >= max(TEXT_MIN_CHUNKS, end // 4)
