"""The bulk load of a one-shot index and the merges of a running daemon (indexer/segments.py, indexer/merges.py)
on a real daemon: threads and priority given to searches, a refused registration, a stopped indexer."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

import aivault.indexer.segments as seg_mod
import aivault.indexer.service
import aivault.vault.live
from aivault.errors import IndexerClosed
from aivault.home import Home
from aivault.indexer.segments import L0_FANIN, SegmentSet
from aivault.indexer.store import BULK_MEMORY_LIMIT, BULK_PASS_THREADS, MEMORY_LIMIT, THREADS
from aivault.priority import BACKGROUND_NICE
from tests.builders import ClaudeWriter
from tests.support.common import answer, wait_until
from tests.support.daemons import InprocDaemon


def _states(daemon: Any) -> list[str]:
    return [seg.state for seg in daemon.service.indexer.writer.segments.segments]


def _memory_limit(daemon: Any) -> str:
    return str(daemon.service.indexer.writer.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])


def _threads(daemon: Any) -> int:
    return int(daemon.service.indexer.writer.con.execute("SELECT current_setting('threads')").fetchone()[0])


def _limit_of(setting: str) -> str:
    con = duckdb.connect(config={"memory_limit": setting})
    try:
        return str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_a_bulk_load_sorts_at_the_end_and_a_search_ends_it(home: Home, roots: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot index sorts nothing until its final compaction and commits with fewer DuckDB threads; a search
    ends the bulk load."""
    from aivault.vault.endpoints import search_sessions

    monkeypatch.setattr(seg_mod, "FREEZE_ROWS", 50)  # read at every batch
    monkeypatch.setattr(aivault.indexer.service, "IDLE_FREEZE_AFTER_S", 1e9)  # no idle compaction meanwhile
    d = InprocDaemon(home, roots, bulk=True)
    sessions = 0
    try:
        for _ in range(L0_FANIN + 2):  # a batch or more per pass, each enough to freeze a segment
            for _ in range(2):
                ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{sessions}").user(
                    f"walrus number {sessions} " + " ".join(f"w{sessions}x{j}" for j in range(60)))
                sessions += 1
            d.service.indexer.reconcile(True).result(60)
        # Every posting so far waits in the active segment: nothing was frozen or merged.
        assert _states(d) == ["active"] and d.service.indexer.writer.segments.active.rows > 50 * L0_FANIN
        # ... and DuckDB keeps less of what it wrote cached than it may while searches run.
        assert _memory_limit(d) == _limit_of(BULK_MEMORY_LIMIT) != _limit_of(MEMORY_LIMIT)
        assert _threads(d) == BULK_PASS_THREADS < THREADS  # the scanners have the other cores
        # A search during a bulk load (another client through the daemon socket) ends it: the
        # pile is frozen and sorted without waiting for more.
        assert len(answer(search_sessions(d.service, {"query": "walrus", "limit": 100}))["hits"]) == sessions
        assert wait_until(lambda: "sorted" in _states(d) and "frozen" not in _states(d), timeout=30), _states(d)
        assert _memory_limit(d) == _limit_of(MEMORY_LIMIT)
        assert wait_until(lambda: _threads(d) == THREADS, timeout=30)  # once the merges the search began end
        ClaudeWriter(roots["claude"], cwd="/home/dev/late").user("walrus late " + " ".join(
            f"late{j}" for j in range(60)))
        sessions += 1
        d.service.indexer.reconcile(True).result(60)
        d.service.indexer.compact("all").result(60)  # resolves only once the merges are done
        states = _states(d)
        assert "frozen" not in states and 1 <= states.count("sorted") <= 2, states
        assert d.service.indexer.writer.segments.active.rows == 0
        assert len(answer(search_sessions(d.service, {"query": "walrus", "limit": 100}))["hits"]) == sessions
        assert len(answer(search_sessions(d.service, {"query": "w7x59"}))["hits"]) == 1
    finally:
        d.close()


def test_a_daemons_merges_leave_a_core_to_searches_and_sort_with_all_when_nobody_searches(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk load commits with BULK_PASS_THREADS and sorts at the end with every DuckDB thread; a merge that
    starts while people search (a search within MERGE_QUIET_S) runs with MERGE_THREADS, one that starts with
    nobody searching with every thread again, and the database's setting is put back when a merge ends."""
    from aivault.indexer.merges import MERGE_THREADS
    from aivault.vault.endpoints import search_sessions

    assert MERGE_THREADS < THREADS
    with InprocDaemon(home, roots, bulk=True) as d:
        ix = d.service.indexer
        seen: list[int] = []

        def threads_now(cur: Any) -> int:
            return int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0])

        nices: list[int] = []
        base = os.getpriority(os.PRIO_PROCESS, 0)

        def record(name: str, created_at: int) -> None:  # on the merge thread, before the setting is put back
            nices.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            cur = d.service.con.cursor()
            try:
                seen.append(threads_now(cur))
            finally:
                cur.close()

        ix.merges.prepare = record
        ClaudeWriter(roots["claude"], cwd="/home/dev/bulk").user("a walrus in the bulk load")
        ix.reconcile(True).result(60)
        assert _threads(d) == BULK_PASS_THREADS < THREADS  # its batches committed with fewer
        ix.compact("all").result(60)
        assert seen == [THREADS], seen
        assert answer(search_sessions(d.service, {"query": "walrus"}))["hits"]  # a search ends the bulk load
        assert wait_until(lambda: not ix.bulk, timeout=30)
        ix.compact("all").result(60)
        ClaudeWriter(roots["claude"], cwd="/home/dev/daemon").user("a walrus the daemon merges")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert seen[1:] and set(seen[1:]) == {MERGE_THREADS}, seen
        assert nices[0] == base and set(nices[1:]) == {max(base, BACKGROUND_NICE)}, nices  # yields to searches
        monkeypatch.setattr(aivault.vault.live, "MERGE_QUIET_S", 0.0)  # the last search is long past
        del seen[:]
        ClaudeWriter(roots["claude"], cwd="/home/dev/quiet").user("a walrus nobody searches for")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert seen and set(seen) == {THREADS}, seen
        cur = d.service.con.cursor()
        try:
            assert threads_now(cur) == THREADS
        finally:
            cur.close()


