"""The ``aivault`` command line: one subcommand per noun; domain errors become messages here.

With a daemon answering on the data directory's socket, commands talk to it; without one,
``search``, ``status`` and ``rpc`` open the index read-only in this process. The commands live in
``aivault.cli.search`` (asking), ``aivault.cli.index`` (writing) and ``aivault.cli.policy``
(consent); this module parses the command line and turns errors into exit codes.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from aivault import __version__, log
from aivault.cli.common import EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, CliError
from aivault.errors import AivaultError, HostUnavailable, InvalidParams, NeedsDaemon
from aivault.home import Home
from aivault.protocol import AGENT_NAMES, RPC_METHODS

__all__ = ["CliError", "build_parser", "main"]

Command = Callable[[argparse.Namespace, Home], int]


def _command(module: str, name: str) -> Command:
    """``module.name``, imported when the command runs: a call that talks to a daemon must not pay
    for the modules of the others (``index`` and ``doctor`` load the scanner's and the indexer's)."""

    def run(args: argparse.Namespace, home: Home) -> int:
        fn: Command = getattr(importlib.import_module(f"aivault.cli.{module}"), name)
        return fn(args, home)

    run.__qualname__ = run.__name__ = name
    return run


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of days, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of days, got {value!r}")
    return n


# Subcommands whose parsers live in their own modules: module, its adder, the commands it adds.
_ADDED_ELSEWHERE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("hosts", "add_parsers", ("hosts", "pair", "relay")),
    # Front ends for agents and browsers: each imports its stack (MCP SDK, Starlette) only when run.
    ("mcp", "add_parser", ("mcp",)),
    ("web", "add_parser", ("web",)),
    ("agent", "add_parser", ("agent",)),
)
_BUILT_HERE = ("serve", "index", "search", "status", "doctor", "rpc", "enable", "clear", "disable", "policy")
COMMANDS = _BUILT_HERE + tuple(name for _, _, names in _ADDED_ELSEWHERE for name in names)


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size finds it: $COLUMNS, then stdout's, then 80."""
    with contextlib.suppress(ValueError):
        columns = int(os.environ.get("COLUMNS", "0"))
        if columns > 0:
            return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


