"""All SQL of the index, as named constants, and the numbered schema migrations.

Full-text search is built from plain tables (the DuckDB fts extension cannot take rows
incrementally, docs/design.md §2): postings ``(term, chunk, sess, tf, dl, conv)`` live in
*segments*. New postings are appended to one small unsorted *active* segment, so making a
batch searchable costs in proportion to the batch. Full segments are frozen and merged in
the background into segments sorted by ``(term, impact DESC)``: DuckDB's zone maps then skip
every row group that cannot hold a query term, and the first rows of a term are its
highest-impact postings, which bounds the work for very common terms. BM25 is computed in
SQL from tf, the chunk length and collection statistics kept in ``meta``.
"""

from __future__ import annotations

from typing import Final

from aivault.protocol import Kind, Role

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

INSERT_META: Final = "INSERT INTO meta VALUES (?, 0, ?, ?, 1, 1, 1, 1, 0, 0)"
SELECT_META: Final = """SELECT identity, generation, created_at, tokenizer, next_file, next_sess, next_chunk,
    next_segment, n_chunks, sum_dl FROM meta"""
UPDATE_META: Final = """UPDATE meta SET generation = ?, next_file = ?, next_sess = ?, next_chunk = ?,
    next_segment = ?, n_chunks = ?, sum_dl = ?"""

SEGMENT_COLUMNS: Final = "term BIGINT, chunk BIGINT, sess INTEGER, tf USMALLINT, dl USMALLINT, conv BOOLEAN"
CREATE_SEGMENT: Final = "CREATE TABLE {name} (" + SEGMENT_COLUMNS + ")"
INSERT_SEGMENT_ROW: Final = "INSERT INTO segments VALUES (?, ?, ?)"
SELECT_SEGMENTS: Final = "SELECT name, state FROM segments ORDER BY created_at, name"

SELECT_FILES_SNAPSHOT: Final = """SELECT path, agent, dev, ino, size, mtime_ns, "offset", head_len, head_hash, present,
    expired, coalesce(mode, 'lines') FROM files ORDER BY path"""
SELECT_FILES_CACHE: Final = """SELECT path, file_id, sess, "offset", present, malformed, oversized, expired, skips
    FROM files"""
SELECT_STATES: Final = "SELECT path, state FROM files WHERE path IN (SELECT path FROM b_paths)"

# Batch application (indexer/ingest.py). ``b_*`` names are Arrow tables registered per batch.
INSERT_CHUNKS: Final = """INSERT INTO chunks SELECT chunk, sess, ord, part, role, kind, ts, dl, text,
    (hash(text) & 9223372036854775807)::BIGINT FROM b_chunks"""
INSERT_POSTINGS: Final = "INSERT INTO {segment} SELECT term, chunk, sess, tf, dl, conv FROM b_postings"
DELETE_FILES: Final = "DELETE FROM files WHERE file_id IN (SELECT file_id FROM b_files)"
INSERT_FILES: Final = """INSERT INTO files SELECT file_id, path, agent, dev, ino, size, mtime_ns, "offset", head_len,
    head_hash, state, sess, present, malformed, oversized, indexed_at, false, skips, mode FROM b_files"""
DELETE_SESSIONS_IN_BATCH: Final = "DELETE FROM sessions WHERE sess IN (SELECT sess FROM b_sessions)"
INSERT_SESSIONS: Final = """INSERT INTO sessions SELECT sess, file_id, agent, session_id, title, cwd, branch,
    started_at, updated_at, message_count, resume_command, parent_session_id, present FROM b_sessions"""
# Lists travel as registered Arrow tables (b_drop, b_gone, b_vocab): a Python list parameter
# costs DuckDB an import probe per element.
CHUNK_TOTALS_OF: Final = "SELECT count(*), coalesce(sum(dl), 0) FROM chunks WHERE sess IN (SELECT sess FROM b_drop)"
DELETE_CHUNKS_OF: Final = "DELETE FROM chunks WHERE sess IN (SELECT sess FROM b_drop)"
DELETE_SESSIONS_OF: Final = "DELETE FROM sessions WHERE sess IN (SELECT sess FROM b_drop)"
MARK_GONE_FILES: Final = "UPDATE files SET present = false WHERE path IN (SELECT path FROM b_gone)"
MARK_GONE_SESSIONS: Final = """UPDATE sessions SET present = false
    WHERE file_id IN (SELECT file_id FROM files WHERE path IN (SELECT path FROM b_gone))"""
DELETE_TITLES: Final = """DELETE FROM titles WHERE (agent, session_id) IN (SELECT agent, session_id FROM b_titles)"""
INSERT_TITLES: Final = "INSERT INTO titles SELECT agent, session_id, title FROM b_titles"
SELECT_TITLES: Final = "SELECT agent, session_id, title FROM titles"
INSERT_VOCAB: Final = "INSERT INTO vocab_log SELECT term FROM b_vocab"

# Segment maintenance (indexer/segments.py).
COUNT_SEGMENT: Final = "SELECT count(*) FROM {name}"
# A merge's postings in the order of a sorted segment; ``{terms}``: "" or a term range
# (``AND term >= ... AND term < ...``) when the merge sorts in parts (segments.term_ranges).
MERGE_SELECT: Final = """SELECT term, chunk, sess, tf, dl, conv FROM ({inputs}) p
    WHERE sess IN (SELECT sess FROM sessions){terms}
    ORDER BY term, tf::DOUBLE / (tf + {k1} * (1 - {b} + {b} * dl / {avgdl})) DESC, chunk"""
