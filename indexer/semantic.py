"""Background embedding: chunk text -> vectors in DuckDB -> the FAISS index.

Lexical indexing never waits for this: text is searchable by BM25 as soon as its batch
commits. A worker thread walks eligible chunks (user and assistant text and thinking) in
chunk-id order above a watermark, embeds only texts whose hash has no vector yet (equal text
is never embedded twice: a re-read file reuses its vectors), and hands each bounded batch to
the writer thread, which commits the vectors, the new watermark and the epoch in one
transaction and then adds them to the FAISS index. A killed worker resumes at the committed
watermark, so finished chunks are never embedded again.

Searches come first (``SearchGate``): no unit of background work -- a model call, a read of
the next chunks, a publication -- starts while a search is in flight or within
``YIELD_AFTER_SEARCH_S`` of the last one ending (aivault/priority.py). A unit already running
finishes (a model call cannot be cut short), which is why calls are small (``EMBED_CALL``). So that a steady
stream of searches cannot starve embedding, a worker held back ``MAX_HELD_S`` in a row starts
one unit anyway, at one thread: under constant searching it still gets about one call per
``MAX_HELD_S``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import duckdb
import numpy as np

from aivault import log
from aivault.embed import Embedder
from aivault.indexer import sql_write
from aivault.priority import SearchGate

_log = log.get("semantic")

# Texts per model call: a search that arrives during a call shares the CPU with it until it ends,
# so calls are short (~85 ms at one thread for ~200-character texts), yet still one llama.cpp
# pack of several texts (packs of 128 tokens embed as many texts/s as 256: docs/design.md §7).
EMBED_CALL = 4
# Two threads must beat one by this factor to be kept; else one thread for BOOST_BACKOFF_S.
BOOST_MIN_GAIN = 1.25
BOOST_BACKOFF_S = 60.0
# Chunks read per step, and how often embedded vectors are published (made searchable); a test that
# must interrupt the embedding between publications publishes more often.
READ_BATCH = 256
PUBLISH_EVERY_S = float(os.environ.get("AIVAULT_PUBLISH_EVERY_S", "5"))
PUBLISH_MAX_CHUNKS = 4096
IDLE_SLEEP_S = 1.0
RETRY_LOAD_S = 60.0


def to_blob(vecs: np.ndarray) -> list[bytes]:
    """Vectors as stored: float16 bytes (half the space; cosine error far below ranking noise)."""
    return [v.astype("<f2").tobytes() for v in vecs]


def from_blobs(blobs: list[bytes], dims: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dims), np.float32)
    out = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), dims).astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    normalized: np.ndarray = out / np.maximum(norms, 1e-12)
    return normalized


@dataclass(slots=True)
class Publication:
    """What one writer transaction commits: new vectors, chunks made searchable, the watermark."""

    hashes: list[int]
    blobs: list[bytes]
    chunk_ids: np.ndarray
    chunk_vecs: np.ndarray
    watermark: int


@dataclass(slots=True)
class SemanticStats:
    state: str = "idle"  # idle | loading | rebuilding | embedding | current | unavailable
    error: str | None = None
    embedded_total: int = 0  # texts embedded by this process
    reused_total: int = 0  # chunks whose text already had a vector
    rate_per_s: float = 0.0
    threads: int = 0  # llama.cpp threads of the last call
    rate_window: list[tuple[float, int]] = field(default_factory=list)

    def note(self, n: int) -> None:
        now = time.monotonic()
        self.embedded_total += n
        self.rate_window.append((now, n))
        self.rate_window = [(t, k) for t, k in self.rate_window if now - t <= 60.0]
        span = now - self.rate_window[0][0] if len(self.rate_window) > 1 else 0.0
        self.rate_per_s = sum(k for _, k in self.rate_window[1:]) / span if span > 0 else 0.0


class ThreadChooser:
    """How many threads the next embedding call gets.

    One while anything else wants the CPU (a scan pass, a merge, a recent search): llama.cpp's
    worker threads wait on spin barriers, so with two threads and another busy process both slow
    down badly. ``boost`` threads while the machine is otherwise quiet -- unless two threads
    measured no faster than one (another process is busy), in which case one thread for a while.
    Speed is measured in characters per second of embedded text, an EMA per thread count.
    """

    def __init__(self, base: int, boost: int) -> None:
        self.base = base
        self.boost = max(base, boost)
        self.speed: dict[int, float] = {}
        self._backoff_until = 0.0

    def choose(self, quiet: bool) -> int:
        if not quiet or self.boost == self.base or time.monotonic() < self._backoff_until:
            return self.base
        return self.boost

    def observe(self, threads: int, chars: int, seconds: float) -> None:
        if seconds <= 0 or chars <= 0:
            return
        rate = chars / seconds
        old = self.speed.get(threads)
        self.speed[threads] = rate if old is None else 0.7 * old + 0.3 * rate
        base = self.speed.get(self.base)
        if threads == self.boost != self.base and base and self.speed[threads] < BOOST_MIN_GAIN * base:
            self._backoff_until = time.monotonic() + BOOST_BACKOFF_S
            self.speed.pop(threads)  # measure afresh after the back-off
            _log.info("embedding stays on one thread", boost_chars_per_s=round(rate), base_chars_per_s=round(base))


class SemanticWorker:
    """The embedding loop; talks to the writer only through ``publish`` (which returns a future)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, make_embedder: Callable[[], Embedder],
                 publish: Callable[[Publication], Future[int]], after_publish: Callable[[int], None],
                 prepare: Callable[[], int], quiet: Callable[[], bool] = lambda: False,
                 gate: SearchGate | None = None) -> None:
        self._con = con
        self._quiet = quiet
        self.gate = gate or SearchGate()
        self._make = make_embedder
        self._publish = publish
        self._after_publish = after_publish
        self._prepare = prepare
        self.stats = SemanticStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="embedder", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self.join(timeout_s)

    def _run(self) -> None:
        cur = self._con.cursor()
        try:
            embedder = self._load()
            if embedder is None:
                return
            self._loop(cur, embedder)
        except Exception as exc:  # never take the indexer down with it: lexical search goes on
            _log.exception("semantic worker stopped")
            self.stats.state = "unavailable"
            self.stats.error = f"{exc.__class__.__name__}: {exc}"
        finally:
            cur.close()

    def _load(self) -> Embedder | None:
        while not self._stop.is_set():
            self.stats.state = "loading"
            try:
                return self._make()
            except Exception as exc:
                self.stats.state = "unavailable"
                self.stats.error = f"the embedding model could not be loaded: {exc}"
                _log.warning("embedding model unavailable; lexical search only", error=str(exc))
                if self._stop.wait(RETRY_LOAD_S):
                    return None
        return None

    def _loop(self, cur: duckdb.DuckDBPyConnection, embedder: Embedder) -> None:
        # The index must reflect DuckDB (sidecar or rebuild) before anything is added to it.
        watermark = self._prepare()
        pending_hashes: list[int] = []
        pending_blobs: list[bytes] = []
        pending_ids: list[int] = []
        pending_vecs: list[np.ndarray] = []
        fresh: dict[int, np.ndarray] = {}
        last_publish = time.monotonic()
        # Embedders without thread control (remote) keep one setting.
        set_threads: Callable[[int], None] = getattr(embedder, "set_threads", lambda n: None)
        base = int(getattr(embedder, "threads", 1))
        chooser = ThreadChooser(base, int(getattr(embedder, "boost_threads", base)))
        while self.gate.enter(self._stop):
            cur.execute(sql_write.BEGIN_SNAPSHOT)
            try:
                rows = cur.execute(sql_write.SELECT_TO_EMBED, [watermark, READ_BATCH]).fetchall()
                hashes = sorted({int(h) for _, h, _ in rows} - fresh.keys())
                known: dict[int, np.ndarray] = {}
                if hashes:
                    import pyarrow as pa  # here: a read-only process imports this module, never this loop

                    cur.register("b_hashes", pa.table({"hash": pa.array(hashes, pa.int64())}))
                    try:
                        found = cur.execute(sql_write.SELECT_KNOWN_VECTORS).fetchall()
                    finally:
                        cur.unregister("b_hashes")
                    vecs = from_blobs([bytes(v) for _, v in found], embedder.dims)
                    known = {int(h): vecs[i] for i, (h, _) in enumerate(found)}
            finally:
                cur.execute(sql_write.ROLLBACK)
            if rows:
                self.stats.state = "embedding"
                todo: dict[int, str] = {}
                for _, h, text in rows:
                    h = int(h)
                    if h not in known and h not in fresh and h not in todo:
                        todo[h] = text
                items = list(todo.items())
                for i in range(0, len(items), EMBED_CALL):
                    if not self.gate.enter(self._stop):
                        return
                    part = items[i : i + EMBED_CALL]
                    texts = [t for _, t in part]
                    threads = chooser.choose(self._quiet())
                    set_threads(threads)
                    self.stats.threads = threads
                    t0 = time.perf_counter()
                    vecs = embedder.embed(texts)
                    chooser.observe(threads, sum(map(len, texts)), time.perf_counter() - t0)
                    for (h, _), v in zip(part, vecs, strict=True):
                        fresh[h] = v
                    pending_hashes += [h for h, _ in part]
                    pending_blobs += to_blob(vecs)
                    self.stats.note(len(part))
                self.stats.reused_total += sum(1 for _, h, _ in rows if int(h) in known)
                for chunk, h, _ in rows:
                    h = int(h)
                    pending_ids.append(int(chunk))
                    pending_vecs.append(fresh[h] if h in fresh else known[h])
                watermark = int(rows[-1][0])
            due = pending_ids and (not rows or len(pending_ids) >= PUBLISH_MAX_CHUNKS
                                   or time.monotonic() - last_publish >= PUBLISH_EVERY_S)
            if due:
                if not self.gate.enter(self._stop):
                    return
                pub = Publication(pending_hashes, pending_blobs, np.asarray(pending_ids, np.int64),
                                  np.vstack(pending_vecs).astype(np.float32), watermark)
                epoch = self._publish(pub).result()
                _log.info("vectors published", chunks=len(pending_ids), embedded=len(pending_hashes),
                          watermark=watermark, epoch=epoch, rate_per_s=round(self.stats.rate_per_s, 1))
                pending_hashes, pending_blobs, pending_ids, pending_vecs = [], [], [], []
                fresh.clear()
                last_publish = time.monotonic()
                self._after_publish(epoch)
            if not rows:
                self.stats.state = "current"
                self._stop.wait(IDLE_SLEEP_S)
