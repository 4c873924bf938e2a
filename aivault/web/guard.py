"""The trust guard in front of every endpoint of the local web page (an ASGI middleware).

The page shows the user's whole agent history and can turn indexing off or delete the index, so
a request is answered only when it can come from the page itself, in this order:

1. ``Host`` is the authority the server is bound to (``127.0.0.1:PORT``, or ``localhost:PORT``):
   a page of another site that re-points its own name at 127.0.0.1 (DNS rebinding) sends its own
   name and is refused.
2. The path and method exist: an unknown path is 404, a known one with another method 405 with
   ``Allow``.
3. ``Sec-Fetch-Site``, when the browser sends it, is ``same-origin`` (or ``none``, a typed URL, for
   reading); ``Origin``, when sent, is this server's origin. A state-changing request must carry one
   of the two, same-origin, and the per-process CSRF token in ``X-Aivault-Csrf``.
4. A body is at most 4,096 bytes (413) and, where one is expected, ``application/json`` (415).

A refusal is ``{ok: false, error, message}`` with its status, and one log line says why.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.routing import Match, Route

from aivault import log

_log = log.get("web")

MAX_BODY_BYTES = 4096
CSRF_HEADER = "x-aivault-csrf"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    error: str
    message: str
    headers: tuple[tuple[str, str], ...] = ()


def _header(scope: Scope, name: str) -> str | None:
    raw = name.encode("latin-1")
    for k, v in scope.get("headers") or []:
        if k.lower() == raw:
            return bytes(v).decode("latin-1")
    return None


class TrustGuard:
    """Wraps the page's ASGI app; ``routes`` are the app's routes (their paths and methods)."""

    def __init__(self, app: App, routes: list[Route], *, authority: str, csrf_token: str) -> None:
        self.app = app
        self.routes = routes
        self.authority = authority
        port = authority.rpartition(":")[2]
        self.hosts = frozenset({authority, f"localhost:{port}"})
        self.origins = frozenset(f"http://{h}" for h in self.hosts)
        self.csrf_token = csrf_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.monotonic()
        refusal = self.check(scope)
        body = b""
        if refusal is None:
            body, refusal = await self._read_body(scope, receive)
        if refusal is not None:
            await _refuse(send, refusal)
            _log.info("request", method=scope["method"], path=scope["path"], status=refusal.status,
                      refused=refusal.error, ms=round((time.monotonic() - t0) * 1000, 1))
            return
        status: list[int] = []

        async def replay() -> Message:
            nonlocal body
            chunk, body = body, b""
            return {"type": "http.request", "body": chunk, "more_body": False}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, replay, sending)
        _log.info("request", method=scope["method"], path=scope["path"], status=status[0] if status else None,
                  ms=round((time.monotonic() - t0) * 1000, 1))

    def check(self, scope: Scope) -> Refusal | None:
        """Everything decided by the request line and headers (the body comes after)."""
        method = scope["method"]
        if _header(scope, "host") not in self.hosts:
            return Refusal(403, "untrusted-host", f"untrusted host authority: open http://{self.authority}/")
        allowed = self._methods(scope)
        if allowed is None:
            return Refusal(404, "not-found", f"no such page: {scope['path'][:80]}")
        if method not in allowed:
            allow = ", ".join(sorted(allowed))
            return Refusal(405, "method-not-allowed", f"{scope['path']} answers {allow} only", (("allow", allow),))
        site = _header(scope, "sec-fetch-site")
        origin = _header(scope, "origin")
        changing = method in STATE_CHANGING
        if site is not None and site not in (("same-origin",) if changing else ("same-origin", "none")):
            return Refusal(403, "cross-origin", "cross-origin request rejected")
        if origin is not None and origin not in self.origins:
            return Refusal(403, "cross-origin", "cross-origin request rejected")
        if changing:
            if site != "same-origin" and origin is None:
                return Refusal(403, "cross-origin", "cross-origin request rejected: a change needs a same-origin "
                                                    "Origin or Sec-Fetch-Site")
            token = _header(scope, CSRF_HEADER) or ""
            if not hmac.compare_digest(token.encode(), self.csrf_token.encode()):
                return Refusal(403, "csrf", "missing or wrong CSRF token: reload the page")
        length = _header(scope, "content-length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            return Refusal(413, "too-large", f"request bodies are at most {MAX_BODY_BYTES} bytes")
        if changing:
            ctype = (_header(scope, "content-type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return Refusal(415, "unsupported-media-type", "send the body as application/json")
        return None

    def _methods(self, scope: Scope) -> frozenset[str] | None:
        """The methods the route at this path answers (HEAD with GET); None when no route has the path."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match in (Match.FULL, Match.PARTIAL):
                return frozenset(route.methods or ())
        return None

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[bytes, Refusal | None]:
        """The whole body, refused past MAX_BODY_BYTES however it is sent (chunked has no length)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = bytes(message.get("body") or b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return b"", Refusal(413, "too-large", f"request bodies are at most {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks), None


async def _refuse(send: Send, r: Refusal) -> None:
    body = json.dumps({"ok": False, "error": r.error, "message": r.message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *((k.encode(), v.encode()) for k, v in r.headers)]
    await send({"type": "http.response.start", "status": r.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
