"""The three tools an agent gets: what they take, what they answer, and how the answer stays small.

Every answer is one JSON text, its ``summary`` first, and the whole tool result (as the MCP
``CallToolResult`` travels) fits ``max_chars`` bytes -- 4,000 unless asked, never more than
16,000: an answer that floods the agent's context costs more than it tells. Search snippets are
cut before a hit is dropped; a page that still does not fit is asked for again with a smaller
limit, so its cursor continues exactly after the last hit shown. A tool never waits for the
indexer: it answers from what is indexed now and says when the index is catching up.

The agent's own running session is left out of searches (it would always match best): the one the
harness names in the environment (``CLAUDE_CODE_SESSION_ID``, ``CODEX_THREAD_ID``,
``AIVAULT_SESSION_ID``), else the newest session in the caller's folder when it was active in the
last ``LIVE_SESSION_WINDOW_S``. ``include_live: true`` keeps it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aivault.broker.asker import Asker
from aivault.broker.exposure import Transport, redact_for_transport, redact_status
from aivault.errors import AivaultError, IndexingDisabled, NeedsDaemon
from aivault.mcp.args import Arg, Parsed, input_schema, parse_args
from aivault.protocol import AGENT_NAMES, METHOD_READ, METHOD_RECONCILE, METHOD_SEARCH, METHOD_STATUS

DEFAULT_MAX_CHARS = 4000
MAX_CHARS_CAP = 16_000
MIN_MAX_CHARS = 1000
LIVE_SESSION_WINDOW_S = 600
# The environment variables harnesses set to the session that spawned this server.
SESSION_ENV = ("AIVAULT_SESSION_ID", "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID")
# Snippet and title lengths tried, longest first, before a hit is dropped from a page.
_SNIPPET_STEPS = (300, 160, 80, 0)
_TITLE_CHARS = 100
# A reconcile started by index_status runs in the background; its answer may take this long.
_REFRESH_TIMEOUT_S = 3600.0

_HOST = Arg("host", "string", "execution host: local (default), ssh:<target> or runtime:<id>")
_MAX = Arg("max_chars", "integer", "size cap of this result in bytes", low=MIN_MAX_CHARS, high=MAX_CHARS_CAP,
           default=DEFAULT_MAX_CHARS)

SEARCH_ARGS: tuple[Arg, ...] = (
    Arg("query", "string", "words or a \"phrase\"; operators agent:NAME path:/dir branch:NAME", required=True),
    Arg("agents", "array", "only these agents", choices=AGENT_NAMES),
    Arg("path", "string", "only sessions whose folder is this absolute path or below it"),
    Arg("since", "string", "only sessions active since this ISO date/time"),
    Arg("sort", "enum", "relevance (default) or newest", choices=("relevance", "newest")),
    Arg("limit", "integer", "sessions per page", low=1, high=20, default=5),
    Arg("cursor", "string", "the cursor of the previous page, for the next one"),
    Arg("include_live", "boolean", "also return your own running session"),
    _HOST, _MAX,
)
READ_ARGS: tuple[Arg, ...] = (
    Arg("session_id", "string", "a hit's id", required=True),
    Arg("agent", "enum", "the hit's agent (needed only if two agents share the id)", choices=AGENT_NAMES),
    Arg("query", "string", "centre on the message matching this (your search: the hit)"),
    Arg("position", "integer", "start at this message position (from before/after)", low=0, high=2**31 - 1),
    Arg("direction", "enum", "from position or the hit", choices=("forward", "backward", "around")),
    Arg("count", "integer", "messages", low=1, high=20, default=6),
    Arg("scope", "enum", "conversation (default: user and assistant text) or all (with tool calls and output)",
        choices=("conversation", "all"), default="conversation"),
    _HOST, _MAX,
)
STATUS_ARGS: tuple[Arg, ...] = (
    Arg("refresh", "boolean", "start a scan for recent changes and return at once"),
    _HOST,
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    args: tuple[Arg, ...]

    def schema(self) -> dict[str, Any]:
        return input_schema(self.args)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search_sessions", "Search past AI coding-agent sessions on this machine (Claude Code, Codex, Gemini, "
             "...): what was done, decided or fixed before. Returns sessions with title, folder, branch, time, "
             "the matching message and the command that resumes it.", SEARCH_ARGS),
    ToolSpec("read_session", "Read messages of one session from search_sessions: around the hit (pass the same "
             "query) or from a position. Each message is cut to a bounded length (truncated: true).", READ_ARGS),
    ToolSpec("index_status", "Whether the session index is current, and what it holds; refresh: true starts "
             "indexing recent changes without waiting.", STATUS_ARGS),
)
BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


class ToolFailed(AivaultError):
    """A tool answer that is an error value (unavailable, a stale cursor) rather than a raised error."""

    def __init__(self, name: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.name = name
        self.extra = extra


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls: the harness's session id (from its environment) and the folder it runs in."""

    session_id: str | None
    cwd: str | None

    @classmethod
    def from_environment(cls) -> Caller:
        sid = next((os.environ[k] for k in SESSION_ENV if os.environ.get(k)), None)
        cwd = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        return cls(sid, os.path.realpath(cwd) if cwd else None)


