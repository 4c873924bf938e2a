"""The front ends' access tokens: ``web.token`` (``aivault web``) and ``mcp.token`` (``aivault mcp --http``).

Both servers listen on 127.0.0.1, which every local user can connect to; the token is what makes
their answers the data directory owner's alone. Each is 32 random bytes (URL-safe base64) in an
owner-only (0600) file of the data directory (itself 0700), made on first use and kept after, so a
second ``aivault web``, ``--open`` and an agent configuration written once keep working. Deleting
the file makes a new token at the next start (and retires every URL and configuration holding the
old one).

A token file that other users could read (or that someone else owns) is refused rather than
tightened: its token may already have been read.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from aivault.errors import DataDirUnusable
from aivault.home import Home, unusable

WEB_TOKEN = "web.token"
MCP_TOKEN = "mcp.token"
TOKEN_BYTES = 32
_VALID = re.compile(r"[A-Za-z0-9_-]{43}")


def token_path(home: Home, name: str) -> Path:
    return home.path / name


def load(home: Home, name: str) -> str | None:
    """The token in ``home/name``, or None when there is none yet (nothing is made)."""
    try:
        return _read(token_path(home, name))
    except FileNotFoundError:
        return None


def load_or_create(home: Home, name: str) -> str:
    """The token in ``home/name``, made (atomically, mode 0600) when there is none yet."""
    path = token_path(home, name)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    home.ensure()
    token = secrets.token_urlsafe(TOKEN_BYTES)
    # Written whole under a private name, then linked in: a second process starting at the same
    # moment either links first (and this one reads its token) or finds the file complete.
    tmp = path.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(token + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return _read(path)
    except OSError as exc:
        raise unusable(path, exc, "write") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return token


def _read(path: Path) -> str:
    """A token file's token, after checking that only its owner, this user, can read it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise unusable(path, exc, "read") from exc
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise DataDirUnusable(f"{path} belongs to uid {st.st_uid}, not to you: refusing its token. Delete it "
                                  "(a new one is made at the next start) or use a data directory of your own.")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise DataDirUnusable(f"{path} can be read by other users (mode {mode:o}), so its token may have "
                                  f"leaked: delete it (`rm {path}`) and start again; a new token is made, and URLs "
                                  "or agent configurations holding the old one must be renewed")
        with os.fdopen(os.dup(fd), "r", encoding="ascii", errors="replace") as fh:
            text = fh.read(256).strip()
    finally:
        os.close(fd)
    if not _VALID.fullmatch(text):
        raise DataDirUnusable(f"{path} does not hold a token aivault wrote: delete it (`rm {path}`) and start "
                              "again; a new one is made")
    return text
