"""The SQL of maintenance, as named constants: work that changes no search result.

Merges of postings segments (indexer/segments.py, indexer/merges.py), the vocabulary's dedupe, the
reclaiming copy (indexer/reclaim.py), checkpoints, the ART index checks and repairs
(indexer/integrity.py), the rows of an unfinished commit and the read-back check
(indexer/store.py), and the engine's settings (threads, memory) that passes and merges change. The
other statements live by purpose too: the tables and migrations in ``indexer/schema.py``, the
indexer's writes in ``indexer/sql_write.py``, the read side's in ``query/sql.py``;
tests/unit/test_structure.py fails on a statement written anywhere else.
"""

from __future__ import annotations

from typing import Final

from aivault.indexer.bm25_formula import IMPACT_SQL

# --- checkpoints and the engine's settings ------------------------------------------------------
# Writes the WAL into the file; blocks a commit freed count as free only once checkpointed.
CHECKPOINT: Final = "CHECKPOINT"
# The threads DuckDB may use (a bulk pass, a merge and the daemon's steady state differ).
SET_THREADS: Final = "SET threads = {threads}"
SET_MEMORY_LIMIT: Final = "SET memory_limit = '{limit}'"
# A larger WAL between checkpoints keeps batch commits cheap (indexer/store.py connect).
SET_CHECKPOINT_THRESHOLD: Final = "SET checkpoint_threshold = '{threshold}'"
# A merge's sort does not need its inputs' order, and keeping it costs memory (segments.run_merge);
# a reclaiming copy registers its merge in order again.
UNORDERED_INSERTS: Final = "SET SESSION preserve_insertion_order = false"
ORDERED_INSERTS: Final = "SET SESSION preserve_insertion_order = true"
# The reclaim's stdout is the command's (--json).
NO_PROGRESS_BAR: Final = "SET enable_progress_bar = false"

# --- merges (indexer/segments.py) ---------------------------------------------------------------
COUNT_SEGMENT: Final = "SELECT count(*) FROM {name}"
# The segment tables in the catalog, registered or not: those the registry does not name are the
# orphans of a crash.
LIST_SEGMENT_TABLES: Final = "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'seg\\_%' ESCAPE '\\'"
# One input of a merge, for a UNION ALL of them; ``{source}``: "" or another attached database's
# ``"db".`` (a reclaiming copy).
SEGMENT_ROWS: Final = "SELECT * FROM {source}{name}"
CREATE_STAGING: Final = "CREATE OR REPLACE TABLE {staging} AS {union}"
# A merge's postings in the order of a sorted segment (BM25 impact: indexer/bm25_formula.py);
# ``{terms}``: "" or a term range (``AND term >= ... AND term < ...``) when the merge sorts in parts
# (segments.term_ranges).
MERGE_SELECT: Final = """SELECT term, chunk, sess, tf, dl, conv FROM ({inputs}) p
    WHERE sess IN (SELECT sess FROM sessions){terms}
    ORDER BY term, """ + IMPACT_SQL + " DESC, chunk"
MERGE_SEGMENTS: Final = "CREATE TABLE {target} AS " + MERGE_SELECT
MERGE_SEGMENT_PART: Final = "INSERT INTO {target} " + MERGE_SELECT
# Registering a merge: its inputs' rows go, its own comes (indexer/sql_write.py INSERT_SEGMENT_ROW).
DELETE_SEGMENT_ROW: Final = "DELETE FROM segments WHERE name = ?"
RAISE_NEXT_SEGMENT: Final = "UPDATE meta SET next_segment = greatest(next_segment, ?)"

# --- the vocabulary (indexer/writer.py dedupe_vocab) ---------------------------------------------
# Each scanner process re-sends the vocabulary it meets; duplicates are dropped when idle.
COUNT_VOCAB: Final = "SELECT count(*) FROM vocab_log"
DEDUPE_VOCAB: Final = """DELETE FROM vocab_log WHERE rowid IN (
    SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY term ORDER BY rowid) AS n FROM vocab_log)
    WHERE n > 1)"""

# --- the reclaiming copy (indexer/reclaim.py) ---------------------------------------------------
CURRENT_DATABASE: Final = "SELECT current_database()"
ATTACH: Final = "ATTACH '{path}' AS {name}"
DETACH: Final = "DETACH {name}"
# ``{src}`` is quoted, ``{name}`` (the copy's attached name) is not: the texts the reclaim always sent.
USE_COPY: Final = "USE {name}"
USE_SOURCE: Final = 'USE "{src}"'
COPY_DATABASE: Final = 'COPY FROM DATABASE "{src}" TO {name}'
COPY_SCHEMA: Final = 'COPY FROM DATABASE "{src}" TO {name} (SCHEMA)'
# What must be equal in both files (reclaim._signature): the catalog as SQL, each table's rows.
CATALOG: Final = """SELECT 'table', table_name, sql FROM duckdb_tables() WHERE database_name = $db
    UNION ALL SELECT 'index', index_name, sql FROM duckdb_indexes() WHERE database_name = $db
    UNION ALL SELECT 'view', view_name, sql FROM duckdb_views() WHERE database_name = $db AND NOT internal
    UNION ALL SELECT 'sequence', sequence_name, sql FROM duckdb_sequences() WHERE database_name = $db
    ORDER BY 1, 2"""
