"""A ZeroMQ DEALER for the CLI's one local conversation: ZMTP 3.0 over a Unix socket, no libzmq.

Why by hand: a CLI call that asks the daemon one question spent ~60 ms of its ~90 ms importing
pyzmq (its Cython backend, the sugar layer, libzmq and its context threads) to send one request
and read one reply over ``ipc://``. The wire protocol for that is small and fixed (ZMTP 3.0, RFC
23/ZMTP, the NULL mechanism): a 64-byte greeting each way, one READY command each way naming the
socket types, then length-prefixed frames. This module speaks exactly that, as a DEALER to the
daemon's ROUTER, and nothing else: no CURVE, no TCP, no reconnection behind the caller's back.
Everything long-lived (the daemon, the scanner link, remote hosts) keeps pyzmq.

What a DEALER sees of a ROUTER: the ROUTER prefixes a message from us with our routing id and
strips it from its reply, so request and reply frames travel here exactly as the codec made
them. Errors are typed: ``TimeoutError`` (nothing within the deadline), ``ConnectionError``
(the peer closed or refused the connection) and ``ZmtpError`` (the peer broke the protocol).
"""

from __future__ import annotations

# The C module under ``socket``: its Python layer converts every constant into enums and imports
# selectors, ~4 ms of a ~85 ms call, for nothing this client uses (connect, sendall, recv, timeouts).
import _socket
import errno
import struct
import time

# RFC 23: signature (0xFF, 8 bytes of padding, 0x7F), version 3.0, mechanism, as-server, filler.
_SIGNATURE = b"\xff" + b"\x00" * 8 + b"\x7f"
GREETING = _SIGNATURE + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31
GREETING_BYTES = 64
# Frame flags.
_MORE = 0x01
_LONG = 0x02
_COMMAND = 0x04
# While the socket file is missing or nobody accepts yet (a daemon starting), connect again this
# often until the deadline, as a libzmq socket would reconnect.
RETRY_S = 0.02


class ZmtpError(Exception):
    """The peer does not speak ZMTP 3 as a ROUTER, or sent something malformed."""


def _short(text: bytes) -> bytes:
    return bytes((len(text),)) + text


def ready_command(socket_type: bytes) -> bytes:
    """Our READY command frame: the socket type and an empty identity (the ROUTER picks one)."""
    body = _short(b"READY") + _short(b"Socket-Type") + struct.pack(">I", len(socket_type)) + socket_type \
        + _short(b"Identity") + struct.pack(">I", 0)
    return _frame_header(_COMMAND, len(body)) + body


def _frame_header(flags: int, size: int) -> bytes:
    if size > 255:
        return bytes((flags | _LONG,)) + struct.pack(">Q", size)
    return bytes((flags, size))


def parse_properties(data: bytes) -> dict[bytes, bytes]:
    """A READY command's metadata: short-string names, 4-byte-length values."""
    props: dict[bytes, bytes] = {}
    i = 0
    while i < len(data):
        n = data[i]
        name = data[i + 1:i + 1 + n]
        i += 1 + n
        if i + 4 > len(data):
            raise ZmtpError("a READY property is cut short")
        (size,) = struct.unpack_from(">I", data, i)
        i += 4
        if i + size > len(data):
            raise ZmtpError("a READY property's value is cut short")
        props[name.lower()] = data[i:i + size]
        i += size
    return props


