"""The one place that packs and unpacks frames (docs/protocol.md).

RPC messages (client <-> broker) are signed with HMAC-SHA256 under the data directory's key;
ingest messages (scanner <-> indexer) travel over a socket inside the ``0700`` data
directory and are not signed. Bulk ingest payloads (row columns, term arrays) are separate
raw frames, never nested inside the msgpack header.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import msgpack

from aivault.errors import AuthenticationError, InvalidRequest, ProtocolError
from aivault.protocol import INGEST_MAGIC, PROTOCOL_VERSION, RPC_MAGIC, RPC_MAX_FRAME_BYTES, RPC_MAX_ID_CHARS

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


@dataclass(frozen=True, slots=True)
class RpcRequest:
    id: str
    method: str
    params: Any
    host: str | None = None


@dataclass(frozen=True, slots=True)
class RpcReply:
    id: str
    ok: bool
    value: Any  # the result when ok, else {"code", "message"}


def encode_request(key: bytes, req: RpcRequest) -> list[bytes]:
    header = packb({"v": PROTOCOL_VERSION, "id": req.id, "method": req.method, "host": req.host})
    body = packb(req.params)
    # Refused here rather than sent: the broker's socket drops the connection of a peer sending
    # a bigger frame, and the caller would only see a timeout.
    for frame in (header, body):
        if len(frame) > RPC_MAX_FRAME_BYTES:
            raise ProtocolError(f"a request frame of {len(frame)} bytes exceeds the {RPC_MAX_FRAME_BYTES}-byte limit")
    return [RPC_MAGIC, _sign(key, header, body), header, body]


def decode_request(key: bytes, frames: list[bytes]) -> RpcRequest:
    header, body = _check_rpc(key, frames)
    h = unpackb(header, max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("method"), str):
        raise ProtocolError("request header must be a map with string 'id' and 'method'")
    if len(h["id"]) > RPC_MAX_ID_CHARS:
        raise InvalidRequest(f"request id of {len(h['id'])} characters; at most {RPC_MAX_ID_CHARS}")
    host = h.get("host")
    if host is not None and not isinstance(host, str):
        raise ProtocolError("request 'host' must be a string or absent")
    return RpcRequest(id=h["id"], method=h["method"], params=unpackb(body), host=host)


def encode_reply(key: bytes, rep: RpcReply) -> list[bytes]:
    header = packb({"v": PROTOCOL_VERSION, "id": rep.id, "ok": rep.ok})
    body = packb(rep.value)
    return [RPC_MAGIC, _sign(key, header, body), header, body]


def decode_reply(key: bytes, frames: list[bytes]) -> RpcReply:
    header, body = _check_rpc(key, frames)
    h = unpackb(header, max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("ok"), bool):
        raise ProtocolError("reply header must be a map with string 'id' and bool 'ok'")
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


# --- ingest ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IngestMessage:
    kind: bytes
    header: dict[str, Any]
    payload: list[bytes]


def encode_ingest(kind: bytes, header: dict[str, Any], payload: list[bytes] | None = None) -> list[bytes]:
    return [INGEST_MAGIC, kind, packb(header), *(payload or [])]


def decode_ingest(frames: list[bytes], allowed: tuple[bytes, ...]) -> IngestMessage:
    if len(frames) < 3 or frames[0] != INGEST_MAGIC:
        raise ProtocolError(f"expected an ingest message starting with {INGEST_MAGIC!r}")
    kind = bytes(frames[1])
    if kind not in allowed:
        raise ProtocolError(f"unexpected ingest message kind {kind[:32]!r}")
    header = unpackb(frames[2], max_bytes=_MAX_HEADER_BYTES)
    if not isinstance(header, dict):
        raise ProtocolError("ingest header must be a map")
    return IngestMessage(kind=kind, header=header, payload=list(frames[3:]))
