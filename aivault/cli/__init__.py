"""The ``aivault`` command line: one subcommand per noun; domain errors become messages here.

With a daemon answering on the data directory's socket, commands talk to it; without one,
``search``, ``status`` and ``rpc`` open the index read-only in this process. The commands live in
the modules of this package, each registering its own (``COMMANDS``): ``search`` (asking), ``index``
(writing), ``doctor``, ``policy`` (consent and retention), ``hosts`` (other machines), ``agent``,
``mcp`` and ``web``; this module parses the command line and turns errors into exit codes.
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
from typing import Any

from aivault import __version__, log
from aivault.cli.common import EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, CliError, local_only
from aivault.errors import AivaultError, HostUnavailable, InvalidParams, NeedsDaemon
from aivault.home import Home

__all__ = ["CliError", "build_parser", "main"]

# Every command word and the module of this package that registers it: each module's ``register(sub)``
# adds its subcommands to the top-level parser, each with its function as ``fn``. A call imports only
# the module its command word names (``aivault search``: aivault.cli.search); ``aivault --help`` imports
# them all, so a command module imports at its top only what its parser needs (argparse, cli.common,
# protocol's names), and each command what it runs (the broker's client, the renderer, the index...).
COMMANDS: dict[str, str] = {
    "search": "search", "status": "search", "rpc": "search",
    "index": "index", "serve": "index", "clear": "index",
    "doctor": "doctor",
    "policy": "policy", "enable": "policy", "disable": "policy",
    "hosts": "hosts", "pair": "hosts", "relay": "hosts",
    # Front ends for agents and browsers: each imports its stack (MCP SDK, Starlette) only when run.
    "agent": "agent", "mcp": "mcp", "web": "web",
}
# The older spellings, still accepted: each is registered by the module of the noun it now lives under
# (common.alias), left out of the list of commands and named once below it.
OLDER_SPELLINGS: dict[str, str] = {"enable": "policy enable", "disable": "policy disable", "pair": "hosts invite",
                                   "relay": "hosts relay"}


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
    """The whole command line, or with ``only`` just the subcommands of the module that registers that
    command: the same parse for it, without importing the others' modules (nor building, and translating
    the help of, the twenty others). ``only`` naming no command builds none (``--version``)."""
    older = ", ".join(f"{old} ({new})" for old, new in OLDER_SPELLINGS.items())
    ap = _Parser(prog="aivault", description="Search the transcripts your AI coding agents left on disk.",
                 epilog=f"Older spellings, still accepted: {older}.")
    ap.add_argument("--home", help="data directory (default: $AIVAULT_HOME or ~/.local/share/aivault)")
    ap.add_argument("--version", action="version", version=f"aivault {__version__}",
                    help="print aivault's version and exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    named = COMMANDS.values() if only is None else [COMMANDS[only]] if only in COMMANDS else []
    for module in dict.fromkeys(named):
        importlib.import_module(f"aivault.cli.{module}").register(sub)
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
        from aivault.thin.light_imports import light_duckdb_version

        light_duckdb_version()
    log.configure("warning")
    home = Home.resolve(args.home)
    if threading.current_thread() is threading.main_thread() and args.command != "serve":
        signal.signal(signal.SIGINT, _on_sigint)
    try:
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

