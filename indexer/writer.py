"""Applying one scanner batch in one DuckDB transaction.

The file offsets a batch advances are committed in the same transaction as its rows, so a
crash of either process loses at most uncommitted work, which the scanner re-sends. A batch
part must start exactly at the committed offset of its file (or at 0 for a file read
afresh): anything else is refused (NACK) and the scanner reloads the committed state, so a
re-sent or reordered batch can never duplicate a message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from aivault import log
from aivault.codec import packb, unpackb
from aivault.errors import ProtocolError
from aivault.indexer import schema as q
from aivault.indexer import segments as seg_mod
from aivault.indexer.segments import MergePlan, SegmentLock, SegmentSet
from aivault.indexer.store import Meta, now_ms, transaction
from aivault.protocol import CONVERSATION_ROLES, Kind

_log = log.get("indexer.writer")



class Refused(Exception):
    """A batch that does not continue the committed state (answered with NACK)."""


@dataclass(slots=True)
class FileEntry:
    file_id: int
    sess: int
    offset: int
    present: bool
    malformed: int = 0
    oversized: int = 0
    expired: bool = False
    skips: dict[str, int] = field(default_factory=dict)


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


# Distinct skip reasons kept per file: reasons are a small fixed vocabulary; the cap only guards
# the table against a peer sending arbitrary keys.
_SKIP_REASONS_MAX = 32


def _load_skips(text: object) -> dict[str, int]:
    try:
        raw = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, dict) else {}


def _add_skips(old: dict[str, int], new: object) -> dict[str, int]:
    """``old`` plus a part's skip counts; ProtocolError for counts that are not a reason -> int map."""
    if not new:
        return dict(old)
    if not isinstance(new, dict) or not all(isinstance(k, str) and isinstance(v, int) and v >= 0
                                            for k, v in new.items()):
        raise ProtocolError("a file part's 'skips' must map reasons to counts")
    out = dict(old)
    for k, v in new.items():
        if k in out or len(out) < _SKIP_REASONS_MAX:
            out[k] = out.get(k, 0) + v
    return out


def _sig(session: dict[str, Any]) -> bytes:
    return hashlib.blake2b(packb(session), digest_size=8).digest()


