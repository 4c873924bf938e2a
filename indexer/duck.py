"""Reading one row from DuckDB without leaving its transaction open.

DuckDB's Python client streams a query's result: a statement run outside an explicit transaction
commits only once its result is read to the end, or when the cursor runs its next statement or is
closed. ``fetchone()`` on a one-row result reads the row but not the end, so the cursor's
transaction stays open -- on a long-lived cursor (the sidecar thread's, the writer's) for as long as
the cursor sits idle. Every write committed meanwhile then stays pinned: DuckDB cannot clean it up
while an older transaction is active, so ``CHECKPOINT`` is refused ("there are other write
transactions active"), automatic checkpoints are skipped and the daemon's reclaim never runs (a
daemon whose postings-sidecar thread last ran its prune did exactly that). Reading every row ends
the statement; each such read goes through ``one``.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Executes(Protocol):
    def execute(self, query: str, parameters: Any = None) -> Any: ...


def one(cur: _Executes, query: str, parameters: Any = None) -> tuple[Any, ...] | None:
    """The first row of ``query`` (None when it has none), its result read to the end."""
    rows = cur.execute(query, parameters).fetchall()
    return tuple(rows[0]) if rows else None
