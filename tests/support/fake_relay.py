"""A relay that misbehaves on purpose, run as the remote command of the tests' fake ssh.

    python tests/support/fake_relay.py MODE [MARKER]

It speaks the real stream (the preamble, framed RPC messages, aivault.codec) but answers as told:

* ``old``    -- a host of an older aivault: ping works, every other method is -32601;
* ``liar``   -- answers search with hits claiming another host, status with raw reasons and fields the
                contract does not have, a resume command with CODEX_HOME: the client must correct all;
* ``die``    -- exits in the middle of the first search (once: when MARKER does not exist yet, it is
                created; later runs answer like ``liar``);
* ``hang``   -- answers the greeting ping, then never answers anything again (stays alive);
* ``noise``  -- prints a login shell's chatter before the preamble, then answers like ``liar``;
* ``garbage``-- the preamble, then bytes that are no stream message;
* ``version``-- answers with replies of protocol version 2.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import time
from pathlib import Path

from aivault.codec import (
    RpcReply,
    StreamDecoder,
    decode_request,
    encode_reply,
    encode_stream,
    packb,
)
from aivault.protocol import METHOD_PING, METHOD_SEARCH, METHOD_STATUS, REMOTE_FRAME_KEY, RPC_MAGIC, STREAM_PREAMBLE

HIT = {"agent": "codex", "sessionId": "s-1", "title": "lying host", "cwd": "/srv/app", "branch": None,
       "updatedAt": 1, "messageCount": 3, "score": 1.0, "source": "present",
       "evidence": {"snippet": "the [[quokka]]", "role": "user", "timestamp": 1},
       "resumeCommand": "CODEX_HOME=/srv/.codex codex resume s-1", "executionHostId": "local"}
STATUS = {"enabled": True, "phase": "degraded", "filesIndexed": 3, "filesDue": 0, "filesFailed": 1,
          "degradedRoots": [{"root": "/srv/.claude/projects", "reason": "cannot list /srv/.claude/secret: EACCES"},
                            {"root": "/mnt/old", "reason": "root does not exist"}],
          "lastReconcileAt": 1, "lastSweepCompletedAt": 1, "generation": 4, "homePath": "/srv/aivault"}


def write(out: int, data: bytes) -> None:
    while data:
        data = data[os.write(out, data):]


def reply(rid: str, ok: bool, value: object) -> bytes:
    return encode_stream(encode_reply(REMOTE_FRAME_KEY, RpcReply(rid, ok, value)))


def reply_v2(rid: str, value: object) -> bytes:
    header = packb({"v": 2, "id": rid, "ok": True})
    body = packb(value)
    mac = hmac.new(REMOTE_FRAME_KEY, header + body, hashlib.sha256).hexdigest().encode()
    return encode_stream([RPC_MAGIC, mac, header, body])


def answer(mode: str, method: str, params: object) -> tuple[bool, object]:
    if method == METHOD_PING:
        return True, {"pong": True, "protocol": 1, "version": "fake", "service": True}
    if mode == "old":
        return False, {"code": -32601, "name": "method-not-found", "message": f"Method not found: {method}"}
    if method == METHOD_SEARCH:
        return True, {"kind": "results", "hits": [dict(HIT)], "page": {"cursor": "remote-cursor", "hasMore": True},
                      "generation": 4, "truncated": {"candidates": False, "snippets": 0, "query": False,
                                                     "freshness": False}, "durationMs": 1.0}
    if method == METHOD_STATUS:
        return True, dict(STATUS)
    return False, {"code": -32601, "name": "method-not-found", "message": f"Method not found: {method}"}


def main() -> int:
    mode = sys.argv[1]
    marker = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    out = sys.stdout.fileno()
    if mode == "die" and marker is not None and marker.exists():
        mode = "liar"
    if mode == "noise":
        write(out, b"Welcome to the build box!\nLast login: yesterday\n")
        mode = "liar"
    write(out, STREAM_PREAMBLE)
    if mode == "garbage":
        write(out, b"\x00\x00\x00\x00 this is not a stream message")
        time.sleep(30)
        return 0
    decoder = StreamDecoder()
    greeted = False
    while True:
        data = os.read(sys.stdin.fileno(), 65536)
        if not data:
            return 0
        for frames in decoder.feed(data):
            req = decode_request(REMOTE_FRAME_KEY, frames)
            if mode == "hang" and greeted:
                continue
            greeted = True
            if mode == "die" and req.method == METHOD_SEARCH:
                assert marker is not None
                marker.touch()
                os._exit(3)
            if mode == "version":
                write(out, reply_v2(req.id, {"pong": True}))
                continue
            ok, value = answer(mode, req.method, req.params)
            write(out, reply(req.id, ok, value))


if __name__ == "__main__":
    sys.exit(main())
