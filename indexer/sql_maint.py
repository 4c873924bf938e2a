"""The SQL of maintenance, as named constants: work that changes no search result.

Merges of postings segments (indexer/segments.py, indexer/merges.py), the reclaiming copy
(indexer/reclaim.py), checkpoints, the ART index checks and repairs (indexer/integrity.py), the
rows of an unfinished commit and the read-back check (indexer/store.py), and the engine's
settings (threads, memory) that the passes and merges change. The other statements live by purpose
too: the tables and migrations in ``indexer/schema.py``, the indexer's writes in
``indexer/sql_write.py``, the read side's in ``query/sql.py``; tests/test_structure.py fails on a
statement written anywhere else.
"""

from __future__ import annotations

from typing import Final

# --- checkpoints and the engine's settings ------------------------------------------------------
# Writes the WAL into the file; blocks a commit freed count as free only once checkpointed.
CHECKPOINT: Final = "CHECKPOINT"
# The threads DuckDB may use (a bulk pass, a merge and the daemon's steady state differ).
SET_THREADS: Final = "SET threads = {threads}"
