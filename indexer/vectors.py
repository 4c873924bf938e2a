"""The FAISS index of chunk vectors, and its sidecar file.

Ids are the chunks' int64 row ids (the same ids the postings use). Vectors are L2-normalized
so inner product is cosine similarity.

Index type, by measurement on this machine (docs/design.md §6, 384 dims, single queries, k=200):
exact flat inner product costs ~0.5 ms per 1,000 vectors per query (about 50 ms at 100k and
140 ms at 400k) and supports removal; HNSW is fast but cannot remove ids; IVF-Flat answers in
well under a millisecond at 400k with recall@200 above 0.99 at nprobe 32 on clustered data,
supports removal, and needs training. So: flat below ``IVF_MIN`` vectors (exact and cheap there),
IVF-Flat above it, retrained from the stored vectors whenever the count has grown ``RETRAIN_GROWTH``
times since the last training. Vectors live in DuckDB (the source of truth), so the index can
always be rebuilt without re-embedding.

Sidecar: ``vectors.faiss`` plus ``vectors.json`` = {format, identity, epoch, fingerprint, count}.
It is trusted only when all of identity, epoch and fingerprint match the database's; otherwise
it is rebuilt from DuckDB.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np

from aivault.home import write_private

SIDECAR_FORMAT = 1
IVF_MIN = 50_000
RETRAIN_GROWTH = 4
NPROBE = 32

faiss.omp_set_num_threads(1)  # one query per thread; the daemon runs several at once


@dataclass(frozen=True, slots=True)
class SidecarHeader:
    format: int
    identity: str
    epoch: int
    fingerprint: str
    count: int


class VectorIndex:
    """A thread-safe FAISS index over chunk ids (searches in parallel, changes exclusive)."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self._lock = threading.RLock()
        self._index: faiss.Index = faiss.IndexIDMap2(faiss.IndexFlatIP(dims))
        self.kind = "flat"
        self.trained_at = 0

    @property
    def count(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        if len(ids) == 0:
            return
        with self._lock:
            self._index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids.astype(np.int64))

    def remove(self, ids: np.ndarray) -> int:
        if len(ids) == 0:
            return 0
        with self._lock:
            # The Python wrapper turns an int64 array into an ID selector; the stubs only know the selector.
            return int(self._index.remove_ids(ids.astype(np.int64)))  # type: ignore[arg-type]

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores) of the ``k`` nearest vectors, best first; -1 ids are dropped."""
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        with self._lock:
            if self.count == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            scores, ids = self._index.search(q, min(k, self.count))
        keep = ids[0] >= 0
        return ids[0][keep], scores[0][keep]

    def wants_training(self) -> bool:
        """True when the index should become (or be retrained as) IVF at its current size."""
        n = self.count
        if n < IVF_MIN:
            return False
        return self.kind == "flat" or n >= self.trained_at * RETRAIN_GROWTH

    @staticmethod
    def build(dims: int, ids: np.ndarray, vecs: np.ndarray, *, ivf_min: int | None = None) -> VectorIndex:
        """A new index over these vectors: flat when small, IVF-Flat trained on them when large."""
        out = VectorIndex(dims)
        n = len(ids)
        if n >= (IVF_MIN if ivf_min is None else ivf_min):
            nlist = int(4 * math.sqrt(n))
            quantizer = faiss.IndexFlatIP(dims)
            ivf = faiss.IndexIVFFlat(quantizer, dims, nlist, faiss.METRIC_INNER_PRODUCT)
            sample = vecs[np.random.default_rng(0).choice(n, size=min(n, 40 * nlist), replace=False)]
            ivf.train(np.ascontiguousarray(sample, dtype=np.float32))
            ivf.nprobe = NPROBE
            # A hash-table direct map: ids are arbitrary chunk ids, added and removed over time.
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # type: ignore[attr-defined]  # SWIG class, not in the stubs
            out._index = ivf
            out.kind = "ivf"
            out.trained_at = n
        out.add(ids, vecs)
        return out

    # --- sidecar -----------------------------------------------------------------------------------
    def save(self, path: Path, header: SidecarHeader) -> None:
        """Write the index and its header atomically (the header last: it vouches for the index)."""
        with self._lock:
            data = faiss.serialize_index(self._index)
        write_private(path, bytes(data))
        write_private(path.with_suffix(".json"), json.dumps(asdict(header)).encode())

    @staticmethod
    def load(path: Path, expect: SidecarHeader, *, mapped: bool = False) -> VectorIndex | None:
        """The saved index if its header matches ``expect`` exactly (count aside), else None.

        ``mapped``: for a process that only searches (never adds or removes), the vectors are
        memory-mapped from the file instead of read into memory -- a flat index's codes
        (``IO_FLAG_MMAP_IFC``) or an IVF index's inverted lists (``IO_FLAG_MMAP``); the same
        vectors, so the same answers. Loading the 100k bench's 50 MB flat sidecar: ~50 ms read,
        ~9 ms mapped. The mapping survives the daemon replacing the file (it writes a new file
        and renames it over the old one) or removing it.
        """
        try:
            header = SidecarHeader(**json.loads(path.with_suffix(".json").read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if (header.format, header.identity, header.epoch, header.fingerprint) != \
                (expect.format, expect.identity, expect.epoch, expect.fingerprint):
            return None
        try:
            if mapped:
                # The two flags cannot be combined for IVF, and the kind is known only after reading:
                # by size, as the daemon chooses it (either flag reads the other kind correctly, unmapped).
                flag = faiss.IO_FLAG_MMAP if header.count >= IVF_MIN else faiss.IO_FLAG_MMAP_IFC
                index = faiss.read_index(str(path), flag)
            else:
                raw = np.frombuffer(path.read_bytes(), dtype=np.uint8)
                index = faiss.deserialize_index(raw)
        except (OSError, RuntimeError):
            return None
        if int(index.ntotal) != header.count:
            return None
        out = VectorIndex(index.d)
        out._index = index
        out.kind = "ivf" if isinstance(index, faiss.IndexIVF) or "IVF" in type(index).__name__ else "flat"
        out.trained_at = header.count if out.kind == "ivf" else 0
        if out.kind == "ivf":
            faiss.extract_index_ivf(index).nprobe = NPROBE
        return out


def remove_sidecar(path: Path) -> None:
    for p in (path, path.with_suffix(".json")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
