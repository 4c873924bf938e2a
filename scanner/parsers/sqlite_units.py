"""Sessions kept in an agent's SQLite database, found and read as ``whole`` units.

OpenCode, Crush and Goose keep every session of a user (or of a project) in one database the
agent writes while it runs. Each session is a unit ``"<db path>#<session id>"`` whose change
signature is computed from its own rows, because the shared file's mtime says nothing about one
session (docs/formats.md §14). What this module owns:

* **When to list a database again.** Listing means one grouped query over the session's rows, so
  it is done only when ``db_change_stamp`` (size and mtime of the database and its WAL) moved since
  the last listing; the stamp is remembered in the scanner's ``dirs`` dict. The ``-shm`` file is
  never looked at: readers touch it, so watching it would re-list for ever (AV #956, #1321).
* **Reading one session consistently.** All of a session's rows are read in one read transaction,
  so a commit landing in the middle of the read is either wholly in it or wholly out of it.
  A database that is locked or busy is retried on the next pass (``UnitChanged``), never read
  half; a schema without a table or column we need is ``UnitUnreadable`` naming it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.sources import Found, Root, RootProblem, db_change_stamp, open_sqlite

# Keys of database stamps in the scanner's ``dirs`` dict. Directory walkers re-stat every key
# under their root (sources.walk_changed), so a stamp must not look like a path.
STAMP_KEY_PREFIX: Final = "sqlite-stamp:"

# (session id, change signature, rows it holds): one listed session.
ListedSession = tuple[str, int, int]
Lister = Callable[[sqlite3.Connection], Iterable[ListedSession]]


@dataclass(frozen=True, slots=True)
class Listing:
    """A database's sessions as of one stamp."""

    stamp: int
    ino: int
    units: tuple[Found, ...]
    ids: frozenset[str]


# Per database path: the last listing. A recent pass whose stamp did not move re-uses it instead of
# querying again (a full pass must name every unit, or the unlisted ones would be taken for gone).
_LISTINGS: dict[str, Listing] = {}
# Units whose last read was refused (locked, busy, changed under the reader): re-offered by the next
# pass even when the database's stamp has not moved since.
_RETRY: set[str] = set()


