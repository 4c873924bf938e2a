"""The scanner <-> indexer ingest protocol (docs/protocol.md §2): the message kinds, one typed record per
header, the flow limits, the frames, and the check every header gets where it is decoded.

Only the scanner and the indexer load this module; the thin client (aivault/thin/) never does, so it
is written with ordinary idioms. The records are TypedDicts and NamedTuples because they are what
travels: a header is the map its record names, a row (FileState, Title) the array of its fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypedDict

from aivault.codec import check_version, packb, unpackb
from aivault.errors import HeaderInvalid, ProtocolError
from aivault.protocol import PROTOCOL_VERSION

if TYPE_CHECKING:
    import numpy as np

_MAX_HEADER_BYTES = 1 * 1024 * 1024


# --- scanner <-> indexer ingest ---------------------------------------------------------
INGEST_MAGIC: Final = b"AIVI1"

# scanner -> indexer
K_HELLO: Final = b"HELLO"
K_BATCH: Final = b"BATCH"
K_PROGRESS: Final = b"PROGRESS"
K_PASS_DONE: Final = b"PASS_DONE"
K_GET_STATES: Final = b"GET_STATES"
# indexer -> scanner
K_STATE: Final = b"STATE"
K_ACK: Final = b"ACK"
K_NACK: Final = b"NACK"
K_RECONCILE: Final = b"RECONCILE"
K_STOP: Final = b"STOP"
K_PING: Final = b"PING"

SCANNER_KINDS: Final = (K_HELLO, K_BATCH, K_PROGRESS, K_PASS_DONE, K_GET_STATES)
INDEXER_KINDS: Final = (K_STATE, K_ACK, K_NACK, K_RECONCILE, K_STOP, K_PING)


# --- the headers, one typed record per message (docs/protocol.md §2.2) ----------------------------
# Every header also carries ``v`` (PROTOCOL_VERSION), added by encode_ingest below and
# checked by decode_ingest: a peer of another version is a clear ``protocol-version`` error.
class Hello(TypedDict):
    req: int
    protocol: int
    pid: int
    shard: int
    shards: int
    roots: list[list[str]]
    token: str  # the one the indexer gave this scanner on its command line


class FileState(NamedTuple):
    """What the indexer has committed of one transcript file, as a STATE page lists it (an array on the
    wire, in this order): the scanner compares the file on disk with it to know what to read."""

    path: str
    agent: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int  # read up to here
    head_len: int
    head_hash: int  # of the first head_len bytes: a file rewritten under the same name differs here
    present: bool
    expired: bool  # its session fell out of retention
    mode: str  # lines | zst | whole (aivault/scanner/sources.py)


class State(TypedDict, total=False):
    req: int | None
    last: bool
    epoch: int
    files: list[FileState]
    states: dict[str, bytes | None]  # path -> parser state, answering GET_STATES


class GetStates(TypedDict):
    req: int
    paths: list[str]


class Reconcile(TypedDict):
    req: int
    full: bool
    cutoff_ms: int | None


class SessionMeta(TypedDict):
    agent: str
    session_id: str
    title: str | None
    cwd: str | None
    branch: str | None
    started_at: int | None
    updated_at: int | None
    message_count: int
    resume_command: str | None
    parent_session_id: str | None


# A file part is filled in while the scanner reads it; in a BATCH every part has closed and has these.
FILE_PART_SENT: Final = frozenset({"path", "agent", "reset", "dev", "ino", "size", "mtime_ns", "start", "end",
                                   "head_len", "head_hash", "state", "session"})


class FilePart(TypedDict, total=False):
    path: str
    agent: str
    mode: str  # lines | zst | whole (aivault/scanner/sources.py)
    reset: bool
    renamed_from: str | None
    dev: int
    ino: int
    size: int
    mtime_ns: int
    start: int
    # filled in when the part closes
    end: int
    head_len: int
    head_hash: int
    state: bytes
    session: SessionMeta
    malformed: int
    oversized: int
    skips: dict[str, int]


class Title(NamedTuple):
    """A session's title an agent keeps beside its transcript (an array on the wire)."""

    agent: str
    session_id: str
    title: str


