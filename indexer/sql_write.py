"""The SQL of the indexer's writes, as named constants: what a commit changes and what it reads to decide.

The writer's batches (files, sessions, chunks, postings, titles, vocabulary), the meta row's
counters, the segment registry's rows as segments rotate, retention, the indexer's observations, and
the semantic vectors (the embedding worker's reads and the writer's commits of its vectors); with
the transaction statements every write goes through (indexer/store.py ``transaction``). The other
statements live by purpose too: the tables and migrations in ``indexer/schema.py``, maintenance in
``indexer/sql_maint.py``, the read side's in ``query/sql.py``; tests/unit/test_structure.py fails on a
statement written anywhere else.
"""

from __future__ import annotations

from typing import Final

from aivault.protocol import Kind, Role

# --- transactions -------------------------------------------------------------------------------
# Every write transaction of the process (indexer/store.py transaction, migrate), so that its
# WriteFence sees each one begin and end.
BEGIN: Final = "BEGIN"
COMMIT: Final = "COMMIT"
ROLLBACK: Final = "ROLLBACK"

# --- the meta row's counters and the segment registry --------------------------------------------
UPDATE_META: Final = """UPDATE meta SET generation = ?, next_file = ?, next_sess = ?, next_chunk = ?,
    next_segment = ?, n_chunks = ?, sum_dl = ?"""
SELECT_SEGMENTS: Final = "SELECT name, state FROM segments ORDER BY created_at, name"
INSERT_SEGMENT_ROW: Final = "INSERT INTO segments VALUES (?, ?, ?)"
# A full active segment is frozen and a new one begins (indexer/segments.py freeze).
SET_SEGMENT_STATE: Final = "UPDATE segments SET state = ? WHERE name = ?"
SET_NEXT_SEGMENT: Final = "UPDATE meta SET next_segment = ?"

# --- what the writer knows of the files (indexer/writer.py) -------------------------------------
SELECT_FILES_SNAPSHOT: Final = """SELECT path, agent, dev, ino, size, mtime_ns, "offset", head_len, head_hash, present,
    expired, coalesce(mode, 'lines') FROM files ORDER BY path"""
SELECT_FILES_CACHE: Final = """SELECT path, file_id, sess, "offset", present, malformed, oversized, expired, skips
    FROM files"""
SELECT_STATES: Final = "SELECT path, state FROM files WHERE path IN (SELECT path FROM b_paths)"
SELECT_TITLES: Final = "SELECT agent, session_id, title FROM titles"

# --- batch application (indexer/writer.py) ------------------------------------------------------
# ``b_*`` names are Arrow tables registered per batch.
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
SELECT_DROPPED_CHUNKS: Final = "SELECT chunk FROM chunks WHERE sess IN (SELECT sess FROM b_drop)"
DELETE_CHUNKS_OF: Final = "DELETE FROM chunks WHERE sess IN (SELECT sess FROM b_drop)"
DELETE_SESSIONS_OF: Final = "DELETE FROM sessions WHERE sess IN (SELECT sess FROM b_drop)"
MARK_GONE_FILES: Final = "UPDATE files SET present = false WHERE path IN (SELECT path FROM b_gone)"
MARK_GONE_SESSIONS: Final = """UPDATE sessions SET present = false
    WHERE file_id IN (SELECT file_id FROM files WHERE path IN (SELECT path FROM b_gone))"""
DELETE_TITLES: Final = """DELETE FROM titles WHERE (agent, session_id) IN (SELECT agent, session_id FROM b_titles)"""
INSERT_TITLES: Final = "INSERT INTO titles SELECT agent, session_id, title FROM b_titles"
INSERT_VOCAB: Final = "INSERT INTO vocab_log SELECT term FROM b_vocab"

# --- observations: the indexer's last, for a process without a running indexer ------------------
DELETE_OBSERVATIONS: Final = "DELETE FROM observations"
INSERT_OBSERVATION: Final = "INSERT INTO observations VALUES (?, ?)"
SELECT_OBSERVATION: Final = "SELECT value FROM observations WHERE key = ?"

# --- retention (indexer/writer.py: Writer.sweep): small transactions, oldest sessions first -----
SELECT_EXPIRED: Final = """SELECT sess, file_id FROM sessions WHERE updated_at < ? ORDER BY updated_at, sess LIMIT ?"""
EXPIRE_FILES: Final = "UPDATE files SET expired = true WHERE file_id IN (SELECT file_id FROM b_drop)"
COUNT_EXPIRED_FILES: Final = "SELECT count(*) FROM files WHERE expired"
FORGET_EXPIRED_FILES: Final = "DELETE FROM files WHERE expired"

# --- semantic vectors (indexer/semantic.py, indexer/vector_service.py) ---------------------------
# Eligible: user and assistant text and thinking; tool calls and results are not embedded (see
# docs/protocol.md §4).
VECTOR_ELIGIBLE: Final = (f"role IN ({Role.USER:d}, {Role.ASSISTANT:d}) "
                          f"AND kind IN ({Kind.TEXT:d}, {Kind.THINKING:d})")
SELECT_VECTOR_STATE: Final = "SELECT fingerprint, watermark, epoch FROM vector_state"
INSERT_VECTOR_STATE: Final = "INSERT INTO vector_state VALUES (?, 0, 0)"
UPDATE_VECTOR_STATE: Final = "UPDATE vector_state SET fingerprint = ?, watermark = ?, epoch = ?"
# The embedding worker reads in a snapshot of its own, ended by ROLLBACK (it writes nothing there:
# its vectors are committed by the writer).
BEGIN_SNAPSHOT: Final = "BEGIN TRANSACTION"
SELECT_TO_EMBED: Final = f"""SELECT chunk, hash, text FROM chunks WHERE chunk > ? AND {VECTOR_ELIGIBLE}
    ORDER BY chunk LIMIT ?"""
# Vectors already stored for a read batch's text hashes (registered as ``b_hashes``): equal text is
# embedded once.
SELECT_KNOWN_VECTORS: Final = """SELECT hash, any_value(vec) FROM vectors
                            WHERE hash IN (SELECT hash FROM b_hashes) GROUP BY hash"""
INSERT_VECTORS: Final = "INSERT INTO vectors SELECT hash, vec FROM b_vectors"
DELETE_ALL_VECTORS: Final = "DELETE FROM vectors"
COUNT_ELIGIBLE: Final = f"SELECT count(*), count(*) FILTER (WHERE chunk <= ?) FROM chunks WHERE {VECTOR_ELIGIBLE}"
# Every stored vector of the chunks at or below a watermark: the vector index rebuilt without embedding.
SELECT_ALL_VECTORS: Final = f"""SELECT c.chunk, v.vec FROM chunks c
    JOIN (SELECT hash, any_value(vec) AS vec FROM vectors GROUP BY hash) v USING (hash)
    WHERE c.chunk <= ? AND {VECTOR_ELIGIBLE.replace("role", "c.role").replace("kind", "c.kind")}"""