def test_a_merge_that_began_with_nobody_searching_yields_when_a_search_comes(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge that started with every DuckDB thread (nobody searching) gives them back and lowers its
    thread's priority as soon as a search begins, and the setting is put back when it ends."""
    from aivault.indexer.merges import MERGE_THREADS
    from aivault.vault.endpoints import search_sessions

    monkeypatch.setattr(aivault.vault.live, "MERGE_QUIET_S", 0.0)  # nobody searched "recently"
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("a walrus before the merge")
    with InprocDaemon(home, roots) as d:
        ix = d.service.indexer
        ix.reconcile(True).result(60)
        inside, go = threading.Event(), threading.Event()
        seen: list[tuple[int, int]] = []
        base = os.getpriority(os.PRIO_PROCESS, 0)

        def held(name: str, created_at: int) -> None:  # on the merge thread, the sort done
            cur = d.service.con.cursor()
            try:
                seen.append((int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]),
                             os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
                inside.set()
                assert go.wait(60)
                seen.append((int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]),
                             os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
            finally:
                cur.close()

        ix.merges.prepare = held
        ClaudeWriter(roots["claude"], cwd="/home/dev/merge").user("a walrus the merge takes in")
        ix.reconcile(True).result(60)
        compacted = ix.compact("all")
        assert inside.wait(60)
        assert answer(search_sessions(d.service, {"query": "walrus"}))["hits"]  # a search while the merge runs
        go.set()
        compacted.result(60)
        assert seen[0] == (THREADS, base), seen
        assert seen[1] == (MERGE_THREADS, max(base, BACKGROUND_NICE)), seen
        cur = d.service.con.cursor()
        try:
            assert int(cur.execute("SELECT current_setting('threads')").fetchall()[0][0]) == THREADS
        finally:
            cur.close()


def test_a_merge_whose_registration_fails_is_abandoned_and_the_indexer_goes_on(
        home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A registration the database refuses drops the merged table, keeps its inputs, and the indexer
    goes on indexing, searching and merging (it used to end the indexer thread)."""
    from aivault.vault.endpoints import search_sessions

    with InprocDaemon(home, roots) as d:
        ix = d.service.indexer
        ClaudeWriter(roots["claude"], cwd="/home/dev/one").user("a walrus before the refusal")
        ix.reconcile(True).result(60)
        real = SegmentSet.register
        targets: list[str] = []

        def refuse(self: SegmentSet, con: Any, plan: Any, rows: int, next_segment: int) -> None:
            targets.append(plan.target)
            raise duckdb.IOException("simulated: could not write the registration")

        monkeypatch.setattr(SegmentSet, "register", refuse)
        before = [s.name for s in ix.writer.segments.segments]
        ix.compact("all").result(60)
        assert targets, "no merge was attempted"
        names = [s.name for s in ix.writer.segments.segments]  # the compaction froze the active one first
        assert set(before) <= set(names) and targets[0] not in names and not ix.writer.segments.merging, names

        def tables() -> set[str]:
            cur = d.service.con.cursor()
            try:
                return {str(r[0]) for r in cur.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            finally:
                cur.close()

        assert targets[0] not in tables(), "the abandoned merge's table was left behind"
        assert answer(search_sessions(d.service, {"query": "walrus"}))["hits"]
        monkeypatch.setattr(SegmentSet, "register", real)
        ClaudeWriter(roots["claude"], cwd="/home/dev/two").user("a walrus after the refusal")
        ix.reconcile(True).result(60)
        ix.compact("all").result(60)
        assert ix._thread is not None and ix._thread.is_alive()
        assert [s.state for s in ix.writer.segments.segments].count("sorted") == 1
        assert len(answer(search_sessions(d.service, {"query": "walrus"}))["hits"]) == 2


def test_requests_to_a_stopped_indexer_settle_at_once(home: Home, roots: dict[str, Path]) -> None:
    """After the indexer stops, compact() resolves and reconcile() fails right away: no caller hangs."""

    ClaudeWriter(roots["claude"]).user("a walrus in the index")
    d = InprocDaemon(home, roots, bulk=True)
    ix = d.service.indexer
    ix.reconcile(True).result(60)
    ix.stop()
    compact, reconcile = ix.compact("all"), ix.reconcile(True)
    assert compact.result(timeout=5) is None  # a TimeoutError here is the hang this test is about
    with pytest.raises(IndexerClosed, match="closed"):
        reconcile.result(timeout=5)
    d.close()
