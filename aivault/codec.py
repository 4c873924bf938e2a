"""The RPC frames and the relay stream (docs/protocol.md §1, §5.1): msgpack, and the signing.

RPC messages (client <-> broker) are signed with HMAC-SHA256 under the data directory's key. This
is part of the thin client's lean core (aivault/thin/__init__.py); the ingest frames between the
scanner and the indexer, which travel unsigned inside the ``0700`` data directory, are
aivault/ingest.py's.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, NamedTuple

import msgpack

from aivault.errors import AuthenticationError, InvalidRequest, ProtocolError, ProtocolVersionError
from aivault.protocol import (
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


def check_version(header: dict[str, Any], what: str) -> None:
    v = header.get("v")
    if v != PROTOCOL_VERSION:
        raise ProtocolVersionError(f"{what} of protocol version {v!r}; this aivault speaks version {PROTOCOL_VERSION}. "
                                   "Run the same aivault version on both ends.")


def decode_request(key: bytes, frames: list[bytes]) -> RpcRequest:
    header, body = _check_rpc(key, frames)
    h = unpackb(header, max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("method"), str):
        raise ProtocolError("request header must be a map with string 'id' and 'method'")
    check_version(h, "a request")
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
    check_version(h, "a reply")
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
