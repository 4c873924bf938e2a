"""aivault/heap.py: the C heap's free pages go back to the system after a peak."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from tests.support.common import REPO

# 200 MB of 2-KB blocks (malloc's, not pymalloc's), one in fifty kept: glibc cannot give the freed
# ones back from the top of its heap, so they stay resident until malloc_trim.
_FRAGMENT = textwrap.dedent("""
    import json
    from aivault import log
    log.configure("error")
    from aivault.heap import release_free_memory, resident_bytes
    keep, drop = [], []
    for i in range(100_000):
        (keep if i % 50 == 0 else drop).append(bytearray(2000))
    del drop
    before = resident_bytes()
    released = release_free_memory("test")
    print(json.dumps({"before": before, "after": resident_bytes(), "released": released}))
""")


def test_freed_heap_pages_are_given_back_to_the_system() -> None:
    """After freeing 200 MB in small blocks, release_free_memory makes them non-resident (glibc)."""
    proc = subprocess.run([sys.executable, "-c", _FRAGMENT], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "AIVAULT_LOG_LEVEL": "error"})
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    if platform.libc_ver()[0] != "glibc":
        assert r["released"] is None  # no malloc_trim: nothing is done, nothing is claimed
        return
    assert r["released"] > 100e6
    assert r["after"] < r["before"] - 100e6


# A 48-MB buffer, allocated before and after tune_for_bulk: is it a mapping of its own?
_BULK = textwrap.dedent("""
    import json
    from aivault import log
    log.configure("error")
    from aivault.heap import tune_for_bulk

    def own_mappings(size):
        out = 0
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if len(fields) == 5 and hi - lo >= size:  # anonymous, not the [heap]
                    out += 1
        return out

    size = 48 << 20
    base = own_mappings(size)
    a = bytearray(size)
    mapped_before = own_mappings(size) - base
    del a
    tuned = tune_for_bulk("test")
    b = bytearray(size)
    mapped_after = own_mappings(size) - base
    print(json.dumps({"before": mapped_before, "after": mapped_after, "tuned": tuned}))
""")


def test_a_bulk_load_serves_its_large_buffers_from_the_heap() -> None:
    """glibc maps a 48-MB buffer on its own; after tune_for_bulk the same buffer comes from the heap."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt thresholds are glibc's (nothing to tune on this C library)")
    proc = subprocess.run([sys.executable, "-c", _BULK], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "AIVAULT_LOG_LEVEL": "error"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"before": 1, "after": 0, "tuned": True}
