"""Applying one scanner batch in one DuckDB transaction.

The file offsets a batch advances are committed in the same transaction as its rows, so a
crash of either process loses at most uncommitted work, which the scanner re-sends. A batch
part must start exactly at the committed offset of its file (or at 0 for a file read
afresh): anything else is refused (NACK) and the scanner reloads the committed state, so a
re-sent or reordered batch can never duplicate a message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from aivault import log
from aivault.indexer import segments as seg_mod
from aivault.indexer import sql_maint, sql_write
from aivault.indexer.batch import (
    BatchPlan,
    BatchTables,
    FileEntry,
    batch_tables,
    load_skips,
    plan_batch,
    session_sig,
)
from aivault.indexer.duck import one
from aivault.indexer.segments import MergePlan, SegmentLock, SegmentSet
from aivault.indexer.store import Meta, transaction
from aivault.ingest import Batch, BatchPayload, FileState, decode_batch

_log = log.get("indexer.writer")



@dataclass(frozen=True, slots=True)
class VectorState:
    fingerprint: str
    watermark: int
    epoch: int


@dataclass(slots=True)
class Applied:
    generation: int
    advanced: bool
    messages: int
    chunks: int
    postings: int


class Writer:
    """The single writer of the database (one thread)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, meta: Meta, lock: SegmentLock) -> None:
        self.con = con
        self.lock = lock
        self.files: dict[str, FileEntry] = {}
        for path, file_id, sess, offset, present, malformed, oversized, expired, skips in \
                con.execute(sql_write.SELECT_FILES_CACHE).fetchall():
            self.files[path] = FileEntry(int(file_id), int(sess), int(offset), bool(present), int(malformed),
                                         int(oversized), bool(expired), load_skips(skips))
        self.sess_sig: dict[int, bytes] = {}
        self.titles: dict[tuple[str, str], str] = {(str(a), str(s)): str(t)
                                                   for a, s, t in con.execute(sql_write.SELECT_TITLES).fetchall()}
        row = one(con, sql_write.SELECT_VECTOR_STATE)
        self.vstate: VectorState | None = VectorState(str(row[0]), int(row[1]), int(row[2])) if row else None
        # Chunk ids deleted since the vector index last took them out (it must drop them too).
        self.dropped_chunks: list[np.ndarray] = []
        self._vocab_after_dedupe = 0
        self.segments, next_segment = SegmentSet.load(con, meta.next_segment)
        self.meta = meta.advanced(next_segment=next_segment)

    # --- snapshot for the scanner -------------------------------------------------------------
    def snapshot(self) -> list[FileState]:
        """Every file's committed state, for the scanners' STATE pages."""
        return [FileState(*r) for r in self.con.execute(sql_write.SELECT_FILES_SNAPSHOT).fetchall()]

    def states(self, paths: list[str]) -> dict[str, bytes | None]:
        self.con.register("b_paths", pa.table({"path": pa.array(paths, pa.string())}))
        try:
            return {p: s for p, s in self.con.execute(sql_write.SELECT_STATES).fetchall()}
        finally:
            self.con.unregister("b_paths")

    # --- batches ------------------------------------------------------------------------------
    def apply(self, header: Batch, frames: list[bytes]) -> Applied:
        """Commit one batch, or raise Refused (it does not continue the committed state) or
        ProtocolError (its payload disagrees with its header). The header was checked against its
        record where it was decoded (aivault/codec.py check_header). Stages: decode the payload, plan
        the file parts against the committed offsets, build the Arrow tables, commit them in one
        transaction, then move the in-memory view."""
        payload = decode_batch(header, frames)
        plan = plan_batch(header, payload, self.files, self.sess_sig, self.meta, self.titles)
        tables = batch_tables(plan, payload, self.meta.next_chunk)
        new_meta, dropped_ids = self._commit(plan, tables, payload)
        self._advance(plan, new_meta, dropped_ids)
        return Applied(new_meta.generation, plan.changed, header["messages"], plan.n_chunks,
                       len(payload.p_term))

    def _commit(self, plan: BatchPlan, tables: BatchTables, payload: BatchPayload) -> tuple[Meta, np.ndarray]:
        """Everything the batch changes, in one transaction: its rows, the files' offsets and parser
        states, and the meta counters (whose ids fence an unfinished commit: indexer/store.py)."""
        con = self.con
        meta = self.meta
        segment = self.segments.active.name
        try:
            with transaction(con):
                for name, table in tables.lists.items():
                    con.register(name, table)
                dropped_chunks = dropped_dl = 0
                dropped_ids = np.zeros(0, np.int64)
                if plan.drop_sess:
                    dropped_ids = np.asarray([r[0] for r in con.execute(sql_write.SELECT_DROPPED_CHUNKS).fetchall()],
                                             np.int64)
                    totals = one(con, sql_write.CHUNK_TOTALS_OF)
                    dropped_chunks, dropped_dl = (int(totals[0]), int(totals[1])) if totals else (0, 0)
                    con.execute(sql_write.DELETE_CHUNKS_OF)
                    con.execute(sql_write.DELETE_SESSIONS_OF)
                for name, table in tables.rows.items():
                    con.register(name, table)
                if plan.n_chunks:
                    con.execute(sql_write.INSERT_CHUNKS)
                if len(payload.p_term):
                    con.execute(sql_write.INSERT_POSTINGS.format(segment=segment))
                if plan.file_rows:
                    con.execute(sql_write.DELETE_FILES)
                    con.execute(sql_write.INSERT_FILES)
                if plan.sess_rows:
                    con.execute(sql_write.DELETE_SESSIONS_IN_BATCH)
                    con.execute(sql_write.INSERT_SESSIONS)
                if plan.gone:
                    con.execute(sql_write.MARK_GONE_SESSIONS)
                    con.execute(sql_write.MARK_GONE_FILES)
                if plan.titles:
                    con.execute(sql_write.DELETE_TITLES)
                    con.execute(sql_write.INSERT_TITLES)
                if payload.vocab:
                    con.execute(sql_write.INSERT_VOCAB)
                new_meta = meta.advanced(
                    generation=meta.generation + (1 if plan.changed else 0),
                    next_file=plan.next_file,
                    next_sess=plan.next_sess,
                    next_chunk=meta.next_chunk + plan.n_chunks,
                    n_chunks=meta.n_chunks + plan.n_chunks - dropped_chunks,
                    sum_dl=meta.sum_dl + tables.new_dl - dropped_dl,
                )
                self._write_meta(new_meta)
                vstate = self._bump_vector_epoch() if len(dropped_ids) else None
        finally:
            for name in (*tables.rows, *tables.lists):
                con.unregister(name)
        if vstate is not None:
            self.vstate = vstate
            self.dropped_chunks.append(dropped_ids)
        return new_meta, dropped_ids

    def _advance(self, plan: BatchPlan, new_meta: Meta, dropped_ids: np.ndarray) -> None:
        """Committed: only now does the in-memory view move."""
        self.meta = new_meta
        for path in plan.removed:
            self.files.pop(path, None)
        self.files.update(plan.pending)
        for path in plan.gone:
            self.files[path].present = False
            self.sess_sig.pop(self.files[path].sess, None)
        for sess in plan.drop_sess:
            self.sess_sig.pop(sess, None)
        for sess, row in plan.sess_rows.items():
            self.sess_sig[sess] = session_sig(row)
        for agent, session_id, title in plan.titles:
            self.titles[(agent, session_id)] = title
        self.segments.active.rows += plan.n_postings

    def _write_meta(self, m: Meta) -> None:
        self.con.execute(sql_write.UPDATE_META, [m.generation, m.next_file, m.next_sess, m.next_chunk, m.next_segment,
                                         m.n_chunks, m.sum_dl])

    def sweep(self, cutoff_ms: int, *, batch: int = 200, should_stop: Callable[[], bool] | None = None) -> int:
        """Delete sessions last updated before ``cutoff_ms``, ``batch`` sessions per transaction.

        Each transaction removes the sessions and their chunks, marks their files expired (so an
        unchanged file is not read again) and advances the generation. Interrupting between
        transactions loses nothing; the next sweep continues. Returns the sessions removed.
        """
        removed = 0
        while not (should_stop and should_stop()):
            rows = self.con.execute(sql_write.SELECT_EXPIRED, [cutoff_ms, batch]).fetchall()
            if not rows:
                break
            sess = [int(r[0]) for r in rows]
            file_ids = [int(r[1]) for r in rows]
            con = self.con
            try:
                with transaction(con):
                    con.register("b_drop", pa.table({"sess": pa.array(sess, pa.int32()),
                                                      "file_id": pa.array(file_ids, pa.int32())}))
                    dropped = np.asarray([r[0] for r in con.execute(sql_write.SELECT_DROPPED_CHUNKS).fetchall()],
                                         np.int64)
                    totals = one(con, sql_write.CHUNK_TOTALS_OF)
                    n, dl = (int(totals[0]), int(totals[1])) if totals else (0, 0)
                    con.execute(sql_write.DELETE_CHUNKS_OF)
                    con.execute(sql_write.DELETE_SESSIONS_OF)
                    con.execute(sql_write.EXPIRE_FILES)
                    vstate = self._bump_vector_epoch() if len(dropped) else None
                    meta = self.meta.advanced(generation=self.meta.generation + 1, n_chunks=self.meta.n_chunks - n,
                                              sum_dl=self.meta.sum_dl - dl)
                    self._write_meta(meta)
            finally:
                con.unregister("b_drop")
            self.meta = meta
            if vstate is not None:
                self.vstate = vstate
                self.dropped_chunks.append(dropped)
            gone = set(file_ids)
            for entry in self.files.values():
                if entry.file_id in gone:
                    entry.expired = True
            for s in sess:
                self.sess_sig.pop(s, None)
            removed += len(sess)
        return removed

    def forget_expired(self) -> int:
        """Drop the rows of expired files so the next full pass reads them again (retention changed)."""
        row = one(self.con, sql_write.COUNT_EXPIRED_FILES)
        self.con.execute(sql_write.FORGET_EXPIRED_FILES)
        for path in [p for p, e in self.files.items() if e.expired]:
            del self.files[path]
        return int(row[0]) if row else 0

    # --- vectors (indexer/semantic.py) -----------------------------------------------------------
    def _bump_vector_epoch(self) -> VectorState | None:
        """Inside the caller's transaction: the searchable vector set changed (chunks went away)."""
        if self.vstate is None:
            return None
        v = VectorState(self.vstate.fingerprint, self.vstate.watermark, self.vstate.epoch + 1)
        self.con.execute(sql_write.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
        return v

    def align_vectors(self, fingerprint: str) -> VectorState:
        """Make the stored vectors belong to ``fingerprint``'s model, dropping them if they do not."""
        if self.vstate is not None and self.vstate.fingerprint == fingerprint:
            return self.vstate
        con = self.con
        with transaction(con):
            if self.vstate is None:
                con.execute(sql_write.INSERT_VECTOR_STATE, [fingerprint])
                v = VectorState(fingerprint, 0, 0)
            else:
                _log.warning("embedding model changed: all vectors are rebuilt", old=self.vstate.fingerprint,
                             new=fingerprint)
                con.execute(sql_write.DELETE_ALL_VECTORS)
                v = VectorState(fingerprint, 0, self.vstate.epoch + 1)
                con.execute(sql_write.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
                meta = self.meta.advanced(generation=self.meta.generation + 1)
                self._write_meta(meta)
        if self.vstate is not None:
            self.meta = self.meta.advanced(generation=self.meta.generation + 1)
        self.vstate = v
        return v

    def publish_vectors(self, hashes: list[int], blobs: list[bytes], watermark: int) -> VectorState:
        """Commit new vectors and the watermark they complete; the generation advances (results change)."""
        assert self.vstate is not None, "align_vectors first"
        con = self.con
        v = VectorState(self.vstate.fingerprint, watermark, self.vstate.epoch + 1)
        meta = self.meta.advanced(generation=self.meta.generation + 1)
        try:
            with transaction(con):
                con.register("b_vectors", pa.table({"hash": pa.array(hashes, pa.int64()),
                                                    "vec": pa.array(blobs, pa.binary())}))
                if hashes:
                    con.execute(sql_write.INSERT_VECTORS)
                con.execute(sql_write.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
                self._write_meta(meta)
        finally:
            con.unregister("b_vectors")
        self.meta = meta
        self.vstate = v
        return v

    def dedupe_vocab(self) -> int:
        """Drop repeated vocabulary rows (typo repair reads this table); returns the rows removed."""
        row = one(self.con, sql_maint.COUNT_VOCAB)
        before = int(row[0]) if row else 0
        if before <= self._vocab_after_dedupe * 2 + 10_000:
            return 0
        with transaction(self.con):
            self.con.execute(sql_maint.DEDUPE_VOCAB)
        row = one(self.con, sql_maint.COUNT_VOCAB)
        self._vocab_after_dedupe = int(row[0]) if row else 0
        return before - self._vocab_after_dedupe

    def take_dropped_chunks(self) -> np.ndarray:
        out = np.concatenate(self.dropped_chunks) if self.dropped_chunks else np.zeros(0, np.int64)
        self.dropped_chunks = []
        return out

    def save_observations(self, values: dict[str, str]) -> None:
        """Persist the indexer's last observations (they change no search result)."""
        with transaction(self.con):
            self.con.execute(sql_write.DELETE_OBSERVATIONS)
            for k, v in values.items():
                self.con.execute(sql_write.INSERT_OBSERVATION, [k, v])

    # --- segment upkeep (called between batches) ----------------------------------------------
    def maybe_freeze(self, force: bool = False) -> bool:
        active = self.segments.active
        if active.rows >= seg_mod.FREEZE_ROWS or (force and active.rows > 0):
            nxt = self.segments.freeze(self.con, self.meta.next_segment)
            self.meta = self.meta.advanced(next_segment=nxt)
            return True
        return False

    def plan_merge(self, *, compact: str | None = None, with_active: bool = False) -> MergePlan | None:
        """The next merge (SegmentSet.plan); ``with_active``: a compaction ``all`` that takes the
        active segment as it stands, for a reclaim's copy to run (SegmentSet.plan_all_with_active)."""
        avgdl = self.meta.sum_dl / self.meta.n_chunks if self.meta.n_chunks else 1.0
        if with_active:
            plan, nxt = self.segments.plan_all_with_active(self.meta.next_segment, avgdl)
        else:
            plan, nxt = self.segments.plan(self.meta.next_segment, avgdl, compact=compact)
        self.meta = self.meta.advanced(next_segment=nxt)
        return plan

    def finish_merge(self, plan: MergePlan, rows: int) -> None:
        """Register the merged segment (raises duckdb.Error with nothing registered if that fails),
        then drop its inputs; inputs that cannot be dropped now stay listed for the next merge."""
        self.segments.register(self.con, plan, rows, self.meta.next_segment)
        try:
            self.segments.drop_retired(self.con, self.lock)
        except duckdb.Error as exc:
            _log.warning("retired segments not dropped yet; the next merge drops them", error=str(exc))
