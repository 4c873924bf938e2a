"""Background embedding yields to searches (indexer/semantic.py; SearchGate, aivault/priority.py), with the real model.

A search is held in flight on purpose (the engine's assembly hook blocks inside it), and what the
embedder does meanwhile is read from its counters: texts embedded, units of work started, held and
forced by the duty cycle.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aivault.home import Home
from aivault.priority import SearchGate
from tests.builders import ClaudeWriter
from tests.support.common import wait_until
from tests.support.daemons import InprocDaemon
from tests.support.semantic import TOPICS, semantic_on


def _write(roots: dict[str, Path], sessions: int, per_session: int) -> None:
    """Distinct texts (each one is embedded), several publications' worth when there are many."""
    topics = list(TOPICS.values())
    for i in range(sessions):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/bg{i}")
        for j in range(per_session):
            c.user(f"session {i} note {j}: {topics[(i + j) % len(topics)]} (case {i * 1000 + j})")


class HeldSearch:
    """One search that stays in flight until ``release``; other threads' searches run normally."""

    def __init__(self, d: InprocDaemon, query: str) -> None:
        self.d = d
        self.inside = threading.Event()
        self._go = threading.Event()
        self.result: dict[str, Any] | None = None
        self.on_entry: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, args=(query,), name="held-search", daemon=True)
        engine = d.service.engine
        engine.assembly_hook = self._hook

    def _hook(self) -> None:
        if threading.current_thread() is not self._thread:
            return
        vec = self.d.service.indexer.vec
        assert vec is not None
        self.on_entry = {"started": vec.gate.started, "held": vec.gate.held}
        self.inside.set()
        self._go.wait(600)

    def _run(self, query: str) -> None:
        self.result = self.d.search(query)

    def start(self) -> HeldSearch:
        self._thread.start()
        assert self.inside.wait(120), "the search never reached its assembly"
        return self

    def abandon(self) -> None:
        """Let the search finish whatever happened (a test's cleanup); idempotent."""
        self._go.set()
        self._thread.join(120)
        self.d.service.engine.assembly_hook = None

    def release(self) -> dict[str, Any]:
        self._go.set()
        self._thread.join(120)
        self.d.service.engine.assembly_hook = None
        assert self.result is not None
        return self.result


@pytest.mark.timeout(600)
def test_no_embedding_work_starts_while_a_search_is_in_flight(home: Home, roots: dict[str, Path]) -> None:
    """While a search is in flight the embedder starts no model call (nor read, nor publication)."""
    semantic_on(home)
    # 3,000 texts: still embedding when the search is held, even if the first hybrid search takes
    # many seconds to reach its assembly (a clean CI run saw 600 texts all embedded by then).
    _write(roots, 100, 30)
    d = InprocDaemon(home, roots)
    held: HeldSearch | None = None
    try:
        vec = d.service.indexer.vec
        assert vec is not None
        # One gate counts each search for the embedding and for the merges (query/engine.py).
        assert d.service.engine.activity is vec.gate
        vec.gate.max_held_s = 3600.0  # no share forced during this test: the rule alone
        d.reconcile()
        assert wait_until(lambda: vec.worker.stats.embedded_total >= 8, timeout=300), vec.worker.stats
        held = HeldSearch(d, "sourdough starter").start()
        # The embedder reaches the gate (any call it had begun is over) and is held there. It may have
        # got there before the search reached its assembly (while the query was embedded): it is then
        # held already, once, so what is asserted is that it waits, not that ``held`` grew after entry.
        assert wait_until(lambda: vec.gate.waiting == 1, timeout=60), \
            f"the embedder never waited at the gate: {vec.worker.stats}, embedded {vec.worker.stats.embedded_total}"
        embedded = vec.worker.stats.embedded_total
        time.sleep(1.5)  # longer than MAX_HELD_S and YIELD_AFTER_SEARCH_S at their defaults
        assert vec.worker.stats.embedded_total == embedded
        assert vec.gate.started == held.on_entry["started"] and vec.gate.forced == 0
        assert vec.worker.stats.embedded_total < 3000, "finished before the search was held"
        result = held.release()
        assert result["kind"] == "results"
        # Once the search has ended (and the short quiet after it), embedding goes on.
        assert wait_until(lambda: vec.worker.stats.embedded_total > embedded, timeout=60)
        assert vec.gate.forced == 0 and vec.gate.in_flight == 0
    finally:
        if held is not None:
            held.abandon()  # a search left in flight would hold the lifecycle lock that close() needs
        d.close()


@pytest.mark.timeout(900)
def test_embedding_completes_under_a_steady_stream_of_searches(home: Home, roots: dict[str, Path]) -> None:
    """With a search in flight all along and others back to back, the duty cycle still embeds everything."""
    semantic_on(home)
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user(TOPICS["tax"])
    d = InprocDaemon(home, roots)
    stop = threading.Event()
    answered = [0]

    def stream() -> None:
        while not stop.is_set():
            if d.search("pod restarting liveness probe")["kind"] == "results":
                answered[0] += 1

    held: HeldSearch | None = None
    try:
        vec = d.service.indexer.vec
        assert vec is not None
        vec.gate.max_held_s = 0.2  # a short share period keeps the test short; the rule is the same
        d.reconcile()  # one text, so that a search has an index to read
        held = HeldSearch(d, "quarterly tax filing").start()  # in flight from here to the end
        _write(roots, 4, 10)  # 40 texts more, all embedded while that search is in flight
        d.reconcile()
        searcher = threading.Thread(target=stream, name="search-stream", daemon=True)
        searcher.start()

        def done() -> bool:
            s = d.service.stats()
            return bool(s.get("semanticEligible")) and s["semanticEmbedded"] == s["semanticEligible"]

        assert wait_until(done, timeout=600, interval=0.2), d.service.stats()
        assert vec.gate.in_flight >= 1  # the held search never ended meanwhile
        # Every unit started while searching was one the duty cycle forced.
        assert vec.gate.forced > 0 and vec.gate.forced == vec.gate.started - held.on_entry["started"]
        assert vec.worker.stats.embedded_total == 41
        stop.set()
        searcher.join(60)
        assert answered[0] > 0
        # It spanned the second pass's commit: its page is refused rather than mixed (the fence).
        assert held.release()["kind"] in ("results", "stale-cursor")
    finally:
        stop.set()
        if held is not None:
            held.abandon()
        d.close()


def test_gate_counts_a_held_worker_once_and_says_while_it_waits() -> None:
    """A worker held by a search counts one hold however long it waits, ``waiting`` is 1 meanwhile
    and 0 once the search has ended and the unit started."""
    gate = SearchGate(quiet_after_s=0.0, max_held_s=3600.0)
    stop = threading.Event()
    entered = threading.Event()
    gate.begins()

    def work() -> None:
        if gate.enter(stop):
            entered.set()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    assert wait_until(lambda: gate.waiting == 1, timeout=10)
    time.sleep(0.6)  # several of the wait's 0.25 s wake-ups
    assert (gate.held, gate.started, gate.waiting) == (1, 0, 1) and not entered.is_set()
    gate.ends()
    assert entered.wait(10)
    worker.join(10)
    assert (gate.held, gate.started, gate.forced, gate.waiting) == (1, 1, 0, 0)
