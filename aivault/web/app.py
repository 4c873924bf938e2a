"""The local web page's endpoints (Starlette): search, a session's messages, status, the hosts, and the policy.

Every answer comes through ``broker.asker.Asker`` (the daemon when one answers, else the index
opened read-only for that one request), so the page never holds the database. The page targets one
execution host (``aivault web --host``); for any host but this machine it is a paired client
(docs/contract.md §8.1): status and hits are exposed as to a paired client, and the Agent Session
History controls -- consent, retention, clear -- are refused, since they are this machine's own.

A search and a session read may name another host (``host=``: ``local``, a configured host, or for a
search ``all``): ``all`` asks this machine for aiVault.searchHosts, one search merged over this machine
and every configured host, each hit naming its host; a hit of any host but this machine is shown as to
a paired client, as the page's own remote searches are.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aivault import policy as policy_mod
from aivault.broker.asker import Asker
from aivault.broker.exposure import redact_for_transport, redact_read, redact_status
from aivault.broker.remote.hosts import parse_host
from aivault.errors import AivaultError, InvalidParams, NeedsDaemon
from aivault.home import Home
from aivault.protocol import (
    AGENT_NAMES,
    ERROR_CODES,
    METHOD_CLEAR,
    METHOD_HOSTS,
    METHOD_READ,
    METHOD_SEARCH,
    METHOD_SEARCH_HOSTS,
    METHOD_STATUS,
    search_request,
)
from aivault.web.guard import TrustGuard

STATIC = Path(__file__).resolve().parent / "static"
ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
# A clear closes the indexer and replaces the database before it answers; the rebuild runs after.
CLEAR_TIMEOUT_S = 600.0
# The largest magnitude of a query-string number (from, count, limit): 2**31 - 1.
_INT32 = 2**31 - 1
# The search that asks this machine and every configured host at once (aiVault.searchHosts).
ALL_HOSTS = "all"
# A merged search answers within its own deadline (config.json mergedSearch.deadlineS); the page waits
# this much longer for the answer to travel.
_MERGED_SLACK_S = 5.0
# Askers kept for hosts a request named (besides this machine's and the page's own host).
_MAX_ASKERS = 32
_HTTP_STATUS = {"invalid-params": 400, "session-not-found": 404, "host-unavailable": 502, "needs-daemon": 503,
                "busy": 503, "index-locked": 503, "indexing-disabled": 409}
# The page's own security policy: its script and style only, nothing framed, nothing sent elsewhere.
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _error(exc: AivaultError) -> JSONResponse:
    name = ERROR_CODES.get(exc.code, "internal-error")
    return JSONResponse({"ok": False, "error": name, "message": str(exc)}, status_code=_HTTP_STATUS.get(name, 500))


class Page:
    """The endpoints over one data directory and one execution host."""

    def __init__(self, home: Home, host: str | None = None) -> None:
        self.home = home
        self.asker = Asker(home, host)
        self.local = self.asker if self.asker.is_local else Asker(home)
        self._askers: dict[str, Asker] = {"local": self.local, self.asker.host or "local": self.asker}
        self.csrf_token = secrets.token_urlsafe(32)

    @property
    def remote(self) -> bool:
        return not self.asker.is_local

    def asker_for(self, host: str | None) -> Asker:
        """The asker of the host a request names (``host=``); none named: the page's own host."""
        if not host:
            return self.asker
        hid = parse_host(host).id  # 'all' and a malformed id are invalid-params
        asker = self._askers.get(hid)
        if asker is None:
            asker = Asker(self.home, hid)
            if len(self._askers) < _MAX_ASKERS:
                self._askers[hid] = asker
        return asker

    async def _ask(self, method: str, params: Any, *, asker: Asker | None = None, **kw: Any) -> Any:
        return await run_in_threadpool((asker or self.asker).call, method, params, **kw)

    # --- the page -----------------------------------------------------------------------------
    async def index(self, request: Request) -> Response:
        html = (STATIC / "index.html").read_text("utf-8")
        config = {"csrf": self.csrf_token, "host": self.asker.host or "local", "controls": not self.remote,
                  "agents": list(AGENT_NAMES)}
        html = html.replace("{{CONFIG}}", json.dumps(config).replace("&", "&amp;").replace('"', "&quot;"))
        return Response(html, media_type="text/html; charset=utf-8", headers=_page_headers())

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return JSONResponse({"ok": False, "error": "not-found", "message": "no such file"}, status_code=404)
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers=_page_headers())

    # --- asking -------------------------------------------------------------------------------
    async def search(self, request: Request) -> Response:
        q = request.query_params
        body = search_request(q.get("query", ""), limit=_int(q.get("limit"), "limit", 10),
                              agents=[a for a in q["agents"].split(",") if a] if q.get("agents") else None,
                              scope_paths=[q["path"]] if q.get("path") else None, since=q.get("since"),
                              sort=q.get("sort"), cursor=q.get("cursor"))
        if q.get("host") == ALL_HOSTS:
            return await self._search_all(body)
        try:
            asker = self.asker_for(q.get("host"))
            result: dict[str, Any] = await self._ask(METHOD_SEARCH, body, asker=asker)
        except AivaultError as exc:
            return _error(exc)
        if not asker.is_local and result.get("kind") == "results":
            result = {**result, "hits": [redact_for_transport(h, "paired") for h in result["hits"]]}
        return JSONResponse(result)

    async def _search_all(self, body: Mapping[str, Any]) -> Response:
        """aiVault.searchHosts over this machine and every configured host, asked of this machine; a hit of
        another host is shown as to a paired client."""
        from aivault.broker.merged import settings

        try:
            wait = max(self.local.timeout_s, settings(self.home).deadline_s + _MERGED_SLACK_S)
            result: dict[str, Any] = await self._ask(METHOD_SEARCH_HOSTS, {**body, "hosts": ALL_HOSTS},
                                                     asker=self.local, timeout_s=wait)
        except AivaultError as exc:
            return _error(exc)
        if result.get("kind") == "results":
            result = {**result, "hits": [h if h.get("executionHostId", "local") == "local"
                                         else redact_for_transport(h, "paired") for h in result["hits"]]}
        return JSONResponse(result)

    async def hosts(self, request: Request) -> Response:
        """The hosts a search may name: this machine, every configured host (aiVault.listHosts), and the page's
        own host; ``default`` is the page's host."""
        try:
            listed: dict[str, Any] = await self._ask(METHOD_HOSTS, {"check": False}, asker=self.local)
        except AivaultError as exc:
            return _error(exc)
        rows: list[dict[str, Any]] = [{"id": "local", "kind": "local"}]
        for h in listed.get("hosts") or []:
            rows.append({"id": h.get("id"), "kind": h.get("kind"), "state": h.get("state")})
        own = self.asker.host or "local"
        if own not in {r["id"] for r in rows}:
            rows.append({"id": own, "kind": own.partition(":")[0], "state": None})
        return JSONResponse({"hosts": rows, "default": own, "all": ALL_HOSTS})

    async def session(self, request: Request) -> Response:
        q = request.query_params
        params: dict[str, Any] = {"sessionId": q.get("id", ""), "count": _int(q.get("count"), "count", 12),
                                  "maxChars": 4000}
        for name in ("agent", "query", "direction", "scope"):
            if q.get(name):
                params[name] = q[name]
        if q.get("from"):
            params["from"] = _int(q["from"], "from", 0)
        try:
            asker = self.asker_for(q.get("host"))
            value: dict[str, Any] = await self._ask(METHOD_READ, params, asker=asker)
        except AivaultError as exc:
            return _error(exc)
        if not asker.is_local:
            value = redact_read(value, "paired")
        return JSONResponse(value)

    async def status(self, request: Request) -> Response:
        try:
            st: dict[str, Any] = await self._ask(METHOD_STATUS, {})
        except AivaultError as exc:
            return _error(exc)
        if self.remote:
            st = redact_status(st, "paired")
        return JSONResponse({"status": st, "host": self.asker.host or "local", "mode": self.asker.last_mode})

    async def policy(self, request: Request) -> Response:
        if request.method == "POST":
            return await self.set_policy(request)
        try:
            pol = policy_mod.load(self.home)
        except AivaultError as exc:
            return _error(exc)
        return JSONResponse({"policy": pol.to_json(), "controls": not self.remote})

    # --- this machine's controls (docs/contract.md §8) ----------------------------------------
    def _local_only(self, what: str) -> JSONResponse | None:
        if not self.remote:
            return None
        return JSONResponse({"ok": False, "error": "paired-client",
                             "message": f"this page searches {self.asker.host}: {what} is this machine's own control "
                                        "and is not offered to a page for another host"}, status_code=403)

    async def set_policy(self, request: Request) -> Response:
        refused = self._local_only("the Agent Session History policy")
        if refused is not None:
            return refused
        try:
            body = await _json(request)
            old = policy_mod.load(self.home)
            enabled = body.get("enabled", old.enabled)
            days = body.get("historyDays", old.history_days) if "historyDays" in body else old.history_days
            if not isinstance(enabled, bool):
                raise InvalidParams("enabled must be true or false")
            if days is not None and (isinstance(days, bool) or not isinstance(days, int) or not 0 < days <= 36500):
                raise InvalidParams("historyDays must be a whole number of days from 1 to 36500, or null to keep "
                                    "everything")
            new = policy_mod.Policy(enabled, days)
            await run_in_threadpool(policy_mod.save, self.home, new)
        except AivaultError as exc:
            return _error(exc)
        return JSONResponse({"policy": new.to_json(), "daemon": await run_in_threadpool(self.asker.daemon_running)})

    async def clear(self, request: Request) -> Response:
        refused = self._local_only("clearing the index")
        if refused is not None:
            return refused
        try:
            body = await _json(request)
            if body.get("confirm") is not True:
                raise InvalidParams("clearing deletes the index (never a transcript): send {\"confirm\": true}")
            if not await run_in_threadpool(self.asker.daemon_running):
                raise NeedsDaemon("clearing from this page needs the daemon (`aivault serve`); without one, run "
                                  "`aivault clear`")
            value = await self._ask(METHOD_CLEAR, {}, timeout_s=CLEAR_TIMEOUT_S)
        except AivaultError as exc:
            return _error(exc)
        return JSONResponse(value)