class Writer:
    """The single writer of the database (one thread)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, meta: Meta, lock: SegmentLock) -> None:
        self.con = con
        self.lock = lock
        self.files: dict[str, FileEntry] = {}
        for path, file_id, sess, offset, present, malformed, oversized, expired, skips in \
                con.execute(q.SELECT_FILES_CACHE).fetchall():
            self.files[path] = FileEntry(int(file_id), int(sess), int(offset), bool(present), int(malformed),
                                         int(oversized), bool(expired), _load_skips(skips))
        self.sess_sig: dict[int, bytes] = {}
        row = con.execute(q.SELECT_VECTOR_STATE).fetchone()
        self.vstate: VectorState | None = VectorState(str(row[0]), int(row[1]), int(row[2])) if row else None
        # Chunk ids deleted since the vector index last took them out (it must drop them too).
        self.dropped_chunks: list[np.ndarray] = []
        self._vocab_after_dedupe = 0
        self.segments, next_segment = SegmentSet.load(con, meta.next_segment)
        self.meta = meta.advanced(next_segment=next_segment)

    # --- snapshot for the scanner -------------------------------------------------------------
    def snapshot(self) -> list[list[Any]]:
        return [list(r) for r in self.con.execute(q.SELECT_FILES_SNAPSHOT).fetchall()]

    def states(self, paths: list[str]) -> dict[str, bytes | None]:
        self.con.register("b_paths", pa.table({"path": pa.array(paths, pa.string())}))
        try:
            return {p: s for p, s in self.con.execute(q.SELECT_STATES).fetchall()}
        finally:
            self.con.unregister("b_paths")

    # --- batches ------------------------------------------------------------------------------
    def apply(self, header: dict[str, Any], payload: list[bytes]) -> Applied:
        n_chunks = int(header.get("chunks", 0))
        n_post = int(header.get("postings", 0))
        if len(payload) != 5:
            raise ProtocolError(f"a batch carries 5 payload frames, got {len(payload)}")
        cols = unpackb(payload[0])
        p_chunk = np.frombuffer(payload[1], dtype="<u4")
        p_term = np.frombuffer(payload[2], dtype="<i8")
        p_tf = np.frombuffer(payload[3], dtype="<u2")
        vocab = unpackb(payload[4])
        parts: list[dict[str, Any]] = header.get("files") or []
        if not (len(p_chunk) == len(p_term) == len(p_tf) == n_post):
            raise ProtocolError("posting arrays disagree with the header's count")
        if not isinstance(cols, dict) or any(len(cols.get(c, ())) != n_chunks for c in
                                             ("file", "ord", "part", "role", "kind", "ts", "dl", "text")):
            raise ProtocolError("chunk columns disagree with the header's count")
        if n_post and int(p_chunk.max()) >= n_chunks:
            raise ProtocolError("a posting points past the batch's chunks")
        if n_chunks and max(cols["file"]) >= len(parts):
            raise ProtocolError("a chunk points past the batch's files")

        meta = self.meta
        next_file, next_sess = meta.next_file, meta.next_sess
        pending: dict[str, FileEntry] = {}
        removed: list[str] = []
        part_sess: list[int] = []
        file_rows: dict[int, dict[str, Any]] = {}
        sess_rows: dict[int, dict[str, Any]] = {}
        drop_sess: list[int] = []
        changed = False
        for part in parts:
            path = part["path"]
            cur = pending.get(path) or self.files.get(path)
            renamed = part.get("renamed_from")
            if renamed:
                cur = pending.get(renamed) or self.files.get(renamed)
                if cur is None:
                    raise Refused(f"{path}: renamed from {renamed}, which is not indexed")
                removed.append(renamed)
            if part["reset"]:
                if part["start"] != 0:
                    raise Refused(f"{path}: a re-read must start at offset 0")
                if cur is not None:
                    drop_sess.append(cur.sess)
                    file_id = cur.file_id
                else:
                    file_id, next_file = next_file, next_file + 1
                sess, next_sess = next_sess, next_sess + 1
                changed = True
            else:
                if cur is None:
                    raise Refused(f"{path}: not indexed yet, so a batch must read it from offset 0")
                if cur.expired:
                    raise Refused(f"{path}: its session expired under the retention policy; re-read it from 0")
                if cur.offset != part["start"]:
                    raise Refused(f"{path}: committed offset is {cur.offset}, batch starts at {part['start']}")
                file_id, sess = cur.file_id, cur.sess
            keep = cur is not None and not part["reset"]
            entry = FileEntry(file_id, sess, int(part["end"]), True,
                              (cur.malformed if keep and cur else 0) + int(part.get("malformed", 0)),
                              (cur.oversized if keep and cur else 0) + int(part.get("oversized", 0)),
                              skips=_add_skips(cur.skips if keep and cur else {}, part.get("skips")))
            pending[path] = entry
            part_sess.append(sess)
            s = part["session"]
            file_rows[file_id] = {
                "file_id": file_id, "path": path, "agent": part["agent"], "dev": part["dev"], "ino": part["ino"],
                "size": part["size"], "mtime_ns": part["mtime_ns"], "offset": part["end"],
                "head_len": part["head_len"], "head_hash": part["head_hash"], "state": part["state"],
                "sess": sess, "present": True, "malformed": entry.malformed,
                "oversized": entry.oversized, "indexed_at": now_ms(),
                "skips": json.dumps(entry.skips, sort_keys=True),
            }
            row = {
                "sess": sess, "file_id": file_id, "agent": s["agent"], "session_id": s["session_id"],
                "title": s.get("title"), "cwd": s.get("cwd"), "branch": s.get("branch"),
                "started_at": s.get("started_at"), "updated_at": s.get("updated_at"),
                "message_count": s.get("message_count", 0), "resume_command": s.get("resume_command"),
                "parent_session_id": s.get("parent_session_id"), "present": True,
            }
            sig = _sig(row)
            if self.sess_sig.get(sess) != sig:
                changed = True
            sess_rows[sess] = row
        gone = [p for p in header.get("gone") or [] if p in self.files and p not in pending]
        titles = header.get("titles") or []
        changed = changed or n_chunks > 0 or bool(gone) or bool(titles)

        # Per-chunk and per-posting columns, computed with numpy rather than per row.
        base = meta.next_chunk
        c_file = np.asarray(cols["file"], dtype=np.int64)
        c_sess = np.asarray(part_sess, dtype=np.int32)[c_file] if n_chunks else np.zeros(0, np.int32)
        c_role = np.asarray(cols["role"], dtype=np.uint8)
        c_kind = np.asarray(cols["kind"], dtype=np.uint8)
        c_dl = np.asarray(cols["dl"], dtype=np.uint16)
        c_conv = np.isin(c_role, [int(r) for r in CONVERSATION_ROLES]) & (c_kind == Kind.TEXT)
        b_chunks = pa.table({
            "chunk": pa.array(np.arange(base, base + n_chunks, dtype=np.int64)),
            "sess": pa.array(c_sess),
            "ord": pa.array(np.asarray(cols["ord"], dtype=np.int32)),
            "part": pa.array(np.asarray(cols["part"], dtype=np.int16)),
            "role": pa.array(c_role),
            "kind": pa.array(c_kind),
            "ts": pa.array(cols["ts"], type=pa.int64()),
            "dl": pa.array(c_dl),
            "text": pa.array(cols["text"], type=pa.string()),
        })
        idx = p_chunk.astype(np.int64)
        b_postings = pa.table({
            "term": pa.array(p_term),
            "chunk": pa.array(idx + base),
            "sess": pa.array(c_sess[idx]),
            "tf": pa.array(p_tf),
            "dl": pa.array(c_dl[idx]),
            "conv": pa.array(c_conv[idx]),
        })
        b_files = pa.Table.from_pylist(list(file_rows.values()), schema=_FILES_SCHEMA)
        b_sessions = pa.Table.from_pylist(list(sess_rows.values()), schema=_SESSIONS_SCHEMA)
        b_titles = pa.table({
            "agent": pa.array([t[0] for t in titles], pa.string()),
            "session_id": pa.array([t[1] for t in titles], pa.string()),
            "title": pa.array([t[2] for t in titles], pa.string()),
        })
        b_lists = {
            "b_drop": pa.table({"sess": pa.array(drop_sess, pa.int32())}),
            "b_gone": pa.table({"path": pa.array(gone, pa.string())}),
            "b_vocab": pa.table({"term": pa.array(vocab if isinstance(vocab, list) else [], pa.string())}),
        }
        new_dl = int(c_dl.sum(dtype=np.int64))

        con = self.con
        segment = self.segments.active.name
        try:
            with transaction(con):
                for name, table in b_lists.items():
                    con.register(name, table)
                dropped_chunks = dropped_dl = 0
                vstate: VectorState | None = None
                dropped_ids = np.zeros(0, np.int64)
                if drop_sess:
                    dropped_ids = np.asarray([r[0] for r in con.execute(q.SELECT_DROPPED_CHUNKS).fetchall()],
                                             np.int64)
                    totals = con.execute(q.CHUNK_TOTALS_OF).fetchone()
                    dropped_chunks, dropped_dl = (int(totals[0]), int(totals[1])) if totals else (0, 0)
                    con.execute(q.DELETE_CHUNKS_OF)
                    con.execute(q.DELETE_SESSIONS_OF)
                con.register("b_chunks", b_chunks)
                con.register("b_postings", b_postings)
                con.register("b_files", b_files)
                con.register("b_sessions", b_sessions)
                con.register("b_titles", b_titles)
                if n_chunks:
                    con.execute(q.INSERT_CHUNKS)
                if n_post:
                    con.execute(q.INSERT_POSTINGS.format(segment=segment))
                if file_rows:
                    con.execute(q.DELETE_FILES)
                    con.execute(q.INSERT_FILES)
                if sess_rows:
                    con.execute(q.DELETE_SESSIONS_IN_BATCH)
                    con.execute(q.INSERT_SESSIONS)
                if gone:
                    con.execute(q.MARK_GONE_SESSIONS)
                    con.execute(q.MARK_GONE_FILES)
                if titles:
                    con.execute(q.DELETE_TITLES)
                    con.execute(q.INSERT_TITLES)
                if vocab:
                    con.execute(q.INSERT_VOCAB)
                new_meta = meta.advanced(
                    generation=meta.generation + (1 if changed else 0),
                    next_file=next_file,
                    next_sess=next_sess,
                    next_chunk=base + n_chunks,
                    n_chunks=meta.n_chunks + n_chunks - dropped_chunks,
                    sum_dl=meta.sum_dl + new_dl - dropped_dl,
                )
                self._write_meta(new_meta)
                vstate = self._bump_vector_epoch() if len(dropped_ids) else None
        finally:
            for name in ("b_chunks", "b_postings", "b_files", "b_sessions", "b_titles", *b_lists):
                con.unregister(name)
        if vstate is not None:
            self.vstate = vstate
            self.dropped_chunks.append(dropped_ids)

        # Committed: only now does the in-memory view move.
        self.meta = new_meta
        for path in removed:
            self.files.pop(path, None)
        self.files.update(pending)
        for path in gone:
            self.files[path].present = False
            self.sess_sig.pop(self.files[path].sess, None)
        for sess in drop_sess:
            self.sess_sig.pop(sess, None)
        for sess, row in sess_rows.items():
            self.sess_sig[sess] = _sig(row)
        self.segments.active.rows += n_post
        return Applied(new_meta.generation, changed, int(header.get("messages", 0)), n_chunks, n_post)

    def _write_meta(self, m: Meta) -> None:
        self.con.execute(q.UPDATE_META, [m.generation, m.next_file, m.next_sess, m.next_chunk, m.next_segment,
                                         m.n_chunks, m.sum_dl])

    def sweep(self, cutoff_ms: int, *, batch: int = 200, should_stop: Callable[[], bool] | None = None) -> int:
        """Delete sessions last updated before ``cutoff_ms``, ``batch`` sessions per transaction.

        Each transaction removes the sessions and their chunks, marks their files expired (so an
        unchanged file is not read again) and advances the generation. Interrupting between
        transactions loses nothing; the next sweep continues. Returns the sessions removed.
        """
        removed = 0
        while not (should_stop and should_stop()):
            rows = self.con.execute(q.SELECT_EXPIRED, [cutoff_ms, batch]).fetchall()
            if not rows:
                break
            sess = [int(r[0]) for r in rows]
            file_ids = [int(r[1]) for r in rows]
            con = self.con
            try:
                with transaction(con):
                    con.register("b_drop", pa.table({"sess": pa.array(sess, pa.int32()),
                                                      "file_id": pa.array(file_ids, pa.int32())}))
                    dropped = np.asarray([r[0] for r in con.execute(q.SELECT_DROPPED_CHUNKS).fetchall()], np.int64)
                    totals = con.execute(q.CHUNK_TOTALS_OF).fetchone()
                    n, dl = (int(totals[0]), int(totals[1])) if totals else (0, 0)
                    con.execute(q.DELETE_CHUNKS_OF)
                    con.execute(q.DELETE_SESSIONS_OF)
                    con.execute(q.EXPIRE_FILES)
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
        row = self.con.execute("SELECT count(*) FROM files WHERE expired").fetchone()
        self.con.execute(q.FORGET_EXPIRED_FILES)
        for path in [p for p, e in self.files.items() if e.expired]:
            del self.files[path]
        return int(row[0]) if row else 0

    # --- vectors (indexer/semantic.py) -----------------------------------------------------------
    def _bump_vector_epoch(self) -> VectorState | None:
        """Inside the caller's transaction: the searchable vector set changed (chunks went away)."""
        if self.vstate is None:
            return None
        v = VectorState(self.vstate.fingerprint, self.vstate.watermark, self.vstate.epoch + 1)
        self.con.execute(q.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
        return v

    def align_vectors(self, fingerprint: str) -> VectorState:
        """Make the stored vectors belong to ``fingerprint``'s model, dropping them if they do not."""
        if self.vstate is not None and self.vstate.fingerprint == fingerprint:
            return self.vstate
        con = self.con
        with transaction(con):
            if self.vstate is None:
                con.execute(q.INSERT_VECTOR_STATE, [fingerprint])
                v = VectorState(fingerprint, 0, 0)
            else:
                _log.warning("embedding model changed: all vectors are rebuilt", old=self.vstate.fingerprint,
                             new=fingerprint)
                con.execute("DELETE FROM vectors")
                v = VectorState(fingerprint, 0, self.vstate.epoch + 1)
                con.execute(q.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
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
                    con.execute(q.INSERT_VECTORS)
                con.execute(q.UPDATE_VECTOR_STATE, [v.fingerprint, v.watermark, v.epoch])
                self._write_meta(meta)
        finally:
            con.unregister("b_vectors")
        self.meta = meta
        self.vstate = v
        return v

    def dedupe_vocab(self) -> int:
        """Drop repeated vocabulary rows (typo repair reads this table); returns the rows removed."""
        row = self.con.execute(q.COUNT_VOCAB).fetchone()
        before = int(row[0]) if row else 0
        if before <= self._vocab_after_dedupe * 2 + 10_000:
            return 0
        with transaction(self.con):
            self.con.execute(q.DEDUPE_VOCAB)
        row = self.con.execute(q.COUNT_VOCAB).fetchone()
        self._vocab_after_dedupe = int(row[0]) if row else 0
        return before - self._vocab_after_dedupe

    def take_dropped_chunks(self) -> np.ndarray:
        out = np.concatenate(self.dropped_chunks) if self.dropped_chunks else np.zeros(0, np.int64)
        self.dropped_chunks = []
        return out

    def save_observations(self, values: dict[str, str]) -> None:
        """Persist the indexer's last observations (they change no search result)."""
        with transaction(self.con):
            self.con.execute(q.DELETE_OBSERVATIONS)
            for k, v in values.items():
                self.con.execute(q.INSERT_OBSERVATION, [k, v])

    # --- segment upkeep (called between batches) ----------------------------------------------
    def maybe_freeze(self, force: bool = False) -> bool:
        active = self.segments.active
        if active.rows >= seg_mod.FREEZE_ROWS or (force and active.rows > 0):
            nxt = self.segments.freeze(self.con, self.meta.next_segment)
            self.meta = self.meta.advanced(next_segment=nxt)
            return True
        return False

    def plan_merge(self, *, compact: str | None = None) -> MergePlan | None:
        avgdl = self.meta.sum_dl / self.meta.n_chunks if self.meta.n_chunks else 1.0
        plan, nxt = self.segments.plan(self.meta.next_segment, avgdl, compact=compact)
        self.meta = self.meta.advanced(next_segment=nxt)
        return plan

    def finish_merge(self, plan: MergePlan, rows: int) -> None:
        self.segments.register(self.con, plan, rows, self.meta.next_segment)
        self.segments.drop_retired(self.con, self.lock)


_FILES_SCHEMA = pa.schema([
    ("file_id", pa.int32()), ("path", pa.string()), ("agent", pa.string()), ("dev", pa.uint64()),
    ("ino", pa.uint64()), ("size", pa.int64()), ("mtime_ns", pa.int64()), ("offset", pa.int64()),
    ("head_len", pa.int32()), ("head_hash", pa.int64()), ("state", pa.binary()), ("sess", pa.int32()),
    ("present", pa.bool_()), ("malformed", pa.int64()), ("oversized", pa.int64()), ("indexed_at", pa.int64()),
    ("skips", pa.string()),
])
_SESSIONS_SCHEMA = pa.schema([
    ("sess", pa.int32()), ("file_id", pa.int32()), ("agent", pa.string()), ("session_id", pa.string()),
    ("title", pa.string()), ("cwd", pa.string()), ("branch", pa.string()), ("started_at", pa.int64()),
    ("updated_at", pa.int64()), ("message_count", pa.int32()), ("resume_command", pa.string()),
    ("parent_session_id", pa.string()), ("present", pa.bool_()),
])
