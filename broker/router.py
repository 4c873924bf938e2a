"""The broker: one loop over a ROUTER socket, dispatching RPCs to worker threads.

Requests are verified and decoded here (codec), handed to a small thread pool (DuckDB runs
queries without the GIL, so searches overlap), and the workers' replies come back over an
inproc socket so only this loop ever touches the ROUTER. Every exception becomes an error
reply in exactly one place (``_call``); no traceback crosses the wire. One log line per RPC.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import zmq

from aivault import log
from aivault.codec import RpcReply, RpcRequest, decode_request, encode_reply, peek_request_id
from aivault.errors import AivaultError, AuthenticationError, ProtocolError, error_value

_log = log.get("broker")

WORKERS = 4
_TICK_MS = 100

Handler = Callable[[RpcRequest], Any]


class Broker:
    def __init__(self, endpoint: str, key: bytes, handler: Handler, *, workers: int = WORKERS) -> None:
        self.endpoint = endpoint
        self.key = key
        self.handler = handler
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="query")
        self.ctx: zmq.Context[Any] = zmq.Context.instance()
        self._stop = threading.Event()
        self._inproc = f"inproc://broker-replies-{id(self)}"
        self._ids = itertools.count(1)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        front = self.ctx.socket(zmq.ROUTER)
        front.setsockopt(zmq.LINGER, 0)
        front.setsockopt(zmq.ROUTER_MANDATORY, 0)
        path = Path(self.endpoint.removeprefix("ipc://")) if self.endpoint.startswith("ipc://") else None
        if path is not None:
            path.unlink(missing_ok=True)
        front.bind(self.endpoint)
        if path is not None:
            os.chmod(path, 0o600)
        back = self.ctx.socket(zmq.PULL)
        back.bind(self._inproc)
        poller = zmq.Poller()
        poller.register(front, zmq.POLLIN)
        poller.register(back, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(_TICK_MS))
                if back in events:
                    while True:
                        try:
                            front.send_multipart(back.recv_multipart(zmq.NOBLOCK))
                        except zmq.Again:
                            break
                if front in events:
                    while True:
                        try:
                            frames = front.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._accept(frames)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            while True:  # replies of requests that finished during shutdown
                try:
                    front.send_multipart(back.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
            front.close(linger=200)
            back.close(linger=0)
            if path is not None:
                path.unlink(missing_ok=True)

    def _accept(self, frames: list[bytes]) -> None:
        if len(frames) < 2:
            return  # not even a routing identity: nothing to answer
        ident, body = frames[0], frames[1:]
        try:
            req = decode_request(self.key, body)
        except (ProtocolError, AuthenticationError) as exc:
            rid = peek_request_id(body) or "?"
            _log.warning("rpc rejected", id=rid, error=str(exc), code=exc.code)
            self._reply_now(ident, RpcReply(rid, False, error_value(exc)))
            return
        try:
            self.pool.submit(self._call, ident, req)
        except RuntimeError:
            return  # shutting down

    def _reply_now(self, ident: bytes, rep: RpcReply) -> None:
        push = self.ctx.socket(zmq.PUSH)
        try:
            push.connect(self._inproc)
            push.send_multipart([ident, *encode_reply(self.key, rep)])
        finally:
            push.close(linger=1000)

    def _call(self, ident: bytes, req: RpcRequest) -> None:
        t0 = time.perf_counter()
        try:
            value = self.handler(req)
            rep = RpcReply(req.id, True, value)
            outcome = value.get("kind", "ok") if isinstance(value, dict) else "ok"
        except AivaultError as exc:
            rep = RpcReply(req.id, False, error_value(exc))
            outcome = f"error:{exc.code}"
        except Exception as exc:  # a bug: report it as an internal error, log the traceback here
            _log.exception("rpc failed", id=req.id, method=req.method)
            rep = RpcReply(req.id, False, error_value(AivaultError(f"internal error: {exc.__class__.__name__}: {exc}")))
            outcome = "error:internal"
        self._reply_now(ident, rep)
        _log.info("rpc", id=req.id, method=req.method, host=req.host or "local", outcome=outcome,
                  ms=round((time.perf_counter() - t0) * 1000, 2))