def _int(value: str | None, name: str, default: int) -> int:
    """A query-string number, clamped into 32 bits (each request then clamps it to its own range: a
    bigger one could not even be sent to the daemon); past 4,300 digits it is refused as not a number."""
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise InvalidParams(f"{name} must be a whole number, got {value[:20]!r}") from None
    return max(-_INT32, min(_INT32, n))


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except RecursionError:
        raise InvalidParams("the body is not JSON a parser reads: it nests too deeply") from None
    except ValueError as exc:
        raise InvalidParams(f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidParams("the body must be a JSON object")
    return body


def _page_headers() -> dict[str, str]:
    return {"content-security-policy": _CSP, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
            "cache-control": "no-store"}


def build_app(home: Home, *, authority: str, sign_in_token: str,
              host: str | None = None) -> tuple[TrustGuard, Page]:
    """The guarded ASGI app for the page bound at ``authority`` (``127.0.0.1:PORT``); ``sign_in_token``
    is the token of ``web.token`` that the printed URL carries."""
    page = Page(home, host)
    routes = [
        Route("/", page.index, methods=["GET"]),
        Route("/static/{name}", page.asset, methods=["GET"]),
        Route("/api/search", _guarded(page.search), methods=["GET"]),
        Route("/api/session", _guarded(page.session), methods=["GET"]),
        Route("/api/hosts", _guarded(page.hosts), methods=["GET"]),
        Route("/api/status", page.status, methods=["GET"]),
        Route("/api/policy", page.policy, methods=["GET", "POST"]),
        Route("/api/clear", page.clear, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    # The session cookie's value: this process's own secret (never the token), so a cookie does not
    # outlive the server.
    guard = TrustGuard(app, routes, authority=authority, csrf_token=page.csrf_token, sign_in_token=sign_in_token,
                       session_secret=secrets.token_urlsafe(32))
    return guard, page


def _guarded(handler: Any) -> Any:
    """A handler whose own parsing errors (a bad number in the query string) answer as errors."""
    async def run(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except AivaultError as exc:
            return _error(exc)
        return response
    return run
