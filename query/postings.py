"""Sorted segments' postings as memory-mapped NumPy arrays: the daemon's fast path for BM25.

DuckDB stays the store of record. A *sorted* segment never changes once the merge has written it
(a later merge drops it and writes another), so the daemon copies each one, once, into a sidecar
beside the database (``index.duckdb.postings/<segment>-<created_at>-<rows>/``): one ``.npy`` file per
column, in the segment's own row order (term, then highest BM25 impact first, then chunk), plus
the segment's distinct terms and where each term's rows start. Searches map the files read-only:
a term's postings are a slice found by binary search, with no SQL statement and no copy, and the
pages the OS keeps are shared page cache rather than the daemon's own memory.

A sidecar is built in a background thread the first time the engine sees a sorted segment
without one (read from DuckDB in slices of ``BUILD_SLICE`` rows, under the segment lock, into a
temporary folder renamed into place when complete); until then, and for every segment that is not
sorted (the active one, frozen ones awaiting a merge), searches read postings from DuckDB as
before. Folders of segments that no longer exist are deleted by the next build. ``clear``
deletes the folder with the database (its name starts with the database's).

The segments that are not sorted (the active one every batch appends to, frozen ones waiting for a
merge) hold the newest postings and change with each batch, so they get no files: the same thread
loads them into memory instead, sorted by term (``tails``). A segment's table only ever grows by
appended rows until a merge drops it, so its postings as a snapshot sees them are its first ``rows``
rows: a load is valid for exactly that count, and the next batch's load reads only the rows appended
since and inserts them in term order. Until a segment's load for the snapshot's count is done, its
postings are read in DuckDB, one statement per search, as before (~4 ms for five terms over an active
segment of 300k postings at 100k messages; a slice of the loaded arrays takes microseconds).

The same thread writes the chunks' texts beside them too, for a search's evidence rows
(query/chunk_texts.py: ``texts``).

Only a long-lived process (the daemon) uses this: a one-shot CLI search reads DuckDB directly, as
importing NumPy would cost it more than the statements it saves.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from aivault import log, priority
from aivault.envvars import env_int
from aivault.indexer.duck import one
from aivault.indexer.schema import SELECT_IDENTITY
from aivault.indexer.segments import SegmentLock
from aivault.query import chunk_texts, sql
from aivault.query.chunk_texts import TEXTS_PREFIX, TextSegment

_log = log.get("query.postings")

# Rows read from DuckDB per statement while a sidecar is built: bounded memory, short lock holds.
BUILD_SLICE = 1 << 20
# The segment's columns and the dtypes DuckDB hands them over in (indexer/schema.py SEGMENT_COLUMNS).
COLUMNS: dict[str, Any] = {"chunk": np.int64, "sess": np.int32, "tf": np.uint16, "dl": np.uint16, "conv": np.bool_}
HEADER = "header.json"
# What a sidecar takes on disk per posting while it is written (the term column is dropped at the
# end), and the free space left to the index besides: a build that would go below it is not made.
BYTES_PER_POSTING = 21
FREE_MARGIN = 512 * 2**20
FORMAT = 1
# At most this many postings of the segments that are not sorted are kept in memory (17 bytes each,
# ~100 MB at the bound); segments past it are read in DuckDB. A daemon freezes its active
# segment at AIVAULT_FREEZE_ROWS (300k) postings and merges frozen ones six at a time, or after 10 s
# without batches; while a burst of new transcripts outruns the merges, frozen segments pile up
# (1M messages and 300k new ones at once: eight of ~475k, 3.8M postings, beside the merge).
TAIL_MAX_ROWS = env_int("AIVAULT_TAIL_MAX_ROWS", 6_000_000, minimum=0)


def sidecar_dir(db_path: Path) -> Path:
    """Where a database's postings sidecars live (a name ``index_files`` counts as the index's)."""
    return db_path.with_name(db_path.name + ".postings")


@dataclass(frozen=True, slots=True)
class SegmentKey:
    """What a sidecar vouches for: one sorted segment of one database."""

    identity: str
    name: str
    created_at: int

    def folder(self, rows: int) -> str:
        return f"{self.name}-{self.created_at}-{rows}"


class SegmentArrays:
    """One segment's postings by term: ``span(term)`` gives its rows. A sorted segment's are its
    sidecar's files, memory-mapped (``load``); a tail's are in memory (``by_term``)."""

    __slots__ = ("chunk", "conv", "dl", "rows", "sess", "starts", "terms", "tf")

    def __init__(self, terms: Any, starts: Any, chunk: Any, sess: Any, tf: Any, dl: Any, conv: Any) -> None:
        self.terms, self.starts = terms, starts
        self.chunk, self.sess, self.tf, self.dl, self.conv = chunk, sess, tf, dl, conv
        self.rows = int(self.starts[-1]) if len(self.starts) else 0
        if len(self.starts) != len(self.terms) + 1 or any(len(a) != self.rows for a in
                                                            (self.chunk, self.sess, self.tf, self.dl, self.conv)):
            raise ValueError("postings arrays of unequal lengths")

    @classmethod
    def load(cls, folder: Path) -> SegmentArrays:
        """A sidecar's files, mapped read-only."""
        def load(name: str) -> Any:
            # A plain ndarray view of the map: slicing a np.memmap costs a Python-level __getitem__.
            return np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray)

        try:
            return cls(load("terms"), load("starts"), *(load(c) for c in COLUMNS))
        except ValueError:
            raise ValueError(f"the postings sidecar {folder.name} is inconsistent") from None

    @classmethod
    def by_term(cls, term: Any, columns: list[Any]) -> SegmentArrays:
        """Rows already in term order (``term`` ascending), with ``columns`` in COLUMNS' order."""
        rows = len(term)
        change = np.flatnonzero(term[1:] != term[:-1]) + 1 if rows else np.zeros(0, np.int64)
        starts = np.concatenate([[0], change, [rows]]).astype(np.int64) if rows else np.zeros(1, np.int64)
        return cls(np.asarray(term[starts[:-1]], dtype=np.int64), starts, *columns)

    def span(self, term: int) -> tuple[int, int]:
        """The rows holding ``term`` (an empty range when the segment has none)."""
        i = int(np.searchsorted(self.terms, term))
        if i < len(self.terms) and int(self.terms[i]) == term:
            return int(self.starts[i]), int(self.starts[i + 1])
        return 0, 0


