"""The FAISS index wrapper: flat and IVF indexes add, remove, search, and round-trip their sidecar."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from aivault.indexer.vectors import IVF_MIN, SIDECAR_FORMAT, SidecarHeader, VectorIndex


def _data(n: int, dims: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((20, dims)).astype(np.float32)
    vecs = centers[rng.integers(0, 20, n)] + 0.3 * rng.standard_normal((n, dims)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = rng.choice(10**9, size=n, replace=False).astype(np.int64)  # arbitrary chunk ids
    return ids, vecs


def test_flat_and_ivf_indexes_find_the_query_vector_itself_and_forget_removed_ids() -> None:
    """Both index kinds return a stored vector's own id first, accept new ids, and drop removed ones."""
    ids, vecs = _data(3000)
    for ivf_min in (10**9, 1000):  # flat, then IVF
        index = VectorIndex.build(32, ids[:2000], vecs[:2000], ivf_min=ivf_min)
        assert index.kind == ("flat" if ivf_min > 3000 else "ivf")
        index.add(ids[2000:], vecs[2000:])  # arbitrary ids after training
        assert index.count == 3000
        for i in (0, 1500, 2999):
            found, scores = index.search(vecs[i], 5)
            assert found[0] == ids[i] and scores[0] > 0.99
        assert index.remove(ids[:10]) == 10
        found, _ = index.search(vecs[0], 50)
        assert ids[0] not in set(found.tolist()) and index.count == 2990


def test_a_sidecar_is_trusted_only_with_its_own_identity_epoch_and_model(tmp_path: Path) -> None:
    """Saved and loaded with the same header it is the same index; any mismatch refuses it."""
    ids, vecs = _data(1500)
    index = VectorIndex.build(32, ids, vecs, ivf_min=1000)
    header = SidecarHeader(SIDECAR_FORMAT, "db-1", 7, "local:m:f1:32", index.count)
    path = tmp_path / "vectors.faiss"
    index.save(path, header)
    loaded = VectorIndex.load(path, header)
    assert loaded is not None and loaded.kind == "ivf" and loaded.count == 1500
    assert loaded.search(vecs[3], 1)[0][0] == ids[3]
    loaded.add(np.array([123], np.int64), vecs[:1])  # still accepts arbitrary ids after loading
    for changed in (SidecarHeader(SIDECAR_FORMAT, "db-2", 7, header.fingerprint, 0),
                    SidecarHeader(SIDECAR_FORMAT, "db-1", 8, header.fingerprint, 0),
                    SidecarHeader(SIDECAR_FORMAT, "db-1", 7, "local:other:f1:32", 0),
                    SidecarHeader(SIDECAR_FORMAT + 1, "db-1", 7, header.fingerprint, 0)):
        assert VectorIndex.load(path, changed) is None
    path.write_bytes(b"not a faiss index")
    assert VectorIndex.load(path, header) is None


def test_a_mapped_sidecar_answers_as_the_loaded_one_and_outlives_its_file_being_replaced(tmp_path: Path) -> None:
    """Memory-mapped (read-only processes) flat and IVF sidecars, on either side of IVF_MIN, return the
    same neighbours and scores as the same sidecar read into memory, also after the file is replaced."""
    ids, vecs = _data(IVF_MIN + 500)
    path = tmp_path / "vectors.faiss"
    for n, ivf_min in ((3000, 10**9), (3000, 1000), (IVF_MIN + 500, 10**9), (IVF_MIN + 500, 1000)):
        index = VectorIndex.build(32, ids[:n], vecs[:n], ivf_min=ivf_min)
        index.remove(ids[:50])
        header = SidecarHeader(SIDECAR_FORMAT, "db-1", 3, "local:m:f1:32", index.count)
        index.save(path, header)
        loaded, mapped = VectorIndex.load(path, header), VectorIndex.load(path, header, mapped=True)
        assert loaded is not None and mapped is not None
        assert (mapped.kind, mapped.count) == (loaded.kind, loaded.count) == (index.kind, n - 50)
        VectorIndex.build(32, ids[:10], vecs[:10]).save(path, replace(header, count=10))  # the daemon saves anew
        for i in (60, 61, n - 1):
            want, got = loaded.search(vecs[i], 20), mapped.search(vecs[i], 20)
            assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
            assert got[0][0] == ids[i]
