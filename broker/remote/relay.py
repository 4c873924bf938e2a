"""``aivault relay --stdio``: this machine's search, for the client at the other end of an ssh connection.

The stream on standard input and output is docs/protocol.md §5.1: the preamble, then RPC messages,
each a frame count and length-prefixed frames. The relay answers for its own machine only -- through
its daemon when one answers, else from the index opened read-only for that one request (holding it
open would keep ``aivault serve`` from starting) -- and never forwards. Until the machine's owner runs
``aivault policy --relay on`` there, it has no service (``NULL_SERVICE``): search is
``unavailable/no-service``, status the sentinel. Its clients are ``relay`` clients: it dispatches through
the endpoint table (broker/endpoints.py) as one -- no clearing, no indexing, and the redacted status.

Pings are answered by the reading loop at once (they are the client's heartbeats); other requests
wait, a few at most, for the one worker. Framing errors end the stream -- it cannot be re-synchronized
-- after an error reply; a frame that decodes but is not a valid request is answered with an error and
the stream goes on. Nothing but frames ever reaches standard output: the process's own fd 1 is pointed
at stderr before any library can print.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from aivault import log
from aivault import policy as policy_mod
from aivault.broker.endpoints import Answers, Context, dispatch, error_frames, error_reply, remote_ping, reply_frames
from aivault.broker.exposure import Caller
from aivault.codec import RpcRequest, StreamDecoder, decode_request, encode_stream, peek_request_id
from aivault.errors import AivaultError, Busy, DaemonUnreachable, IndexLocked, clip
from aivault.home import Home
from aivault.protocol import (
    METHOD_PING,
    METHOD_READ,
    METHOD_SHARD,
    RELAY_MAX_QUEUED,
    RELAY_SILENCE_TIMEOUT_S,
    REMOTE_FRAME_KEY,
    STREAM_PREAMBLE,
)
from aivault.thin.client import Connection

_log = log.get("relay")

RELAY_CALLER = Caller("relay")
_READ_BYTES = 256 * 1024
_TICK_S = 1.0
# How long the relay waits, once its input ended, for the request it is answering.
_DRAIN_S = 5.0
# A request meeting a daemon that just stopped or is just starting is asked again, after a pause.
_ASK_ATTEMPTS = 3
_RETRY_PAUSE_S = 1.0


class RelayAnswerer:
    """This machine's answers, for the relay: its daemon, else its index for one request at a time; with no
    relay consent, the null service's."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._conn: Connection | None = None

    def has_service(self) -> bool:
        return policy_mod.relay_allowed(self.home)

    def _none(self) -> Answers:
        from aivault.vault.endpoints import NULL_SERVICE, ServiceAnswers

        return ServiceAnswers(NULL_SERVICE)

    def search(self, params: Any) -> Mapping[str, Any]:
        if not self.has_service():
            return self._none().search(params)
        value: Mapping[str, Any] = self._ask(lambda c: c.search(params))
        return value

    def status(self) -> Mapping[str, Any]:
        if not self.has_service():
            return self._none().status()
        value: Mapping[str, Any] = self._ask(lambda c: c.status())
        return value

    def read(self, params: Any) -> Mapping[str, Any]:
        if not self.has_service():
            return self._none().read(params)
        value: Mapping[str, Any] = self._ask(lambda c: c.call(METHOD_READ, params))
        return value

    def shard(self, params: Any) -> Mapping[str, Any]:
        if not self.has_service():
            return self._none().shard(params)
        value: Mapping[str, Any] = self._ask(lambda c: c.call(METHOD_SHARD, params))
        return value

    def _ask(self, fn: Any) -> Any:
        for attempt in range(_ASK_ATTEMPTS):
            conn = self._connection()
            try:
                return fn(conn)
            except (DaemonUnreachable, IndexLocked):
                # The daemon stopped between two requests, or one is starting and holds the file before
                # its socket answers: the next connection finds out how to answer.
                self._drop()
                if attempt == _ASK_ATTEMPTS - 1:
                    raise
                time.sleep(_RETRY_PAUSE_S)
            finally:
                if self._conn is not None and self._conn.mode == "direct":
                    self._drop()
        raise AssertionError("unreachable")

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = Connection(self.home)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._drop()


