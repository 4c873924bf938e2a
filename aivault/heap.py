"""Giving the C heap's free pages back to the system after a large, short-lived peak.

glibc's malloc keeps what is freed inside its arenas (one per thread that allocates, 64 MB each)
for the next allocation; it gives a page back only from the top of an arena. DuckDB allocates its
buffers and a sort's runs there, and a bulk load's batches pass through it, so after the final sort
of a one-shot index the indexer still held ~300 MB of free but resident pages, on which the
reclaim's copy then allocated more (1M messages: peak RSS 1.03-1.35 GB run to run). ``malloc_trim(0)``
hands every free page of every arena back (``madvise``), which is what RSS counts. It runs when a
phase that freed a lot ends: a pass, a merge. Elsewhere (musl, macOS: no ``malloc_trim``) it does
nothing.

A bulk load (a one-shot ``aivault index``) also raises two of malloc's thresholds in the indexer and
its scanners (``tune_for_bulk``). Its batches' large arrays (a 16,000-message batch's postings keys
alone are ~40 MB) are above glibc's largest automatic mmap threshold (32 MB), so each was mapped,
page-faulted in zeroed and unmapped again, batch after batch; and a heap top freed by one batch was
trimmed and faulted back by the next. Served from the heap and kept there instead, a 1M one-shot
index takes a third fewer page faults and a fifth less system CPU, with the same peak RSS
(bench/README.md). What a phase leaves free is still handed back by ``release_free_memory``.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable

from aivault import log

_log = log.get("heap")

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _libc(name: str, *argtypes: type) -> Callable[..., int] | None:
    """The C library's function ``name`` returning an int, or None where it has none (musl, macOS)."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_trim = _libc("malloc_trim", ctypes.c_size_t)

# mallopt(3) parameters (glibc's malloc.h) and what a bulk load sets them to.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
BULK_MMAP_THRESHOLD = 64 << 20
BULK_TRIM_THRESHOLD = 256 << 20


_mallopt = _libc("mallopt", ctypes.c_int, ctypes.c_int)


def tune_for_bulk(process: str) -> bool:
    """Serve a bulk load's large, short-lived buffers from the heap and keep its freed top (see the
    module doc); for the rest of this process's life. False where malloc has no ``mallopt``."""
    if _mallopt is None:
        return False
    ok = bool(_mallopt(_M_MMAP_THRESHOLD, BULK_MMAP_THRESHOLD)) and bool(_mallopt(_M_TRIM_THRESHOLD,
                                                                                BULK_TRIM_THRESHOLD))
    _log.info("heap tuned for a bulk load", process=process, ok=ok, mmap_threshold_mb=BULK_MMAP_THRESHOLD >> 20,
              trim_threshold_mb=BULK_TRIM_THRESHOLD >> 20)
    return ok


def resident_bytes() -> int | None:
    """This process's resident set size, or None where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def release_free_memory(after: str) -> int | None:
    """Give the heap's free pages back; the resident bytes released (None if nothing could be done)."""
    if _trim is None:
        return None
    before = resident_bytes()
    t0 = time.perf_counter()
    _trim(0)
    ms = (time.perf_counter() - t0) * 1e3
    now = resident_bytes()
    released = before - now if before is not None and now is not None else None
    _log.info("free heap released", after=after, released_mb=None if released is None else round(released / 1e6),
              ms=round(ms, 1))
    return released