def is_busy(exc: sqlite3.Error) -> bool:
    """A lock or busy condition: the writer is working, so try again later."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def unit_error(exc: sqlite3.Error, db: str) -> UnitChanged | UnitUnreadable:
    """What a failed read of one session means: retry next pass, or a reason to report."""
    name = os.path.basename(db)
    if is_busy(exc) or not os.path.exists(db):
        return UnitChanged(f"{name}: {exc}")
    return UnitUnreadable(f"cannot read {name}: {exc}")


@contextmanager
def snapshot(db: str, key: str | None = None) -> Iterator[sqlite3.Connection]:
    """A read-only connection inside one read transaction (everything read sees one commit).

    ``key`` is the unit being read: when its read is refused it is offered again by the next pass.
    """
    try:
        con = open_sqlite(db)
    except sqlite3.Error as exc:
        raise _remember(unit_error(exc, db), key) from exc
    # Text the agent stored with invalid UTF-8 reads with replacement characters instead of
    # failing the whole session.
    con.text_factory = _lenient_text
    try:
        # A deferred transaction: its snapshot starts at the first read and holds until the end,
        # never blocking a WAL writer (and a rollback-journal writer only while we read).
        con.execute("BEGIN")
        yield con
    except sqlite3.Error as exc:
        raise _remember(unit_error(exc, db), key) from exc
    except UnitChanged:
        if key is not None:
            _RETRY.add(key)
        raise
    finally:
        con.close()
    if key is not None:
        _RETRY.discard(key)


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _remember(err: UnitChanged | UnitUnreadable, key: str | None) -> UnitChanged | UnitUnreadable:
    if key is not None and isinstance(err, UnitChanged):
        _RETRY.add(key)
    return err


def columns(con: sqlite3.Connection, table: str, needed: Iterable[str] | None = None) -> frozenset[str]:
    """The columns of ``table`` (empty when there is no such table). ``table`` is one of our constants.

    With ``needed``: UnitUnreadable naming the table or the first column the agent's schema lacks.
    """
    cols = frozenset(row[1] for row in con.execute(f'PRAGMA table_info("{table}")'))
    if needed is not None:
        if not cols:
            raise UnitUnreadable(f"the database has no table {table!r}: a schema this version does not know")
        for name in needed:
            if name not in cols:
                raise UnitUnreadable(f"table {table!r} has no column {name!r}: a schema this version does not know")
    return cols


@dataclass(frozen=True, slots=True)
class SessionSql:
    """The two queries of a database with a ``sessions`` table (aliased ``s``) and a ``messages``
    table (Crush, Goose), built for the columns this database has."""

    sessions: str  # every session's row: its id first, then what its change signature is made of
    messages: str  # one session's messages, in order (the session id is the one parameter)


ONE_SESSION: Final = " WHERE s.id = ?"


def read_session(found: Found, sql: Callable[[sqlite3.Connection], SessionSql]) -> tuple[Any, list[Any]]:
    """(the session's row, its message rows) of a ``(db, session id, ...)`` unit, read in one
    transaction; UnitChanged when the session is no longer in the database."""
    db, session_id = found.locator[:2]
    with snapshot(db, found.path) as con:
        queries = sql(con)
        row = con.execute(queries.sessions + ONE_SESSION, (session_id,)).fetchone()
        if row is None:
            raise UnitChanged(f"session {session_id} is no longer in {db}")
        return row, con.execute(queries.messages, (session_id,)).fetchall()


def pick(cols: frozenset[str], *names: str, alias: str = "") -> str:
    """The first of ``names`` the table has (qualified with ``alias``), else ``NULL``.

    Only our own constant column names are ever passed, so the result is safe to put in SQL.
    """
    for name in names:
        if name in cols:
            return f"{alias}.{name}" if alias else name
    return "NULL"


def list_sessions(db: str, root: Root, problems: list[RootProblem], dirs: dict[str, int] | None,
                  lister: Lister, *, extra: tuple[str, ...] = ()) -> tuple[Listing | None, bool]:
    """(the database's listing, whether it was listed just now), or (None, False) without a database.

    Each unit's locator is ``(db, session id, *extra)``. A database whose stamp has not moved since
    its last listing is not queried again. A listing that fails is a root problem (so a full pass
    marks nothing under the root gone) and offers no unit; the ids of the previous listing stand.
    """
    try:
        st = os.stat(db)
    except FileNotFoundError:
        _LISTINGS.pop(db, None)
        return None, False
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot stat {db}: {exc.strerror or exc}"))
        return _LISTINGS.get(db), False
    key = STAMP_KEY_PREFIX + db
    stamp = db_change_stamp(db)  # taken before the query: a commit during it is seen next time
    cached = _LISTINGS.get(db)
    if dirs is not None and dirs.get(key) == stamp and cached is not None and cached.stamp == stamp \
            and cached.ino == st.st_ino:
        return cached, False
    try:
        with snapshot(db) as con:
            rows = list(lister(con))
    except (UnitChanged, UnitUnreadable) as exc:
        problems.append(RootProblem(root.path, f"{db}: {exc}"))
        # Nothing to read now; the ids last listed still keep their sessions from being taken elsewhere.
        return (Listing(cached.stamp, cached.ino, (), cached.ids) if cached is not None else None), False
    units = tuple(Found(f"{db}#{sid}", root.agent, st.st_dev, st.st_ino, size, sig, "whole", (db, sid, *extra))
                  for sid, sig, size in rows)
    listing = Listing(stamp, st.st_ino, units, frozenset(sid for sid, _, _ in rows))
    _LISTINGS[db] = listing
    keys = {f.path for f in units}
    _RETRY.difference_update({k for k in _RETRY if k.startswith(db + "#") and k not in keys})
    if dirs is not None:
        dirs[key] = stamp
    return listing, True


def due(listing: Listing, fresh: bool, full: bool, skip: frozenset[str] | set[str] = frozenset()) -> Iterator[Found]:
    """The units a pass should look at: all of them after a new listing or in a full pass, else only
    those whose last read was refused; sessions in ``skip`` (already seen elsewhere) are left out."""
    for found in listing.units:
        if found.locator[1] in skip:
            continue
        if full or fresh or found.path in _RETRY:
            yield found
