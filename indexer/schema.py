"""The index's tables: their DDL, the numbered migrations, the meta row and a segment's table.

This is one of the four modules SQL is written in, by purpose (tests/unit/test_structure.py fails on a
statement anywhere else): what the database is, here; the indexer's writes in
``indexer/sql_write.py``; maintenance (merges, reclaim, checkpoints, integrity) in
``indexer/sql_maint.py``; the read side's statements in ``query/sql.py``.

Full-text search is built from plain tables (the DuckDB fts extension cannot take rows
incrementally, docs/design.md §2): postings ``(term, chunk, sess, tf, dl, conv)`` live in
*segments*. New postings are appended to one small unsorted *active* segment, so making a
batch searchable costs in proportion to the batch. Full segments are frozen and merged in
the background into segments sorted by ``(term, impact DESC)``: DuckDB's zone maps then skip
every row group that cannot hold a query term, and the first rows of a term are its
highest-impact postings, which bounds the work for very common terms. BM25 is computed in
SQL from tf, the chunk length and collection statistics kept in ``meta`` (k1, b and the formula:
``indexer/bm25_formula.py``).
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 4

# Migrations: version -> statements. Never edit a released migration; add the next number.
MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {
    1: (
        """CREATE TABLE meta (
            identity VARCHAR NOT NULL,       -- random, made with the file; replaced by clear
            generation BIGINT NOT NULL,      -- advances with every commit that changes results
            created_at BIGINT NOT NULL,
            tokenizer INTEGER NOT NULL,
            next_file INTEGER NOT NULL,
            next_sess INTEGER NOT NULL,
            next_chunk BIGINT NOT NULL,
            next_segment INTEGER NOT NULL,
            n_chunks BIGINT NOT NULL,        -- live chunks (BM25 N)
            sum_dl BIGINT NOT NULL           -- sum of live chunk lengths (BM25 avgdl)
        )""",
        """CREATE TABLE files (
            file_id INTEGER NOT NULL,
            path VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,
            dev UBIGINT NOT NULL,
            ino UBIGINT NOT NULL,
            size BIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            "offset" BIGINT NOT NULL,        -- just after the last complete line indexed
            head_len INTEGER NOT NULL,
            head_hash BIGINT NOT NULL,
            state BLOB,                      -- the parser's state at "offset"
            sess INTEGER NOT NULL,
            present BOOLEAN NOT NULL,
            malformed BIGINT NOT NULL,
            oversized BIGINT NOT NULL,
            indexed_at BIGINT NOT NULL,
            expired BOOLEAN NOT NULL DEFAULT false  -- its session fell out of retention
        )""",
        """CREATE TABLE sessions (
            sess INTEGER NOT NULL,           -- internal id; a re-read file gets a new one
            file_id INTEGER NOT NULL,
            agent VARCHAR NOT NULL,
            session_id VARCHAR NOT NULL,
            title VARCHAR,
            cwd VARCHAR,
            branch VARCHAR,
            started_at BIGINT,
            updated_at BIGINT,
            message_count INTEGER NOT NULL,
            resume_command VARCHAR,
            parent_session_id VARCHAR,
            present BOOLEAN NOT NULL
        )""",
        "CREATE INDEX sessions_by_id ON sessions (sess)",
        "CREATE TABLE titles (agent VARCHAR NOT NULL, session_id VARCHAR NOT NULL, title VARCHAR NOT NULL)",
        """CREATE TABLE chunks (
            chunk BIGINT NOT NULL,
            sess INTEGER NOT NULL,
            ord INTEGER NOT NULL,            -- message ordinal within the session
            part SMALLINT NOT NULL,          -- chunk number within the message
            role UTINYINT NOT NULL,
            kind UTINYINT NOT NULL,
            ts BIGINT,
            dl USMALLINT NOT NULL,
            text VARCHAR NOT NULL,
            hash BIGINT NOT NULL             -- of the text: vectors are shared by equal texts
        )""",
        """CREATE TABLE segments (
            name VARCHAR NOT NULL,
            state VARCHAR NOT NULL,          -- active | frozen | sorted
            created_at BIGINT NOT NULL
        )""",
        # Point lookups of a page's evidence chunks and sessions; a scan would read every text.
        "CREATE INDEX chunks_by_id ON chunks (chunk)",
        "CREATE TABLE vocab_log (term VARCHAR NOT NULL)",
        # Semantic vectors, keyed by the chunk text's hash so equal text is embedded once.
        "CREATE TABLE vectors (hash BIGINT NOT NULL, vec BLOB NOT NULL)",
        "CREATE INDEX vectors_by_hash ON vectors (hash)",
        """CREATE TABLE vector_state (
            fingerprint VARCHAR NOT NULL,    -- the model the vectors come from
            watermark BIGINT NOT NULL,       -- every eligible chunk at or below it has a vector
            epoch BIGINT NOT NULL            -- advances whenever the searchable vector set changes
        )""",
        # The indexer's last observations, so a process without a running indexer can report them.
        "CREATE TABLE observations (key VARCHAR NOT NULL, value VARCHAR NOT NULL)",
    ),
    # What was skipped in each file, by reason (JSON {reason: count}, since the file was last read
    # from its start): nothing is left out of the index without a count a user can see.
    2: ("ALTER TABLE files ADD COLUMN skips VARCHAR DEFAULT '{}'",),
    # How a unit is read (lines | zst | whole, aivault/scanner/sources.py): the scanner's
    # "unchanged" test and its re-checks depend on it.
    3: ("ALTER TABLE files ADD COLUMN mode VARCHAR DEFAULT 'lines'",),
    # What was repaired in the file (indexer/integrity.py): an index rebuilt because it disagreed
    # with its table, the rows of a commit that never finished. The writer that migrates a file to
    # this version also rebuilds its indexes once: DuckDB before this version could lose a killed
    # writer's rows from them (indexer/integrity.py), and nothing looked.
    4: ("""CREATE TABLE repairs (
            at_ms BIGINT NOT NULL,            -- when (epoch ms)
            kind VARCHAR NOT NULL,            -- index-rebuilt | unfinished-commit
            what VARCHAR NOT NULL,            -- for people: which index or table, what was wrong
            n BIGINT NOT NULL                 -- rows missing from the index, or removed
        )""",),
}

CREATE_VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL, applied_at BIGINT NOT NULL)"""
SELECT_VERSION: Final = "SELECT coalesce(max(version), 0) FROM schema_version"
INSERT_VERSION: Final = "INSERT INTO schema_version VALUES (?, ?)"

