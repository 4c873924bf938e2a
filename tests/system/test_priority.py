"""Background threads give the CPU to searches first (aivault/priority.py): their own priority is lowered,
nobody else's."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from aivault.priority import BACKGROUND_NICE, background_thread
from aivault.query.postings import PostingsSidecars
from tests.support.daemons import InprocDaemon

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities are Linux's")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_background_thread_lowers_its_own_priority_only() -> None:
    """The thread that asks runs at BACKGROUND_NICE afterwards; the thread that started it keeps its own."""
    before = _nice()
    got: list[tuple[bool, int]] = []
    t = threading.Thread(target=lambda: got.append((background_thread(), _nice())))
    t.start()
    t.join(10)
    assert got == [(True, max(before, BACKGROUND_NICE))]
    assert _nice() == before


def test_the_sidecar_thread_runs_at_the_background_priority(inproc_daemon: InprocDaemon) -> None:
    """A daemon's postings sidecar thread (builds, loads of new postings) yields the CPU to the query workers."""
    side = inproc_daemon.service.engine.postings
    assert isinstance(side, PostingsSidecars)
    seen: list[int] = []
    side.later(lambda cur: seen.append(_nice()))
    assert side.wait_built(60)
    assert seen == [max(os.getpriority(os.PRIO_PROCESS, 0), BACKGROUND_NICE)]


def _thread_nices(pid: int) -> list[int]:
    """The nice value of each thread of process ``pid`` (field 19 of /proc/PID/task/TID/stat)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            stat = f.read()
        out.append(int(stat[stat.rindex(")") + 2:].split()[16]))
    return out


def test_the_scanner_processes_run_at_the_background_priority(inproc_daemon: InprocDaemon) -> None:
    """Every thread of a daemon's scanner processes (parsing, ZeroMQ's) yields the CPU to the daemon's searches."""
    inproc_daemon.reconcile()
    pids = [slot.proc.pid for slot in inproc_daemon.service.indexer.slots if slot.proc is not None]
    assert pids
    floor = max(os.getpriority(os.PRIO_PROCESS, 0), BACKGROUND_NICE)
    for pid in pids:
        nices = _thread_nices(pid)
        assert len(nices) > 1  # the interpreter's thread and ZeroMQ's
        assert all(n == floor for n in nices), nices