class Batch(TypedDict):
    seq: int
    epoch: int
    files: list[FilePart]
    gone: list[str]
    titles: list[Title]
    chunks: int
    postings: int
    messages: int
    dropped_lines: int


class Ack(TypedDict):
    seq: int
    generation: int
    messages: int


class Nack(TypedDict, total=False):
    seq: int | None  # None: the indexer could not read which batch it was
    reason: str
    retry_after_s: float
    poison: bool  # sending the same again is pointless: set its files aside until they change


class Progress(TypedDict):
    req: int | None
    files_seen: int
    files_changed: int
    files_done: int
    bytes_total: int
    bytes_done: int
    messages: int


class PassDone(TypedDict):
    reqs: list[int | None]
    full: bool
    files_seen: int
    files_changed: int
    messages: int
    malformed: int
    oversized: int
    record_cut: int
    too_old: int
    failed: list[dict[str, str]]  # [{path, reason}]
    problems: list[dict[str, str]]  # [{root, reason}]
    roots: list[dict[str, Any]]  # full passes, first shard: [{root, agent, units, shaped, expects}]
    watch: dict[str, Any]  # the file watcher: {mode: events|polling, watched, polled: [{root, reason}], reason?}


class Ping(TypedDict):
    pass


class Stop(TypedDict, total=False):
    reason: str


# kind -> its header record (the protocol document lists the same fields; a test compares them)
INGEST_HEADERS: Final[dict[bytes, type]] = {
    K_HELLO: Hello, K_STATE: State, K_GET_STATES: GetStates, K_RECONCILE: Reconcile, K_BATCH: Batch,
    K_ACK: Ack, K_NACK: Nack, K_PROGRESS: Progress, K_PASS_DONE: PassDone, K_PING: Ping, K_STOP: Stop,
}

_SHARD_MIX = 1_000_003


def shard_of(dev: int, ino: int, shards: int) -> int:
    """The scanner shard owning a file (by device and inode, so a rename keeps its shard).

    Both sides of the ingest socket compute it: the indexer to send each scanner its files'
    state, the scanner to pick its files.
    """
    return (dev * _SHARD_MIX + ino) % shards


# --- liveness and flow control (units in the names) ----------------------------------------
# Batches the scanner may have sent but not seen acknowledged; with BATCH_MAX_BYTES this
# bounds the memory either side holds for a slow peer.
MAX_INFLIGHT_BATCHES: Final = 4
BATCH_MAX_MESSAGES: Final = 4000
BATCH_MAX_BYTES: Final = 4 * 1024 * 1024
# A one-shot bulk load (`aivault index` without a daemon; scanners started with --bulk) batches
# this many times more per commit: nobody is searching, and each commit's fixed cost (~100 ms: the
# transaction, the deletes in the files and sessions tables, registering the batch's tables) is
# paid a quarter as often. Measured at 1M messages, one run each on the same corpus: the pass
# 81 -> 58 s, the whole index 127 -> 105 s; peak RSS of a scanner 209 -> 340 MB, of the indexer
# 992 -> 1,037 MB (MAX_INFLIGHT_BATCHES of the larger batches in flight).
BULK_BATCH_SCALE: Final = 4
# A bulk load's scanners keep this many of their larger batches in flight, so the batches queued
# in the indexer weigh about what the daemon's do (two scanners x four 16-MB batches of text and
# postings held ~250 MB of the indexer's peak RSS); two still leave the indexer a batch waiting.
BULK_MAX_INFLIGHT_BATCHES: Final = 2
# A batch's msgpack header (file parts with parser states, gone paths, titles) stays under this,
# half the ingest header limit in aivault/codec.py.
BATCH_MAX_HEADER_BYTES: Final = 512 * 1024
# A scanner that has heard nothing from its indexer for this long assumes it is gone. The parent
# check notices a dead indexer at once; this is for one that lives on without its old socket (an
# indexer restarted inside the daemon). Generous: on an overloaded machine a commit or a segment
# freeze on the indexer thread held its pings for over 30 s at 1M messages, and the scanners quit
# in the middle of a pass (restarted, nothing lost, but the pass's counts were cut).
INDEXER_SILENCE_TIMEOUT_S: Final = 120.0
# The indexer pings an idle scanner this often so the scanner can tell "idle" from "gone".
HEARTBEAT_INTERVAL_S: Final = 2.0


