"""File-system events: a change is read when it happens, and polling stays as the safety net."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aivault.home import Home
from aivault.scanner.sources import Root
from aivault.scanner.watch import Watcher, count_dirs
from tests.builders.claude import ClaudeWriter
from tests.builders.codex import CodexWriter
from tests.support.daemons import InprocDaemon

# Generous bounds: the watcher answers in well under a second; these only end a failing test.
FOUND_WITHIN_S = 15.0


def scheduled_daemon(home: Home, roots: dict[str, Path]) -> InprocDaemon:
    """The daemon as `aivault serve` runs it (scheduled passes, watching scanners), in this process."""
    return InprocDaemon(home, roots, schedule=True, semantic=False)


def wait_found(d: InprocDaemon, query: str, within_s: float = FOUND_WITHIN_S) -> float:
    """Seconds until ``query`` has a hit (fails the test past ``within_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if d.search(query).get("hits"):
            return time.monotonic() - t0
        time.sleep(0.02)
    pytest.fail(f"{query!r} not found within {within_s} s")


def watch_state(d: InprocDaemon) -> dict[str, Any]:
    states = d.service.stats().get("watch") or []
    return states[0] if states else {}


@pytest.fixture
def scheduled(home: Home, roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[InprocDaemon]:
    # No polling pass for an hour: only the watcher can find what is written during the test.
    monkeypatch.setenv("AIVAULT_RECENT_PASS_S", "3600")
    ClaudeWriter(roots["claude"], cwd="/home/dev/old").user("an old conversation about the pelican parser")
    with scheduled_daemon(home, roots) as d:
        wait_found(d, "pelican")  # the first full pass
        yield d


def test_an_append_to_an_old_transcript_is_found_without_a_polling_pass(scheduled: InprocDaemon,
                                                                        roots: dict[str, Path]) -> None:
    """A line appended to a transcript last written long ago is searchable with no polling pass due."""
    [path] = list(roots["claude"].rglob("*.jsonl"))
    old = time.time() - 30 * 86_400
    os.utime(path, (old, old))  # idle for a month: a recent pass would not even look at it
    time.sleep(0.3)  # let the utime event's pass come and go
    w = ClaudeWriter(roots["claude"], path.stem, cwd="/home/dev/old")
    w.user("and now the albatross tokenizer")
    wait_found(scheduled, "albatross")
    assert watch_state(scheduled)["mode"] == "events"


def test_new_folders_and_files_are_found_as_they_appear(scheduled: InprocDaemon, roots: dict[str, Path]) -> None:
    """A new project folder (Claude) and a new dated folder tree (Codex) made after the watch began are seen."""
    ClaudeWriter(roots["claude"], cwd="/home/dev/brand-new").user("the cormorant cache was never invalidated")
    wait_found(scheduled, "cormorant")
    CodexWriter(roots["codex"]).user("the heron migration deadlocks on the enum")
    wait_found(scheduled, "heron")


def test_a_root_over_the_watch_budget_is_polled_and_says_so(home: Home, roots: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With no folders allowed to watch, every root is polled, status says why, and polling still finds changes."""
    monkeypatch.setenv("AIVAULT_WATCH_MAX_DIRS", "0")
    monkeypatch.setenv("AIVAULT_RECENT_PASS_S", "1")
    with scheduled_daemon(home, roots) as d:
        ClaudeWriter(roots["claude"], cwd="/home/dev/p").user("the grebe scheduler stalls")
        wait_found(d, "grebe")
        state = watch_state(d)
        assert state["mode"] == "polling" and state["watched"] == 0
        assert {p["root"] for p in state["polled"]} == {str(roots["claude"]), str(roots["codex"])}
        assert all("folders to watch" in p["reason"] for p in state["polled"])


def test_the_watcher_reports_changed_paths_and_ignores_sqlite_shared_memory(tmp_path: Path) -> None:
    """Watcher.take gives the written paths once, never a -shm file, and None when nothing changed."""
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    w = Watcher([Root("claude", str(root))], enabled=True, budget=100)
    w.start()
    try:
        assert w.state()["mode"] == "events" and w.state()["watched"] == 1
        time.sleep(0.2)
        (root / "a" / "db-shm").write_bytes(b"x")
        (root / "a" / "s.jsonl").write_bytes(b"{}\n")
        seen: set[str] = set()
        deadline = time.monotonic() + 10
        while str(root / "a" / "s.jsonl") not in seen and time.monotonic() < deadline:
            seen |= w.take() or set()
            time.sleep(0.02)
        assert str(root / "a" / "s.jsonl") in seen
        assert not any(p.endswith("-shm") for p in seen)
        time.sleep(0.2)
        assert not (w.take() or set()) - seen
    finally:
        w.close()


def test_watching_is_planned_within_the_budget(tmp_path: Path) -> None:
    """Roots are watched while their folders fit the budget; the rest, Aider project trees and absent ones are not."""
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    for i in range(5):
        (big / f"d{i}").mkdir(parents=True)
    assert count_dirs(str(big), 100) == 6 and count_dirs(str(big), 2) == 3
    w = Watcher([Root("claude", str(small)), Root("codex", str(big)), Root("aider", str(tmp_path)),
                 Root("gemini", str(tmp_path / "absent"))], enabled=True, budget=4)
    watched, polled = w._plan()
    assert watched == [str(small)]
    assert {p["root"]: p["reason"] for p in polled} == {
        str(big): "more than 4 folders to watch: polled",
        str(tmp_path): "a folder of projects: polled, not watched",
    }
    off = Watcher([Root("claude", str(small))], enabled=False)
    off.start()
    assert off.state()["mode"] == "polling" and "one-shot" in off.state()["reason"]
    off.close()