# What to do about an OSError no command turned into a message of its own.
_OS_ADVICE = {
    errno.EROFS: ". aivault writes only in its data directory: use one you can write (`--home` or $AIVAULT_HOME); "
                 "searching a read-only one works once it holds an index.",
    errno.ENOSPC: ". The disk is full: free some space and run the command again.",
    errno.EDQUOT: ". The disk quota is used up: free some space and run the command again.",
}


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the width: finding it itself, it imports shutil (with zlib, bz2 and
    lzma, ~3 ms of a ~85 ms call) for the first parser an ``add_argument`` checks."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """Every parser of the CLI (subparsers are made of the parent's class) formats with _Formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` just that command's subparser: the same parse for
    that command, without building (and translating the help of) the twenty others."""
    ap = _Parser(prog="aivault",
                 description="Search the transcripts your AI coding agents left on disk.")
    ap.add_argument("--home", help="data directory (default: $AIVAULT_HOME or ~/.local/share/aivault)")
    ap.add_argument("--version", action="version", version=f"aivault {__version__}",
                    help="print aivault's version and exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def want(name: str) -> bool:
        return only is None or only == name

    def roots(p: argparse.ArgumentParser) -> None:
        p.add_argument("--root", action="append", metavar="AGENT=PATH",
                       help="extra transcript folder, e.g. claude=/backup/.claude/projects (repeatable)")
        p.add_argument("--no-default-roots", action="store_true",
                       help="only the --root folders, not the agents' default locations")

    def host(p: argparse.ArgumentParser) -> None:
        p.add_argument("--host", help="execution host: local (default), ssh:<target>, runtime:<environmentId>")

    def control(p: argparse.ArgumentParser) -> None:
        p.add_argument("--host", dest="control_host", help=argparse.SUPPRESS)  # refused: see cli/hosts.py

    if want("serve"):
        p = sub.add_parser("serve", help="run the daemon in the foreground (indexer, scanner, query workers)")
        roots(p)
        p.add_argument("--listen", metavar="tcp://ADDR:PORT",
                       help="also serve paired clients here, CurveZMQ-encrypted (see `aivault pair`)")
        p.set_defaults(fn=_command("index", "cmd_serve"))
    if want("index"):
        p = sub.add_parser("index", help="index until current, then exit")
        roots(p)
        p.add_argument("--json", action="store_true", help="print the pass summary as JSON")
        p.add_argument("--vectors", action="store_true",
                       help="also embed every eligible chunk before exiting (slow; `serve` does it in the background)")
        p.set_defaults(fn=_command("index", "cmd_index"))
    if want("search"):
        p = sub.add_parser("search", help="search sessions")
        p.add_argument("query",
                       help="words, \"a phrase\", and operators such as agent:codex path:/home/me/api branch:main")
        p.add_argument("--agent", action="append", help=f"only this agent ({', '.join(AGENT_NAMES)}); repeatable")
        p.add_argument("--path", action="append", help="only sessions whose folder is PATH or below; repeatable")
        p.add_argument("--since", help="only sessions updated at or after this ISO-8601 date/time")
        p.add_argument("--sort", choices=("relevance", "newest"), help="order of the sessions (default relevance)")
        p.add_argument("--limit", type=int, default=10, help="sessions per page, 1 to 100 (default 10)")
        p.add_argument("--scope", choices=("conversation", "all"),
                       help="conversation: only what the user and the assistant wrote; all (default): tool calls, "
                            "their results and metadata too")
        p.add_argument("--cursor", help="the next-page cursor printed by a previous search")
        p.add_argument("--fresh", action="store_true", help="scan recently changed transcripts first (waits up to 5 s)")
        p.add_argument("--debug", action="store_true", help="include the planner's report")
        p.add_argument("--json", action="store_true", help="print the contract's result object")
        host(p)
        p.set_defaults(fn=_command("search", "cmd_search"))
    if want("status"):
        p = sub.add_parser("status", help="indexing status")
        p.add_argument("--json", action="store_true", help="print the contract's status object")
        host(p)
        p.set_defaults(fn=_command("search", "cmd_status"))
    if want("doctor"):
        p = sub.add_parser("doctor", help="per agent: where aivault looks, what it finds and what it leaves out")
        roots(p)
        p.add_argument("--json", action="store_true", help="the same report as data")
        p.set_defaults(fn=_command("doctor", "cmd_doctor"))
    if want("rpc"):
        p = sub.add_parser("rpc", help="send one raw RPC and print the JSON answer")
        p.add_argument("method", help=f"one of {', '.join(RPC_METHODS)}")
        p.add_argument("params", nargs="?", help="JSON parameters")
        p.add_argument("--host", help="execution host: local, ssh:<target>, runtime:<id>")
        p.set_defaults(fn=_command("search", "cmd_rpc"))
    if want("enable"):
        p = sub.add_parser("enable", help="consent to indexing agent sessions")
        p.add_argument("--history-days", type=_positive, metavar="DAYS",
                       help="keep only the sessions of the last DAYS days (default: the retention set before)")
        control(p)
        p.set_defaults(fn=_command("policy", "cmd_enable"))
    if want("clear"):
        p = sub.add_parser("clear", help="delete the index (never a transcript); rebuild if enabled")
        roots(p)
        p.add_argument("--json", action="store_true", help="print what was removed and rebuilt as JSON")
        control(p)
        p.set_defaults(fn=_command("index", "cmd_clear"))
    if want("disable"):
        p = sub.add_parser("disable", help="stop indexing; keep the index copy")
        control(p)
        p.set_defaults(fn=_command("policy", "cmd_disable"))
    if want("policy"):
        p = sub.add_parser("policy", help="show or change retention")
        g = p.add_mutually_exclusive_group()
        g.add_argument("--history-days", type=_positive, metavar="DAYS",
                       help="keep the sessions of the last DAYS days (older ones are swept)")
        g.add_argument("--forever", action="store_true", help="keep all history")
        p.add_argument("--json", action="store_true", help="print the stored policy as JSON")
        p.add_argument("--relay", choices=("on", "off"),
                       help="whether `aivault relay` answers ssh clients on this machine (default off)")
        control(p)
        p.set_defaults(fn=_command("policy", "cmd_policy"))
    for module, adder, names in _ADDED_ELSEWHERE:
        if only is None or only in names:
            getattr(importlib.import_module(f"aivault.cli.{module}"), adder)(sub)
    return ap


def _command_word(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` when it can be told without parsing (only ``--home`` before
    it), else None: anything unusual gets the whole parser, and so argparse's own messages.
    ``--version`` there names no subcommand, so it is answered by a parser with none."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--home":
            i += 2
            continue
        if word.startswith("--home="):
            i += 1
            continue
        return word if word in COMMANDS or word == "--version" else None
    return None


_interrupted: list[int] = []


def _on_sigint(signum: int, frame: object) -> None:
    # Remembered, because DuckDB turns the KeyboardInterrupt raised in the middle of one of its
    # queries into "RuntimeError: Query interrupted".
    _interrupted.append(signum)
    raise KeyboardInterrupt


# Commands that ask and print, then exit: run from the console script, they run without the cyclic
# garbage collector (their few cycles die with the process), which also skips the interpreter's
# full collection at exit (gc.freeze). Measured interleaved, `aivault rpc aiVault.ping` through a
# daemon: ~15 ms of ~125. Every other command (serve, index, web, mcp, relay...) collects as usual.
_SHORT_LIVED = frozenset({"search", "status", "rpc"})


def main(argv: list[str] | None = None) -> int:
    # argv None: this process is the `aivault` command itself (an in-process caller passes a list
    # and keeps its collector as it was).
    oneshot = argv is None and gc.isenabled()
    if oneshot:
        gc.disable()
    try:
        return _main(argv, oneshot)
    except KeyboardInterrupt:
        # Ctrl-C before the command's own handling is in place (while modules load or the
        # arguments are parsed) ends the call as quietly as one during it.
        return 130
    finally:
        if oneshot:
            gc.freeze()


def _main(argv: list[str] | None, oneshot: bool = False) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(_command_word(words)).parse_args(words)
    if oneshot and args.command not in _SHORT_LIVED:
        gc.enable()
    elif oneshot:
        # One query needs no BLAS threads: NumPy's and FAISS's OpenBLAS each start a thread per core
        # as they load, which spin meanwhile -- ~140 ms of CPU of a direct hybrid search (~900),
        # taken from the other core (`python -m bench.cli_latency`). Read when the library loads, so
        # set before anything imports NumPy; a value the user set is kept.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from aivault.cli.light_imports import light_duckdb_version

        light_duckdb_version()
    log.configure("warning")
    home = Home.resolve(args.home)
    if threading.current_thread() is threading.main_thread() and args.command != "serve":
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        if hasattr(args, "control_host"):
            from aivault.cli.hosts import local_only

            local_only(args)
        code: int = args.fn(args, home)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # `aivault status | head -1`: the reader has what it wanted. Point stdout at /dev/null so
        # the interpreter's own flush at exit does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except CliError as exc:
        print(f"aivault: {exc}", file=sys.stderr)
        return exc.code
    except InvalidParams as exc:
        print(f"aivault: invalid request: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (NeedsDaemon, HostUnavailable) as exc:
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
        advice = _OS_ADVICE.get(exc.errno or 0, "")
        print(f"aivault: {exc.strerror or exc}{where}{advice}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: say so plainly; the traceback is one env var away
        if _interrupted:
            return 130
        if log.debug_enabled():
            raise
        print(f"aivault: internal error: {exc.__class__.__name__}: {exc}\n"
              "Run again with AIVAULT_LOG_LEVEL=debug for the traceback, and please report it.", file=sys.stderr)
        return EXIT_ERROR

