"""``python -m aivault.scanner``: the scanner child process (docs/protocol.md §2.1).

It connects to the indexer's ingest socket, loads the committed file state, then runs scan
passes when the indexer asks (RECONCILE) until told to STOP or until its parent goes away.
A desktop app can spawn it the same way the daemon does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import time
from collections import deque

from aivault import heap, log, priority
from aivault.errors import IndexerGone, InvalidRoot, Resync, StopRequested
from aivault.ingest import (
    BULK_BATCH_SCALE,
    BULK_MAX_INFLIGHT_BATCHES,
    K_PASS_DONE,
    MAX_INFLIGHT_BATCHES,
    IngestMessage,
    PassDone,
)
from aivault.redact import Redactor
from aivault.scanner.discover import Root, default_roots, parse_root_spec
from aivault.scanner.link import IngestLink
from aivault.scanner.scan import Scanner
from aivault.scanner.watch import Watcher


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m aivault.scanner", description=__doc__.splitlines()[0])
    ap.add_argument("--connect", required=True, help="the indexer's ingest endpoint, e.g. ipc:///path/ingest.sock")
    ap.add_argument("--root", action="append", default=[], metavar="AGENT=PATH",
                    help="an extra transcript root (repeatable), e.g. claude=/mnt/old/.claude/projects")
    ap.add_argument("--no-default-roots", action="store_true",
                    help="scan only --root folders, not ~/.claude, ~/.codex and friends")
    ap.add_argument("--shard", default="0/1", metavar="K/N",
                    help="handle only files whose (device, inode) hash is K modulo N (default 0/1: all)")
    ap.add_argument("--parent", type=int, default=None, metavar="PID",
                    help="the indexer's pid: exit as soon as it is no longer our parent (default: the parent "
                         "at start)")
    ap.add_argument("--token", default="", help="identifies this scanner to the indexer that started it")
    ap.add_argument("--watch", action="store_true",
                    help="also read files as soon as they change (file-system events), between the indexer's passes")
    ap.add_argument("--bulk", action="store_true",
                    help="a one-shot bulk load: batches BULK_BATCH_SCALE times larger (fewer, cheaper commits)")
    ap.add_argument("--no-redact", action="store_true",
                    help="index texts as they are, secrets included (config.json redact.enabled false)")
    ap.add_argument("--redact-allow", action="append", default=[], metavar="REGEX",
                    help="keep a found secret this regular expression matches (a known false positive; repeatable)")
    return ap.parse_args(argv)


def _tie_to_parent(parent: int) -> bool:
    """Die with the parent: the kernel sends SIGTERM when it exits (Linux), and a scanner whose
    parent is already gone (the indexer was killed while starting it) exits at once instead of
    living on and attaching to the next indexer. False when the parent is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    # Checked after arming the signal, so a parent that died in between is seen here.
    return os.getppid() == parent


def _on_sigterm(signum: int, frame: object) -> None:
    # Unwinding from anywhere is safe: the indexer commits each batch atomically with the
    # file offsets it advances, so an interrupted batch is simply re-sent next time. Only once:
    # a second SIGTERM (the indexer's stop, then its exit's death signal) must not interrupt the
    # unwinding's own cleanup -- raised inside ZeroMQ's context termination it printed two
    # tracebacks to the user's terminal and an "Exception ignored" from pyzmq's atexit hook.
    _quiet_signals()
    raise StopRequested("SIGTERM")


