"""What every ``aivault`` command shares: exit codes, the one error type the CLI prints, and the options
several commands take (transcript roots, the execution host, the refused ``--host`` of local-only ones)."""

from __future__ import annotations

import argparse
import os
from typing import Any, TypeAlias

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


# The subcommand parser of the top level (or of a noun) that a command module's ``register`` adds to.
Subcommands: TypeAlias = "argparse._SubParsersAction[Any]"


# --- options ------------------------------------------------------------------------------------


def positive_days(value: str) -> int:
    """An argparse type: a whole, positive number of days."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of days, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of days, got {value!r}")
    return n


def add_roots(p: argparse.ArgumentParser) -> None:
    """``--root`` and ``--no-default-roots``: where the commands that scan look for transcripts."""
    p.add_argument("--root", action="append", metavar="AGENT=PATH",
                   help="extra transcript folder, e.g. claude=/backup/.claude/projects (repeatable)")
    p.add_argument("--no-default-roots", action="store_true",
                   help="only the --root folders, not the agents' default locations")


def add_host(p: argparse.ArgumentParser) -> None:
    """``--host``: the execution host a command that asks addresses (docs/contract.md §6)."""
    p.add_argument("--host", help="execution host: local (default), ssh:<target>, runtime:<environmentId>")


def add_local_only(p: argparse.ArgumentParser) -> None:
    """A hidden ``--host`` on the commands that change this machine's index or policy, refused by
    ``local_only`` with a message (it is absent from the namespace unless given)."""
    p.add_argument("--host", dest="control_host", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def local_only(args: argparse.Namespace) -> None:
    """Refuse ``--host`` on the commands that change this machine's index or policy (docs/contract.md §8)."""
    host = getattr(args, "control_host", None)
    if host not in (None, "local"):
        raise CliError(f"consent, retention, relay policy and clearing are each machine's own: run this command on "
                       f"{host} itself (aivault refuses them for relay and paired clients)", EXIT_USAGE)


def alias(sub: Subcommands, old: str, new: str) -> argparse.ArgumentParser:
    """A command's older spelling ``old``, still accepted: registered beside ``aivault NEW`` (its caller gives it
    the same options) and left out of the list of commands, which names the older spellings in one line
    (cli/__init__.py); its own help says what it is."""
    p: argparse.ArgumentParser = sub.add_parser(old, description=f"The older spelling of `aivault {new}`.")
    return p


# --- helpers ------------------------------------------------------------------------------------


def absolute(p: str) -> str:
    return os.path.abspath(os.path.expanduser(p))