@dataclass(frozen=True, slots=True)
class TailKey:
    """A segment that is not sorted, as a snapshot sees it: its first ``rows`` rows."""

    identity: str
    name: str
    created_at: int
    rows: int


@dataclass(frozen=True, slots=True)
class _Tail:
    rows: int
    arrays: SegmentArrays


@dataclass(frozen=True, slots=True)
class _TailJob:
    keys: list[TailKey]


@dataclass(frozen=True, slots=True)
class _TextJob:
    identity: str
    lo: int


@dataclass(frozen=True, slots=True)
class _CallJob:
    run: Callable[[duckdb.DuckDBPyConnection], None]


class PostingsSidecars:
    """The sidecars of one database: loaded on demand, built in the background, pruned."""

    def __init__(self, db_path: Path, con: duckdb.DuckDBPyConnection, lock: SegmentLock | None) -> None:
        self.root = sidecar_dir(db_path)
        self._con = con
        self._lock = lock
        self._loaded: dict[SegmentKey, SegmentArrays] = {}
        self._failed: set[SegmentKey] = set()
        self._queued: set[SegmentKey] = set()
        # (segment, created_at) of sidecars built for a merge not registered yet (prebuild): _prune
        # keeps them; each goes from here once a snapshot lists its segment.
        self._prebuilt: set[tuple[str, int]] = set()
        self._mutex = threading.Lock()
        # A job is the sorted segments of one snapshot; an Event is a marker (wait_built); None stops.
        self._jobs: queue.Queue[list[SegmentKey] | _TailJob | _TextJob | _CallJob | threading.Event | None] = \
            queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.built = 0  # sidecars this process has built (tests, stats)
        self._token = os.urandom(4).hex()  # names this manager's temporary build folders
        # Tails by (identity, segment, created_at): the newest load of each, and the loads queued.
        self._tails: dict[tuple[str, str, int], _Tail] = {}
        self._tails_queued: set[TailKey] = set()
        self.tail_loads = 0  # tail loads this process has made (tests, stats)
        self.tail_failures = 0
        # Text segments of the database named by _texts_identity, and a write queued; writes that
        # failed, by (identity, lo): not tried again by this process.
        self._texts: list[TextSegment] = []
        self._texts_identity: str | None = None
        self._texts_queued = False
        self._texts_failed: set[tuple[str, int]] = set()
        self.texts_built = 0

    # --- reading ---------------------------------------------------------------------------------
    def arrays(self, identity: str, segments: Iterable[tuple[str, str, int]]) -> dict[str, SegmentArrays] | None:
        """Every sorted segment's arrays by name, or None when one has no sidecar yet (its build
        is then queued: the caller reads DuckDB for this search)."""
        keys = [SegmentKey(identity, name, created) for name, state, created in segments if state == "sorted"]
        out: dict[str, SegmentArrays] = {}
        missing: list[SegmentKey] = []
        with self._mutex:
            if self._prebuilt:
                self._prebuilt.difference_update((k.name, k.created_at) for k in keys)
            for key in keys:
                got = self._loaded.get(key)
                if got is None and key not in self._failed:
                    got = self._open(key)
                if got is None:
                    missing.append(key)
                else:
                    out[key.name] = got
            if len(self._loaded) > len(keys):  # segments merged away: let their maps go
                live = set(keys)
                for key in [k for k in self._loaded if k not in live]:
                    del self._loaded[key]
            new = [k for k in missing if k not in self._queued and k not in self._failed]
            self._queued.update(new)
        if new:
            self._submit(keys)
        return None if missing else out

    def prebuild(self, name: str, created_at: int) -> None:
        """Build the sidecar of a merged segment that is not registered yet, on the caller's thread
        (the merge's: indexer/merges.py), so that the snapshot that first lists the segment finds
        its arrays and no search reads all of it in DuckDB meanwhile."""
        cur = self._con.cursor()
        try:
            row = one(cur, SELECT_IDENTITY)
            if row is None:
                return
            key = SegmentKey(str(row[0]), name, created_at)
            with self._mutex:
                self._prebuilt.add((name, created_at))
                self._queued.add(key)
            self._build_one(cur, key)
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.close()

    def tails(self, identity: str, segments: Iterable[tuple[str, int, int]]) -> dict[str, SegmentArrays]:
        """The postings in memory of the segments that are not sorted -- (name, created_at, rows) as the
        caller's snapshot sees them -- by name, for those loaded at exactly that many rows. A load is
        queued for the others (the caller reads them in DuckDB for this search)."""
        want = [TailKey(identity, name, created, rows) for name, created, rows in segments if rows > 0]
        out: dict[str, SegmentArrays] = {}
        todo: list[TailKey] = []
        budget = TAIL_MAX_ROWS
        with self._mutex:
            for key in want:
                budget -= key.rows
                got = self._tails.get((key.identity, key.name, key.created_at))
                if got is not None and got.rows == key.rows:
                    out[key.name] = got.arrays
                elif (budget >= 0 and (got is None or got.rows < key.rows)  # not back to an older snapshot's
                      and key not in self._tails_queued):
                    todo.append(key)
            live = {(k.identity, k.name, k.created_at) for k in want}
            for gone in [k for k in self._tails if k not in live]:  # merged away, or grown past the budget
                del self._tails[gone]
            self._tails_queued.update(todo)
        if todo:
            self._submit(_TailJob(todo))
        return out

    def texts(self, identity: str, next_chunk: int) -> list[TextSegment]:
        """The database's text segments (query/chunk_texts.py); the next one is queued when enough
        chunk ids (``next_chunk`` is the snapshot's next id) are not covered yet."""
        with self._mutex:
            if self._texts_identity != identity:
                for seg in self._texts:
                    seg.close()
                self._texts, self._texts_identity = self._open_texts(identity), identity
            segs = list(self._texts)
            lo = chunk_texts.covered(segs)
            want = (not self._texts_queued and chunk_texts.due(lo, next_chunk)
                    and (identity, lo) not in self._texts_failed and not self._stop.is_set())
            if want:
                self._texts_queued = True
        if want:
            self._submit(_TextJob(identity, lo))
        return segs

    def _open_texts(self, identity: str) -> list[TextSegment]:
        """The complete text segments of ``identity`` in the folder (mutex held)."""
        out: list[TextSegment] = []
        if not self.root.is_dir():
            return out
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith(TEXTS_PREFIX):
                try:
                    out.append(TextSegment(folder, identity))
                except (OSError, ValueError, KeyError):
                    continue  # another database's, or damaged: _prune deletes it, the range is written again
        return out

    def _open(self, key: SegmentKey) -> SegmentArrays | None:
        """The sidecar of ``key`` if a complete one exists (mutex held)."""
        if not self.root.is_dir():
            return None
        prefix = f"{key.name}-{key.created_at}-"
        for folder in self.root.iterdir():
            if not folder.name.startswith(prefix):
                continue
            try:
                header = json.loads((folder / HEADER).read_text())
                if header.get("identity") != key.identity or header.get("format") != FORMAT:
                    continue
                arrays = SegmentArrays.load(folder)
            except (OSError, ValueError) as exc:
                _log.warning("a postings sidecar is unreadable; it is rebuilt", folder=str(folder), error=str(exc))
                continue
            self._loaded[key] = arrays
            return arrays
        return None

    def state(self) -> dict[str, Any]:
        """For indexStats: sidecars mapped, builds waiting, built by this process, refused."""
        with self._mutex:
            return {"mapped": len(self._loaded), "building": len(self._queued), "built": self.built,
                    "failed": len(self._failed),
                    "tails": {"segments": len(self._tails), "rows": sum(t.rows for t in self._tails.values()),
                              "loading": len(self._tails_queued), "loads": self.tail_loads,
                              "failed": self.tail_failures},
                    "texts": {"segments": len(self._texts), "covered": chunk_texts.covered(self._texts),
                              "writing": self._texts_queued, "written": self.texts_built,
                              "failed": len(self._texts_failed)}}

    # --- building ----------------------------------------------------------------------------------
    def later(self, run: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
        """Have ``run(cursor)`` called on this thread: reading work a search may do without (nothing
        waits for it; an error is logged and dropped, and the thread goes on)."""
        self._submit(_CallJob(run))

    def _submit(self, keys: list[SegmentKey] | _TailJob | _TextJob | _CallJob) -> None:
        if self._stop.is_set():
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="postings-sidecars", daemon=True)
            self._thread.start()
        self._jobs.put(keys)

    def close(self) -> None:
        """Stop building (an unfinished build is abandoned, its temporary folder removed)."""
        self._stop.set()
        self._jobs.put(None)
        if self._thread is not None:
            self._thread.join()
        with self._mutex:
            self._loaded.clear()
            self._tails.clear()
            for seg in self._texts:
                seg.close()
            self._texts = []

    def wait_built(self, timeout_s: float = 120.0) -> bool:
        """Block until every build queued so far has finished (tests, benchmarks)."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._jobs.put(done)
        return done.wait(timeout_s)

    def _run(self) -> None:
        priority.background_thread()  # builds and loads yield the CPU to searches
        cur = self._con.cursor()
        try:
            while not self._stop.is_set():
                job = self._jobs.get()
                if job is None:
                    return
                if isinstance(job, threading.Event):
                    job.set()
                    continue
                if isinstance(job, _TailJob):
                    for tail in job.keys:
                        self._load_tail(cur, tail)
                    continue
                if isinstance(job, _CallJob):
                    try:
                        job.run(cur)
                    except Exception as exc:  # work searches can do without: never the end of the thread
                        _log.warning("background read failed; searches read it themselves", error=str(exc),
                                     kind=type(exc).__name__)
                    continue
                if isinstance(job, _TextJob):
                    self._write_texts(cur, job)
                    self._prune(cur)  # a damaged or superseded text segment goes
                    continue
                for key in job:
                    with self._mutex:
                        todo = key in self._queued and key not in self._loaded
                    if todo:
                        self._build_one(cur, key)
                self._prune(cur)
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.close()

    def _build_one(self, cur: duckdb.DuckDBPyConnection, key: SegmentKey) -> None:
        # Unique per manager, the pid last (_prune reads it): two managers of one database in one
        # process (a daemon's and a test's, an engine replaced by a clear) once built into the same
        # folder, and one's clean-up deleted the other's half-written files (CI of 55cc7d2).
        tmp = self.root / f"tmp-{key.name}-{self._token}-{os.getpid()}"
        with self._mutex:
            if self._open(key) is not None:  # another manager of this database built it meanwhile
                self._queued.discard(key)
                return
        try:
            rows, top_chunk = self._count(cur, key.name)
            self.root.mkdir(parents=True, exist_ok=True)
            need = rows * BYTES_PER_POSTING + FREE_MARGIN
            free = shutil.disk_usage(self.root).free
            if free < need:
                # The index itself must never be the one to meet a full disk because of a cache.
                raise OSError(f"{free // 2**20} MB free, {need // 2**20} MB wanted (sidecar + margin)")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            self._write(cur, key.name, rows, top_chunk, tmp)
            (tmp / HEADER).write_text(json.dumps({"identity": key.identity, "segment": key.name,
                                                  "createdAt": key.created_at, "rows": rows, "format": FORMAT}))
            final = self.root / key.folder(rows)
            # Looking for a finished sidecar and renaming ours into place is one step for every manager
            # of this folder in the process: checked apart, two managers each found none, and one
            # deleted the folder the other had just renamed (CI of 58a767f).
            with _placing(self.root):
                with self._mutex:
                    arrays = self._open(key)  # complete already: another manager renamed its build first
                if arrays is None:
                    shutil.rmtree(final, ignore_errors=True)  # a damaged one (_open refused it)
                    os.rename(tmp, final)
                    arrays = SegmentArrays.load(final)
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
            with self._mutex:
                self._loaded[key] = arrays
                self._queued.discard(key)
            self.built += 1
            _log.info("postings sidecar built", segment=key.name, rows=rows)
        except _Abandoned:
            shutil.rmtree(tmp, ignore_errors=True)
            with self._mutex:
                self._queued.discard(key)
        except (duckdb.Error, OSError, ValueError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            # Searches keep reading DuckDB for this segment; nothing is retried until it is merged.
            _log.warning("a postings sidecar could not be built; that segment is searched in DuckDB",
                         segment=key.name, error=str(exc))
            with self._mutex:
                self._queued.discard(key)
                self._failed.add(key)

    def _load_tail(self, cur: duckdb.DuckDBPyConnection, key: TailKey) -> None:
        """Load ``key``'s rows into memory in term order: only the rows appended since the segment's
        last load when it has one (inserted where their terms go), else all of them."""
        slot = (key.identity, key.name, key.created_at)
        with self._mutex:
            old = self._tails.get(slot)
        base = old if old is not None and old.rows < key.rows else None
        start = base.rows if base is not None else 0
        t0 = time.perf_counter()
        try:
            if old is not None and old.rows >= key.rows:
                return  # a later snapshot's load came first
            with self._locked():
                got = cur.execute(sql.SELECT_POSTINGS_SLICE_BY_TERM.format(name=key.name, start=start,
                                                                           stop=key.rows)).fetchnumpy()
            term = np.asarray(got["term"], dtype=np.int64)
            if len(term) != key.rows - start:
                raise ValueError(f"{key.name}: rows {start}..{key.rows} read back {len(term)}")
            columns = [np.asarray(got[c], dtype=t) for c, t in COLUMNS.items()]
            if base is not None:
                # Each new row goes after the loaded rows of its term (the order within a term is the
                # segment's, which nothing that reads a tail depends on: it is not impact-ordered).
                a = base.arrays
                old_term = np.repeat(a.terms, np.diff(a.starts))  # each loaded row's term
                at = np.searchsorted(old_term, term, side="right")
                old_columns = (a.chunk, a.sess, a.tf, a.dl, a.conv)
                columns = [np.insert(o, at, n) for o, n in zip(old_columns, columns, strict=True)]
                term = np.insert(old_term, at, term)
            tail = _Tail(key.rows, SegmentArrays.by_term(term, columns))
        except duckdb.CatalogException:
            tail = None  # merged away before its turn came
        except (duckdb.Error, ValueError, MemoryError) as exc:
            tail = None
            self.tail_failures += 1
            _log.warning("a segment's postings could not be loaded into memory; searches read them in DuckDB",
                         segment=key.name, rows=key.rows, error=str(exc))
        finally:
            with self._mutex:
                self._tails_queued.discard(key)
        if tail is None:
            return
        with self._mutex:
            now = self._tails.get(slot)
            if now is None or now.rows < tail.rows:
                self._tails[slot] = tail
            self.tail_loads += 1
        _log.info("segment postings loaded", segment=key.name, rows=key.rows, read=key.rows - start,
                  ms=round((time.perf_counter() - t0) * 1000, 1))

    def _write_texts(self, cur: duckdb.DuckDBPyConnection, job: _TextJob) -> None:
        """Write the text segment from chunk id ``job.lo`` to the next id not handed out yet."""
        tmp = self.root / f"tmp-{TEXTS_PREFIX}{job.lo}-{self._token}-{os.getpid()}"
        t0 = time.perf_counter()
        seg: TextSegment | None = None
        full = False

        def stopping() -> bool:
            nonlocal full
            full = shutil.disk_usage(self.root).free < FREE_MARGIN  # a cache never fills the index's disk
            return full or self._stop.is_set()

        try:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            hi, rows, size = chunk_texts.write_segment(cur, job.identity, job.lo, tmp, stopping)
            final = self.root / chunk_texts.folder_name(job.lo, hi)
            with _placing(self.root):
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
            seg = TextSegment(final, job.identity)
            _log.info("chunk texts written", lo=job.lo, hi=hi, rows=rows, mb=round(size / 2**20, 1),
                      ms=round((time.perf_counter() - t0) * 1000))
        except InterruptedError:
            shutil.rmtree(tmp, ignore_errors=True)
            if full:
                _log.warning("chunk texts not written: the disk is nearly full; searches read them in DuckDB",
                             free_mb=shutil.disk_usage(self.root).free // 2**20)
                with self._mutex:
                    self._texts_failed.add((job.identity, job.lo))
        except (duckdb.Error, OSError, ValueError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            _log.warning("chunk texts could not be written; searches read them in DuckDB", lo=job.lo, error=str(exc))
            with self._mutex:
                self._texts_failed.add((job.identity, job.lo))
        with self._mutex:
            self._texts_queued = False
            if seg is not None:
                if self._texts_identity == job.identity and not self._stop.is_set():
                    self._texts.append(seg)
                    self.texts_built += 1
                else:
                    seg.close()

    def _locked(self) -> Any:
        return self._lock.shared() if self._lock is not None else contextlib.nullcontext()

    def _count(self, cur: duckdb.DuckDBPyConnection, name: str) -> tuple[int, int]:
        """The segment's rows and its highest chunk id."""
        with self._locked():
            try:
                row = one(cur, sql.COUNT_SEGMENT_CHUNKS.format(name=name))
            except duckdb.CatalogException:
                raise _Abandoned from None  # merged away before its turn came
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _write(self, cur: duckdb.DuckDBPyConnection, name: str, rows: int, top_chunk: int, tmp: Path) -> None:
        # Chunk ids fit 32 bits in any index a person's transcripts make (13 bytes a posting, not 17).
        dtypes = {**COLUMNS, "chunk": np.int32 if top_chunk < 2**31 else np.int64}
        out = {c: np.lib.format.open_memmap(tmp / f"{c}.npy", mode="w+", dtype=t, shape=(rows,))
               for c, t in dtypes.items()}
        term = np.lib.format.open_memmap(tmp / "term.npy", mode="w+", dtype=np.int64, shape=(rows,))
        for start in range(0, rows, BUILD_SLICE):
            if self._stop.is_set():
                raise _Abandoned
            stop = min(start + BUILD_SLICE, rows)
            with self._locked():
                try:
                    got = cur.execute(sql.SELECT_POSTINGS_SLICE.format(name=name, start=start, stop=stop)).fetchnumpy()
                except duckdb.CatalogException:
                    raise _Abandoned from None
            if len(got["term"]) != stop - start:
                raise ValueError(f"{name}: rows {start}..{stop} read back {len(got['term'])}")
            term[start:stop] = got["term"]
            for c in COLUMNS:
                out[c][start:stop] = got[c]
        # Rows are in the merge's order, terms ascending: each term's rows start where it changes.
        if rows and not bool(np.all(term[1:] >= term[:-1])):
            raise ValueError(f"{name} is not in term order")
        change = np.flatnonzero(term[1:] != term[:-1]) + 1 if rows else np.zeros(0, np.int64)
        starts = np.concatenate([[0], change, [rows]]).astype(np.int64) if rows else np.zeros(1, np.int64)
        np.save(tmp / "terms.npy", np.asarray(term[starts[:-1]], dtype=np.int64))
        np.save(tmp / "starts.npy", starts)
        for a in (*out.values(), term):
            a.flush()
        del term
        (tmp / "term.npy").unlink()

    def _prune(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Delete sidecars of segments that are gone (and temporary folders of dead builds).

        What is live is read from the database now, not taken from the job: a job queued by a search
        on an older snapshot must not delete the sidecar of a segment a later merge wrote."""
        if not self.root.is_dir():
            return
        with self._mutex:  # taken before the registry is read: one dropped from it since is listed there
            prebuilt = set(self._prebuilt)
        try:
            with self._locked():
                registered = cur.execute(sql.SELECT_SEGMENT_NAMES).fetchall()
                live = prebuilt | {(str(n), int(c)) for n, c in registered}
                row = one(cur, SELECT_IDENTITY)
        except duckdb.Error:
            return  # nothing is deleted on doubt; the next build prunes
        identity = str(row[0]) if row else None
        for folder in self.root.iterdir():
            if folder.name.startswith(TEXTS_PREFIX):
                try:
                    TextSegment(folder, identity or "").close()
                except (OSError, ValueError, KeyError):
                    shutil.rmtree(folder, ignore_errors=True)  # another database's, or damaged
                continue
            name, _, rest = folder.name.partition("-")
            created = rest.partition("-")[0]
            if folder.name.startswith("tmp-"):
                pid = folder.name.rsplit("-", 1)[-1]
                if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                    shutil.rmtree(folder, ignore_errors=True)
                continue
            if not created.isdigit() or (name, int(created)) not in live:
                shutil.rmtree(folder, ignore_errors=True)


_PLACING: dict[str, threading.Lock] = {}
_PLACING_GUARD = threading.Lock()


def _placing(root: Path) -> threading.Lock:
    """The lock this process's managers of ``root`` hold while they put a finished build in place."""
    with _PLACING_GUARD:
        return _PLACING.setdefault(str(root), threading.Lock())


class _Abandoned(Exception):
    """The segment went away (merged) or the engine is closing: the build stops quietly."""
