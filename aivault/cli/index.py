"""``aivault serve``, ``index`` and ``clear``: the commands that write the index."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from aivault import config, log
from aivault.cli.common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, Subcommands, add_local_only, add_roots
from aivault.errors import InvalidRoot
from aivault.home import Home
from aivault.protocol import METHOD_CLEAR, METHOD_RECONCILE, METHOD_STATS

if TYPE_CHECKING:  # the vault (and DuckDB) for the commands that write, the rest as they run (cli/__init__.py)
    from aivault.thin.render import ProgressLine
    from aivault.vault.oneshot import OneShot


def register(sub: Subcommands) -> None:
    """``index``, ``serve`` and ``clear``."""
    p = sub.add_parser("index", help="index until current, then exit")
    add_roots(p)
    p.add_argument("--json", action="store_true", help="print the pass summary as JSON")
    p.add_argument("--vectors", action="store_true",
                   help="also embed every eligible chunk before exiting (slow; `serve` does it in the background)")
    p.set_defaults(fn=cmd_index)

    p = sub.add_parser("serve", help="run the daemon in the foreground (indexer, scanner, query workers)")
    add_roots(p)
    p.add_argument("--listen", metavar="tcp://ADDR:PORT",
                   help="also serve paired clients here, CurveZMQ-encrypted (see `aivault hosts invite`)")
    p.set_defaults(fn=cmd_serve)

    p = sub.add_parser("clear", help="delete the index (never a transcript); rebuild if enabled")
    add_roots(p)
    p.add_argument("--json", action="store_true", help="print what was removed and rebuilt as JSON")
    add_local_only(p)
    p.set_defaults(fn=cmd_clear)


def _roots(home: Home, args: argparse.Namespace) -> list[Any]:
    """Every root a scanner would walk, validated here: a bad --root or config.json entry is the
    user's to fix, so it stops the command before any child process starts."""
    from aivault.scanner.discover import default_roots, parse_root_spec

    specs = config.roots(home, list(getattr(args, "root", None) or []))
    try:
        extra = [parse_root_spec(spec) for spec in specs]
    except InvalidRoot as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    return ([] if getattr(args, "no_default_roots", False) else default_roots()) + extra


def _run_daemon(home: Home, args: argparse.Namespace, *, schedule: bool, semantic: bool = True,
                bulk: bool = False, listen: str | None = None) -> Any:
    from aivault.broker.daemon import Daemon

    _roots(home, args)
    return Daemon(home, extra_roots=list(args.root or []), default_roots=not args.no_default_roots,
                  schedule=schedule, semantic=semantic, bulk=bulk, listen=listen)


def cmd_serve(args: argparse.Namespace, home: Home) -> int:
    from aivault import policy as policy_mod

    log.configure("info", process="daemon")
    listen = getattr(args, "listen", None)
    if listen is not None and not listen.startswith("tcp://"):
        raise CliError(f"--listen takes tcp://ADDRESS:PORT, not {listen!r}", EXIT_USAGE)
    daemon = _run_daemon(home, args, schedule=True, listen=listen)
    # The handler only flips a flag: it runs on the main thread between bytecodes, and touching
    # a threading primitive the main thread may be holding (Event.wait's lock) would deadlock.
    stopping: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    daemon.start()
    if not policy_mod.load(home).enabled:
        print(f"aivault: serving {home.path}, but indexing is disabled: `aivault enable` turns it on", file=sys.stderr)
    try:
        while not stopping:
            time.sleep(0.2)
    finally:
        daemon.close()
    return EXIT_OK


# Ctrl-C while `index` or `clear` runs threads (the indexer, the scanners' links, the broker): the
# handler only records it, and the main thread raises KeyboardInterrupt itself where it waits
# (aivault/vault/oneshot.py). Raised by the handler, it lands between any two bytecodes -- once inside
# the import system's weakref callback that releases the global import lock, where an exception
# is printed and swallowed: the lock stayed held, the indexer thread's next import waited forever
# and the command never ended (CI, tests/system/test_cli.py::test_ctrl_c_during_index_exits_130...).
_stop_requested: list[int] = []


def _defer_interrupts() -> None:
    _stop_requested.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda signum, _frame: _stop_requested.append(signum))


def _interrupted() -> bool:
    """Ctrl-C was pressed (the one-shot index and the rebuild raise KeyboardInterrupt where they wait)."""
    return bool(_stop_requested)


