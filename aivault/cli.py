"""The ``aivault`` command line: one subcommand per noun; domain errors become messages here.

With a daemon answering on the data directory's socket, commands talk to it; without one,
``search``, ``status`` and ``rpc`` open the index read-only in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from aivault import config, log
from aivault import policy as policy_mod
from aivault.broker.client import Connection
from aivault.errors import AivaultError, InvalidParams, InvalidRoot, NeedsDaemon
from aivault.home import Home
from aivault.protocol import (
    METHOD_CLEAR,
    METHOD_RECONCILE,
    METHOD_STATS,
    RPC_METHODS,
)
from aivault.render import ProgressLine, print_debug, print_results, print_status

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


# --- commands -----------------------------------------------------------------------------------
def _check_agents(names: list[str]) -> list[str]:
    """Agent names as the index spells them; an unknown name is a usage error with a hint."""
    from aivault.scanner.discover import AGENTS

    for name in names:
        if name in AGENTS:
            continue
        if name.lower() in AGENTS:
            raise CliError(f"agent names are lower-case: use --agent {name.lower()} (not {name!r})", EXIT_USAGE)
        raise CliError(f"unknown agent {name!r}: aivault indexes {', '.join(AGENTS)}", EXIT_USAGE)
    return names


def _limit_note(limit: int) -> None:
    """The contract clamps the page size to 1..100 silently; a person typing it should hear it once."""
    from aivault.query.request import MAX_LIMIT

    if limit < 1:
        print(f"aivault: --limit {limit} is below 1; showing 1 session per page", file=sys.stderr)
    elif limit > MAX_LIMIT:
        print(f"aivault: --limit {limit} is above the maximum of {MAX_LIMIT}; showing {MAX_LIMIT} per page",
              file=sys.stderr)


def cmd_search(args: argparse.Namespace, home: Home) -> int:
    filters: dict[str, Any] = {}
    if args.agent:
        filters["agents"] = _check_agents(args.agent)
    if args.path:
        filters["scopePaths"] = [_abs(p) for p in args.path]
    if args.since:
        filters["since"] = args.since
    if args.sort:
        filters["sort"] = args.sort
    request: dict[str, Any] = {"query": args.query, "limit": args.limit, "filters": filters}
    if args.scope:
        request["scope"] = args.scope
    if args.cursor:
        request["cursor"] = args.cursor
    if args.fresh:
        request["freshness"] = "wait-until-current"
    if args.debug or not args.json:
        # Human output always asks for the trace: it is how a hit found by meaning alone is marked
        # (the contract's hits carry no route). --json stays the contract's object as asked.
        request["debug"] = True
    if not args.json:
        _limit_note(args.limit)
    conn = Connection(home)
    result = conn.search(request)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    kind = result.get("kind")
    if kind == "results":
        print_results(result)
        if args.debug:
            print_debug(result.get("debug") or {})
        return EXIT_OK
    if kind == "unavailable":
        raise CliError(_unavailable_message(result.get("reason"), home, conn.index_missing), EXIT_UNAVAILABLE)
    if kind == "stale-cursor":
        if args.cursor:
            raise CliError("the index changed since that cursor was made: search again without --cursor")
        raise CliError("the index kept changing while the page was assembled (it is being written right now): "
                       "try again in a moment")
    raise CliError("that cursor is not valid for this search: search again without --cursor")


def _unavailable_message(reason: Any, home: Home, index_missing: bool = False) -> str:
    if reason == "disabled":
        then = ", then build the index with `aivault index` (or `aivault serve`)" if index_missing else ""
        return (f"session search is disabled for {home.path}. Turn it on with `aivault enable` "
                f"(`aivault enable --history-days 90` keeps only the last 90 days){then}.")
    if reason == "not-ready" and index_missing:
        return f"no index in {home.path} yet: run `aivault index` (or `aivault serve`)"
    if reason == "not-ready":
        return "the index is still being built; try again in a moment (`aivault status` shows progress)"
    return "no search service is available here"


def _abs(p: str) -> str:
    import os

    return os.path.abspath(os.path.expanduser(p))


def cmd_status(args: argparse.Namespace, home: Home) -> int:
    conn = Connection(home)
    status = conn.status()
    if args.json:
        print(json.dumps(status))
        return EXIT_OK
    stats = conn.call(METHOD_STATS, {}) if conn.mode == "daemon" else conn.direct_counts()
    print_status(status, stats, f"{conn.mode} mode · {home.path}")
    if conn.index_missing:
        step = "`aivault index` (or `aivault serve`)" if status["enabled"] else "`aivault enable`, then `aivault index`"
        print(f"no index yet: run {step}")
    return EXIT_OK


def cmd_rpc(args: argparse.Namespace, home: Home) -> int:
    try:
        params = json.loads(args.params) if args.params is not None else {}
    except ValueError as exc:
        raise CliError(f"PARAMS_JSON is not valid JSON: {exc}", EXIT_USAGE) from exc
    conn = Connection(home)
    if args.host and conn.rpc is not None:
        value = conn.rpc.call(args.method, params, host=args.host)
    elif args.host and args.host != "local":
        from aivault.broker.hosts import parse_host, remote_unavailable

        raise remote_unavailable(parse_host(args.host))
    else:
        value = conn.call(args.method, params)
    print(json.dumps(value, ensure_ascii=False))
    return EXIT_OK


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
                bulk: bool = False) -> Any:
    from aivault.broker.daemon import Daemon

    _roots(home, args)
    return Daemon(home, extra_roots=list(args.root or []), default_roots=not args.no_default_roots,
                  schedule=schedule, semantic=semantic, bulk=bulk)


def cmd_serve(args: argparse.Namespace, home: Home) -> int:
    log.configure("info", process="daemon")
    daemon = _run_daemon(home, args, schedule=True)
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


def cmd_index(args: argparse.Namespace, home: Home) -> int:
    pol = policy_mod.load(home)
    if not pol.enabled:
        raise CliError(f"indexing is disabled for {home.path}: run `aivault enable` first", EXIT_UNAVAILABLE)
    conn = Connection(home)
    bar = ProgressLine()
    t0 = time.monotonic()
    lexical_s = 0.0
    vectors_note = ""
    if conn.rpc is not None:
        rpc = conn.rpc
        summary = _with_progress(lambda: rpc.call(METHOD_RECONCILE, {"full": True}, timeout_s=24 * 3600),
                                 lambda: _stats_over_rpc(home), bar)
    else:
        # Embedding is slow (~70 chunks/s): a one-shot index is lexical unless asked; `serve`
        # embeds in the background.
        daemon = _run_daemon(home, args, schedule=False, semantic=args.vectors, bulk=True)
        daemon.start()
        try:
            fut = daemon.service.indexer.reconcile(full=True)
            summary = _with_progress(fut.result, daemon.service.stats, bar)
            # Leave the index fully compact: the searches that follow a one-shot index run without a
            # daemon to merge in the background, and few sorted segments answer fastest.
            daemon.service.indexer.compact("all").result()
            lexical_s = time.monotonic() - t0
            if args.vectors:
                _with_progress(lambda: _wait_vectors(daemon.service), daemon.service.stats, bar)
                st = daemon.service.stats()
                vectors_note = (f"; embedded {st.get('semanticEligible', 0):,} chunks in "
                                f"{time.monotonic() - t0 - lexical_s:.1f} s")
        finally:
            daemon.close()
    elapsed = lexical_s if conn.rpc is None else time.monotonic() - t0
    if conn.rpc is None:
        _verify_index(home)
    msgs = int(summary.get("messages") or 0)
    if args.json:
        import resource

        summary = {**summary, "elapsedS": round(elapsed, 3), "mode": conn.mode,
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
          + vectors_note)
    if not summary.get("files_seen"):
        print(_where_looked(_roots(home, args)))
    return EXIT_OK


def _where_looked(roots: list[Any]) -> str:
    import os

    if not roots:
        return "no transcript folders to look in: add one with --root AGENT=PATH"
    parts = [f"{r.agent} {r.path} ({'found' if os.path.isdir(r.path) else 'absent'})" for r in roots]
    return ("no transcripts found. Looked in: " + "; ".join(parts)
            + ". Add another folder with --root AGENT=PATH (or \"roots\" in config.json).")


def _verify_index(home: Home) -> None:
    """An index that cannot read itself back is not "indexed": read every table once."""
    from aivault.indexer.store import connect, verify_readable

    con = connect(home.db_path, read_only=True)
    try:
        verify_readable(con, home.db_path)
    finally:
        con.close()


def _wait_vectors(service: Any) -> None:
    """Until every eligible chunk has a vector (or the semantic layer reports it cannot)."""
    while True:
        st = service.stats()
        if st.get("semanticState") in ("unavailable", "off"):
            raise CliError(f"semantic search is unavailable: {st.get('semanticError') or 'turned off in config.json'}")
        if st.get("semanticEmbedded") == st.get("semanticEligible") and st.get("vectorIndex"):
            return
        time.sleep(0.5)


def _stats_over_rpc(home: Home) -> dict[str, Any]:
    from aivault.broker.client import RpcClient

    c = RpcClient.for_home(home, timeout_s=5)
    try:
        value: dict[str, Any] = c.call(METHOD_STATS, {})
        return value
    finally:
        c.close()


def _with_progress(work: Callable[[], Any], stats: Callable[[], dict[str, Any]], bar: ProgressLine) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.2)
        with contextlib.suppress(AivaultError):
            bar.update(stats())
    bar.finish()
    if "error" in box:
        raise box["error"]
    value: dict[str, Any] = box["value"]
    return value


def cmd_clear(args: argparse.Namespace, home: Home) -> int:
    """Delete the index and its sidecars (never a transcript); rebuild if consent is on."""
    conn = Connection(home)
    if conn.rpc is not None:
        value = conn.rpc.call(METHOD_CLEAR, {}, timeout_s=600)
        if args.json:
            print(json.dumps(value))
            return EXIT_OK
        note = "rebuilding in the daemon" if value.get("rebuilding") else "not rebuilding: search is disabled"
        print(f"cleared the index in {home.path} ({len(value.get('removed', []))} file(s) removed); {note}")
        return EXIT_OK
    from aivault.query.local import clear_offline

    _roots(home, args)
    # The old database is never opened: clear is the way out of a damaged one.
    removed = clear_offline(home)
    daemon = _run_daemon(home, args, schedule=False)
    try:
        value = {"cleared": True, "removed": removed, "rebuilding": daemon.service.policy.enabled,
                 "identity": daemon.service.indexer.identity}
        summary: dict[str, Any] | None = None
        if value["rebuilding"]:
            daemon.service.start()
            bar = ProgressLine()
            summary = _with_progress(daemon.service.indexer.reconcile(full=True).result, daemon.service.stats, bar)
            daemon.service.indexer.compact().result()
    finally:
        daemon.close()
    if args.json:
        print(json.dumps({**value, "rebuild": summary}))
        return EXIT_OK
    print(f"cleared the index in {home.path} ({len(value['removed'])} file(s) removed)"
          + (f"; rebuilt: {summary['messages']:,} messages from {summary['files_changed']:,} files" if summary
             else "; not rebuilt: search is disabled (`aivault enable` turns it on)"))
    return EXIT_OK


def cmd_enable(args: argparse.Namespace, home: Home) -> int:
    old = policy_mod.load(home)
    days = old.history_days if args.history_days is None else args.history_days
    policy_mod.save(home, policy_mod.Policy(True, days))
    keep = f"the last {days} days" if days else "all history"
    print(f"session search enabled for {home.path} (keeping {keep}). Run `aivault index` or `aivault serve`.")
    return EXIT_OK


def cmd_disable(args: argparse.Namespace, home: Home) -> int:
    old = policy_mod.load(home)
    policy_mod.save(home, policy_mod.Policy(False, old.history_days))
    print(f"session search disabled for {home.path}; the index copy is kept (`aivault clear` deletes it).")
    return EXIT_OK


def cmd_policy(args: argparse.Namespace, home: Home) -> int:
    pol = policy_mod.load(home)
    changed = args.forever or args.history_days is not None
    if args.forever:
        pol = policy_mod.Policy(pol.enabled, None)
        policy_mod.save(home, pol)
    elif args.history_days is not None:
        pol = policy_mod.Policy(pol.enabled, args.history_days)
        policy_mod.save(home, pol)
    if args.json:
        print(json.dumps(pol.to_json()))
        return EXIT_OK
    keep = "all history" if pol.history_days is None else f"the last {pol.history_days} days"
    state = "enabled" if pol.enabled else "disabled (`aivault enable` turns it on)"
    print(f"session search {state} for {home.path}; keeping {keep}")
    if changed and pol.enabled:
        print("a running daemon applies this now; otherwise the next `aivault index` does")
    return EXIT_OK


# --- parser -------------------------------------------------------------------------------------
def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of days, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of days, got {value!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="aivault",
                                 description="Search the transcripts your AI coding agents left on disk.")
    ap.add_argument("--home", help="data directory (default: $AIVAULT_HOME or ~/.local/share/aivault)")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def roots(p: argparse.ArgumentParser) -> None:
        p.add_argument("--root", action="append", metavar="AGENT=PATH",
                       help="extra transcript folder, e.g. claude=/backup/.claude/projects (repeatable)")
        p.add_argument("--no-default-roots", action="store_true", help="do not scan ~/.claude, ~/.codex, ...")

    p = sub.add_parser("serve", help="run the daemon in the foreground (indexer, scanner, query workers)")
    roots(p)
    p.set_defaults(fn=cmd_serve)
    p = sub.add_parser("index", help="index until current, then exit")
    roots(p)
    p.add_argument("--json", action="store_true", help="print the pass summary as JSON")
    p.add_argument("--vectors", action="store_true",
                   help="also embed every eligible chunk before exiting (slow; `serve` does it in the background)")
    p.set_defaults(fn=cmd_index)
    p = sub.add_parser("search", help="search sessions")
    p.add_argument("query")
    p.add_argument("--agent", action="append", help="only this agent (lower-case: claude, codex); repeatable")
    p.add_argument("--path", action="append", help="only sessions whose folder is PATH or below; repeatable")
    p.add_argument("--since", help="only sessions updated at or after this ISO-8601 date/time")
    p.add_argument("--sort", choices=("relevance", "newest"))
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--scope", choices=("conversation", "all"))
    p.add_argument("--cursor", help="the next-page cursor printed by a previous search")
    p.add_argument("--fresh", action="store_true", help="scan recently changed transcripts first (waits up to 5 s)")
    p.add_argument("--debug", action="store_true", help="include the planner's report")
    p.add_argument("--json", action="store_true", help="print the contract's result object")
    p.set_defaults(fn=cmd_search)
    p = sub.add_parser("status", help="indexing status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)
    p = sub.add_parser("rpc", help="send one raw RPC and print the JSON answer")
    p.add_argument("method", help=f"one of {', '.join(RPC_METHODS)}")
    p.add_argument("params", nargs="?", help="JSON parameters")
    p.add_argument("--host", help="execution host: local, ssh:<target>, runtime:<id>")
    p.set_defaults(fn=cmd_rpc)
    p = sub.add_parser("enable", help="consent to indexing agent sessions")
    p.add_argument("--history-days", type=_positive)
    p.set_defaults(fn=cmd_enable)
    p = sub.add_parser("clear", help="delete the index (never a transcript); rebuild if enabled")
    roots(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_clear)
    p = sub.add_parser("disable", help="stop indexing; keep the index copy")
    p.set_defaults(fn=cmd_disable)
    p = sub.add_parser("policy", help="show or change retention")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--history-days", type=_positive)
    g.add_argument("--forever", action="store_true")
    p.add_argument("--json", action="store_true", help="print the stored policy as JSON")
    p.set_defaults(fn=cmd_policy)
    return ap


_interrupted: list[int] = []


def _on_sigint(signum: int, frame: object) -> None:
    # Remembered, because DuckDB turns the KeyboardInterrupt raised in the middle of one of its
    # queries into "RuntimeError: Query interrupted".
    _interrupted.append(signum)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log.configure("warning")
    home = Home.resolve(args.home)
    if threading.current_thread() is threading.main_thread() and args.fn is not cmd_serve:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        code: int = args.fn(args, home)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # `aivault status | head -1`: the reader has what it wanted. Point stdout at /dev/null so
        # the interpreter's own flush at exit does not complain again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except CliError as exc:
        print(f"aivault: {exc}", file=sys.stderr)
        return exc.code
    except InvalidParams as exc:
        print(f"aivault: invalid request: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except NeedsDaemon as exc:
        print(f"aivault: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except AivaultError as exc:
        print(f"aivault: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except PermissionError as exc:
        print(f"aivault: permission denied: {exc.filename or exc}. Use a data directory of your own (`--home` or "
              "$AIVAULT_HOME) and check the transcript folders' permissions.", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"aivault: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: say so plainly; the traceback is one env var away
        if _interrupted:
            return 130
        if log.debug_enabled():
            raise
        print(f"aivault: internal error: {exc.__class__.__name__}: {exc}\n"
              "Run again with AIVAULT_LOG_LEVEL=debug for the traceback, and please report it.", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
