"""What a transcript source is, for the scanner: roots, the units found under them, and how a unit is read.

A *unit* is what the index keeps one session (or, for Aider, one chat) from: it has a key (stored as
``files.path``), a device/inode (its file, or the database file holding it) and a change signature.
Units come in three modes:

* ``lines`` — an append-only line file (JSONL, Aider's markdown): read incrementally from the byte
  offset after the last complete line, with the parser's state at that offset (docs/protocol.md §2.2).
* ``zst`` — a zstd-compressed line file (Codex rollouts idle for a week): read like ``lines``, with
  offsets counted in the *decompressed* stream. Such a file is written once, so it is complete when
  its end has been read.
* ``whole`` — a unit read at once whenever its signature changes: a JSON document, a task folder, one
  session inside an SQLite database. Its "offset" counts messages, so a unit too large for one batch
  is committed over several and a crash resumes where the last committed batch ended.

Every listing or read failure is a value (a ``RootProblem`` or ``UnitUnreadable``), never an
exception that stops the pass.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.reader import MAX_LINE_BYTES, ReadStats, iter_lines

Mode = Literal["lines", "zst", "whole"]


@dataclass(frozen=True, slots=True)
class Root:
    agent: str  # a wire agent name (aivault.scanner.agents.AGENTS)
    path: str  # absolute
    explicit: bool = False  # named by the user: its absence is an error, not a fact


@dataclass(frozen=True, slots=True)
class RootProblem:
    root: str
    reason: str


@dataclass(frozen=True, slots=True)
class Found:
    """A unit seen by a pass. For ``lines`` units ``size``/``mtime_ns`` are the file's; for ``zst``
    and ``whole`` units ``mtime_ns`` is the change signature and ``size`` is informational."""

    path: str  # the unit's key: a file or folder path, or "<container>#<unit id>"
    agent: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: Mode = "lines"
    locator: tuple[str, ...] = ()  # what the agent's reader needs to open a container unit


@dataclass(slots=True)
class Unit:
    """A ``whole`` unit as read: the session, all its messages in order, what was skipped and why."""

    session: SessionInfo
    messages: list[Message]
    signature: int  # the signature of what was read (stored, so an unchanged unit is not read again)
    skips: dict[str, int] = field(default_factory=dict)


def signature(*parts: object) -> int:
    """A signed 64-bit fingerprint of the given values (a unit's change signature)."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def file_signature(path: str) -> int | None:
    """size + mtime + inode of a file, or None when it cannot be stat-ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return signature(st.st_size, st.st_mtime_ns, st.st_ino)


def size_mtime(path: str) -> tuple[int, int]:
    """(size, mtime_ns) of a side file whose change a reader remembers; (-1, -1) when it cannot be
    stat-ed (a file that appears later then counts as changed)."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def read_whole(path: str, limit: int, too_large: Callable[[int], str]) -> tuple[bytes, int, os.stat_result]:
    """(the bytes of a unit read whole, its file_signature, its stat) when it did not change while
    read. UnitChanged when it is gone or changed (the next pass reads it again); UnitUnreadable when
    it cannot be read, or holds more than ``limit`` bytes (``too_large(size)`` says so)."""
    before = file_signature(path)
    if before is None:
        raise UnitChanged(f"{path} disappeared")
    try:
        st = os.stat(path)
        if st.st_size > limit:
            raise UnitUnreadable(too_large(st.st_size))
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError as exc:
        raise UnitChanged(f"{path} disappeared") from exc
    except OSError as exc:
        raise UnitUnreadable(f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise UnitUnreadable(too_large(len(data)))
    if file_signature(path) != before:
        raise UnitChanged(f"{path} changed while it was read")
    return data, before, st


# --- walking a root -------------------------------------------------------------------------------
# Deep enough for Codex's YYYY/MM/DD, Claude's project/session/subagents/workflows, Cursor's nested
# transcripts; bounded so a symlink loop or a huge unrelated tree cannot keep a pass busy.
MAX_DEPTH = 7

Wanted = Callable[[str, str], "Mode | None"]  # (directory, file name) -> the unit's mode, or None


def check_root(root: Root, problems: list[RootProblem]) -> os.stat_result | None:
    """The root's stat when it is a directory to walk; absence is a problem only for explicit roots."""
    try:
        st = os.stat(root.path)
    except FileNotFoundError:
        if root.explicit:
            problems.append(RootProblem(root.path, "root does not exist"))
        return None
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot stat root: {exc.strerror or exc}"))
        return None
    if not stat.S_ISDIR(st.st_mode):
        problems.append(RootProblem(root.path, "root is not a directory"))
        return None
    return st


def walk_files(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, wanted: Wanted, *,
               max_depth: int = MAX_DEPTH, hidden: bool = False) -> Iterator[Found]:
    """Every wanted file under ``root``; listing failures are appended to ``problems``.

    ``dirs`` (when given) receives every listed directory's mtime, so a later bounded pass can
    re-list only the directories that changed (see ``walk_changed``).
    """
    st = check_root(root, problems)
    if st is None:
        return
    yield from _walk_dir(root, root.path, problems, 0, dirs, wanted, recurse_known=True,
                         seen={(st.st_dev, st.st_ino)}, max_depth=max_depth, hidden=hidden)


def walk_changed(root: Root, problems: list[RootProblem], dirs: dict[str, int], wanted: Wanted, *,
                 max_depth: int = MAX_DEPTH, hidden: bool = False) -> Iterator[Found]:
    """Files in directories of ``root`` whose mtime changed since ``dirs`` recorded it.

    Creating or renaming an entry changes its directory's mtime, so new transcripts are found
    by a stat per known directory instead of a walk of the whole tree. Known sub-directories
    are not descended into: they are checked on their own.
    """
    for path, mtime in list(dirs.items()):
        if path != root.path and not path.startswith(root.path + os.sep):
            continue
        try:
            now = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            dirs.pop(path, None)
            continue
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {path}: {exc.strerror or exc}"))
            continue
        if now != mtime:
            depth = 0 if path == root.path else path[len(root.path) + 1 :].count(os.sep) + 1
            yield from _walk_dir(root, path, problems, depth, dirs, wanted, recurse_known=False, seen=set(),
                                 max_depth=max_depth, hidden=hidden)


def _walk_dir(root: Root, path: str, problems: list[RootProblem], depth: int, dirs: dict[str, int] | None,
              wanted: Wanted, *, recurse_known: bool, seen: set[tuple[int, int]], max_depth: int,
              hidden: bool) -> Iterator[Found]:
    try:
        mtime = os.stat(path).st_mtime_ns
        with os.scandir(path) as it:
            entries = list(it)
    except OSError as exc:
        where = "root" if path == root.path else path
        problems.append(RootProblem(root.path, f"cannot list {where}: {exc.strerror or exc}"))
        return
    if dirs is not None:
        dirs[path] = mtime
    entries.sort(key=lambda e: e.name)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=True):
                # A symlinked project folder is followed like a real one; a directory already
                # walked in this pass (a link back up the tree) is not walked again.
                ident = _dir_identity(entry)
                if ident is not None and ident not in seen and depth < max_depth \
                        and (hidden or not entry.name.startswith(".")) \
                        and (recurse_known or dirs is None or entry.path not in dirs):
                    seen.add(ident)
                    yield from _walk_dir(root, entry.path, problems, depth + 1, dirs, wanted,
                                         recurse_known=recurse_known, seen=seen, max_depth=max_depth,
                                         hidden=hidden)
                continue
            mode = wanted(path, entry.name)
            if mode is None:
                continue
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(st.st_mode):
            sig = st.st_mtime_ns if mode == "lines" else signature(st.st_size, st.st_mtime_ns, st.st_ino)
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size, sig, mode)


