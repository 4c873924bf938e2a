"""The one place that packs and unpacks frames (docs/protocol.md).

RPC messages (client <-> broker) are signed with HMAC-SHA256 under the data directory's key;
ingest messages (scanner <-> indexer) travel over a socket inside the ``0700`` data
directory and are not signed. Bulk ingest payloads (row columns, term arrays) are separate
raw frames, never nested inside the msgpack header.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack

if TYPE_CHECKING:
    import numpy as np

from aivault.errors import AuthenticationError, HeaderInvalid, InvalidRequest, ProtocolError, ProtocolVersionError
from aivault.protocol import (
    INGEST_MAGIC,
    PROTOCOL_VERSION,
    RPC_MAGIC,
    RPC_MAX_FRAME_BYTES,
    RPC_MAX_ID_CHARS,
    STREAM_MAX_FRAMES,
    STREAM_MAX_MESSAGE_BYTES,
    STREAM_PREAMBLE,
    STREAM_PREAMBLE_SEARCH_BYTES,
    ReplyHeader,
    RequestHeader,
)

_MAX_HEADER_BYTES = 1 * 1024 * 1024
# The broker's socket refuses bigger frames before reading them (ZMQ_MAXMSGSIZE); this check
# covers every other reader of these frames.
_MAX_BODY_BYTES = RPC_MAX_FRAME_BYTES


def packb(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def unpackb(data: bytes, *, max_bytes: int = _MAX_BODY_BYTES) -> Any:
    if len(data) > max_bytes:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds the {max_bytes}-byte limit")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"undecodable msgpack frame: {exc.__class__.__name__}") from exc


def _sign(key: bytes, header: bytes, body: bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    mac.update(header)
    mac.update(body)
    return mac.hexdigest().encode("ascii")


# The records below are NamedTuples (immutable values, equality, a hash) rather than frozen
# dataclasses, so that a client importing the codec does not import dataclasses and inspect.
class RpcRequest(NamedTuple):
    id: str
    method: str
    params: Any
    host: str | None = None


class RpcReply(NamedTuple):
    id: str
    ok: bool
    value: Any  # the result when ok, else {"code", "message"}


def encode_request(key: bytes, req: RpcRequest) -> list[bytes]:
    header = packb(RequestHeader(v=PROTOCOL_VERSION, id=req.id, method=req.method, host=req.host))
    body = packb(req.params)
    # Refused here rather than sent: the broker's socket drops the connection of a peer sending
    # a bigger frame, and the caller would only see a timeout.
    for frame in (header, body):
        if len(frame) > RPC_MAX_FRAME_BYTES:
            raise ProtocolError(f"a request frame of {len(frame)} bytes exceeds the {RPC_MAX_FRAME_BYTES}-byte limit")
    return [RPC_MAGIC, _sign(key, header, body), header, body]


def _check_version(header: dict[str, Any], what: str) -> None:
    v = header.get("v")
    if v != PROTOCOL_VERSION:
        raise ProtocolVersionError(f"{what} of protocol version {v!r}; this aivault speaks version {PROTOCOL_VERSION}. "
                                   "Run the same aivault version on both ends.")


def decode_request(key: bytes, frames: list[bytes]) -> RpcRequest:
    header, body = _check_rpc(key, frames)
    h = unpackb(header, max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("method"), str):
        raise ProtocolError("request header must be a map with string 'id' and 'method'")
    _check_version(h, "a request")
    if len(h["id"]) > RPC_MAX_ID_CHARS:
        raise InvalidRequest(f"request id of {len(h['id'])} characters; at most {RPC_MAX_ID_CHARS}")
    host = h.get("host")
    if host is not None and not isinstance(host, str):
        raise ProtocolError("request 'host' must be a string or absent")
    return RpcRequest(id=h["id"], method=h["method"], params=unpackb(body), host=host)


def encode_reply(key: bytes, rep: RpcReply) -> list[bytes]:
    header = packb(ReplyHeader(v=PROTOCOL_VERSION, id=rep.id, ok=rep.ok))
    body = packb(rep.value)
    return [RPC_MAGIC, _sign(key, header, body), header, body]


def decode_reply(key: bytes, frames: list[bytes]) -> RpcReply:
    header, body = _check_rpc(key, frames)
    h = unpackb(header, max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("ok"), bool):
        raise ProtocolError("reply header must be a map with string 'id' and bool 'ok'")
    _check_version(h, "a reply")
    return RpcReply(id=h["id"], ok=h["ok"], value=unpackb(body))


def peek_request_id(frames: list[bytes]) -> str | None:
    """Best-effort id of a request that failed to verify, so the error reply can name it."""
    try:
        h = unpackb(frames[2], max_bytes=_MAX_HEADER_BYTES)
        rid = h.get("id") if isinstance(h, dict) else None
        return rid if isinstance(rid, str) and len(rid) <= RPC_MAX_ID_CHARS else None
    except Exception:
        return None


def _check_rpc(key: bytes, frames: list[bytes]) -> tuple[bytes, bytes]:
    if len(frames) != 4 or frames[0] != RPC_MAGIC:
        raise ProtocolError(f"expected 4 frames starting with {RPC_MAGIC!r}, got {len(frames)} frame(s)")
    _, sig, header, body = frames
    if not hmac.compare_digest(sig, _sign(key, header, body)):
        raise AuthenticationError("message signature does not match this data directory's key")
    return header, body


# --- the relay stream: RPC messages over a byte stream (docs/protocol.md §5.1) -----------------
_U32 = 4


def encode_stream(frames: list[bytes]) -> bytes:
    """One message on a relay stream: its frame count (one byte), then each frame as a big-endian
    u32 length and its bytes."""
    if not 1 <= len(frames) <= STREAM_MAX_FRAMES:
        raise ProtocolError(f"a stream message has 1 to {STREAM_MAX_FRAMES} frames, not {len(frames)}")
    out = bytearray([len(frames)])
    for f in frames:
        out += len(f).to_bytes(_U32, "big")
        out += f
    if len(out) > STREAM_MAX_MESSAGE_BYTES:
        raise ProtocolError(f"a stream message of {len(out)} bytes exceeds the {STREAM_MAX_MESSAGE_BYTES}-byte limit")
    return bytes(out)


class StreamDecoder:
    """Messages out of a relay stream, fed in whatever pieces the pipe delivers.

    ``feed`` returns the messages completed so far. A stream that breaks the framing (a frame count
    outside 1..8, a frame or message over the limits) cannot be re-synchronized: ``feed`` raises
    ProtocolError as soon as the offending length is read, before any of its content is buffered, and
    the stream must be closed. With ``preamble``, bytes before ``STREAM_PREAMBLE`` are skipped (what a
    login shell printed) and kept, at most 4 KiB of them, in ``noise`` for error messages.
    """

    def __init__(self, *, preamble: bool = False) -> None:
        self._buf = bytearray()
        self._seeking = preamble
        self._skipped = 0
        self.noise = b""

    @property
    def started(self) -> bool:
        """Whether the preamble has been seen (always true for a decoder that does not look for one)."""
        return not self._seeking

    def feed(self, data: bytes) -> list[list[bytes]]:
        self._buf += data
        if self._seeking and not self._seek():
            return []
        out: list[list[bytes]] = []
        while (msg := self._next()) is not None:
            out.append(msg)
        return out

    def _seek(self) -> bool:
        at = self._buf.find(STREAM_PREAMBLE)
        if at < 0:
            keep = len(STREAM_PREAMBLE) - 1  # a preamble may straddle two reads
            cut = max(0, len(self._buf) - keep)
            self._note_noise(bytes(self._buf[:cut]))
            del self._buf[:cut]
            if self._skipped > STREAM_PREAMBLE_SEARCH_BYTES:
                raise ProtocolError(f"no aivault relay preamble in the first {STREAM_PREAMBLE_SEARCH_BYTES} bytes")
            return False
        self._note_noise(bytes(self._buf[:at]))
        del self._buf[: at + len(STREAM_PREAMBLE)]
        self._seeking = False
        return True

    def _note_noise(self, data: bytes) -> None:
        self._skipped += len(data)
        self.noise = (self.noise + data)[-4096:]

    def _next(self) -> list[bytes] | None:
        buf = self._buf
        if not buf:
            return None
        count = buf[0]
        if not 1 <= count <= STREAM_MAX_FRAMES:
            raise ProtocolError(f"a stream message announces {count} frames; 1 to {STREAM_MAX_FRAMES} are allowed")
        pos, total, spans = 1, 0, []
        for _ in range(count):
            if len(buf) < pos + _U32:
                return None
            n = int.from_bytes(buf[pos : pos + _U32], "big")
            total += n
            if n > RPC_MAX_FRAME_BYTES or total > STREAM_MAX_MESSAGE_BYTES:
                raise ProtocolError(f"a stream frame of {n} bytes exceeds the limits ({RPC_MAX_FRAME_BYTES} bytes a "
                                    f"frame, {STREAM_MAX_MESSAGE_BYTES} a message)")
            pos += _U32
            if len(buf) < pos + n:
                return None
            spans.append((pos, pos + n))
            pos += n
        frames = [bytes(buf[a:b]) for a, b in spans]
        del buf[:pos]
        return frames


# --- ingest ------------------------------------------------------------------------------


class IngestMessage(NamedTuple):
    kind: bytes
    header: dict[str, Any]
    payload: list[bytes]


def encode_ingest(kind: bytes, header: Mapping[str, Any], payload: list[bytes] | None = None) -> list[bytes]:
    return [INGEST_MAGIC, kind, packb({**header, "v": PROTOCOL_VERSION}), *(payload or [])]


# --- ingest headers checked against their records (aivault/protocol.py INGEST_HEADERS) -------------------
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

    from aivault.protocol import FILE_PART_SENT, FilePart

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
    raise TypeError(f"no checker for {tp!r}")  # a record in protocol.py uses a type this does not know


def check_header(kind: bytes, header: dict[str, Any]) -> None:
    """HeaderInvalid unless ``header`` has the fields of its kind's record, each of its type
    (docs/protocol.md §2.2). Fields a record does not name are left alone: a newer peer may send more."""
    check = _HEADER_CHECKS.get(kind)
    if check is None:
        from aivault.protocol import INGEST_HEADERS

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
    _check_version(header, f"an ingest {kind.decode('ascii', 'replace')} message")
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