# --- frames -------------------------------------------------------------------------------------


class IngestMessage(NamedTuple):
    kind: bytes
    header: dict[str, Any]
    payload: list[bytes]


def encode_ingest(kind: bytes, header: Mapping[str, Any], payload: list[bytes] | None = None) -> list[bytes]:
    return [INGEST_MAGIC, kind, packb({**header, "v": PROTOCOL_VERSION}), *(payload or [])]


# --- ingest headers checked against their records (INGEST_HEADERS above) -------------------
# A checker appends what is wrong with a value (where, and what) to ``problems``; built once per type, on the
# first decode (the CLI, which never decodes an ingest message, pays nothing).
_Check = Callable[[Any, str, list[str]], None]
_HEADER_CHECKS: dict[bytes, _Check] = {}
_MAX_PROBLEMS = 5


def _what(v: Any) -> str:
    return "nil" if v is None else type(v).__name__


def _checker(tp: Any) -> _Check:
    import types
    import typing

    if tp is Any:
        return lambda v, w, out: None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        alts = [_checker(a) for a in typing.get_args(tp)]
        names = " or ".join("nil" if a is type(None) else getattr(a, "__name__", str(a)) for a in typing.get_args(tp))

        def union(v: Any, w: str, out: list[str]) -> None:
            for alt in alts:
                trial: list[str] = []
                alt(v, w, trial)
                if not trial:
                    return
            out.append(f"{w} must be {names}, not {_what(v)}")
        return union
    if origin is list:
        each = _checker(typing.get_args(tp)[0])

        def array(v: Any, w: str, out: list[str]) -> None:
            if not isinstance(v, list):
                out.append(f"{w} must be an array, not {_what(v)}")
                return
            for i, x in enumerate(v):
                each(x, f"{w}[{i}]", out)
                if len(out) >= _MAX_PROBLEMS:
                    return
        return array
    if origin is dict:
        key_check, value_check = (_checker(a) for a in typing.get_args(tp))

        def mapping(v: Any, w: str, out: list[str]) -> None:
            if not isinstance(v, dict):
                out.append(f"{w} must be a map, not {_what(v)}")
                return
            for k, x in v.items():
                key_check(k, f"{w} key", out)
                value_check(x, f"{w}[{str(k)[:40]!r}]", out)
                if len(out) >= _MAX_PROBLEMS:
                    return
        return mapping
    if typing.is_typeddict(tp):
        fields = {k: _checker(t) for k, t in typing.get_type_hints(tp).items()}
        required = sorted(FILE_PART_SENT if tp is FilePart else tp.__required_keys__)

        def record(v: Any, w: str, out: list[str]) -> None:
            if not isinstance(v, dict):
                out.append(f"{w} must be a map, not {_what(v)}")
                return
            missing = [k for k in required if k not in v]
            if missing:
                out.append(f"{w} lacks {', '.join(repr(k) for k in missing)}")
            for k, check in fields.items():
                if k in v:
                    check(v[k], f"{w}.{k}", out)
        return record
    if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):  # a NamedTuple: an array
        checks = [(k, _checker(t)) for k, t in typing.get_type_hints(tp).items()]

        def row(v: Any, w: str, out: list[str]) -> None:
            if not isinstance(v, list | tuple) or len(v) != len(checks):
                out.append(f"{w} must be an array of {len(checks)} ({', '.join(k for k, _ in checks)})")
                return
            for (k, check), x in zip(checks, v, strict=True):
                check(x, f"{w}.{k}", out)
        return row
    if tp is int:  # msgpack keeps booleans apart from integers: a true is not a count
        return lambda v, w, out: None if isinstance(v, int) and not isinstance(v, bool) else out.append(
            f"{w} must be an integer, not {_what(v)}")
    if tp is float:
        return lambda v, w, out: None if isinstance(v, int | float) and not isinstance(v, bool) else out.append(
            f"{w} must be a number, not {_what(v)}")
    if tp is type(None):
        return lambda v, w, out: None if v is None else out.append(f"{w} must be nil, not {_what(v)}")
    if tp in (str, bool, bytes):
        return lambda v, w, out: None if isinstance(v, tp) else out.append(
            f"{w} must be {tp.__name__}, not {_what(v)}")
    raise TypeError(f"no checker for {tp!r}")  # a record above uses a type this does not know