class Dealer:
    """One connection to a ROUTER listening on a Unix socket, opened by the first send."""

    def __init__(self, path: str, *, max_frame_bytes: int) -> None:
        self.path = path
        self.max_frame_bytes = max_frame_bytes
        self._sock: _socket.socket | None = None
        self._buf = bytearray()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf.clear()

    # --- sending --------------------------------------------------------------------------------
    def send_multipart(self, frames: list[bytes], deadline: float) -> None:
        if self._sock is not None and self._peer_left():
            self.close()  # the daemon restarted since the last message: talk to the new one
        if self._sock is None:
            self._open(deadline)
        parts: list[bytes] = []
        for i, frame in enumerate(frames):
            parts.append(_frame_header(_MORE if i < len(frames) - 1 else 0, len(frame)))
            parts.append(frame)
        self._sendall(b"".join(parts), deadline)

    def _sendall(self, data: bytes, deadline: float) -> None:
        sock = self._live()
        sock.settimeout(_remaining(deadline))
        sock.sendall(data)

    # --- receiving ------------------------------------------------------------------------------
    def recv_multipart(self, deadline: float) -> list[bytes]:
        """The next whole message; commands the peer may send between messages are skipped."""
        frames: list[bytes] = []
        while True:
            flags, body = self._read_frame(deadline)
            if flags & _COMMAND:
                if frames:
                    raise ZmtpError("a command arrived inside a multipart message")
                self._check_command(body)
                continue
            frames.append(body)
            if not flags & _MORE:
                return frames

    def _read_frame(self, deadline: float) -> tuple[int, bytes]:
        flags = self._read(1, deadline)[0]
        if flags & ~(_MORE | _LONG | _COMMAND):
            raise ZmtpError(f"a frame with unknown flags 0x{flags:02x}")
        if flags & _LONG:
            (size,) = struct.unpack(">Q", self._read(8, deadline))
        else:
            size = self._read(1, deadline)[0]
        if size > self.max_frame_bytes:
            raise ZmtpError(f"a frame of {size} bytes, over the {self.max_frame_bytes}-byte limit")
        return flags, self._read(size, deadline)

    @staticmethod
    def _check_command(body: bytes) -> None:
        name = body[1:1 + body[0]] if body else b""
        if name == b"ERROR":
            reason = body[1 + len(name):]
            text = reason[1:1 + reason[0]].decode("utf-8", "replace") if reason else ""
            raise ZmtpError(f"the peer sent ERROR: {text}")
        # PING/PONG (ZMTP 3.1 heartbeats) and unknown commands carry nothing for us.

    def _read(self, n: int, deadline: float) -> bytes:
        buf = self._buf
        sock = self._live()
        while len(buf) < n:
            sock.settimeout(_remaining(deadline))
            chunk = sock.recv(max(65536, n - len(buf)))
            if not chunk:
                raise ConnectionError("the peer closed the connection")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    # --- connecting -----------------------------------------------------------------------------
    def _peer_left(self) -> bool:
        """Whether the peer closed this connection while we held it (nothing is read)."""
        sock = self._live()
        sock.settimeout(0)
        try:
            return sock.recv(1, _socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _live(self) -> _socket.socket:
        if self._sock is None:
            raise ConnectionError("not connected")
        return self._sock

    def _open(self, deadline: float) -> None:
        """Connect (again while the socket is missing or refuses: a daemon binding it now), then
        greet: greetings cross, then READY commands, and the peer must be a ZMTP 3 NULL ROUTER. Our
        READY waits for the peer's greeting, so a peer refusing ours closes with nothing of ours
        unread (a clean close, not a reset) and is named as such."""
        while True:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(_remaining(deadline))
                sock.connect(self.path)
                break
            except OSError as exc:
                sock.close()
                if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN):
                    raise
                if time.monotonic() + RETRY_S >= deadline:
                    raise ConnectionRefusedError(exc.errno, f"nothing accepts connections on {self.path}") from exc
                time.sleep(RETRY_S)
        self._sock = sock
        try:
            self._sendall(GREETING, deadline)
            try:
                peer = self._read(GREETING_BYTES, deadline)
            except ConnectionError as exc:
                # libzmq drops a peer whose greeting names another mechanism (CURVE) without a word.
                raise ZmtpError("the peer closed the connection during the ZMTP greeting: it is not a "
                                "ZeroMQ socket of the NULL security mechanism") from exc
            if peer[0] != 0xFF or not peer[9] & 0x01:
                raise ZmtpError("the peer's greeting is not ZMTP's")
            if peer[10] < 3:
                raise ZmtpError(f"the peer speaks ZMTP {peer[10]}.{peer[11]}; version 3 is needed")
            if peer[12:32].rstrip(b"\x00") != b"NULL":
                raise ZmtpError(f"the peer asks for the {peer[12:32].rstrip(bytes(1)).decode('ascii', 'replace')} "
                                "security mechanism; this client speaks NULL only")
            self._sendall(ready_command(b"DEALER"), deadline)
            flags, body = self._read_frame(deadline)
            if not flags & _COMMAND:
                raise ZmtpError("the peer sent a message before its READY command")
            self._check_command(body)
            if body[1:1 + body[0]] != b"READY":
                raise ZmtpError("the peer's first command is not READY")
            kind = parse_properties(body[1 + body[0]:]).get(b"socket-type", b"")
            if kind != b"ROUTER":
                raise ZmtpError(f"the peer is a {kind.decode('ascii', 'replace') or 'nameless'} socket, not a ROUTER")
        except BaseException:
            self.close()
            raise


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left