MERGE_SEGMENTS: Final = "CREATE TABLE {target} AS " + MERGE_SELECT
MERGE_SEGMENT_PART: Final = "INSERT INTO {target} " + MERGE_SELECT
DROP_SEGMENT: Final = "DROP TABLE IF EXISTS {name}"
DELETE_SEGMENT_ROW: Final = "DELETE FROM segments WHERE name = ?"
SET_SEGMENT_STATE: Final = "UPDATE segments SET state = ? WHERE name = ?"

DELETE_OBSERVATIONS: Final = "DELETE FROM observations"
INSERT_OBSERVATION: Final = "INSERT INTO observations VALUES (?, ?)"

# Retention (indexer/writer.py: Writer.sweep): small transactions, oldest sessions first.
SELECT_EXPIRED: Final = """SELECT sess, file_id FROM sessions WHERE updated_at < ? ORDER BY updated_at, sess LIMIT ?"""
EXPIRE_FILES: Final = "UPDATE files SET expired = true WHERE file_id IN (SELECT file_id FROM b_drop)"
FORGET_EXPIRED_FILES: Final = "DELETE FROM files WHERE expired"

# Semantic vectors (indexer/semantic.py). Eligible: user and assistant text and thinking;
# tool calls and results are not embedded (see docs/protocol.md §4).
VECTOR_ELIGIBLE: Final = (f"role IN ({Role.USER:d}, {Role.ASSISTANT:d}) "
                          f"AND kind IN ({Kind.TEXT:d}, {Kind.THINKING:d})")
SELECT_VECTOR_STATE: Final = "SELECT fingerprint, watermark, epoch FROM vector_state"
INSERT_VECTOR_STATE: Final = "INSERT INTO vector_state VALUES (?, 0, 0)"
UPDATE_VECTOR_STATE: Final = "UPDATE vector_state SET fingerprint = ?, watermark = ?, epoch = ?"
SELECT_TO_EMBED: Final = f"""SELECT chunk, hash, text FROM chunks WHERE chunk > ? AND {VECTOR_ELIGIBLE}
    ORDER BY chunk LIMIT ?"""
SELECT_KNOWN_HASHES: Final = "SELECT DISTINCT hash FROM vectors WHERE hash IN (SELECT hash FROM b_hashes)"
INSERT_VECTORS: Final = "INSERT INTO vectors SELECT hash, vec FROM b_vectors"
COUNT_ELIGIBLE: Final = f"SELECT count(*), count(*) FILTER (WHERE chunk <= ?) FROM chunks WHERE {VECTOR_ELIGIBLE}"
SELECT_ALL_VECTORS: Final = f"""SELECT c.chunk, v.vec FROM chunks c
    JOIN (SELECT hash, any_value(vec) AS vec FROM vectors GROUP BY hash) v USING (hash)
    WHERE c.chunk <= ? AND {VECTOR_ELIGIBLE.replace("role", "c.role").replace("kind", "c.kind")}"""
SELECT_DROPPED_CHUNKS: Final = "SELECT chunk FROM chunks WHERE sess IN (SELECT sess FROM b_drop)"

# Each scanner process re-sends the vocabulary it meets; duplicates are dropped when idle.
COUNT_VOCAB: Final = "SELECT count(*) FROM vocab_log"
DEDUPE_VOCAB: Final = """DELETE FROM vocab_log WHERE rowid IN (
    SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY term ORDER BY rowid) AS n FROM vocab_log)
    WHERE n > 1)"""

# Small statements of the writer and its helpers.
SET_NEXT_SEGMENT: Final = "UPDATE meta SET next_segment = ?"
RAISE_NEXT_SEGMENT: Final = "UPDATE meta SET next_segment = greatest(next_segment, ?)"
CREATE_STAGING: Final = "CREATE OR REPLACE TABLE {staging} AS {union}"
COUNT_META: Final = "SELECT count(*) FROM meta"
SELECT_IDENTITY: Final = "SELECT identity FROM meta"
LIST_TABLES: Final = "SELECT table_name FROM duckdb_tables() ORDER BY table_name"
# Reading a whole table back: hashing every column makes DuckDB read (and checksum) each block;
# a count would be answered from metadata.
READ_EVERY_COLUMN: Final = 'SELECT max(hash(COLUMNS(*))) FROM "{table}"'
# Rows of an unfinished commit: ids at or past the counter a commit advances (indexer/store.py).
COUNT_UNFINISHED: Final = "SELECT count(*) FROM {table} WHERE {col} >= ?"
DELETE_UNFINISHED: Final = "DELETE FROM {table} WHERE {col} >= ?"

# The ART indexes against their tables (indexer/integrity.py).
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
INSERT_REPAIR: Final = "INSERT INTO repairs VALUES (?, ?, ?, ?)"
COUNT_REPAIRS: Final = "SELECT count(*) FROM repairs"
SELECT_REPAIRS: Final = "SELECT at_ms, kind, what, n FROM repairs ORDER BY at_ms DESC LIMIT ?"
COUNT_EXPIRED_FILES: Final = "SELECT count(*) FROM files WHERE expired"
DELETE_ALL_VECTORS: Final = "DELETE FROM vectors"

# Re-indexing after a tokenizer change (``reindex_if_stale``). The postings, the vocabulary and
# the chunk lengths (BM25's dl) hold terms cut by the old tokenizer; sessions and files are what
# was read with it, and without their rows the next full pass reads every transcript again.
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