def cmd_index(args: argparse.Namespace, home: Home) -> int:
    from aivault import policy as policy_mod
    from aivault.thin.client import Connection
    from aivault.thin.render import ProgressLine

    _defer_interrupts()
    pol = policy_mod.load(home)
    if not pol.enabled:
        raise CliError(f"indexing is disabled for {home.path}: run `aivault enable` first", EXIT_UNAVAILABLE)
    conn = Connection(home)
    bar = ProgressLine()
    t0 = time.monotonic()
    lexical_s = 0.0
    vectors_note = ""
    reclaimed: dict[str, Any] | None = None
    if conn.rpc is not None:
        rpc = conn.rpc
        from aivault.vault.oneshot import with_progress

        try:
            summary = with_progress(lambda: rpc.call(METHOD_RECONCILE, {"full": True}, timeout_s=24 * 3600),
                                    lambda: _stats_over_rpc(home), bar, _interrupted)
        finally:
            bar.finish()
    else:
        from aivault.vault import oneshot

        with oneshot.recorded_run(home):
            done = _one_shot(home, args, bar, t0)
            oneshot.verify(home)
        summary, reclaimed, lexical_s = done.summary, done.reclaim, done.lexical_s
        if done.vectors_s is not None:
            vectors_note = f"; embedded {done.embedded:,} chunks in {done.vectors_s:.1f} s"
    elapsed = lexical_s if conn.rpc is None else time.monotonic() - t0
    msgs = int(summary.get("messages") or 0)
    if args.json:
        import resource

        summary = {**summary, "elapsedS": round(elapsed, 3), "mode": conn.mode, "reclaim": reclaimed,
                   "peakRssKb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   "scannerPeakRssKb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}
        print(json.dumps(summary))
        return EXIT_OK
    print(f"indexed {summary.get('files_changed', 0):,} changed of {summary.get('files_seen', 0):,} files, "
          f"{msgs:,} messages in {elapsed:.1f} s ({msgs / max(elapsed, 1e-9):,.0f} msg/s); "
          f"generation {summary.get('generation')}"
          + (f"; {summary['malformed']:,} malformed lines skipped" if summary.get("malformed") else "")
          + (f"; {summary['oversized']:,} lines over 64 MiB skipped" if summary.get("oversized") else "")
          + (f"; {summary['record_cut']:,} records cut at 4 MiB of text" if summary.get("record_cut") else "")
          + (f"; {summary['failed']} file(s) unreadable" if summary.get("failed") else "")
          + (f"; {summary['problems']} root problem(s), see `aivault status`" if summary.get("problems") else "")
          + vectors_note + _reclaim_note(reclaimed))
    if not summary.get("files_seen"):
        print(_where_looked(_roots(home, args)))
    return EXIT_OK


def _one_shot(home: Home, args: argparse.Namespace, bar: ProgressLine, t0: float) -> OneShot:
    """The index written by this process, served meanwhile so that other shells can search it."""
    from aivault.vault import oneshot

    # Embedding is slow (~70 chunks/s): a one-shot index is lexical unless asked; `serve`
    # embeds in the background.
    daemon = _run_daemon(home, args, schedule=False, semantic=args.vectors, bulk=True)
    daemon.start()
    try:
        done = oneshot.index_once(daemon.service, vectors=args.vectors, progress=bar, interrupted=_interrupted,
                                  started=t0)
    finally:
        daemon.close()
    return done


def _reclaim_note(r: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    if not r.get("done"):
        return f"; free space not reclaimed: {r.get('reason')}"
    before, after = r["before"]["fileBytes"], r["after"]["fileBytes"]
    return f"; index file {before / 1e6:,.0f} -> {after / 1e6:,.0f} MB (reclaimed in {r['seconds']:.1f} s)"


def _where_looked(roots: list[Any]) -> str:
    if not roots:
        return "no transcript folders to look in: add one with --root AGENT=PATH"
    parts = [f"{r.agent} {r.path} ({'found' if os.path.isdir(r.path) else 'absent'})" for r in roots]
    return ("no transcripts found. Looked in: " + "; ".join(parts)
            + ". Add another folder with --root AGENT=PATH (or \"roots\" in config.json).")


def _stats_over_rpc(home: Home) -> dict[str, Any]:
    from aivault.thin.client import RpcClient

    c = RpcClient.for_home(home, timeout_s=5)
    try:
        value: dict[str, Any] = c.call(METHOD_STATS, {})
        return value
    finally:
        c.close()


def cmd_clear(args: argparse.Namespace, home: Home) -> int:
    """Delete the index and its sidecars (never a transcript); rebuild if consent is on."""
    from aivault.thin.client import Connection
    from aivault.thin.render import ProgressLine

    conn = Connection(home)
    if conn.rpc is not None:
        value = conn.rpc.call(METHOD_CLEAR, {}, timeout_s=600)
        if args.json:
            print(json.dumps(value))
            return EXIT_OK
        note = "rebuilding in the daemon" if value.get("rebuilding") else "not rebuilding: search is disabled"
        print(f"cleared the index in {home.path} ({len(value.get('removed', []))} file(s) removed); {note}")
        return EXIT_OK
    from aivault.vault import oneshot
    from aivault.vault.live import clear_offline

    _roots(home, args)
    # The old database is never opened: clear is the way out of a damaged one.
    removed = clear_offline(home)
    _defer_interrupts()
    daemon = _run_daemon(home, args, schedule=False)
    bar = ProgressLine()
    try:
        value = oneshot.rebuild_after_clear(daemon.service, removed, progress=bar, interrupted=_interrupted)
    finally:
        daemon.close()
    if args.json:
        print(json.dumps(value))
        return EXIT_OK
    summary = value["rebuild"]
    print(f"cleared the index in {home.path} ({len(value['removed'])} file(s) removed)"
          + (f"; rebuilt: {summary['messages']:,} messages from {summary['files_changed']:,} files" if summary
             else "; not rebuilt: search is disabled (`aivault enable` turns it on)"))
    return EXIT_OK
