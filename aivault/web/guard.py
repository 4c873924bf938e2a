"""The trust guard in front of every endpoint of the local web page (an ASGI middleware).

The page shows the user's whole agent history and can turn indexing off or delete the index, and
every local user can connect to 127.0.0.1, so a request is answered only when it comes from the
owner's own browser, in this order:

1. ``Host`` is the authority the server is bound to (``127.0.0.1:PORT``, or ``localhost:PORT``):
   a page of another site that re-points its own name at 127.0.0.1 (DNS rebinding) sends its own
   name and is refused.
2. The path and method exist: an unknown path is 404, a known one with another method 405 with
   ``Allow``.
3. Signing in: ``GET /?token=T`` with the token of ``web.token`` (a 0600 file of the data
   directory, which ``aivault web`` prints in its URL) answers a page that sets the session cookie
   and moves on to ``/`` (the token leaves the address bar). The cookie holds a random secret of
   this server process (never the token), is ``HttpOnly`` (no script reads it) and
   ``SameSite=Strict`` (no other site's page or link sends it), and is named after the port, so
   two ``aivault web`` servers do not sign each other out.
4. ``Sec-Fetch-Site``, when the browser sends it, is ``same-origin`` (or ``none``, a typed URL, for
   reading); ``Origin``, when sent, is this server's origin. A state-changing request must carry one
   of the two, same-origin.
5. The session cookie: without it ``/`` is a page saying to open the URL ``aivault web`` printed
   and every ``/api/*`` route is 401, before anything is read. ``/static/*`` (the script and style
   sheet, the same bytes as in the installed package, which every local user can read there) is
   served without it: it holds no data.
6. A state-changing request carries the per-process CSRF token in ``X-Aivault-Csrf``.
7. A body is at most 4,096 bytes (413) and, where one is expected, ``application/json`` (415).

A refusal is ``{ok: false, error, message}`` with its status (the page itself: a small HTML page),
and one log line says why; the token never appears in a log line.
"""

from __future__ import annotations

import hmac
import html
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

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
    """An answer the guard gives itself: a refusal, or the sign-in page (``error`` names it for the log)."""

    status: int
    error: str
    message: str
    headers: tuple[tuple[str, str], ...] = ()
    # The body as an HTML page (for the page itself) instead of the JSON error value.
    html: str | None = None


SIGN_IN_HINT = ("open the address `aivault web` printed when it started (it ends in ?token=...): it signs this "
                "browser in until that `aivault web` stops")
# The page's own security policy: nothing but itself.
_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def _html_page(title: str, text: str) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>aivault: "
            f"{html.escape(title)}</title></head>\n<body><h1>aivault</h1><p>{html.escape(text)}</p></body></html>\n")


def _query_token(scope: Scope) -> str | None:
    query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True)
    values = query.get("token")
    return values[0] if values else None


def _cookie(scope: Scope, name: str) -> str | None:
    for k, v in scope.get("headers") or []:
        if k.lower() != b"cookie":
            continue
        for part in bytes(v).decode("latin-1").split(";"):
            key, sep, value = part.strip().partition("=")
            if sep and key == name:
                return value
    return None


def _header(scope: Scope, name: str) -> str | None:
    raw = name.encode("latin-1")
    for k, v in scope.get("headers") or []:
        if k.lower() == raw:
            return bytes(v).decode("latin-1")
    return None


