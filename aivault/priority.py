"""Background threads give the CPU to searches first.

On the two cores a daemon usually has, a merge's sort, a sidecar build or a load of new postings into
memory competes with the query workers for the same cores; the searches then took 1.5-3x their
idle time (docs/design.md §3). Linux schedules each thread on its own, so such a thread lowers its
own priority (``nice`` +``BACKGROUND_NICE``) when it starts: it still gets every cycle nobody else
wants, and a search that becomes runnable takes the core. A thread cannot raise its priority again
without privileges, so only threads that do nothing but background work call this. Elsewhere (no
per-thread priorities) it does nothing.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

from aivault import log

_log = log.get("priority")

BACKGROUND_NICE = 10

# No unit of background work starts while a search runs or this soon after one ended: the next
# page, a refined query and the bench's back-to-back queries all come within it.
YIELD_AFTER_SEARCH_S = 0.3
# A worker held back this long in a row starts one unit anyway (its share under steady searching).
MAX_HELD_S = 1.0


def background_thread(tid: int | None = None) -> bool:
    """Lower the scheduling priority of the calling thread (or of the thread of this process with
    native id ``tid``) for good; True when it was lowered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id() if tid is None else tid
        now = os.getpriority(os.PRIO_PROCESS, tid)
        if now < BACKGROUND_NICE:
            os.setpriority(os.PRIO_PROCESS, tid, BACKGROUND_NICE)
        return True
    except OSError as exc:  # a sandbox that refuses it: the thread runs at the normal priority
        _log.debug("background thread priority not lowered", error=str(exc))
        return False


class SearchGate:
    """When background work may start: never while a search is in flight, nor within
    ``quiet_after_s`` of the last search ending -- except that a worker held back ``max_held_s`` in
    a row starts one unit anyway (the duty cycle: embedding is slowed by searches, never stopped).

    Searches call ``begins``/``ends`` (any thread); the worker calls ``enter`` before each unit.
    Both take one lock, so once ``begins`` has returned no unit starts unless it is forced, and the
    counters say exactly what happened: ``started`` units, ``held`` times a unit had to wait,
    ``forced`` units started while a search was in flight or had just ended; ``waiting`` is how
    many workers are held at this moment.
    """

    def __init__(self, quiet_after_s: float = YIELD_AFTER_SEARCH_S, max_held_s: float = MAX_HELD_S) -> None:
        self.quiet_after_s = quiet_after_s
        self.max_held_s = max_held_s
        self._cond = threading.Condition()
        self.in_flight = 0
        self._last_end = -math.inf
        self.started = 0
        self.held = 0
        self.forced = 0
        self.waiting = 0

    def begins(self) -> None:
        with self._cond:
            self.in_flight += 1

    def ends(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._last_end = time.monotonic()
            self._cond.notify_all()

    def recent(self, within_s: float) -> bool:
        """A search is in flight or ended less than ``within_s`` ago."""
        return self.in_flight > 0 or time.monotonic() - self._last_end < within_s

    def enter(self, stop: threading.Event) -> bool:
        """Wait until a unit of background work may start and count it; False when ``stop`` is set."""
        with self._cond:
            held_since: float | None = None
            try:
                while not stop.is_set():
                    now = time.monotonic()
                    quiet_in = self._last_end + self.quiet_after_s - now
                    if self.in_flight == 0 and quiet_in <= 0:
                        self.started += 1
                        return True
                    if held_since is None:
                        held_since = now
                        self.held += 1
                        self.waiting += 1
                    share_in = held_since + self.max_held_s - now
                    if share_in <= 0:
                        self.forced += 1
                        self.started += 1
                        return True
                    # Woken by ``ends``; the timeout also lets ``stop`` be seen.
                    self._cond.wait(min(share_in, quiet_in if self.in_flight == 0 else share_in, 0.25))
                return False
            finally:
                if held_since is not None:
                    self.waiting -= 1
