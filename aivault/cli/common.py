"""What every ``aivault`` command shares: exit codes and the one error type the CLI prints."""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


# --- commands -----------------------------------------------------------------------------------


def absolute(p: str) -> str:
    return os.path.abspath(os.path.expanduser(p))
