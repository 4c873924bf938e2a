"""Planning one scanner batch before it is committed (indexer/writer.py commits it).

A batch part must continue its file exactly: start at the committed offset, or at 0 with
``reset`` (the file is read again and its old rows replaced). Anything else is ``Refused`` and the
scanner reloads the committed state, so a re-sent or reordered batch can never duplicate a
message. The plan is computed against the writer's in-memory view without touching it; the
Arrow tables are what DuckDB reads the batch's rows from, without a per-row Python loop.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from aivault.codec import packb
from aivault.errors import ProtocolError, Refused
from aivault.indexer.store import Meta, now_ms
from aivault.ingest import Batch, BatchPayload, FilePart, Title
from aivault.protocol import CONVERSATION_ROLES, Kind

# Distinct skip reasons kept per file: reasons are a small fixed vocabulary; the cap only guards
# the table against a peer sending arbitrary keys.
SKIP_REASONS_MAX = 32


@dataclass(slots=True)
class FileEntry:
    """What the writer remembers of an indexed file between batches."""

    file_id: int
    sess: int
    offset: int
    present: bool
    malformed: int = 0
    oversized: int = 0
    expired: bool = False
    skips: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class BatchPlan:
    """What committing the batch changes, decided before anything is written."""

    pending: dict[str, FileEntry] = field(default_factory=dict)  # path -> its entry after the commit
    removed: list[str] = field(default_factory=list)  # old paths of renamed files
    part_sess: list[int] = field(default_factory=list)  # each part's internal session id
    file_rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    sess_rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    drop_sess: list[int] = field(default_factory=list)  # sessions of files read again
    gone: list[str] = field(default_factory=list)
    titles: list[Title] = field(default_factory=list)
    next_file: int = 0
    next_sess: int = 0
    n_chunks: int = 0
    n_postings: int = 0
    changed: bool = False  # results change: the generation advances


@dataclass(frozen=True, slots=True)
class BatchTables:
    rows: dict[str, pa.Table]  # b_chunks, b_postings, b_files, b_sessions, b_titles
    lists: dict[str, pa.Table]  # b_drop, b_gone, b_vocab (needed before the row inserts)
    new_dl: int  # the batch's chunk lengths, for BM25's average


def load_skips(text: object) -> dict[str, int]:
    try:
        raw = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, dict) else {}


def add_skips(old: dict[str, int], new: object) -> dict[str, int]:
    """``old`` plus a part's skip counts; ProtocolError for counts that are not a reason -> int map."""
    if not new:
        return dict(old)
    if not isinstance(new, dict) or not all(isinstance(k, str) and isinstance(v, int) and v >= 0
                                            for k, v in new.items()):
        raise ProtocolError("a file part's 'skips' must map reasons to counts")
    out = dict(old)
    for k, v in new.items():
        if k in out or len(out) < SKIP_REASONS_MAX:
            out[k] = out.get(k, 0) + v
    return out


def session_sig(session: dict[str, Any]) -> bytes:
    """A fingerprint of a session row: an unchanged one needs no new generation."""
    return hashlib.blake2b(packb(session), digest_size=8).digest()


def plan_batch(header: Batch, payload: BatchPayload, files: dict[str, FileEntry],
               sess_sig: dict[int, bytes], meta: Meta, titles: dict[tuple[str, str], str] | None = None) -> BatchPlan:
    """Check every file part against the committed state and work out the rows to write.

    ``titles``: the stored titles; a title the batch repeats unchanged (a new scanner sends them
    all again) is not written and does not advance the generation."""
    parts = header["files"]
    n_chunks = len(payload.columns["text"])
    if n_chunks and max(payload.columns["file"]) >= len(parts):
        raise ProtocolError("a chunk points past the batch's files")
    plan = BatchPlan(next_file=meta.next_file, next_sess=meta.next_sess, n_chunks=n_chunks,
                     n_postings=len(payload.p_term))
    for part in parts:
        _plan_part(plan, part, files, sess_sig)
    plan.gone = [p for p in header["gone"] if p in files and p not in plan.pending]
    # One title per session: a later entry (a newer source) replaces an earlier one of the batch.
    plan.titles = [Title(*t) for t in {(t[0], t[1]): t for t in header["titles"]}.values()
                   if titles is None or titles.get((t[0], t[1])) != t[2]]
    plan.changed = plan.changed or n_chunks > 0 or bool(plan.gone) or bool(plan.titles)
    return plan


