"""The scanner's end of the ingest socket: credit-based flow control and liveness.

The scanner may have at most ``MAX_INFLIGHT_BATCHES`` batches unacknowledged (a bulk load's,
``BULK_MAX_INFLIGHT_BATCHES`` of its larger ones); sending
another blocks until an ACK frees a slot. With bounded batches this bounds the memory both
processes hold when the indexer is slower than the scanner. Control messages (RECONCILE,
STOP) that arrive while a pass is running are queued for the main loop.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

import zmq

from aivault import log
from aivault.errors import IndexerGone, ProtocolError, Resync, StopRequested
from aivault.ingest import (
    INDEXER_KINDS,
    INDEXER_SILENCE_TIMEOUT_S,
    K_ACK,
    K_NACK,
    K_RECONCILE,
    K_STATE,
    K_STOP,
    MAX_INFLIGHT_BATCHES,
    Ack,
    Batch,
    IngestMessage,
    Nack,
    State,
    decode_ingest,
    encode_ingest,
)

_log = log.get("scanner.link")


class IngestLink:
    def __init__(self, endpoint: str, ctx: zmq.Context[Any] | None = None, *, parent: int | None = None,
                 max_inflight: int = MAX_INFLIGHT_BATCHES) -> None:
        self.ctx = ctx or zmq.Context.instance()
        self.max_inflight = max_inflight
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.setsockopt(zmq.SNDHWM, max_inflight + 16)
        self.sock.connect(endpoint)
        self.parent = os.getppid() if parent is None else parent
        # seq -> the paths of the batch's file parts, until its ACK
        self.inflight: dict[int, list[str]] = {}
        self.control: deque[IngestMessage] = deque()
        self.replies: deque[IngestMessage] = deque()
        self.generation = 0
        self.acked_messages = 0
        self.last_heard = time.monotonic()
        self._seq = 0

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def send(self, kind: bytes, header: Mapping[str, object], payload: list[bytes] | None = None) -> None:
        self.sock.send_multipart(encode_ingest(kind, header, payload), copy=False)

    def send_batch(self, kind: bytes, header: Batch, payload: list[bytes]) -> None:
        while len(self.inflight) >= self.max_inflight:
            self.pump(timeout_s=1.0)
        self.inflight[header["seq"]] = [f["path"] for f in header.get("files", [])]
        self.send(kind, header, payload)

    def drain(self) -> None:
        """Wait until every sent batch is acknowledged."""
        while self.inflight:
            self.pump(timeout_s=1.0)

    def check_alive(self) -> None:
        if os.getppid() != self.parent:
            raise IndexerGone("parent process exited")
        if time.monotonic() - self.last_heard > INDEXER_SILENCE_TIMEOUT_S:
            raise IndexerGone(f"no word from the indexer for {INDEXER_SILENCE_TIMEOUT_S:.0f} s")

    def pump(self, timeout_s: float, wake_fd: int | None = None) -> None:
        """Receive whatever arrives within ``timeout_s`` and dispatch it; with ``wake_fd``, also
        return as soon as that file descriptor is readable (the file watcher has changes)."""
        if wake_fd is not None:
            poller = zmq.Poller()
            poller.register(self.sock, zmq.POLLIN)
            poller.register(wake_fd, zmq.POLLIN)
            ready = dict(poller.poll(int(timeout_s * 1000)))
            has_frames = self.sock in ready
        else:
            has_frames = bool(self.sock.poll(int(timeout_s * 1000), zmq.POLLIN))
        if has_frames:
            while True:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._dispatch(frames)
        self.check_alive()

    def _dispatch(self, frames: list[bytes]) -> None:
        try:
            msg = decode_ingest(frames, INDEXER_KINDS)
        except ProtocolError as exc:
            _log.warning("bad frame from indexer", error=str(exc))
            return
        self.last_heard = time.monotonic()
        if msg.kind == K_ACK:  # the headers were checked against their records where decoded
            ack = cast(Ack, msg.header)
            self.inflight.pop(ack["seq"], None)
            self.generation = ack["generation"]
            self.acked_messages += ack["messages"]
        elif msg.kind == K_NACK:
            nack = cast(Nack, msg.header)
            seq = nack.get("seq")
            poison: list[str] = []
            if nack.get("poison") is True:
                # Without a seq the indexer could not even read which batch it was: every batch
                # in flight is suspect.
                batches = [self.inflight[seq]] if seq in self.inflight else list(self.inflight.values())
                poison = sorted({p for paths in batches for p in paths})
            self.inflight.clear()
            raise Resync(nack.get("reason", "batch refused"), float(nack.get("retry_after_s", 0.0)), poison)
        elif msg.kind == K_STOP:
            raise StopRequested()
        elif msg.kind == K_RECONCILE:
            self.control.append(msg)
        elif msg.kind == K_STATE:
            self.replies.append(msg)
        # PING frames only refresh last_heard.

    def request(self, kind: bytes, header: Mapping[str, object]) -> list[IngestMessage]:
        """Send a request (its header carries a ``req`` from next_seq) and collect its STATE reply
        pages, matched by ``req``, up to the one marked ``last``."""
        req = header["req"]
        self.send(kind, header)
        pages: list[IngestMessage] = []
        while True:
            while self.replies:
                msg = self.replies.popleft()
                page = cast(State, msg.header)
                if page.get("req") != req:
                    continue
                pages.append(msg)
                if page.get("last", True):
                    return pages
            self.pump(timeout_s=0.5)

    def close(self) -> None:
        """Close the socket, then the context, while every frame it may still hold is alive.

        Batches are sent zero-copy; leaving them to the interpreter's shutdown let libzmq write
        from freed memory ("Bad address (src/tcp.cpp:227)"). Whatever is still queued is dropped:
        the indexer re-asks for anything it did not acknowledge.
        """
        self.sock.close(linger=0)
        self.ctx.term()
