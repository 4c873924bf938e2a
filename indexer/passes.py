"""Scan passes asked for and not yet committed (coalescing, hand-out to the shards, completion),
and what the last committed ones observed.

A pass request is done when every shard has reported a pass that started after it was asked
(``wait-until-current`` in docs/contract.md §5). Asking again while a request has not reached any scanner joins it;
a full request also satisfies a recent one. A scanner that (re)connects is sent every request
still waiting on its shard.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, cast

from aivault.errors import IndexerClosed
from aivault.indexer.scanners import Slot
from aivault.indexer.store import now_ms
from aivault.ingest import PassDone

SUMMED = ("files_seen", "files_changed", "messages", "malformed", "oversized", "record_cut", "too_old")


@dataclass(slots=True)
class Request:
    """A reconcile request: done when every shard has reported a pass that started after it."""

    full: bool
    futures: list[Future[dict[str, Any]]]
    remaining: set[int]
    summary: dict[str, Any] = field(default_factory=lambda: {k: 0 for k in SUMMED})

    def absorb(self, shard: int, header: PassDone) -> bool:
        """Count one shard's pass; True when the request is complete."""
        if shard in self.remaining:
            self.remaining.discard(shard)
            counts = cast(Mapping[str, int], header)  # SUMMED names PassDone's integer fields
            for k in SUMMED:
                self.summary[k] += counts[k]
        return not self.remaining


# Sends one reconcile (request id, full) to a slot's scanner.
SendReconcile = Callable[[Slot, int, bool], None]


class Passes:
    """The pending pass requests of one indexer (used on the indexer thread only)."""

    def __init__(self, slots: Sequence[Slot], send: SendReconcile) -> None:
        self.slots = slots
        self._send = send
        self.pending: dict[int, Request] = {}
        self._seq = 0
        self.last_full = 0.0  # monotonic time the last full pass was asked
        self.last_recent = 0.0  # ... and the last pass of either kind

    def ask(self, full: bool, fut: Future[dict[str, Any]] | None) -> None:
        """Ask for a pass (joining a request no scanner has been sent yet, if it covers this one)."""
        for req_id, request in self.pending.items():
            if not any(req_id in slot.sent for slot in self.slots) and (request.full or not full):
                if fut:
                    request.futures.append(fut)
                return
        self._seq += 1
        req_id = self._seq
        self.pending[req_id] = Request(full, [fut] if fut else [], {slot.shard for slot in self.slots})
        for slot in self.slots:
            if slot.ident is not None:
                self._send(slot, req_id, full)
                slot.sent.add(req_id)
        now = time.monotonic()
        if full:
            self.last_full = now
        self.last_recent = now

    def resend(self, slot: Slot) -> None:
        """A scanner (re)connected: whatever was asked of its predecessor is asked of it."""
        slot.sent.clear()
        for req_id, request in sorted(self.pending.items()):
            if slot.shard in request.remaining:
                self._send(slot, req_id, request.full)
                slot.sent.add(req_id)

    def absorb(self, slot: Slot, header: PassDone) -> list[Request]:
        """One shard finished a pass covering the request ids in ``header['reqs']``; the requests
        every shard has now answered, taken out of the pending ones."""
        done: list[Request] = []
        for req in header["reqs"]:
            if req is None:  # a pass nobody asked for (the file watcher's)
                continue
            slot.sent.discard(req)
            request = self.pending.get(req)
            if request is not None and request.absorb(slot.shard, header):
                done.append(self.pending.pop(req))
        return done

    def due(self, now: float, full_every_s: float, recent_every_s: float) -> bool | None:
        """The pass a schedule wants now: True full, False recent, None none (one waits already,
        or a scanner is not connected)."""
        if self.pending or any(slot.ident is None for slot in self.slots):
            return None
        if now - self.last_full >= full_every_s:
            return True
        if now - self.last_recent >= recent_every_s:
            return False
        return None

    def fail_all(self, reason: str | Exception) -> None:
        """Settle every waiter with ``reason`` (an exception, or the message of IndexerClosed)."""
        for request in self.pending.values():
            for fut in request.futures:
                with contextlib.suppress(InvalidStateError):  # the caller may have settled it
                    fut.set_exception(reason if isinstance(reason, Exception) else IndexerClosed(reason))
        self.pending.clear()


@dataclass(slots=True)
class Observations:
    """What the committed passes saw, for ``searchStatus`` (kept in the meta table across restarts)."""

    last_reconcile_at: int | None = None
    last_sweep_at: int | None = None
    failed: list[dict[str, str]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)
    roots: list[dict[str, Any]] = field(default_factory=list)  # the last census (scanner.scan._census)
    write_error: str | None = None
    full_passes: int = 0
    # The retention (history days) the last sweep applied, "" when none ran: a longer one since (or none)
    # means sessions it removed are inside the window again (IndexerService reads their files again).
    swept_days: str = ""

    def gather(self, slots: Sequence[Slot]) -> None:
        """A request completed: take every shard's failures and root problems."""
        self.last_reconcile_at = now_ms()
        self.failed = [f for s in slots for f in s.failed]
        # Every shard walks every root, so each reports the same root problems.
        self.problems = list({(p["root"], p["reason"]): p for s in slots for p in s.problems}.values())

    def as_meta(self) -> dict[str, str]:
        """The rows Writer.save_observations keeps."""
        return {
            "lastReconcileAt": str(self.last_reconcile_at or ""),
            "lastSweepCompletedAt": str(self.last_sweep_at or ""),
            "failed": json.dumps(self.failed),
            "problems": json.dumps(self.problems),
            "roots": json.dumps(self.roots),
            "sweptHistoryDays": self.swept_days,
        }