def _dir_identity(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    st = entry.stat(follow_symlinks=True)
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


# --- reading line files -----------------------------------------------------------------------------
class LineFile:
    """A line file opened for one read: complete lines after an offset, and its first bytes.

    Plain files are read with pread (nothing is held but the current line); zstd files are
    decompressed as a stream, skipping the part already indexed, in bounded memory.
    """

    def __init__(self, path: str, mode: Mode) -> None:
        self.path = path
        self.mode = mode
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self.stat = os.fstat(self.fd)
        self.eof = False  # zst: the read reached the end of the decompressed stream

    def close(self) -> None:
        os.close(self.fd)

    def lines(self, start: int, stats: ReadStats) -> Iterator[tuple[bytes | None, int]]:
        """(line, offset after its newline) for complete lines after ``start`` (see reader.iter_lines)."""
        if self.mode == "zst":
            yield from self._zst_lines(start, stats)
        else:
            yield from iter_lines(self.fd, start, self.stat.st_size, stats)

    def head(self, length: int) -> bytes:
        """The first ``length`` bytes of the (decompressed) content."""
        if length <= 0:
            return b""
        if self.mode != "zst":
            return os.pread(self.fd, length, 0)
        with self._zst_reader() as reader:
            return _read_exactly(reader, length)

    def tail(self, start: int, length: int) -> bytes:
        """``length`` bytes at ``start`` (plain files only: a settled last line, scanner.scan)."""
        return os.pread(self.fd, length, start)

    @contextmanager
    def _zst_reader(self) -> Iterator[_Readable]:
        """A decompressing reader; a corrupt stream is an OSError (EIO) naming the file, like a
        failing disk read, so that callers handle it as one (and nothing broader is caught)."""
        import zstandard  # only Codex's compressed rollouts need it

        with open(self.path, "rb", buffering=0) as raw, closing(
                zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)) as reader:
            try:
                yield reader
            except zstandard.ZstdError as exc:
                raise OSError(errno.EIO, f"corrupt zstd stream: {exc}", self.path) from exc

    def _zst_lines(self, start: int, stats: ReadStats) -> Iterator[tuple[bytes | None, int]]:
        with self._zst_reader() as reader:
            pos = 0
            while pos < start:  # what is already indexed is decompressed again and skipped
                skipped = reader.read(min(_ZST_BLOCK, start - pos))
                if not skipped:
                    return
                pos += len(skipped)
            buf = bytearray()
            skipping = False
            while True:
                block = reader.read(_ZST_BLOCK)
                if not block:
                    self.eof = True
                    return
                lo = 0
                while True:
                    nl = block.find(b"\n", lo)
                    if nl == -1:
                        if not skipping:
                            buf += block[lo:]
                            if len(buf) > MAX_LINE_BYTES:
                                skipping = True
                                buf.clear()
                        break
                    end = pos + nl + 1
                    if skipping:
                        skipping = False
                        stats.oversized += 1
                        yield None, end
                    elif buf:
                        if len(buf) + nl - lo > MAX_LINE_BYTES:
                            stats.oversized += 1
                            buf.clear()
                            yield None, end
                        else:
                            buf += block[lo:nl]
                            yield bytes(buf), end
                            buf.clear()
                    else:
                        yield block[lo:nl], end
                    lo = nl + 1
                pos += len(block)