class Relay:
    def __init__(self, home: Home, inp: int, out: int) -> None:
        self.home = home
        self.inp = inp
        self.out = out
        self.answerer = RelayAnswerer(home)
        self.context = Context(RELAY_CALLER, self.answerer, lambda: remote_ping(self.answerer.has_service()))
        self._write_lock = threading.Lock()
        self._jobs: queue.Queue[tuple[RpcRequest, float] | None] = queue.Queue(RELAY_MAX_QUEUED)
        self._worker = threading.Thread(target=self._work, name="relay-worker", daemon=True)
        self._broken = False

    def run(self) -> int:
        """Serve until the input ends, breaks the framing, or stays silent too long; the exit status."""
        self._write_raw(STREAM_PREAMBLE)
        self._worker.start()
        decoder = StreamDecoder()
        last_rx = time.monotonic()
        status = 0
        try:
            while not self._broken:
                ready, _, _ = select.select([self.inp], [], [], _TICK_S)
                if not ready:
                    if time.monotonic() - last_rx > RELAY_SILENCE_TIMEOUT_S:
                        _log.warning("relay client silent, exiting", silent_s=round(time.monotonic() - last_rx))
                        break
                    continue
                data = os.read(self.inp, _READ_BYTES)
                if not data:
                    break  # the client (ssh) closed the stream
                last_rx = time.monotonic()
                try:
                    messages = decoder.feed(data)
                except AivaultError as exc:
                    _log.warning("relay stream broken, closing", error=clip(str(exc), 200))
                    self._send(error_frames(REMOTE_FRAME_KEY, "?", exc))
                    status = 1
                    break
                for frames in messages:
                    self._dispatch(frames)
        finally:
            self._finish()
        return status

    def _finish(self) -> None:
        with contextlib.suppress(queue.Full):
            self._jobs.put(None, timeout=_DRAIN_S)
        self._worker.join(_DRAIN_S)
        self.answerer.close()

    def _dispatch(self, frames: list[bytes]) -> None:
        t0 = time.perf_counter()
        try:
            req = decode_request(REMOTE_FRAME_KEY, frames)
        except AivaultError as exc:
            rid = peek_request_id(frames) if len(frames) > 2 else None
            self._send(error_frames(REMOTE_FRAME_KEY, rid or "?", exc))
            return
        if req.method == METHOD_PING:
            self._answer(req, t0)
            return
        try:
            self._jobs.put_nowait((req, t0))
        except queue.Full:
            self._send(error_frames(REMOTE_FRAME_KEY, req.id, Busy(
                f"the relay has {RELAY_MAX_QUEUED} requests waiting; retry after a pause")))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._answer(*job)

    def _answer(self, req: RpcRequest, t0: float) -> None:
        """The one place a relay request's exception becomes its error reply, and its one log line."""
        try:
            frames, outcome = reply_frames(REMOTE_FRAME_KEY, req.id, dispatch(self.context, req))
        except Exception as exc:
            if not isinstance(exc, AivaultError):  # a bug: an internal error, the traceback in the relay's stderr
                _log.exception("relay rpc failed", id=clip(req.id), method=clip(req.method))
            frames, outcome = error_reply(REMOTE_FRAME_KEY, req.id, exc, internal="internal error in the relay")
        ms = round((time.perf_counter() - t0) * 1000, 2)
        self._send(frames)  # then the log line, off the caller's wait
        _log.info("rpc", id=clip(req.id), method=clip(req.method), transport="relay", outcome=outcome, ms=ms)

    def _send(self, frames: list[bytes]) -> None:
        try:
            data = encode_stream(frames)
        except AivaultError as exc:  # a reply over the stream limits: say so instead
            data = encode_stream(error_frames(REMOTE_FRAME_KEY, "?", exc))
        self._write_raw(data)

    def _write_raw(self, data: bytes) -> None:
        with self._write_lock:
            view = memoryview(data)
            try:
                while view:
                    n = os.write(self.out, view)
                    view = view[n:]
            except OSError:  # the client is gone: stop reading too
                self._broken = True


def serve_stdio(home: Home) -> int:
    """Run the relay on this process's standard input and output."""
    inp, out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    # Anything printed from now on, by Python or by a C library (llama.cpp loading a model), lands on
    # stderr; only the relay writes to the stream.
    os.dup2(2, 1)
    os.close(devnull)
    sys.stdout = sys.stderr
    try:
        return Relay(home, inp, out).run()
    finally:
        os.close(inp)
        os.close(out)
