"""The live service's life cycle as a state machine (aivault/vault/live.py): each event moves the phase as
MOVES allows, status reports each phase as the contract's, and a move MOVES lacks is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from aivault import policy
from aivault.home import Home
from aivault.vault.endpoints import search_sessions, search_status
from aivault.vault.live import MOVES, IllegalMove, LocalService, Phase
from tests.builders import ClaudeWriter
from tests.support.common import answer
from tests.support.daemons import InprocDaemon


def phase(svc: LocalService) -> Phase:
    """The service's phase now (a call, so that a type checker does not hold on to an earlier assertion)."""
    return svc.phase


def _reachable(start: Phase) -> set[Phase]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in MOVES[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_phase_is_reachable_from_ready_and_stopped_is_final() -> None:
    """The table has no dead phase: all are reachable from READY, each can stop, and STOPPED goes nowhere."""
    assert _reachable(Phase.READY) == set(Phase)
    assert MOVES[Phase.STOPPED] == frozenset()
    assert all(Phase.STOPPED in MOVES[p] for p in Phase if p is not Phase.STOPPED)
    # every phase but STOPPED can get back to indexing
    assert all(Phase.RUNNING in _reachable(p) for p in Phase if p is not Phase.STOPPED)


def test_consent_clear_and_stop_move_the_phase_and_status_follows(home: Home, roots: dict[str, Path]) -> None:
    """READY -> RUNNING -> DISABLED -> RUNNING -> (clear) RUNNING; cleared while disabled -> READY; stop -> STOPPED."""
    ClaudeWriter(roots["claude"], cwd="/home/dev/p").user("sprocket alignment")
    policy.save(home, policy.Policy(False, None))
    with InprocDaemon(home, roots) as d:  # started with consent off: built, never run
        svc = d.service
        assert phase(svc) is Phase.READY and answer(search_status(svc))["phase"] == "idle"
        assert answer(search_sessions(svc, {"query": "sprocket"})) == {"kind": "unavailable", "reason": "disabled"}

        policy.save(home, policy.Policy(True, None))
        assert svc.apply_policy()
        assert phase(svc) is Phase.RUNNING
        d.reconcile()
        assert answer(search_status(svc))["phase"] == "current"
        assert answer(search_sessions(svc, {"query": "sprocket"}))["kind"] == "results"

        policy.save(home, policy.Policy(False, None))
        svc.apply_policy()
        assert phase(svc) is Phase.DISABLED and answer(search_status(svc))["phase"] == "closed"

        policy.save(home, policy.Policy(True, None))
        svc.apply_policy()
        assert phase(svc) is Phase.RUNNING
        assert answer(search_sessions(svc, {"query": "sprocket"}))["kind"] == "results"  # resumed, nothing re-read

        first = svc.identity
        out = svc.clear()
        assert out["rebuilding"] is True and phase(svc) is Phase.RUNNING and svc.identity != first

        policy.save(home, policy.Policy(False, None))
        svc.apply_policy()
        svc.clear()
        assert phase(svc) is Phase.READY and answer(search_status(svc))["phase"] == "idle"

        with pytest.raises(IllegalMove, match="from ready to outage"):
            svc._move(Phase.OUTAGE, "a write refused by an indexer that never ran")
    assert phase(d.service) is Phase.STOPPED and answer(search_status(d.service))["phase"] == "closed"