_ZST_BLOCK = 1 << 20


class _Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


def _read_exactly(reader: _Readable, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = reader.read(n - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def head_fingerprint(data: bytes) -> int:
    """A 64-bit fingerprint of a file's first bytes (a rewrite in place changes them)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


# --- reading SQLite databases an agent is writing --------------------------------------------------
def open_sqlite(path: str) -> sqlite3.Connection:
    """A read-only connection to an agent's database, never a lock the agent waits on for long.

    ``mode=ro`` reads a WAL database's committed state without blocking its writer; where the
    WAL index cannot be used (a read-only directory), ``immutable=1`` reads the main file as is.
    A busy database is waited for briefly, then the unit is retried on the next pass.
    """
    uri = f"file:{_quote(path)}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=2.0, check_same_thread=False)
        con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return con
    except sqlite3.OperationalError as exc:
        # A writer holding the lock is not a read-only directory: immutable=1 would read the main
        # file halfway through its commit. The caller retries later instead.
        if "locked" in str(exc).lower() or "busy" in str(exc).lower():
            raise
        con = sqlite3.connect(f"file:{_quote(path)}?immutable=1", uri=True, timeout=2.0, check_same_thread=False)
        con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return con


def _quote(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="/")


def db_change_stamp(path: str) -> int:
    """The database file's and its WAL's size and mtime folded together: unchanged means no new
    commit since (a cheap test before listing its sessions again)."""
    parts: list[int] = []
    for p in (path, path + "-wal"):
        try:
            st = os.stat(p)
            parts += [st.st_size, st.st_mtime_ns]
        except OSError:
            parts += [-1, -1]
    return zlib.crc32(repr(parts).encode()) | (len(parts) << 32)


# --- what a root holds, whatever the parsers make of it -------------------------------------------
# A census looks at file names only; it stops after this many entries (a huge unrelated tree).
CENSUS_MAX_ENTRIES = 200_000


def census(path: str, shaped: Callable[[str], bool], *, max_depth: int = MAX_DEPTH) -> int:
    """How many files under ``path`` look like the agent's transcripts by name (``shaped``)."""
    count = 0
    seen = 0
    stack = [(path, 0)]
    while stack and seen < CENSUS_MAX_ENTRIES:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    seen += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if depth < max_depth:
                                stack.append((entry.path, depth + 1))
                        elif shaped(entry.name):
                            count += 1
                    except OSError:
                        continue
        except OSError:
            continue
    return count


def listed(root: Root, folder: str, problems: list[RootProblem]) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` (under ``root``) by name; a missing folder has none, and one that cannot be
    listed is a problem reported against the root (never an exception)."""
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {folder}: {exc.strerror or exc}"))
        return []
