"""The ART indexes against their tables, and the journal of repairs made to the index file.

**The fault** (DuckDB 1.5.5; duckdb/duckdb#23848, #25771). Opening a file whose last writer died
replays its WAL; the appends it replays into a table with an ART index are *buffered* in the still
unbound index rather than inserted. A checkpoint run by a statement (a client context) binds the
index first and inserts them; the checkpoint DuckDB runs when the last connection closes has no
context and writes the index's storage as it was before the WAL. The rows stay in the table but
their index no longer finds them: `chunks_by_id` loses the chunks the dead writer committed last,
`sessions_by_id` their sessions, a search's evidence fetch misses them (0 hits in direct mode, an
empty snippet from a daemon), and a later DELETE of such a row invalidates the database ("Failed to
delete all rows from index"). It takes exactly "kill -9, start `aivault serve`, stop it cleanly":
plain DuckDB does the same (open read-write, close), and a first statement that uses the index, or
a ``CHECKPOINT`` statement, avoids it.

**What a writer does** (``indexer/store.py`` ``_open_read_write``) when it opens a file that was
not closed cleanly (its WAL is there): a ``CHECKPOINT`` statement before anything else, which binds
every index with the replayed rows in it; then ``verify_and_rebuild``: each index is probed for the
rows its table holds (the table's last-appended rows, which are the ones a replayed WAL holds, and a
random sample), and rebuilt from its table -- about 0.16 s for `chunks_by_id` at 1M messages,
against ~7 s to probe every row. A probe that finds rows missing, or that DuckDB does not answer
from the index, is journalled in ``repairs`` (``aivault status`` shows it). Files written by a
version without this are rebuilt once when their schema moves to version 4.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from aivault import log
from aivault.indexer import sql_maint
from aivault.indexer.duck import one
from aivault.indexer.store import now_ms, transaction

_log = log.get("indexer.integrity")

# Rows probed per index: the last appended (a replayed WAL's rows are the table's newest) and a
# random sample. 2 x 2,048 took 40 ms for `chunks_by_id` at 1M messages (1.07M chunks).
PROBE_NEWEST = 2048
PROBE_SAMPLE = 2048
# Values per IN list. DuckDB answers an IN filter from the ART when the rows it finds are at most
# `index_scan_max_count` (2,048); a list of consecutive integers is turned into a range filter,
# which is never answered from the index, so each list takes every other value of a sorted run.
PROBE_BATCH = 1024
# Repairs shown by `aivault status` and indexStats (the journal keeps them all).
REPAIRS_SHOWN = 10


@dataclass(frozen=True, slots=True)
class IndexDef:
    name: str
    table: str
    column: str
    sql: str  # the statement that creates it, as the catalog keeps it


@dataclass(frozen=True, slots=True)
class Probe:
    index: str
    probed: int  # rows looked up
    missing: int  # of those, rows the index did not find
    from_index: bool  # DuckDB answered the lookups from the index (else they prove nothing)
    # False when the table holds a single value: DuckDB then answers an equality filter from the
    # column's min/max (always true) and never reaches the index, so no query can probe it. The
    # rebuild that follows every probe covers it.
    checkable: bool = True

    @property
    def agrees(self) -> bool:
        return not self.checkable or (self.from_index and self.missing == 0)


_SIMPLE_COLUMN = re.compile(r"^\[\s*([A-Za-z_][A-Za-z0-9_]*)\s*\]$")


def index_defs(con: Any) -> list[IndexDef]:
    """The single-column ART indexes of the database's main schema, from DuckDB's catalog."""
    out = []
    for name, table, expressions, sql in con.execute(sql_maint.LIST_INDEXES).fetchall():
        m = _SIMPLE_COLUMN.match(str(expressions))
        if m is None or not sql:
            raise RuntimeError(f"index {name} on {table} is not on one column ({expressions}); "
                               "indexer/integrity.py probes only those")
        out.append(IndexDef(str(name), str(table), m.group(1), str(sql)))
    return out


def _batches(values: list[int]) -> Iterator[list[int]]:
    """``values`` (distinct, sorted) in IN lists no two of whose values are consecutive integers."""
    for half in (values[0::2], values[1::2]):
        for i in range(0, len(half), PROBE_BATCH):
            yield half[i:i + PROBE_BATCH]


def _literal_list(values: list[int]) -> str:
    return ",".join(str(int(v)) for v in values)


def probe(con: Any, d: IndexDef, *, everything: bool = False) -> Probe:
    """Look the table's newest rows and a sample of the others up through ``d`` (``everything``:
    every row, ~7 s for 1M chunks); count what it misses."""
    sql = sql_maint.PROBE_EVERY_VALUE if everything else sql_maint.PROBE_VALUES
    rows = con.execute(sql.format(table=d.table, col=d.column, newest=PROBE_NEWEST, sample=PROBE_SAMPLE)).fetchall()
    expected = {int(v): int(n) for v, n in rows}
    if not expected:
        return Probe(d.name, 0, 0, True)
    values = sorted(expected)
    if len(values) == 1:
        return Probe(d.name, expected[values[0]], 0, False, checkable=False)
    found = 0
    from_index = True
    for k, batch in enumerate(_batches(values)):
        sql = sql_maint.COUNT_BY_INDEX.format(table=d.table, col=d.column, values=_literal_list(batch))
        if k == 0:
            plan = "\n".join(str(r[1]) for r in con.execute(sql_maint.EXPLAIN_ANALYZE + sql).fetchall())
            from_index = "Index Scan" in plan
        row = one(con, sql)
        found += int(row[0]) if row else 0
    probed = sum(expected.values())
    return Probe(d.name, probed, max(0, probed - found), from_index)


def probe_all(con: Any, *, everything: bool = False) -> list[Probe]:
    return [probe(con, d, everything=everything) for d in index_defs(con)]


def rebuild(con: Any, d: IndexDef) -> None:
    """Drop ``d`` and create it again from its table (one transaction: a kill leaves the old one)."""
    with transaction(con):
        con.execute(sql_maint.DROP_INDEX.format(name=d.name))
        con.execute(d.sql)


def verify_and_rebuild(con: Any, *, why: str) -> list[Probe]:
    """Probe every index, rebuild each from its table, and journal those the probe found wrong.

    Rebuilding is cheaper than proving an index whole (0.16 s against ~7 s for 1.07M chunks), so
    every index is rebuilt; the probe tells whether this opening repaired anything a user should
    hear of. ``why`` says what made the writer look (kept in the journal).
    """
    probes = []
    for d in index_defs(con):
        p = probe(con, d)
        rebuild(con, d)
        probes.append(p)
        if not p.agrees:
            what = (f"{d.name}: {p.missing:,} of {p.probed:,} probed rows were not found through the index"
                    if p.from_index else f"{d.name}: DuckDB did not answer the probe from the index")
            record(con, "index-rebuilt", what, p.missing)
            _log.warning("an index disagreed with its table and was rebuilt from it", index=d.name,
                         table=d.table, missing=p.missing, probed=p.probed, from_index=p.from_index, why=why)
    con.execute(sql_maint.CHECKPOINT)
    _log.info("indexes checked against their tables and rebuilt", why=why,
              indexes={p.index: {"probed": p.probed, "missing": p.missing} for p in probes})
    return probes


def record(con: Any, kind: str, what: str, count: int) -> None:
    """Journal one repair (its own transaction)."""
    with transaction(con):
        con.execute(sql_maint.INSERT_REPAIR, [now_ms(), kind, what, int(count)])


def repairs(con: Any) -> dict[str, Any]:
    """The journal as `aivault status` shows it: how many repairs, and the latest few."""
    try:
        total = one(con, sql_maint.COUNT_REPAIRS)
        rows = con.execute(sql_maint.SELECT_REPAIRS, [REPAIRS_SHOWN]).fetchall()
    except duckdb.CatalogException:
        return {"count": 0, "latest": []}  # an index of an older schema, opened read-only
    return {"count": int(total[0]) if total else 0,
            "latest": [{"at": int(at), "kind": str(kind), "what": str(what), "count": int(n)}
                       for at, kind, what, n in rows]}


__all__ = ["IndexDef", "Probe", "index_defs", "probe", "probe_all", "rebuild", "record", "repairs",
           "verify_and_rebuild"]
