"""Size limits and settled tails: huge lines never wedge indexing, finished files lose no record."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from aivault.home import Home
from aivault.scanner.reader import MAX_LINE_BYTES
from aivault.scanner.scan import TAIL_SETTLE_S
from tests.builders import ClaudeWriter
from tests.support.common import run_cli
from tests.support.daemons import InprocDaemon

_T = "2026-03-01T10:00:0{}.000Z"


def _user_line(session: str, text: str, second: int = 1) -> bytes:
    rec = {"type": "user", "uuid": f"u{second}", "sessionId": session, "cwd": "/home/dev/app",
           "timestamp": _T.format(second % 10), "message": {"role": "user", "content": text}}
    return (json.dumps(rec) + "\n").encode()


def _index(home: Home, roots: dict[str, Path], *extra: str, timeout: float = 90) -> Any:
    args = ["index", "--no-default-roots", "--json", *extra]
    for agent, path in roots.items():
        args += ["--root", f"{agent}={path}"]
    return run_cli(home.path, *args, timeout=timeout)


def test_a_record_too_large_for_one_frame_is_cut_counted_and_the_file_goes_on(home: Home,
                                                                              roots: dict[str, Path]) -> None:
    """A 20 MB user message (more than a frame holds) is indexed up to the record limit, counted, and
    the lines after it index too; before the cut the scanner re-sent the refused batch for ever."""
    c = ClaudeWriter(roots["claude"])
    c.user("the small question about zebras")
    words = "lorem ipsum dolor sit amet " * (20_000_000 // 27)
    with c.path.open("ab") as fh:
        fh.write(_user_line(c.session_id, "pasted log starts with okapi " + words + " and ends with quokka"))
    c.assistant("the answer mentions giraffes")
    out = _index(home, roots)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["record_cut"] == 1 and summary["messages"] == 3
    for word, hits in (("zebras", 1), ("okapi", 1), ("giraffes", 1), ("quokka", 0)):
        found = json.loads(run_cli(home.path, "search", word, "--json", check=True).stdout)["hits"]
        assert len(found) == hits, word
    status = run_cli(home.path, "status", check=True).stdout
    assert "1 × record cut" in status


def test_batches_stay_far_below_the_frame_limit_whatever_the_lines(inproc_daemon: InprocDaemon,
                                                                   roots: dict[str, Path]) -> None:
    """Several multi-megabyte records in a row are split over batches, each under the frame limit."""
    c = ClaudeWriter(roots["claude"])
    with c.path.open("ab") as fh:
        for i in range(4):
            fh.write(_user_line(c.session_id, f"record{i} " + "wordy text " * 300_000, i))
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 4 and summary["record_cut"] == 0
    for i in range(4):
        assert len(inproc_daemon.search(f"record{i}")["hits"]) == 1


def test_a_line_over_the_line_limit_is_skipped_once_and_reading_moves_past_it(inproc_daemon: InprocDaemon,
                                                                              roots: dict[str, Path]) -> None:
    """A line longer than MAX_LINE_BYTES ending the file is counted once, and later passes do not
    read it again (its end moves the offset); lines after it still index."""
    c = ClaudeWriter(roots["claude"])
    c.user("before the monster line: tapir")
    with c.path.open("ab") as fh:
        fh.write(b'{"type":"user","message":{"content":"')
        fh.write(b"z" * (MAX_LINE_BYTES + 1024))
        fh.write(b'"}}\n')
    first = inproc_daemon.reconcile()
    assert first["oversized"] == 1
    again = inproc_daemon.reconcile()
    assert again["oversized"] == 0 and again["files_changed"] == 0
    c.user("after the monster line: pangolin")
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("pangolin")["hits"]
    assert hit["messageCount"] == 2


def _settle(path: Path) -> None:
    old = time.time() - TAIL_SETTLE_S - 5
    os.utime(path, (old, old))


def test_a_settled_last_line_without_newline_is_indexed_and_growth_stays_exact(inproc_daemon: InprocDaemon,
                                                                               roots: dict[str, Path]) -> None:
    """A complete last record with no newline is indexed once its file has settled; when the file
    grows afterwards, the new records are indexed once and nothing is duplicated."""
    c = ClaudeWriter(roots["claude"])
    c.user("first line about herons")
    c.user("the last line mentions egrets")
    c.path.write_bytes(c.path.read_bytes()[:-1])
    inproc_daemon.reconcile()
    assert inproc_daemon.search("egrets")["hits"] == []  # fresh: its writer may still be at it
    _settle(c.path)
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("egrets")["hits"]
    assert hit["messageCount"] == 2
    with c.path.open("ab") as fh:
        fh.write(b"\n")
    c.user("a later line about storks")
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 1
    [hit] = inproc_daemon.search("storks")["hits"]
    assert hit["messageCount"] == 3
    assert len(inproc_daemon.search("egrets")["hits"]) == 1


def test_a_settled_but_incomplete_last_line_still_waits(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A last line that is not a complete JSON record is never taken, however old the file."""
    c = ClaudeWriter(roots["claude"])
    c.user("a complete line about ibises")
    with c.path.open("ab") as fh:
        fh.write(_user_line(c.session_id, "half written flamingos")[:-20])
    _settle(c.path)
    summary = inproc_daemon.reconcile()
    assert summary["malformed"] == 0
    assert inproc_daemon.search("flamingos")["hits"] == []
    assert len(inproc_daemon.search("ibises")["hits"]) == 1
