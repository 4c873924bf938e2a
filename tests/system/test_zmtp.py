"""The CLI's own ZMTP 3.0 DEALER (aivault/thin/zmtp.py) against real libzmq sockets (pyzmq) on ipc://.

Every peer here is a real ZeroMQ socket or a real Unix socket server: what the client must agree
with is libzmq's framing and handshake, so that is what it is tested against.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from aivault.errors import DaemonUnreachable, ProtocolError
from aivault.thin.client import RpcClient
from aivault.thin.zmtp import Dealer, ZmtpError

LIMIT = 64 * 1024 * 1024


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    c: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield c
    c.destroy(linger=0)


def _bound(ctx: zmq.Context[zmq.Socket[bytes]], kind: int, path: Path) -> zmq.Socket[bytes]:
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.bind(f"ipc://{path}")
    return s


def _deadline(s: float = 5.0) -> float:
    return time.monotonic() + s


def _exchange(dealer: Dealer, router: zmq.Socket[bytes], frames: list[bytes], reply: list[bytes]) -> bytes:
    """Send ``frames`` through the dealer, require the ROUTER to get exactly them after our routing id,
    answer ``reply`` and require the dealer to get exactly that; the routing id."""
    dealer.send_multipart(frames, _deadline())
    assert router.poll(5000)
    rid, *got = router.recv_multipart()
    assert got == frames
    router.send_multipart([rid, *reply])
    assert dealer.recv_multipart(_deadline()) == reply
    return rid


def test_multipart_messages_of_every_frame_size_cross_a_libzmq_router_unchanged(
        ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path) -> None:
    """Frames of 0, 1, 255 (short), 256, 70,000 and 3 MB (long) reach a ROUTER intact and its reply comes back whole."""
    router = _bound(ctx, zmq.ROUTER, tmp_path / "r.sock")
    dealer = Dealer(str(tmp_path / "r.sock"), max_frame_bytes=LIMIT)
    frames = [b"", b"x", b"a" * 255, b"b" * 256, bytes(range(256)) * 273 + b"!", b"c" * 3_000_000]
    try:
        rid = _exchange(dealer, router, frames, [b"reply", b"z" * 300])
        # A second message on the same connection, from the same peer.
        assert _exchange(dealer, router, [b"again"], [b"ok"]) == rid
    finally:
        dealer.close()
        router.close()


def test_the_dealer_connects_to_a_router_that_binds_after_it_started_trying(
        ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path) -> None:
    """A daemon still starting (no socket file yet) is waited for within the deadline, as libzmq reconnects."""
    path = tmp_path / "late.sock"
    box: list[zmq.Socket[bytes]] = []

    def bind_later() -> None:
        time.sleep(0.3)
        box.append(_bound(ctx, zmq.ROUTER, path))

    t = threading.Thread(target=bind_later)
    t.start()
    dealer = Dealer(str(path), max_frame_bytes=LIMIT)
    try:
        dealer.send_multipart([b"hello"], _deadline())
        t.join()
        assert box[0].poll(5000)
        assert box[0].recv_multipart()[1:] == [b"hello"]
    finally:
        dealer.close()
        t.join()
        for s in box:
            s.close()


def test_a_stale_socket_file_is_refused_by_the_deadline_and_the_client_says_so(tmp_path: Path) -> None:
    """A socket file nobody listens on: the dealer gives up at its deadline; RpcClient says: unreachable."""
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays, nothing accepts
    t0 = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        Dealer(str(path), max_frame_bytes=LIMIT).send_multipart([b"x"], _deadline(0.3))
    assert 0.2 <= time.monotonic() - t0 < 2.0
    client = RpcClient(f"ipc://{path}", b"k" * 32, timeout_s=0.3)
    with pytest.raises(DaemonUnreachable, match=r"is not reachable.*aivault serve"):
        client.call("aiVault.ping", {})


def test_a_router_that_never_answers_times_out_at_the_deadline(
        ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path) -> None:
    """A live ROUTER that keeps the request unanswered: TimeoutError at the deadline, DaemonUnreachable in RpcClient."""
    router = _bound(ctx, zmq.ROUTER, tmp_path / "mute.sock")
    try:
        dealer = Dealer(str(tmp_path / "mute.sock"), max_frame_bytes=LIMIT)
        dealer.send_multipart([b"q"], _deadline())
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            dealer.recv_multipart(_deadline(0.3))
        assert time.monotonic() - t0 < 2.0
        dealer.close()
        client = RpcClient(f"ipc://{tmp_path / 'mute.sock'}", b"k" * 32, timeout_s=0.3)
        with pytest.raises(DaemonUnreachable, match="no answer from the aivault daemon"):
            client.call("aiVault.ping", {})
    finally:
        router.close()


def test_peers_that_are_not_a_null_router_are_refused_by_name(
        ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path) -> None:
    """A REP socket and a CURVE server are told apart from a daemon: a ZmtpError naming the type or the greeting."""
    rep = _bound(ctx, zmq.REP, tmp_path / "rep.sock")
    curve = ctx.socket(zmq.ROUTER)
    curve.setsockopt(zmq.LINGER, 0)
    _public, secret = zmq.curve_keypair()
    curve.curve_secretkey = secret
    curve.curve_server = True
    curve.bind(f"ipc://{tmp_path / 'curve.sock'}")
    try:
        with pytest.raises(ZmtpError, match="a REP socket, not a ROUTER"):
            Dealer(str(tmp_path / "rep.sock"), max_frame_bytes=LIMIT).send_multipart([b"x"], _deadline())
        with pytest.raises(ZmtpError, match=r"during the ZMTP greeting.*NULL security mechanism"):
            Dealer(str(tmp_path / "curve.sock"), max_frame_bytes=LIMIT).send_multipart([b"x"], _deadline())
        client = RpcClient(f"ipc://{tmp_path / 'rep.sock'}", b"k" * 32, timeout_s=2)
        with pytest.raises(ProtocolError, match="does not answer as an aivault daemon"):
            client.call("aiVault.ping", {})
    finally:
        rep.close()
        curve.close()


class _RawServer:
    """A Unix socket server that plays a scripted byte sequence to its one client, then closes."""

    def __init__(self, path: Path, script: bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(1)
        self.script = script
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(5)
            conn.sendall(self.script)
            # Read what the client sends until it stops, so closing sends FIN, not a reset.
            conn.settimeout(0.3)
            with contextlib.suppress(OSError):  # the client's silence (timeout) or its reset
                drained = conn.recv(65536)
                while drained:
                    drained = conn.recv(65536)

    def close(self) -> None:
        self.thread.join(5)
        self.sock.close()


def _router_greeting_and_ready() -> bytes:
    """The bytes a NULL ROUTER sends first, taken from a real libzmq ROUTER's handshake."""
    from aivault.thin.zmtp import GREETING

    body = b"\x05READY" + b"\x0bSocket-Type" + (6).to_bytes(4, "big") + b"ROUTER"
    return GREETING + bytes((0x04, len(body))) + body