class TrustGuard:
    """Wraps the page's ASGI app; ``routes`` are the app's routes (their paths and methods)."""

    def __init__(self, app: App, routes: list[Route], *, authority: str, csrf_token: str, sign_in_token: str,
                 session_secret: str) -> None:
        self.app = app
        self.routes = routes
        self.authority = authority
        port = authority.rpartition(":")[2]
        self.hosts = frozenset({authority, f"localhost:{port}"})
        self.origins = frozenset(f"http://{h}" for h in self.hosts)
        self.csrf_token = csrf_token
        self.sign_in_token = sign_in_token
        self.session_secret = session_secret
        self.cookie_name = f"aivault_session_{port}"

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
            outcome = {"signed_in": True} if refusal.status < 400 else {"refused": refusal.error}
            _log.info("request", method=scope["method"], path=scope["path"], status=refusal.status,
                      ms=round((time.monotonic() - t0) * 1000, 1), **outcome)
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
        token = _query_token(scope) if method == "GET" and scope["path"] == "/" else None
        if token is not None:
            # Signing in comes from a typed URL, the terminal, or --open's local file (cross-site to the
            # browser): the token itself is the proof, so the fetch metadata is not asked for here.
            return self.sign_in(token)
        site = _header(scope, "sec-fetch-site")
        origin = _header(scope, "origin")
        changing = method in STATE_CHANGING
        if site is not None and site not in (("same-origin",) if changing else ("same-origin", "none")):
            return Refusal(403, "cross-origin", "cross-origin request rejected")
        if origin is not None and origin not in self.origins:
            return Refusal(403, "cross-origin", "cross-origin request rejected")
        if changing and site != "same-origin" and origin is None:
            return Refusal(403, "cross-origin", "cross-origin request rejected: a change needs a same-origin "
                                                "Origin or Sec-Fetch-Site")
        if not scope["path"].startswith("/static/") and not self.signed_in(scope):
            if scope["path"] == "/":
                return Refusal(401, "unauthorized", SIGN_IN_HINT, html=_html_page("sign in", f"This page "
                               f"shows your agents' sessions to you alone: {SIGN_IN_HINT}."))
            return Refusal(401, "unauthorized", f"not signed in: {SIGN_IN_HINT}")
        if changing:
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

    def signed_in(self, scope: Scope) -> bool:
        value = _cookie(scope, self.cookie_name)
        return value is not None and hmac.compare_digest(value.encode(), self.session_secret.encode())

    def sign_in(self, token: str) -> Refusal:
        """``/?token=T``: the session cookie and a page that moves on to ``/``, or 401 for a wrong token."""
        if not hmac.compare_digest(token.encode(), self.sign_in_token.encode()):
            text = ("This address's token is not this server's (web.token was made anew, or the address is "
                    f"another server's): {SIGN_IN_HINT}.")
            return Refusal(401, "wrong-token", text, html=_html_page("sign in", text))
        cookie = f"{self.cookie_name}={self.session_secret}; HttpOnly; SameSite=Strict; Path=/"
        # A page that moves on (rather than a 303): the move is this origin's own navigation, so the
        # Strict cookie goes with it even when the sign-in itself came from another site (--open's file).
        page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta http-equiv=\"refresh\" content=\"0; url=/\"><title>aivault</title></head>\n"
                "<body><p>Signed in. <a href=\"/\">Open the page</a>.</p></body></html>\n")
        return Refusal(200, "signed-in", "signed in", (("set-cookie", cookie),), html=page)

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
                # The client went (or was cut at the read deadline) before the body ended: a partial
                # body is never handed on as if it were the request.
                return b"", Refusal(400, "disconnected", "the client closed the connection before the body ended")
            chunk = bytes(message.get("body") or b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return b"", Refusal(413, "too-large", f"request bodies are at most {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks), None


async def _refuse(send: Send, r: Refusal) -> None:
    if r.html is not None:
        body = r.html.encode("utf-8")
        ctype = b"text/html; charset=utf-8"
        extra = [(b"content-security-policy", _CSP.encode()), (b"referrer-policy", b"no-referrer"),
                 (b"x-content-type-options", b"nosniff")]
    else:
        body = json.dumps({"ok": False, "error": r.error, "message": r.message}).encode()
        ctype = b"application/json"
        extra = []
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *extra, *((k.encode(), v.encode()) for k, v in r.headers)]
    await send({"type": "http.response.start", "status": r.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
