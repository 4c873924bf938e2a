"""The data directory: where the database, sidecars, keys, policy and sockets live.

Layout (format version 1, docs/protocol.md §3):

    $AIVAULT_HOME/              0700
      index.duckdb              the index (only the indexer opens it read-write)
      index.duckdb.wal          DuckDB's write-ahead log
      key                       32 random bytes: signs RPC frames and cursors (0600)
      policy.json               consent and retention: {enabled, historyDays} (aivault/policy.py)
      config.json               extra transcript roots, embedding setup (optional; aivault/config.py)
      daemon.sock               the broker's RPC socket (ipc://)
      ingest.sock               the scanner -> indexer socket (ipc://)
      daemon.pid                pid of the writer (`aivault serve` or `index`), flock-ed while it runs
      index.duckdb.postings/    the daemon's memory-mapped copies of sorted postings segments
      vectors.faiss/.json       the FAISS index of chunk vectors and the header vouching for it
      web.token, mcp.token      the front ends' access tokens (aivault/tokens.py, 0600)

Converted embedding models are a per-user cache, not index data: see ``models_dir``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NamedTuple

from aivault import log
from aivault.errors import DataDirUnusable

_log = log.get("home")

HOME_FORMAT_VERSION = 1
_KEY_BYTES = 32


def models_dir() -> Path:
    """Where converted models are cached: derived from installed packages, shared by all data
    directories of the user (``AIVAULT_MODELS_DIR``, else ``$XDG_CACHE_HOME/aivault/models``)."""
    env = os.environ.get("AIVAULT_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "aivault" / "models"


def default_home() -> Path:
    env = os.environ.get("AIVAULT_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "aivault"


# A NamedTuple rather than a frozen dataclass: the same immutable value with equality and a hash,
# without importing dataclasses (and inspect, ast, dis, tokenize) into every CLI call.
class Home(NamedTuple):
    path: Path

    @classmethod
    def resolve(cls, path: str | Path | None = None) -> Home:
        return cls(Path(path).expanduser().absolute() if path else default_home().absolute())

    # --- files ---
    @property
    def db_path(self) -> Path:
        return self.path / "index.duckdb"

    @property
    def key_path(self) -> Path:
        return self.path / "key"

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def pid_path(self) -> Path:
        return self.path / "daemon.pid"

    @property
    def rpc_endpoint(self) -> str:
        return f"ipc://{self.path / 'daemon.sock'}"

    @property
    def ingest_endpoint(self) -> str:
        return f"ipc://{self.path / 'ingest.sock'}"

    def ensure(self) -> Home:
        """Create the directory with owner-only permissions (and tighten an existing one of ours).

        Only what needs changing is changed, so a read-only data directory stays usable for reading.
        """
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
            st = self.path.stat()
        except OSError as exc:
            raise unusable(self.path, exc, "create") from exc
        if st.st_uid != os.getuid():
            raise DataDirUnusable(f"the data directory {self.path} belongs to uid {st.st_uid}, not to you "
                                  f"(uid {os.getuid()}): use one of your own (`--home` or $AIVAULT_HOME)")
        if stat.S_IMODE(st.st_mode) != 0o700:
            try:
                os.chmod(self.path, 0o700)
            except OSError as exc:
                raise unusable(self.path, exc, "restrict to owner-only (0700)") from exc
        return self

    def key(self) -> bytes:
        """The signing key, created on first use; owner-only (a loosened one is tightened)."""
        try:
            data = read_private(self.key_path)
        except FileNotFoundError:
            data = b""
        if len(data) == _KEY_BYTES:
            return data
        self.ensure()
        import secrets  # only to create the key: a client reading it need not load random, hmac, base64

        data = secrets.token_bytes(_KEY_BYTES)
        try:
            write_private(self.key_path, data)
        except OSError as exc:
            raise unusable(self.key_path, exc, "write") from exc
        return data


def unusable(path: Path, exc: OSError, doing: str) -> DataDirUnusable:
    """A clear error for an OSError met on a data-directory path, naming it and what to do."""
    if isinstance(exc, PermissionError):
        why = "permission denied"
    elif exc.errno == errno.EROFS:
        why = "the file system is read-only"
    else:
        why = exc.strerror or str(exc)
    return DataDirUnusable(f"cannot {doing} {path}: {why}. Use a data directory you can write "
                           "(`--home` or $AIVAULT_HOME); searching a read-only one works once it holds an index.")


def read_private(path: Path) -> bytes:
    """Read a secret file, first making sure nobody else may read it.

    A key or policy loosened to 0644 (a copy, a careless chmod) is tightened back to 0600 when it
    is ours; one that belongs to someone else is refused, since it may have been planted.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise DataDirUnusable(f"{path} belongs to uid {st.st_uid}, not to you: refusing to use it. "
                                  "Delete it (a new one is made) or use a data directory of your own.")
        if stat.S_IMODE(st.st_mode) & 0o077:
            try:
                os.fchmod(fd, 0o600)
                _log.warning("tightened a private file that others could read", path=str(path),
                             mode=oct(stat.S_IMODE(st.st_mode)))
            except OSError as exc:
                raise DataDirUnusable(f"{path} can be read by other users (mode {stat.S_IMODE(st.st_mode):o}) "
                                      f"and cannot be restricted ({exc.strerror}): `chmod 600 {path}`") from exc
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Write a file atomically with mode 0600 (temp file + rename in the same directory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
