"""Opaque, signed page cursors (docs/contract.md §3).

A cursor is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` where the payload
is msgpack ``[version, query_key, generation, identity, offset]``. The query key is a hash of
everything that defines the result list (query, scope, agents and paths order-insensitively,
branches, since, sort) but not the page size. The server keeps no cursor state: a rejected
cursor keeps being rejected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

import msgpack

from aivault.errors import MalformedCursor
from aivault.query.request import SearchRequest

CURSOR_VERSION = 1
# Offsets and generations past these cannot come from a page we served (no index holds 2^31
# sessions; generations count commits): DuckDB binds a larger offset as UBIGINT and fails, so
# a cursor carrying one -- even one signed with the real key -- is malformed, not an internal error.
MAX_OFFSET = 2**31 - 1
MAX_GENERATION = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Position:
    query_key: bytes
    generation: int
    identity: str
    offset: int


def query_key(req: SearchRequest) -> bytes:
    f = req.filters
    canon = [req.text, req.scope, sorted(f.agents), sorted(f.scope_paths),
             sorted(f.branches), f.since_ms, f.sort]
    return hashlib.blake2b(msgpack.packb(canon, use_bin_type=True), digest_size=16).digest()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise MalformedCursor("not base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise MalformedCursor("not base64url") from exc
    # The last character of unpadded base64 carries unused bits; several spellings decode to
    # the same bytes. Only the one we emit is accepted, so that every edit is detected.
    if b64(data) != text:
        raise MalformedCursor("not canonical base64url")
    return data


def _mac(key: bytes, payload: bytes, domain: bytes = b"aivault-cursor\0") -> bytes:
    return hmac.new(key, domain + payload, hashlib.sha256).digest()


def seal(key: bytes, payload: bytes, domain: bytes = b"aivault-cursor\0") -> str:
    """``base64url(payload) "." base64url(HMAC-SHA256(key, domain + payload))``: a cursor's text. ``domain``
    keeps one kind of cursor from being taken for another (the merged search's has its own)."""
    return f"{b64(payload)}.{b64(_mac(key, payload, domain))}"


def unseal(key: bytes, text: str, domain: bytes = b"aivault-cursor\0") -> bytes:
    """The payload of a cursor ``seal`` made with ``key`` and ``domain``; any edit is MalformedCursor."""
    body, dot, sig = text.partition(".")
    if not dot:
        raise MalformedCursor("no signature")
    payload, mac = unb64(body), unb64(sig)
    if not hmac.compare_digest(mac, _mac(key, payload, domain)):
        raise MalformedCursor("bad signature")
    return payload


def mint(key: bytes, pos: Position) -> str:
    payload = msgpack.packb([CURSOR_VERSION, pos.query_key, pos.generation, pos.identity, pos.offset],
                            use_bin_type=True)
    return seal(key, payload)


def open_cursor(key: bytes, cursor: str) -> Position:
    """Verify and decode; any edit, truncation or garbage raises MalformedCursor."""
    payload = unseal(key, cursor)
    try:
        v, qk, gen, ident, off = msgpack.unpackb(payload, raw=False)
    except Exception as exc:
        raise MalformedCursor("bad payload") from exc
    if v != CURSOR_VERSION or not isinstance(qk, bytes) or type(gen) is not int or not 0 <= gen <= MAX_GENERATION \
            or not isinstance(ident, str) or type(off) is not int or not 0 <= off <= MAX_OFFSET:
        raise MalformedCursor("bad payload")
    return Position(qk, gen, ident, off)
