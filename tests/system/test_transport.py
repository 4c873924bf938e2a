"""The ZeroMQ edges: scanner flow control, and garbage frames against the broker and the indexer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from aivault.codec import RpcRequest, decode_reply, encode_request
from aivault.home import Home
from aivault.ingest import (
    BULK_MAX_INFLIGHT_BATCHES,
    INGEST_MAGIC,
    K_ACK,
    K_BATCH,
    K_HELLO,
    K_RECONCILE,
    K_STATE,
    K_STOP,
    MAX_INFLIGHT_BATCHES,
    SCANNER_KINDS,
    decode_ingest,
    encode_ingest,
)
from aivault.protocol import METHOD_SEARCH, METHOD_STATUS
from tests.builders import ClaudeWriter
from tests.support.common import REPO, cli_env
from tests.support.daemons import DaemonProcess


def _recv(sock: zmq.Socket[bytes], timeout_s: float) -> list[bytes] | None:
    if sock.poll(int(timeout_s * 1000), zmq.POLLIN):
        return sock.recv_multipart()
    return None


@pytest.mark.parametrize(("bulk", "window", "per_session"), [(False, MAX_INFLIGHT_BATCHES, 2500),
                                                           (True, BULK_MAX_INFLIGHT_BATCHES, 7000)])
def test_the_scanner_stops_sending_when_the_indexer_stops_acknowledging(tmp_path: Path, roots: dict[str, Path],
                                                                        bulk: bool, window: int,
                                                                        per_session: int) -> None:
    """With no ACKs the scanner has at most its window of batches out (a bulk load's is smaller); each ACK
    frees one more."""
    for s in range(10):  # 25,000 / 70,000 messages: more batches than the window (bulk ones hold 16,000)
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{s}")
        for i in range(per_session):
            c.user(f"message {i} in session {s}")
    endpoint = f"ipc://{tmp_path / 'ingest.sock'}"
    ctx: zmq.Context[Any] = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)
    env = cli_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "aivault.scanner", "--connect", endpoint, "--no-default-roots",
                             "--root", f"claude={roots['claude']}", *(["--bulk"] if bulk else [])], env=env, cwd=REPO)
    try:
        frames = _recv(router, 20)
        assert frames is not None
        ident, msg = frames[0], decode_ingest(frames[1:], SCANNER_KINDS)
        assert msg.kind == K_HELLO

        def send(kind: bytes, header: dict[str, Any]) -> None:
            router.send_multipart([ident, *encode_ingest(kind, header)])

        send(K_STATE, {"req": msg.header["req"], "epoch": 1, "files": [], "last": True})
        send(K_RECONCILE, {"req": 1, "full": True, "cutoff_ms": None})
        batches: list[int] = []
        while True:
            frames = _recv(router, 3.0)
            if frames is None:
                break
            m = decode_ingest(frames[1:], SCANNER_KINDS)
            if m.kind == K_BATCH:
                batches.append(m.header["seq"])
        assert len(batches) == window
        send(K_ACK, {"seq": batches[0], "generation": 1, "messages": 0})
        more: list[int] = []
        while (frames := _recv(router, 2.0)) is not None:
            m = decode_ingest(frames[1:], SCANNER_KINDS)
            if m.kind == K_BATCH:
                more.append(m.header["seq"])
        assert len(more) == 1
        send(K_STOP, {})
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        router.close(0)


def test_the_broker_answers_garbage_with_errors_and_keeps_serving(home: Home, roots: dict[str, Path]) -> None:
    """Undecodable frames, wrong keys and bad payloads get error replies; the daemon stays up."""
    ClaudeWriter(roots["claude"]).user("still searchable after garbage: quokka")
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        ctx: zmq.Context[Any] = zmq.Context.instance()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(home.rpc_endpoint)
        key = home.key()
        cases: list[list[bytes]] = [
            [b"garbage"],
            [b"AIV1", b"sig", b"\xc1\xc1", b"\x00"],
            encode_request(b"x" * 32, RpcRequest("wrongkey", METHOD_STATUS, {})),
            [os.urandom(64) for _ in range(4)],
        ]
        codes = []
        for frames in cases:
            s.send_multipart(frames)
            reply = _recv(s, 5)
            assert reply is not None, frames
            rep = decode_reply(key, reply)
            assert rep.ok is False
            codes.append(rep.value["code"])
        assert codes[2] == -32001  # authentication
        assert set(codes) <= {-32700, -32001}
        s.send_multipart(encode_request(key, RpcRequest("bad", METHOD_SEARCH, {"query": ["not", "a", "string"]})))
        rep = decode_reply(key, _recv(s, 5) or [])
        assert rep.ok is False and rep.value["code"] == -32602
        s.close(0)
        assert [h["sessionId"] for h in d.search("quokka")["hits"]]
    finally:
        assert d.stop() == 0


def test_the_indexer_drops_garbage_on_its_ingest_socket(home: Home, roots: dict[str, Path]) -> None:
    """Frames that are not the ingest protocol are dropped; the indexer keeps indexing."""
    ClaudeWriter(roots["claude"]).user("first words: pangolin")
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        ctx: zmq.Context[Any] = zmq.Context.instance()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(home.ingest_endpoint)
        s.send_multipart([b"junk"])
        s.send_multipart([INGEST_MAGIC, b"BATCH", b"\xc1"])
        s.send_multipart([INGEST_MAGIC, K_BATCH, b"\x80", b"", b"", b"", b"", b""])  # no HELLO: not our scanner
        s.send_multipart([INGEST_MAGIC, b"NOPE", b"\x80"])
        time.sleep(0.3)
        s.close(0)
        ClaudeWriter(roots["claude"], cwd="/home/dev/other").user("second words: armadillo")
        d.reconcile()
        assert [h["agent"] for h in d.search("armadillo")["hits"]] == ["claude"]
        assert d.status()["phase"] == "current"
    finally:
        assert d.stop() == 0
