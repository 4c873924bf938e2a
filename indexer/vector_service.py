"""Vectors for one indexer: the FAISS index, the embedding worker, and the query-side embedder.

Threads: the embedding worker (indexer/semantic.py) computes vectors and asks the writer
thread to commit them (``on_publish``); the writer thread also removes deleted chunks
(``on_dropped``); query threads call ``search``. The index object is swapped whole when it
is rebuilt (from DuckDB, never by re-embedding) and guards itself with a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from aivault import log
from aivault.embed import Embedder
from aivault.errors import EmbedError
from aivault.home import Home
from aivault.indexer import schema, sql_write
from aivault.indexer.duck import one
from aivault.indexer.mailbox import Mail, VectorsAlign, VectorsPublish, VectorsSwap
from aivault.indexer.semantic import Publication, SemanticWorker, from_blobs, to_blob
from aivault.indexer.vectors import SIDECAR_FORMAT, SidecarHeader, VectorIndex
from aivault.priority import SearchGate

if TYPE_CHECKING:
    from aivault.indexer.writer import Writer  # the daemon's; a read-only process never imports it

_log = log.get("vectors")

SIDECAR_NAME = "vectors.faiss"
SAVE_AFTER_IDLE_S = 30.0
# Background embedding uses its extra thread only once searches have been quiet this long. (It
# starts no work at all while a search runs and shortly after: SearchGate, aivault/priority.py.)
QUIET_AFTER_SEARCH_S = 2.0
VECTOR_CANDIDATES = 200


def stored_precision(vecs: np.ndarray) -> np.ndarray:
    """``vecs`` as DuckDB stores them and a rebuild reads them back (float16, renormalized).

    A vector read back is unchanged by this (its float16 rounding is exact), so a live index fed
    through it holds bit for bit what an index rebuilt from the database holds.
    """
    if len(vecs) == 0:
        return vecs
    return from_blobs(to_blob(vecs), int(vecs.shape[1]))


def build_from_stored(con: duckdb.DuckDBPyConnection, watermark: int, dims: int) -> VectorIndex:
    """An index over every vector DuckDB holds for chunks at or below ``watermark`` (no embedding)."""
    cur = con.cursor()
    try:
        rows = cur.execute(sql_write.SELECT_ALL_VECTORS, [watermark]).fetchall()
    finally:
        cur.close()
    # In chunk order, the order a live index receives them: equal similarities (equal texts) then
    # come back in the same order, and an IVF rebuild trains on the same sample every time.
    rows.sort(key=lambda r: int(r[0]))
    ids = np.asarray([int(r[0]) for r in rows], np.int64)
    return VectorIndex.build(dims, ids, from_blobs([bytes(r[1]) for r in rows], dims))


class VectorService:
    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, writer: Writer,
                 submit: Callable[[Mail], None], make_embedder: Callable[[], Embedder],
                 busy: Callable[[], bool] = lambda: False) -> None:
        self.home = home
        self.con = con
        self.writer = writer
        self._submit = submit
        self._make = make_embedder
        self.index: VectorIndex | None = None
        self.query_embedder: Embedder | None = None
        self._embed_lock = threading.Lock()
        self._rebuilding = False
        self._removed_while_rebuilding: list[np.ndarray] = []
        self._dirty = False
        self._last_change = time.monotonic()
        self._busy = busy
        self.gate = SearchGate()
        self.worker = SemanticWorker(con, self._load, self._publish, self._after_publish, self._prepare,
                                     quiet=self._quiet, gate=self.gate)
        self._embedder: Embedder | None = None

    @property
    def sidecar(self) -> Path:
        return self.home.path / SIDECAR_NAME

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.worker.start()

    def stop(self) -> None:
        self.worker.stop()
        self.save()

    # --- worker-thread side ---------------------------------------------------------------------
    def _load(self) -> Embedder:
        embedder = self._make()
        self.query_embedder = self._make()  # its own context: a query never waits for a batch
        self._embedder = embedder
        return embedder

    def _prepare(self) -> int:
        """Align the stored vectors with the model, then load or rebuild the index; the watermark."""
        assert self._embedder is not None
        fut: Future[Any] = Future()
        self._submit(VectorsAlign(self._embedder.fingerprint, fut))
        vstate = fut.result()
        expect = SidecarHeader(SIDECAR_FORMAT, self.writer.meta.identity, vstate.epoch, vstate.fingerprint, 0)
        loaded = VectorIndex.load(self.sidecar, expect)
        if loaded is not None and loaded.dims == self._embedder.dims:
            self.index = loaded
            _log.info("vector index loaded", count=loaded.count, kind=loaded.kind)
        else:
            self._rebuild(vstate.watermark)
        watermark: int = vstate.watermark
        return watermark

    def _rebuild(self, watermark: int) -> None:
        """Build the index from the vectors stored in DuckDB (no re-embedding)."""
        assert self._embedder is not None
        self._rebuilding = True
        self.worker.stats.state = "rebuilding"
        t0 = time.perf_counter()
        index = build_from_stored(self.con, watermark, self._embedder.dims)
        fut: Future[Any] = Future()
        self._submit(VectorsSwap(index, fut))
        fut.result()
        self._dirty = True
        _log.info("vector index rebuilt from stored vectors", count=index.count, kind=index.kind,
                  ms=round((time.perf_counter() - t0) * 1000))

    def _publish(self, pub: Publication) -> Future[int]:
        fut: Future[int] = Future()
        self._submit(VectorsPublish(pub, fut))
        return fut

    def _after_publish(self, epoch: int) -> None:
        index = self.index
        if index is not None and index.wants_training() and self.writer.vstate is not None:
            self._rebuild(self.writer.vstate.watermark)

    # --- writer-thread side ---------------------------------------------------------------------
    def handle(self, mail: VectorsAlign | VectorsSwap | VectorsPublish) -> None:
        """A request of the embedding thread, on the indexer thread."""
        match mail:
            case VectorsAlign(fingerprint, fut):
                self.on_align(fingerprint, fut)
            case VectorsSwap(index, fut):
                self.on_swap(index, fut)
            case VectorsPublish(pub, fut):
                self.on_publish(pub, fut)

    def on_align(self, fingerprint: str, fut: Future[Any]) -> None:
        try:
            fut.set_result(self.writer.align_vectors(fingerprint))
        except Exception as exc:
            fut.set_exception(exc)

    def on_swap(self, index: VectorIndex, fut: Future[Any]) -> None:
        for ids in self._removed_while_rebuilding:
            index.remove(ids)
        self._removed_while_rebuilding = []
        self._rebuilding = False
        self.index = index
        fut.set_result(None)

    def on_publish(self, pub: Publication, fut: Future[int]) -> None:
        try:
            vstate = self.writer.publish_vectors(pub.hashes, pub.blobs, pub.watermark)
        except Exception as exc:
            fut.set_exception(exc)
            return
        if self.index is not None:
            # At the stored precision (float16), as a rebuild from DuckDB -- ours after a restart or a
            # read-only process's -- would see them: the same neighbours and similarities either way.
            self.index.add(pub.chunk_ids, stored_precision(pub.chunk_vecs))
        self._dirty = True
        self._last_change = time.monotonic()
        fut.set_result(vstate.epoch)

    def on_dropped(self) -> None:
        ids = self.writer.take_dropped_chunks()
        if len(ids) == 0:
            return
        if self.index is not None:
            self.index.remove(ids)
        if self._rebuilding:
            self._removed_while_rebuilding.append(ids)
        self._dirty = True
        self._last_change = time.monotonic()

    def maybe_save(self) -> None:
        if self._dirty and time.monotonic() - self._last_change >= SAVE_AFTER_IDLE_S:
            self.save()

    def save(self) -> None:
        index, vstate = self.index, self.writer.vstate
        if not self._dirty or index is None or vstate is None or self._rebuilding:
            return
        header = SidecarHeader(SIDECAR_FORMAT, self.writer.meta.identity, vstate.epoch, vstate.fingerprint,
                               index.count)
        t0 = time.perf_counter()
        index.save(self.sidecar, header)
        self._dirty = False
        _log.info("vector index saved", count=index.count, epoch=vstate.epoch,
                  ms=round((time.perf_counter() - t0) * 1000))

    def _quiet(self) -> bool:
        """Nothing else wants the CPU: no scan pass or merge, no search for a little while."""
        return not self.gate.recent(QUIET_AFTER_SEARCH_S) and not self._busy()

    # --- query side -------------------------------------------------------------------------------
    def ready(self) -> bool:
        index = self.index
        return index is not None and index.count > 0 and self.query_embedder is not None

    def search(self, text: str, k: int = VECTOR_CANDIDATES) -> tuple[np.ndarray, np.ndarray] | None:
        index, embedder = self.index, self.query_embedder
        if index is None or embedder is None or index.count == 0:
            return None
        with self._embed_lock:  # one query context, used by one query at a time
            vec = embedder.embed([text])[0]
        return index.search(vec, k)

    def model(self) -> str | None:
        embedder = self.query_embedder
        return embedder.fingerprint if embedder is not None and self.ready() else None

    def stats(self) -> dict[str, Any]:
        vstate = self.writer.vstate
        st = self.worker.stats
        eligible = embedded = 0
        cur = self.con.cursor()
        try:
            row = one(cur, sql_write.COUNT_ELIGIBLE, [vstate.watermark if vstate else 0])
            if row:
                eligible, embedded = int(row[0]), int(row[1]) if vstate else 0
        finally:
            cur.close()
        index = self.index
        return {
            "semanticState": st.state,
            "semanticError": st.error,
            "semanticEligible": eligible,
            "semanticEmbedded": embedded,
            "semanticRatePerS": round(st.rate_per_s, 1),
            "semanticTextsEmbedded": st.embedded_total,  # by this process, live (not only when committed)
            "semanticThreads": st.threads,
            "semanticModel": vstate.fingerprint if vstate else None,
            "vectorIndex": {"kind": index.kind, "count": index.count} if index else None,
        }


class ReadOnlyVectors:
    """Vectors for a read-only process (the CLI without a daemon): the same index the daemon searches.

    The daemon's saved sidecar is used when its identity, epoch and model match the database.
    When it does not -- the daemon was killed or crashed before it saved (it saves after
    ``SAVE_AFTER_IDLE_S`` of quiet and when it stops), or a writer without embeddings removed
    chunks since -- the index is rebuilt from the vectors DuckDB holds, exactly as the daemon
    rebuilds it, and saved for the next process. So a read-only search and a daemon search over
    the same committed vectors find the same neighbours; only a database with no vectors yet (or
    a model that cannot load) leaves the semantic routes not ready, and the planner answers
    lexically. Everything loads on the first ``ready``.
    """

    def __init__(self, home: Home, con: duckdb.DuckDBPyConnection, make_embedder: Callable[[], Embedder],
                 fingerprint: str) -> None:
        self.home = home
        self.con = con
        self._make = make_embedder
        self.fingerprint = fingerprint
        self._index: VectorIndex | None = None
        self._embedder: Embedder | None = None
        self._checked = False
        self._lock = threading.Lock()

    @property
    def sidecar(self) -> Path:
        return self.home.path / SIDECAR_NAME

    def _state(self) -> tuple[SidecarHeader, int] | None:
        """The header a current sidecar has, and the watermark of the stored vectors; None when the
        stored vectors belong to another model (or there are none)."""
        cur = self.con.cursor()
        try:
            row = one(cur, sql_write.SELECT_VECTOR_STATE)
            ident = one(cur, schema.SELECT_IDENTITY)
        finally:
            cur.close()
        if row is None or ident is None or str(row[0]) != self.fingerprint:
            return None
        return SidecarHeader(SIDECAR_FORMAT, str(ident[0]), int(row[2]), self.fingerprint, 0), int(row[1])

    def _open(self) -> VectorIndex | None:
        state = self._state()
        if state is None:
            return None
        expect, watermark = state
        index = VectorIndex.load(self.sidecar, expect, mapped=True)  # this process never changes it
        if index is None and watermark == 0:
            return None  # nothing embedded yet
        try:
            self._embedder = self._make()
        except EmbedError as exc:
            # Searches still answer, lexically; say why vectors are not used.
            _log.warning("vectors not used: the query embedder could not load", reason=str(exc))
            return None
        if index is None or index.dims != self._embedder.dims:
            index = self._rebuild(expect, watermark, self._embedder.dims)
        return index

    def _rebuild(self, expect: SidecarHeader, watermark: int, dims: int) -> VectorIndex:
        """The index from the vectors stored in DuckDB (no embedding), saved as the sidecar.

        Saving from a reader is sound: while this process holds its read-only connection no
        writer can open the database (DuckDB locks the file), so the vector state the header
        records is the one the index was built from.
        """
        t0 = time.perf_counter()
        index = build_from_stored(self.con, watermark, dims)
        try:
            index.save(self.sidecar, replace(expect, count=index.count))
        except OSError as exc:
            _log.warning("vector index rebuilt but not saved", path=str(self.sidecar), reason=str(exc))
        _log.info("vector index rebuilt from stored vectors (the saved one was missing or out of date)",
                  count=index.count, kind=index.kind, ms=round((time.perf_counter() - t0) * 1000))
        return index

    def ready(self) -> bool:
        """True when a vector search can run now; the first call loads (or rebuilds) the index and the model."""
        with self._lock:
            if not self._checked:
                self._checked = True
                self._index = self._open()
            return self._index is not None and self._index.count > 0

    def search(self, text: str, k: int = VECTOR_CANDIDATES) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.ready():
            return None
        with self._lock:
            assert self._embedder is not None
            vec = self._embedder.embed([text])[0]
        assert self._index is not None
        return self._index.search(vec, k)

    def model(self) -> str | None:
        return self.fingerprint if self.ready() else None