def _quiet_signals() -> None:
    """From here on the scanner is leaving: SIGTERM and SIGINT no longer interrupt it."""
    with contextlib.suppress(ValueError):  # not the main thread (in-process tests)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _wait_after_refusal(link: IngestLink, scanner: Scanner, first: Resync) -> None:
    """After a NACK: set poisoned files aside, wait as long as the indexer asked, reload state.

    Batches still in flight may be refused too while we wait; each refusal only extends the wait
    (it must not escape from here: the pass is already being abandoned).
    """
    logger = log.get("scanner")
    refusal: Resync | None = first
    deadline = time.monotonic()
    while refusal is not None:
        logger.warning("indexer refused a batch; reloading state", reason=refusal.reason,
                       retry_in_s=refusal.retry_after_s, set_aside=len(refusal.poison))
        scanner.set_aside(refusal.poison, refusal.reason)
        deadline = max(deadline, time.monotonic() + refusal.retry_after_s)
        refusal = None
        while time.monotonic() < deadline:  # still answer STOP and notice a dead parent
            try:
                link.pump(min(1.0, max(0.0, deadline - time.monotonic())))
            except Resync as again:
                refusal = again
                break
    scanner.synced = False


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    log.configure("info", process="scanner")
    logger = log.get("scanner")
    try:
        roots: list[Root] = [] if args.no_default_roots else default_roots()
        roots += [parse_root_spec(s) for s in args.root]
    except InvalidRoot as exc:
        print(f"scanner: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Parsing a burst of new transcripts is background work: searches in the daemon take a core
    # first (aivault/priority.py). Before the link's ZeroMQ threads start, so they inherit it.
    priority.background_thread()
    parent = args.parent if args.parent is not None else os.getppid()
    if not _tie_to_parent(parent):
        logger.info("scanner exiting", reason=f"parent {parent} is gone")
        return 0
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
        if not 0 <= shard < shards:
            raise ValueError
    except ValueError:
        print(f"scanner: --shard must look like K/N with 0 <= K < N, got {args.shard!r}", file=sys.stderr)
        return 2
    if args.bulk:
        heap.tune_for_bulk("scanner")  # its batches' large buffers (aivault/heap.py)
    link = IngestLink(args.connect, parent=parent,
                max_inflight=BULK_MAX_INFLIGHT_BATCHES if args.bulk else MAX_INFLIGHT_BATCHES)
    try:
        redactor = None if args.no_redact else Redactor(args.redact_allow)
    except re.error as exc:
        print(f"scanner: --redact-allow is not a regular expression: {exc}", file=sys.stderr)
        return 2
    scanner = Scanner(link, roots, shard=shard, shards=shards, token=args.token,
                      batch_scale=BULK_BATCH_SCALE if args.bulk else 1, redactor=redactor, raw=args.no_redact)
    watcher = Watcher(roots, enabled=args.watch)
    pending: deque[IngestMessage] = deque()
    hints: set[str] | None = None  # what the watcher saw change, not yet read
    cutoff: object = None  # the retention cutoff of the last request (watcher passes keep it)
    try:
        scanner.sync()
        watcher.start()
        while True:
            pending.extend(link.control)
            link.control.clear()
            changed = watcher.take()
            if changed is not None:
                hints = changed if hints is None else hints | changed
            if not pending and hints is None:
                link.pump(1.0, wake_fd=watcher.fileno())
                continue
            reqs = list(pending)
            pending.clear()
            full = any(bool(m.header.get("full")) for m in reqs)
            if reqs:
                cutoff = reqs[-1].header.get("cutoff_ms")
            try:
                stats = scanner.run_pass(reqs[-1].header.get("req") if reqs else None, full,
                                         cutoff_ms=int(cutoff) if isinstance(cutoff, int) else None,
                                         hints=hints)
            except Resync as exc:
                _wait_after_refusal(link, scanner, exc)
                pending.extendleft(reversed(reqs))
                continue
            hints = None
            if full:
                watcher.restart_if_roots_changed()
            link.send(K_PASS_DONE, PassDone(
                reqs=[m.header.get("req") for m in reqs], full=full, files_seen=stats.files_seen,
                files_changed=stats.files_changed, messages=stats.messages, malformed=stats.malformed,
                oversized=stats.oversized, record_cut=stats.record_cut, too_old=stats.too_old, failed=stats.failed,
                problems=[{"root": p.root, "reason": p.reason} for p in stats.problems], roots=stats.roots,
                watch=watcher.state()))
            logger.info("pass done", full=full, watcher=not reqs, files=stats.files_seen,
                        changed=stats.files_changed, messages=stats.messages, malformed=stats.malformed,
                        failed=len(stats.failed), problems=len(stats.problems))
    except (IndexerGone, StopRequested) as exc:
        logger.info("scanner exiting", reason=str(exc) or exc.__class__.__name__)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        _quiet_signals()
        watcher.close()
        link.close()


if __name__ == "__main__":
    sys.exit(main())