def _plan_part(plan: BatchPlan, part: FilePart, files: dict[str, FileEntry],
               sess_sig: dict[int, bytes]) -> None:
    path = part["path"]
    cur = plan.pending.get(path) or files.get(path)
    renamed = part.get("renamed_from")
    if renamed:
        before = plan.pending.get(renamed) or files.get(renamed)
        if before is not None:
            cur = before
            plan.removed.append(renamed)
        elif not part["reset"]:
            raise Refused(f"{path}: renamed from {renamed}, which is not indexed")
        # A file read from 0 names what it may replace only as a hint: nothing indexed, nothing to replace.
    if part["reset"]:
        if part["start"] != 0:
            raise Refused(f"{path}: a re-read must start at offset 0")
        if cur is not None:
            plan.drop_sess.append(cur.sess)
            file_id = cur.file_id
        else:
            file_id, plan.next_file = plan.next_file, plan.next_file + 1
        sess, plan.next_sess = plan.next_sess, plan.next_sess + 1
        plan.changed = True
    else:
        if cur is None:
            raise Refused(f"{path}: not indexed yet, so a batch must read it from offset 0")
        if cur.expired:
            raise Refused(f"{path}: its session expired under the retention policy; re-read it from 0")
        if cur.offset != part["start"]:
            raise Refused(f"{path}: committed offset is {cur.offset}, batch starts at {part['start']}")
        file_id, sess = cur.file_id, cur.sess
    keep = cur if cur is not None and not part["reset"] else None
    entry = FileEntry(file_id, sess, int(part["end"]), True,
                      (keep.malformed if keep else 0) + int(part.get("malformed", 0)),
                      (keep.oversized if keep else 0) + int(part.get("oversized", 0)),
                      skips=add_skips(keep.skips if keep else {}, part.get("skips")))
    plan.pending[path] = entry
    plan.part_sess.append(sess)
    s = part["session"]
    plan.file_rows[file_id] = {
        "file_id": file_id, "path": path, "agent": part["agent"], "dev": part["dev"], "ino": part["ino"],
        "size": part["size"], "mtime_ns": part["mtime_ns"], "offset": part["end"],
        "head_len": part["head_len"], "head_hash": part["head_hash"], "state": part["state"],
        "sess": sess, "present": True, "malformed": entry.malformed,
        "oversized": entry.oversized, "indexed_at": now_ms(),
        "skips": json.dumps(entry.skips, sort_keys=True),
        "mode": part.get("mode") or "lines",
    }
    row = {
        "sess": sess, "file_id": file_id, "agent": s["agent"], "session_id": s["session_id"],
        "title": s.get("title"), "cwd": s.get("cwd"), "branch": s.get("branch"),
        "started_at": s.get("started_at"), "updated_at": s.get("updated_at"),
        "message_count": s.get("message_count", 0), "resume_command": s.get("resume_command"),
        "parent_session_id": s.get("parent_session_id"), "present": True,
    }
    if sess_sig.get(sess) != session_sig(row):
        plan.changed = True
    plan.sess_rows[sess] = row


def batch_tables(plan: BatchPlan, payload: BatchPayload, base: int) -> BatchTables:
    """Per-chunk and per-posting columns, computed with numpy rather than per row; chunk ids
    continue from ``base`` (meta.next_chunk)."""
    cols, n_chunks = payload.columns, plan.n_chunks
    c_file = np.asarray(cols["file"], dtype=np.int64)
    c_sess = np.asarray(plan.part_sess, dtype=np.int32)[c_file] if n_chunks else np.zeros(0, np.int32)
    c_role = np.asarray(cols["role"], dtype=np.uint8)
    c_kind = np.asarray(cols["kind"], dtype=np.uint8)
    c_dl = np.asarray(cols["dl"], dtype=np.uint16)
    c_conv = np.isin(c_role, [int(r) for r in CONVERSATION_ROLES]) & (c_kind == Kind.TEXT)
    idx = payload.p_chunk.astype(np.int64)
    rows = {
        "b_chunks": pa.table({
            "chunk": pa.array(np.arange(base, base + n_chunks, dtype=np.int64)),
            "sess": pa.array(c_sess),
            "ord": pa.array(np.asarray(cols["ord"], dtype=np.int32)),
            "part": pa.array(np.asarray(cols["part"], dtype=np.int16)),
            "role": pa.array(c_role),
            "kind": pa.array(c_kind),
            "ts": pa.array(cols["ts"], type=pa.int64()),
            "dl": pa.array(c_dl),
            "text": pa.array(cols["text"], type=pa.string()),
        }),
        "b_postings": pa.table({
            "term": pa.array(payload.p_term),
            "chunk": pa.array(idx + base),
            "sess": pa.array(c_sess[idx]),
            "tf": pa.array(payload.p_tf),
            "dl": pa.array(c_dl[idx]),
            "conv": pa.array(c_conv[idx]),
        }),
        "b_files": pa.Table.from_pylist(list(plan.file_rows.values()), schema=FILES_SCHEMA),
        "b_sessions": pa.Table.from_pylist(list(plan.sess_rows.values()), schema=SESSIONS_SCHEMA),
        "b_titles": pa.table({
            "agent": pa.array([t[0] for t in plan.titles], pa.string()),
            "session_id": pa.array([t[1] for t in plan.titles], pa.string()),
            "title": pa.array([t[2] for t in plan.titles], pa.string()),
        }),
    }
    lists = {
        "b_drop": pa.table({"sess": pa.array(plan.drop_sess, pa.int32())}),
        "b_gone": pa.table({"path": pa.array(plan.gone, pa.string())}),
        "b_vocab": pa.table({"term": pa.array(payload.vocab, pa.string())}),
    }
    return BatchTables(rows, lists, int(c_dl.sum(dtype=np.int64)))


FILES_SCHEMA = pa.schema([
    ("file_id", pa.int32()), ("path", pa.string()), ("agent", pa.string()), ("dev", pa.uint64()),
    ("ino", pa.uint64()), ("size", pa.int64()), ("mtime_ns", pa.int64()), ("offset", pa.int64()),
    ("head_len", pa.int32()), ("head_hash", pa.int64()), ("state", pa.binary()), ("sess", pa.int32()),
    ("present", pa.bool_()), ("malformed", pa.int64()), ("oversized", pa.int64()), ("indexed_at", pa.int64()),
    ("skips", pa.string()),
    ("mode", pa.string()),
])
SESSIONS_SCHEMA = pa.schema([
    ("sess", pa.int32()), ("file_id", pa.int32()), ("agent", pa.string()), ("session_id", pa.string()),
    ("title", pa.string()), ("cwd", pa.string()), ("branch", pa.string()), ("started_at", pa.int64()),
    ("updated_at", pa.int64()), ("message_count", pa.int32()), ("resume_command", pa.string()),
    ("parent_session_id", pa.string()), ("present", pa.bool_()),
])