TABLE_ROWS: Final = 'SELECT count(*) FROM "{db}"."{table}"'
DATABASE_PATH: Final = "SELECT path FROM duckdb_databases() WHERE database_name = ?"
TABLES_OF: Final = "SELECT table_name FROM duckdb_tables() WHERE database_name = ? ORDER BY table_name"
DATABASE_SIZE: Final = """SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size()
    WHERE database_name = ?"""
TABLE_BLOCKS: Final = "SELECT count(DISTINCT block_id) FROM pragma_storage_info('{table}') WHERE persistent"
# A merging copy (copy(merge=...)): the tables besides the merge's inputs row for row, the
# vocabulary without repeats (what Writer.dedupe_vocab leaves: each term's first row, in order).
COPY_TABLE: Final = 'INSERT INTO "{table}" SELECT * FROM "{db}"."{table}"'
COPY_VOCAB: Final = """INSERT INTO vocab_log SELECT * FROM "{db}".vocab_log
    QUALIFY row_number() OVER (PARTITION BY term ORDER BY rowid) = 1 ORDER BY rowid"""
COUNT_VOCAB_TERMS: Final = 'SELECT count(DISTINCT term) FROM "{db}".vocab_log'
COUNT_MERGED: Final = 'SELECT count(*) FROM ({union}) p WHERE sess IN (SELECT sess FROM "{db}".sessions)'
# One input segment's sessions, for COUNT_MERGED's UNION ALL.
SEGMENT_SESSIONS: Final = 'SELECT sess FROM "{db}".{name}'
# How DuckDB's catalog begins a table's statement: the merged segment's is its first input's, renamed.
CATALOG_CREATE_TABLE: Final = "CREATE TABLE {name}("

# --- the ART indexes against their tables (indexer/integrity.py) --------------------------------
LIST_INDEXES: Final = """SELECT index_name, table_name, expressions, sql FROM duckdb_indexes()
    WHERE database_name = current_database() AND schema_name = 'main' ORDER BY index_name"""
# The values of a table's newest rows and of a sample, with how many rows hold each; the counts come
# from a join, which DuckDB never answers from an ART.
PROBE_VALUES: Final = """WITH picked AS (
        (SELECT {col} AS v FROM {table} ORDER BY rowid DESC LIMIT {newest})
        UNION (SELECT {col} AS v FROM {table} USING SAMPLE {sample} ROWS))
    SELECT {col}, count(*) FROM {table} WHERE {col} IN (SELECT v FROM picked) GROUP BY {col}"""
PROBE_EVERY_VALUE: Final = "SELECT {col}, count(*) FROM {table} GROUP BY {col}"
# The same rows found through the index: a literal IN list of at most index_scan_max_count values.
COUNT_BY_INDEX: Final = "SELECT count(*) FROM {table} WHERE {col} IN ({values})"
# Prefixed to the first COUNT_BY_INDEX of a probe: its plan says whether the ART answered.
EXPLAIN_ANALYZE: Final = "EXPLAIN ANALYZE "
# An index rebuilt from its table: dropped, then made again by the statement the catalog keeps.
DROP_INDEX: Final = 'DROP INDEX "{name}"'
# The repairs journal (shown by `aivault status` and indexStats).
INSERT_REPAIR: Final = "INSERT INTO repairs VALUES (?, ?, ?, ?)"
COUNT_REPAIRS: Final = "SELECT count(*) FROM repairs"
SELECT_REPAIRS: Final = "SELECT at_ms, kind, what, n FROM repairs ORDER BY at_ms DESC LIMIT ?"

# --- opening a file: what a crash may have left (indexer/store.py) ------------------------------
LIST_TABLES: Final = "SELECT table_name FROM duckdb_tables() ORDER BY table_name"
# Reading a whole table back: hashing every column makes DuckDB read (and checksum) each block;
# a count would be answered from metadata.
READ_EVERY_COLUMN: Final = 'SELECT max(hash(COLUMNS(*))) FROM "{table}"'
# Rows of an unfinished commit: ids at or past the counter a commit advances (indexer/store.py).
COUNT_UNFINISHED: Final = "SELECT count(*) FROM {table} WHERE {col} >= ?"
DELETE_UNFINISHED: Final = "DELETE FROM {table} WHERE {col} >= ?"
