"""The one-shot index and the rebuild after a clear: what ``aivault index`` and ``aivault clear`` run
when no daemon serves the data directory.

Both run over a live service the caller has started (the CLI serves it through a broker, so that other
shells can search while it indexes) and report progress through a callback; the caller prints. A
pass runs on a thread of its own so that the calling thread can report progress and notice Ctrl-C
between two waits (``interrupted``): an interrupt is raised by the calling thread where it waits,
never by a signal handler inside the indexer's threads.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from aivault import lastrun
from aivault.errors import AivaultError, EmbedError
from aivault.home import Home
from aivault.indexer.store import connect, verify_readable
from aivault.vault.live import LocalService

Interrupted = Callable[[], bool]


class Progress(Protocol):
    """Where a long step reports how far it got (the CLI's progress line)."""

    def update(self, stats: dict[str, Any]) -> None: ...

    def finish(self) -> None: ...
_POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class OneShot:
    """What a one-shot index did."""

    summary: dict[str, Any]  # the pass's counts (files, messages, skips, generation)
    reclaim: dict[str, Any] | None  # the last reclaim's record, if one ran
    lexical_s: float  # from the start to a compact lexical index
    vectors_s: float | None  # then to every chunk embedded (``vectors``), else None
    embedded: int  # chunks with a vector at the end


def _check(interrupted: Interrupted) -> None:
    if interrupted():
        raise KeyboardInterrupt


def wait(fut: Any, interrupted: Interrupted) -> Any:
    """``fut.result()``, ending with KeyboardInterrupt once ``interrupted()`` says so."""
    while True:
        _check(interrupted)
        with contextlib.suppress(TimeoutError):
            return fut.result(timeout=_POLL_S)


def with_progress(work: Callable[[], Any], stats: Callable[[], dict[str, Any]], progress: Progress,
                  interrupted: Interrupted) -> Any:
    """``work()`` on a thread of its own, reporting ``stats()`` to ``progress`` until it ends (then finished)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, name="one-shot", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(_POLL_S)
            _check(interrupted)
            with contextlib.suppress(AivaultError):
                progress.update(stats())
    finally:
        progress.finish()
    if "error" in box:
        raise box["error"]
    return box["value"]


def index_once(service: LocalService, *, vectors: bool, progress: Progress, interrupted: Interrupted,
               started: float | None = None) -> OneShot:
    """A full pass, then the index left compact (and embedded with ``vectors``), then its free blocks reclaimed.

    The searches that follow a one-shot index run without a daemon to merge in the background, and few
    sorted segments answer fastest. When that merge would free enough blocks for a reclaim to follow,
    the reclaim's copy of the index runs it on the way (indexer/reclaim.py): the postings are written
    once. If the copy fails, the index is as it was and merges in place. ``started``: the monotonic time
    the caller's work began (its start-up counts in ``lexical_s``).
    """
    t0 = time.monotonic() if started is None else started
    summary: dict[str, Any] = with_progress(service.indexer.reconcile(full=True).result, service.stats, progress,
                                            interrupted)
    plan = wait(service.indexer.plan_copy_merge(), interrupted)
    merged = service.reclaim(restart=vectors, merge=plan) if plan is not None else None
    if not (merged and merged.get("done")):
        service.start()  # the reclaim left the indexer stopped (``restart=vectors``)
        wait(service.indexer.compact("all"), interrupted)
    lexical_s = time.monotonic() - t0
    vectors_s = None
    if vectors:
        with_progress(lambda: _until_embedded(service, interrupted), service.stats, progress, interrupted)
        vectors_s = time.monotonic() - t0 - lexical_s
    # A compaction in place freed the bulk segment's blocks: give them back to the disk.
    _check(interrupted)
    reclaimed = service.reclaim(restart=False) or merged
    return OneShot(summary, reclaimed, lexical_s, vectors_s, int(service.stats().get("semanticEligible", 0)))


def _until_embedded(service: LocalService, interrupted: Interrupted) -> None:
    """Until every eligible chunk has a vector (or the semantic layer reports it cannot)."""
    while not interrupted():
        st = service.stats()
        if st.get("semanticState") in ("unavailable", "off"):
            raise EmbedError(f"semantic search is unavailable: "
                             f"{st.get('semanticError') or 'turned off in config.json'}")
        if st.get("semanticEmbedded") == st.get("semanticEligible") and st.get("vectorIndex"):
            return
        time.sleep(0.5)


def rebuild(service: LocalService, *, progress: Progress, interrupted: Interrupted) -> dict[str, Any] | None:
    """After a clear: the new index built from the transcripts (None when consent is off, nothing built)."""
    if not service.policy.enabled:
        return None
    service.start()
    summary: dict[str, Any] = with_progress(service.indexer.reconcile(full=True).result, service.stats, progress,
                                            interrupted)
    wait(service.indexer.compact(), interrupted)
    service.reclaim(restart=False)
    return summary


def rebuild_after_clear(service: LocalService, removed: list[str], *, progress: Progress,
                        interrupted: Interrupted) -> dict[str, Any]:
    """What ``aivault clear`` answers without a daemon: the files ``clear_offline`` removed, and the new
    index built over ``service`` (``rebuild`` is None when consent is off)."""
    summary = rebuild(service, progress=progress, interrupted=interrupted)
    return {"cleared": True, "removed": removed, "rebuilding": summary is not None, "identity": service.identity,
            "rebuild": summary}


@contextlib.contextmanager
def recorded_run(home: Home) -> Iterator[None]:
    """The one-shot index's record (aivault/lastrun.py): running from here; done when the block ends, or
    failed with why (an interrupt, an aivault error's message, any other exception's class and message)."""
    started = _now_ms()
    lastrun.started(home, started)
    try:
        yield
    except KeyboardInterrupt:
        lastrun.ended(home, started, _now_ms(), "interrupted (Ctrl-C) before it finished")
        raise
    except AivaultError as exc:
        lastrun.ended(home, started, _now_ms(), str(exc))
        raise
    except Exception as exc:
        lastrun.ended(home, started, _now_ms(), f"{exc.__class__.__name__}: {exc}")
        raise
    lastrun.ended(home, started, _now_ms())


def _now_ms() -> int:
    return int(time.time() * 1000)


def verify(home: Home) -> None:
    """An index that cannot read itself back is not "indexed": read every table once (IndexDamaged if not)."""
    con = connect(home.db_path, read_only=True)
    try:
        verify_readable(con, home.db_path)
    finally:
        con.close()


__all__ = ["OneShot", "index_once", "rebuild", "rebuild_after_clear", "recorded_run", "verify", "wait",
           "with_progress"]