@pytest.mark.parametrize(("script", "error", "match"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n" + b" " * 64, ZmtpError, "not ZMTP's"),
    (_router_greeting_and_ready()[:40], ZmtpError, "closed the connection during the ZMTP greeting"),
    (_router_greeting_and_ready()[:64].replace(b"NULL", b"PLAIN"), ZmtpError, "PLAIN security mechanism"),
    (_router_greeting_and_ready()[:64] + b"\x04\x06\x05HELLO", ZmtpError, "first command is not READY"),
    (_router_greeting_and_ready()[:64] + b"\x04\x0f\x05ERROR\x08go away!", ZmtpError, "ERROR: go away!"),
    (_router_greeting_and_ready() + b"\x02" + (2**40).to_bytes(8, "big"), ZmtpError, "over the"),
    (_router_greeting_and_ready() + b"\xf0\x01x", ZmtpError, "unknown flags"),
    (_router_greeting_and_ready() + b"\x01\x03abc", ConnectionError, "closed"),
], ids=["http", "cut-greeting", "plain", "hello", "error", "huge-frame", "bad-flags", "cut-multipart"])
def test_garbage_and_cut_replies_end_the_call_with_a_typed_error(
        tmp_path: Path, script: bytes, error: type[Exception], match: str) -> None:
    """Garbage greetings, a connection closed mid-message and absurd frame sizes raise typed errors, never hang."""
    path = tmp_path / "raw.sock"
    server = _RawServer(path, script)
    dealer = Dealer(str(path), max_frame_bytes=LIMIT)
    try:
        with pytest.raises(error, match=match):
            dealer.send_multipart([b"x"], _deadline())
            dealer.recv_multipart(_deadline())
    finally:
        dealer.close()
        server.close()


def test_a_dealer_held_across_a_daemon_restart_talks_to_the_new_one(
        ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path) -> None:
    """A connection whose ROUTER went away is noticed before the next send, so that message reaches its successor."""
    path = tmp_path / "d.sock"
    old = _bound(ctx, zmq.ROUTER, path)
    dealer = Dealer(str(path), max_frame_bytes=LIMIT)
    new: zmq.Socket[bytes] | None = None
    try:
        dealer.send_multipart([b"one"], _deadline())
        assert old.poll(5000) and old.recv_multipart()[1:] == [b"one"]
        old.close()
        time.sleep(0.2)  # libzmq closes the connection from its I/O thread
        new = _bound(ctx, zmq.ROUTER, path)
        _exchange(dealer, new, [b"two"], [b"ok"])
    finally:
        dealer.close()
        if new is not None:
            new.close()