# The meta row: made with the file (identity, counters from 1), read at every open; the writer's
# commits update it (indexer/sql_write.py UPDATE_META).
INSERT_META: Final = "INSERT INTO meta VALUES (?, 0, ?, ?, 1, 1, 1, 1, 0, 0)"
SELECT_META: Final = """SELECT identity, generation, created_at, tokenizer, next_file, next_sess, next_chunk,
    next_segment, n_chunks, sum_dl FROM meta"""
COUNT_META: Final = "SELECT count(*) FROM meta"
# The file's identity, which names its sidecars (postings, vectors).
SELECT_IDENTITY: Final = "SELECT identity FROM meta"

# A postings segment's table (indexer/segments.py), made and dropped as segments come and go.
SEGMENT_COLUMNS: Final = "term BIGINT, chunk BIGINT, sess INTEGER, tf USMALLINT, dl USMALLINT, conv BOOLEAN"
CREATE_SEGMENT: Final = "CREATE TABLE {name} (" + SEGMENT_COLUMNS + ")"
DROP_SEGMENT: Final = "DROP TABLE IF EXISTS {name}"

# Re-indexing after a tokenizer change (``reindex_if_stale``): a migration of the data. The postings,
# the vocabulary and the chunk lengths (BM25's dl) hold terms cut by the old tokenizer; sessions and
# files are what was read with it, and without their rows the next full pass reads every transcript again.
# Titles (display only) and the vectors stay: vectors are keyed by the chunk text's hash, which no
# tokenizer enters, so re-indexed text finds its vector again instead of being re-embedded.
FORGET_INDEXED: Final = ("DELETE FROM chunks", "DELETE FROM sessions", "DELETE FROM files",
                         "DELETE FROM vocab_log", "DELETE FROM segments")
# The id counters keep advancing (an id is never handed out twice: the unfinished-commit check and
# the vector watermark rely on it); the generation advances so that every old cursor is stale.
RESET_META: Final = "UPDATE meta SET tokenizer = ?, generation = generation + 1, n_chunks = 0, sum_dl = 0"
# The vector sidecar lists chunk ids that no longer exist: a new epoch makes it untrusted, so it is
# rebuilt from the (kept) stored vectors as chunks come back.
NEW_VECTOR_EPOCH: Final = "UPDATE vector_state SET epoch = epoch + 1"