def result_bytes(text: str) -> int:
    """The size of a one-text CallToolResult as it travels (JSON, UTF-8)."""
    envelope = {"content": [{"type": "text", "text": text}], "isError": False, "resultType": "complete"}
    return len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _when(ms: Any) -> str | None:
    if not isinstance(ms, int | float):
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _cut(text: Any, n: int) -> str | None:
    if not isinstance(text, str):
        return None
    if len(text) <= n:
        return text
    out = text[: max(0, n - 1)]
    if out.count("[[") > out.count("]]"):  # never end inside a highlight mark
        out += "]]"
    return out + "…"


class Tools:
    """The tools' implementations over an Asker per host; one instance per server process."""

    def __init__(self, asker_for: Callable[[str | None], Asker], caller: Caller,
                 clock: Callable[[], float] = time.time) -> None:
        self.asker_for = asker_for
        self.caller = caller
        self.clock = clock
        self._refresh_lock = threading.Lock()
        # host -> {started, finished, error, summary}: the background reconcile index_status started.
        self._refresh: dict[str, dict[str, Any]] = {}

    def call(self, name: str, raw: dict[str, Any] | None) -> str:
        spec = BY_NAME.get(name)
        if spec is None:
            raise ToolFailed("invalid-params", f"no tool {name!r}; the tools are {', '.join(BY_NAME)}")
        args = parse_args(name, spec.args, raw)
        if name == "search_sessions":
            return self.search(args)
        if name == "read_session":
            return self.read(args)
        return self.status(args)

    # --- search_sessions --------------------------------------------------------------------------
    def search(self, args: Parsed) -> str:
        a = args.values
        asker = self.asker_for(a.get("host"))
        filters: dict[str, Any] = {}
        if a.get("agents"):
            filters["agents"] = a["agents"]
        if a.get("path"):
            filters["scopePaths"] = [os.path.abspath(os.path.expanduser(a["path"]))]
        if a.get("since"):
            filters["since"] = a["since"]
        if a.get("sort"):
            filters["sort"] = a["sort"]
        request: dict[str, Any] = {"query": a["query"], "filters": filters}
        if a.get("cursor"):
            request["cursor"] = a["cursor"]
        live = None if a.get("include_live") else self._live_session(asker)
        budget = int(a["max_chars"])
        limit = int(a["limit"])
        for _ in range(4):
            result = self._search_once(asker, {**request, "limit": limit})
            hits = [_received(asker, h) for h in result["hits"] if not (live and h.get("sessionId") == live)]
            left_out = len(result["hits"]) - len(hits)
            extra = self._catching_up(asker, a.get("host"))
            text, shown = self._fit_hits(a["query"], hits, result, left_out, live, extra, args.notes, budget)
            if shown == len(hits) or shown == 0:
                return text
            limit = shown + left_out  # ask for exactly what fits, so the cursor follows the last hit shown
        return text

    def _search_once(self, asker: Asker, request: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = asker.call(METHOD_SEARCH, request)
        kind = result.get("kind")
        if kind == "results":
            return result
        if kind == "unavailable":
            reason = result.get("reason")
            msg = {"disabled": "session search is turned off for this machine: the user enables it with "
                               "`aivault enable` (then `aivault serve` or `aivault index`)",
                   "not-ready": "the index is being built and has nothing to search yet; try again in a minute "
                                "(index_status shows progress)",
                   "no-service": "nothing on that host answers searches"}.get(str(reason), str(reason))
            raise ToolFailed("unavailable", msg, reason=reason)
        if kind == "stale-cursor":
            raise ToolFailed("stale-cursor", "the index changed since that cursor was made: search again without "
                                             "cursor (page 1)")
        raise ToolFailed("malformed-cursor", "that cursor is not one of this search's: pass the cursor of the "
                                             "previous page of the same query and filters, or none")

    def _fit_hits(self, query: str, hits: list[dict[str, Any]], result: dict[str, Any], left_out: int,
                  live: str | None, extra: dict[str, Any], notes: list[str], budget: int) -> tuple[str, int]:
        """The largest prefix of ``hits`` (snippets shortened first) whose answer fits ``budget`` bytes."""
        page = result.get("page") or {}
        for n in range(len(hits), -1, -1):
            for chars in _SNIPPET_STEPS:
                compact = [self._hit(h, chars) for h in hits[:n]]
                complete = n == len(hits)
                more = bool(page.get("hasMore")) or not complete
                summary = f"{n} session(s) for {query!r}" + ("; more: pass cursor" if more and complete else "")
                payload: dict[str, Any] = {"summary": summary, "hits": compact,
                                           "cursor": page.get("cursor") if complete else None}
                if not complete:
                    payload["summary"] += f"; {len(hits) - n} more did not fit max_chars: search again with limit {n}"
                if left_out:
                    payload["leftOut"] = f"your own running session {live} (include_live: true shows it)"
                if notes:
                    payload["notes"] = notes
                payload.update(extra)
                text = dump(payload)
                if result_bytes(text) <= budget:
                    return text, n
        return dump({"summary": "max_chars is too small for any hit", "hits": []}), 0

    @staticmethod
    def _hit(h: dict[str, Any], snippet_chars: int) -> dict[str, Any]:
        ev = h.get("evidence") or {}
        out = {"agent": h.get("agent"), "id": h.get("sessionId"), "title": _cut(h.get("title"), _TITLE_CHARS),
               "cwd": h.get("cwd"), "branch": h.get("branch"), "when": _when(h.get("updatedAt")),
               "snippet": _cut(ev.get("snippet"), snippet_chars) if snippet_chars else None,
               "resume": h.get("resumeCommand"), "executionHostId": h.get("executionHostId")}
        return {k: v for k, v in out.items() if v not in (None, "")}

    def _live_session(self, asker: Asker) -> str | None:
        """The caller's own running session: named by the harness, else the newest one in its folder."""
        if self.caller.session_id:
            return self.caller.session_id
        cwd = self.caller.cwd
        if not asker.is_local or not cwd:
            return None
        try:
            result = asker.call(METHOD_SEARCH, {"query": f'path:"{cwd}"', "limit": 5, "filters": {"sort": "newest"}})
        except AivaultError:
            return None  # the search itself will report what is wrong
        now_ms = self.clock() * 1000
        for h in result.get("hits") or []:
            updated = h.get("updatedAt")
            if h.get("cwd") == cwd and isinstance(updated, int | float):
                return str(h.get("sessionId")) if now_ms - updated <= LIVE_SESSION_WINDOW_S * 1000 else None
        return None

    def _catching_up(self, asker: Asker, host: str | None) -> dict[str, Any]:
        """A note when what was searched is not the whole picture yet (indexing, or a refresh running)."""
        notes = []
        pending = self._refresh.get(host or "local")
        if pending and pending.get("finished") is None:
            notes.append(f"a refresh started {self.clock() - pending['started']:.0f} s ago is still running")
        if asker.last_mode == "daemon":
            try:
                st = asker.call(METHOD_STATUS, {})
            except AivaultError:
                st = {}
            if st.get("phase") == "indexing":
                notes.append(f"the index is catching up ({st.get('filesDue', 0)} file(s) due); results are "
                             "from what is indexed so far")
        return {"catchingUp": "; ".join(notes)} if notes else {}

    # --- read_session -----------------------------------------------------------------------------
    def read(self, args: Parsed) -> str:
        a = args.values
        asker = self.asker_for(a.get("host"))
        count = int(a["count"])
        budget = int(a["max_chars"])
        per_message = max(200, min(2000, (budget - 600) // count))
        params: dict[str, Any] = {"sessionId": a["session_id"], "count": count, "maxChars": per_message,
                                  "scope": a["scope"]}
        for key, wire in (("agent", "agent"), ("query", "query"), ("position", "from"), ("direction", "direction")):
            if a.get(key) is not None:
                params[wire] = a[key]
        result: dict[str, Any] = asker.call(METHOD_READ, params)
        if result.get("kind") == "unavailable":
            raise ToolFailed("unavailable", f"sessions cannot be read here now ({result.get('reason')}); "
                                            "index_status says why", reason=result.get("reason"))
        return self._fit_messages(result, str(params.get("direction", "forward")), args.notes, budget)

    def _fit_messages(self, result: dict[str, Any], direction: str, notes: list[str], budget: int) -> str:
        s = result["session"]
        session = {k: v for k, v in {"agent": s.get("agent"), "id": s.get("sessionId"),
                                     "title": _cut(s.get("title"), _TITLE_CHARS), "cwd": s.get("cwd"),
                                     "branch": s.get("branch"), "when": _when(s.get("updatedAt")),
                                     "resume": s.get("resumeCommand")}.items() if v not in (None, "")}
        msgs = [{k: v for k, v in {"position": m["position"], "role": m["role"],
                                   "kind": None if m["kind"] == "text" else m["kind"], "when": _when(m["timestamp"]),
                                   "text": m["text"], "truncated": m["truncated"]}.items() if v is not None}
                for m in result["messages"]]
        before, after = result.get("before"), result.get("after")
        while True:
            first = msgs[0]["position"] if msgs else None
            last = msgs[-1]["position"] if msgs else None
            summary = (f"messages {first}-{last} of {result.get('total')} in this session" if msgs
                       else f"no messages in this window ({result.get('total')} in the session)")
            payload: dict[str, Any] = {"summary": summary, "session": session, "messages": msgs,
                                       "before": before, "after": after}
            if result.get("anchor") is not None:
                payload["hitAt"] = result["anchor"]
            if notes:
                payload["notes"] = notes
            text = dump(payload)
            if result_bytes(text) <= budget or not msgs:
                return text
            # Drop from the far end of the reading direction; the cursor positions follow.
            if direction == "backward" or (direction == "around" and len(msgs) % 2 == 0):
                before = msgs.pop(0)["position"]
            else:
                after = msgs.pop()["position"]

    # --- index_status -----------------------------------------------------------------------------
    def status(self, args: Parsed) -> str:
        host = args.values.get("host")
        asker = self.asker_for(host)
        st: dict[str, Any] = asker.call(METHOD_STATUS, {})
        if not asker.is_local:
            st = redact_status(st, _transport(asker))
        refresh = None
        if args.values.get("refresh"):
            refresh = self._start_refresh(asker, host, st)
        key = host or "local"
        pending = self._refresh.get(key)
        summary = _summary(st)
        if pending is not None:
            if pending.get("finished") is None:
                summary += f"; a refresh started {self.clock() - pending['started']:.0f} s ago is running"
            elif pending.get("error"):
                summary += f"; the last refresh failed: {pending['error']}"
            else:
                summary += f"; the last refresh finished {self.clock() - pending['finished']:.0f} s ago"
        roots = st.get("degradedRoots") or []
        payload: dict[str, Any] = {"summary": summary, "mode": asker.last_mode,
                                   "status": {**st, "degradedRoots": roots[:5]}}
        if len(roots) > 5:
            payload["moreDegradedRoots"] = len(roots) - 5
        if refresh:
            payload["refresh"] = refresh
        for n in (200, 80, 0):
            payload["status"]["degradedRoots"] = [{"root": r.get("root"), "reason": _cut(r.get("reason"), n)}
                                                  for r in roots[:5]] if n else []
            text = dump(payload)
            if result_bytes(text) <= DEFAULT_MAX_CHARS:
                break
        return text

    def _start_refresh(self, asker: Asker, host: str | None, st: dict[str, Any]) -> str:
        if not st.get("enabled"):
            raise IndexingDisabled("indexing is turned off for this machine: the user turns it on with `aivault "
                                   "enable`")
        if not asker.daemon_running():
            raise NeedsDaemon("a refresh needs the aivault daemon (`aivault serve`); without one, `aivault index` "
                              "updates the index")
        key = host or "local"
        with self._refresh_lock:
            pending = self._refresh.get(key)
            if pending is not None and pending.get("finished") is None:
                return "already running"
            job: dict[str, Any] = {"started": self.clock(), "finished": None, "error": None}
            self._refresh[key] = job

        def run() -> None:
            try:
                asker.call(METHOD_RECONCILE, {"full": False}, timeout_s=_REFRESH_TIMEOUT_S)
            except AivaultError as exc:
                job["error"] = f"{exc.__class__.__name__}: {exc}"[:300]
            finally:
                job["finished"] = self.clock()

        threading.Thread(target=run, name="mcp-refresh", daemon=True).start()
        return "started"


def _transport(asker: Asker) -> Transport:
    return "relay" if (asker.host or "").startswith("ssh:") else "paired"


def _received(asker: Asker, hit: dict[str, Any]) -> dict[str, Any]:
    """A remote host's hit as its transport may show it (docs/contract.md §6.2: receivers apply it again)."""
    return hit if asker.is_local else redact_for_transport(hit, _transport(asker))


def _summary(st: dict[str, Any]) -> str:
    if not st.get("enabled"):
        return "disabled: session search is turned off here (`aivault enable` turns it on)"
    phase = st.get("phase")
    files = f"{st.get('filesIndexed', 0):,} file(s) indexed, generation {st.get('generation', 0)}"
    if phase == "current":
        return f"current: {files}"
    if phase == "indexing":
        return f"catching up: {st.get('filesDue', 0):,} file(s) due; {files}; searches answer from what is indexed"
    if phase == "degraded":
        return f"degraded: {len(st.get('degradedRoots') or [])} root problem(s); {files}"
    if phase == "closed":
        return f"closed: the indexer is stopped; {files}"
    return f"idle: no daemon is indexing (searches read the index directly); {files}"