def check_header(kind: bytes, header: dict[str, Any]) -> None:
    """HeaderInvalid unless ``header`` has the fields of its kind's record, each of its type
    (docs/protocol.md §2.2). Fields a record does not name are left alone: a newer peer may send more."""
    check = _HEADER_CHECKS.get(kind)
    if check is None:
        check = _HEADER_CHECKS[kind] = _checker(INGEST_HEADERS[kind])
    problems: list[str] = []
    check(header, "header", problems)
    if problems:
        seq = header.get("seq")
        raise HeaderInvalid(f"{kind.decode('ascii', 'replace')} {'; '.join(problems[:_MAX_PROBLEMS])}",
                            seq if isinstance(seq, int) and not isinstance(seq, bool) else None)


def decode_ingest(frames: list[bytes], allowed: tuple[bytes, ...]) -> IngestMessage:
    if len(frames) < 3 or frames[0] != INGEST_MAGIC:
        raise ProtocolError(f"expected an ingest message starting with {INGEST_MAGIC!r}")
    kind = bytes(frames[1])
    if kind not in allowed:
        raise ProtocolError(f"unexpected ingest message kind {kind[:32]!r}")
    header = unpackb(frames[2], max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(header, dict):
        raise ProtocolError("ingest header must be a map")
    check_version(header, f"an ingest {kind.decode('ascii', 'replace')} message")
    check_header(kind, header)
    return IngestMessage(kind=kind, header=header, payload=list(frames[3:]))


# --- BATCH payload: chunk columns as one msgpack frame, postings as raw little-endian arrays ---
_COLUMNS = ("file", "ord", "part", "role", "kind", "ts", "dl", "text")


class BatchPayload(NamedTuple):
    """A BATCH's bulk data: per-chunk columns, and postings (chunk index, term hash, tf) arrays."""

    columns: dict[str, list[Any]]
    p_chunk: np.ndarray  # uint32, indexes the chunk columns
    p_term: np.ndarray  # int64 term hashes
    p_tf: np.ndarray  # uint16
    vocab: list[str]  # terms this scanner had not sent before (typo repair)


def encode_batch(payload: BatchPayload) -> list[bytes]:
    """The five payload frames that follow a BATCH header (docs/protocol.md §2.2)."""
    return [
        packb(payload.columns),
        payload.p_chunk.astype("<u4").tobytes(),
        payload.p_term.astype("<i8").tobytes(),
        payload.p_tf.astype("<u2").tobytes(),
        packb(payload.vocab),
    ]


def decode_batch(header: Mapping[str, Any], frames: list[bytes]) -> BatchPayload:
    """The payload of a BATCH, checked against its header's counts (ProtocolError otherwise)."""
    import numpy as np  # only the indexer decodes batches; clients of this module need no numpy

    if len(frames) != 5:
        raise ProtocolError(f"a batch carries 5 payload frames, got {len(frames)}")
    n_chunks, n_post = int(header.get("chunks", 0)), int(header.get("postings", 0))
    columns = unpackb(frames[0])
    for i, width in ((1, 4), (2, 8), (3, 2)):
        if len(frames[i]) != width * n_post:
            raise ProtocolError("posting arrays disagree with the header's count")
    p_chunk = np.frombuffer(frames[1], dtype="<u4")
    p_term = np.frombuffer(frames[2], dtype="<i8")
    p_tf = np.frombuffer(frames[3], dtype="<u2")
    vocab = unpackb(frames[4])
    if not isinstance(columns, dict) or any(len(columns.get(c, ())) != n_chunks for c in _COLUMNS):
        raise ProtocolError("chunk columns disagree with the header's count")
    if not all(type(f) is int for f in columns["file"]) or not all(type(t) is str for t in columns["text"]):
        raise ProtocolError("a chunk's file must be an integer and its text a string")
    if n_post and int(p_chunk.max()) >= n_chunks:
        raise ProtocolError("a posting points past the batch's chunks")
    if not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab):
        raise ProtocolError("the vocabulary frame must be a list of strings")
    return BatchPayload(columns, p_chunk, p_term, p_tf, vocab)
