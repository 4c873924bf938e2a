"""The three tools an agent gets: what they take, what they answer, and how the answer stays small.

Every answer is one JSON text, its ``summary`` first, and the whole tool result (as the MCP
``CallToolResult`` travels) fits ``max_chars`` bytes -- 4,000 unless asked, never more than
16,000: an answer that floods the agent's context costs more than it tells. Search snippets are
cut before a hit is dropped; a page that still does not fit is asked for again with a smaller
limit, so its cursor continues exactly after the last hit shown. A tool never waits for the
indexer: it answers from what is indexed now and says when the index is catching up.

search_sessions with ``host: "all"`` asks this machine for aiVault.searchHosts: one search over this
machine and every configured host, merged into one ranking. Each hit names its ``executionHostId`` (and
``executionHostIds`` when the session was found on several hosts); each host that gave no part of the
page is a line of ``hostsNotSearched`` (its state and reason), and a note says the list is partial.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aivault.broker.asker import Asker
from aivault.broker.exposure import Transport, redact_for_transport, redact_status
from aivault.errors import AivaultError, IndexingDisabled, InvalidParams, NeedsDaemon, clip
from aivault.mcp.args import Arg, Parsed, input_schema, parse_args
from aivault.protocol import (
    AGENT_NAMES,
    METHOD_READ,
    METHOD_RECONCILE,
    METHOD_SEARCH,
    METHOD_SEARCH_HOSTS,
    METHOD_STATUS,
    search_request,
)
from aivault.query.request import MAX_QUERY_CHARS, MAX_QUERY_TERMS

DEFAULT_MAX_CHARS = 4000
MAX_CHARS_CAP = 16_000
MIN_MAX_CHARS = 1000
LIVE_SESSION_WINDOW_S = 600
# The environment variables harnesses set to the session that spawned this server.
SESSION_ENV = ("AIVAULT_SESSION_ID", "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID")
# Snippet and title lengths tried, longest first, before a hit is dropped from a page.
_SNIPPET_STEPS = (300, 160, 80, 0)
_TITLE_CHARS = 100
# A folder, branch and resume command are cut in their middle past these (both ends say the most);
# the hit or session then says truncated: true. Past them, a window's header is cut again to the
# second step when even one message would not fit.
_FIELD_STEPS = ((300, 400), (60, 80))
# The shortest a lone message's text is cut to before it is dropped instead.
_MIN_MESSAGE_CHARS = 40
# A reconcile started by index_status runs in the background; its answer may take this long.
_REFRESH_TIMEOUT_S = 3600.0
# search_sessions' host that searches this machine and every configured host at once (aiVault.searchHosts).
ALL_HOSTS = "all"
# A merged search answers within its own deadline (config.json mergedSearch.deadlineS); the tool waits this
# much longer for the answer to travel.
_MERGED_SLACK_S = 5.0
# A host's reason in the lines of the hosts that gave no part of a merged page is cut to these lengths, the
# first whose lines take at most a third of max_chars.
_REASON_STEPS = (160, 60, 0)

_HOST = Arg("host", "string", "execution host: local (default), ssh:<target> or runtime:<id>")
_MAX = Arg("max_chars", "integer", "size cap of this result in bytes", low=MIN_MAX_CHARS, high=MAX_CHARS_CAP,
           default=DEFAULT_MAX_CHARS)

_SEARCH_HOST = Arg("host", "string", "execution host: local (default), ssh:<target>, runtime:<id>, or all: this "
                   "machine and every configured host at once, merged into one ranking")
SEARCH_ARGS: tuple[Arg, ...] = (
    Arg("query", "string", "words or a \"phrase\"; operators agent:NAME path:/dir branch:NAME", required=True),
    Arg("agents", "array", "only these agents", choices=AGENT_NAMES),
    Arg("path", "string", "only sessions whose folder is this absolute path or below it"),
    Arg("since", "string", "only sessions active since this ISO date/time"),
    Arg("sort", "enum", "relevance (default) or newest", choices=("relevance", "newest")),
    Arg("limit", "integer", "sessions per page", low=1, high=20, default=5),
    Arg("cursor", "string", "the cursor of the previous page, for the next one"),
    Arg("include_live", "boolean", "also return your own running session"),
    _SEARCH_HOST, _MAX,
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
             "the matching message and the command that resumes it. host: \"all\" searches every machine at "
             "once; each hit names its executionHostId (read it with that host).", SEARCH_ARGS),
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


def _cut_middle(text: Any, n: int) -> str | None:
    """``text`` in at most ``n`` characters: its start and its end around "…" (a path's and a command's
    ends say the most)."""
    if not isinstance(text, str):
        return None
    if len(text) <= n:
        return text
    head = (n - 1) // 3
    return text[:head] + "…" + text[len(text) - (n - 1 - head):]


def _place(s: dict[str, Any], chars: int, resume_chars: int) -> dict[str, Any]:
    """A hit's or a session's folder, branch and resume command, each cut to its step; ``truncated``
    says one was."""
    raw = {"cwd": s.get("cwd"), "branch": s.get("branch"), "resume": s.get("resumeCommand")}
    out: dict[str, Any] = {k: _cut_middle(v, resume_chars if k == "resume" else chars) for k, v in raw.items()}
    if any(out[k] != raw[k] for k in raw):
        out["truncated"] = True
    return out


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
            raise ToolFailed("invalid-params", f"no tool {clip(name)!r}; the tools are {', '.join(BY_NAME)}")
        args = parse_args(name, spec.args, raw)
        budget = int(args.values.get("max_chars", DEFAULT_MAX_CHARS))
        if name == "search_sessions":
            text = self.search(args)
        elif name == "read_session":
            text = self.read(args)
        else:
            text = self.status(args)
        if result_bytes(text) > budget:  # each tool fits its answer; this is the bound's last guard
            raise ToolFailed("internal-error", f"the {name} answer was {result_bytes(text)} bytes, over max_chars "
                                               f"{budget} (a bug): ask for fewer results")
        return text

    # --- search_sessions --------------------------------------------------------------------------
    def search(self, args: Parsed) -> str:
        a = args.values
        merged = isinstance(a.get("host"), str) and a["host"].strip().lower() == ALL_HOSTS
        # The merged search is asked of this machine, which asks every host.
        asker = self.asker_for(None if merged else a.get("host"))
        path = a.get("path")
        request = search_request(a["query"], agents=a.get("agents"), since=a.get("since"), sort=a.get("sort"),
                                 scope_paths=[os.path.abspath(os.path.expanduser(path))] if path else None,
                                 cursor=a.get("cursor"))
        live = None if a.get("include_live") else self._live_session(asker)
        budget = int(a["max_chars"])
        limit = int(a["limit"])
        for _ in range(4):
            if merged:
                result = self._search_merged(asker, {**request, "limit": limit})
                hits = [_received_merged(h) for h in result["hits"] if not (live and h.get("sessionId") == live)]
            else:
                result = self._search_once(asker, {**request, "limit": limit})
                hits = [_received(asker, h) for h in result["hits"] if not (live and h.get("sessionId") == live)]
            left_out = len(result["hits"]) - len(hits)
            extra = self._catching_up(asker, None if merged else a.get("host"))
            notes = list(args.notes)
            if (result.get("truncated") or {}).get("query"):
                notes.append(f"the query was searched as its first {MAX_QUERY_CHARS} characters and "
                             f"{MAX_QUERY_TERMS} words")
            if merged:
                extra = {**extra, **_host_lines(result, budget)}
                if result.get("partial"):
                    missing = sum(1 for h in result.get("hosts") or [] if h.get("state") != "ok")
                    notes.append(f"partial: {missing} of {len(result.get('hosts') or [])} host(s) gave no part of "
                                 "these results (hostsNotSearched says why); their sessions are missing")
            text, shown = self._fit_hits(a["query"], hits, result, left_out, live, extra, notes, budget)
            if shown == len(hits) or shown == 0:
                return text
            limit = shown + left_out  # ask for exactly what fits, so the cursor follows the last hit shown
        return text

    def _search_once(self, asker: Asker, request: Mapping[str, Any]) -> dict[str, Any]:
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

    def _search_merged(self, asker: Asker, request: Mapping[str, Any]) -> dict[str, Any]:
        """aiVault.searchHosts over this machine and every configured host, asked of this machine."""
        from aivault.broker.merged import settings

        try:
            wait = max(asker.timeout_s, settings(asker.home).deadline_s + _MERGED_SLACK_S)
        except AivaultError:
            wait = asker.timeout_s  # a bad mergedSearch setting: the search itself says so
        result: dict[str, Any] = asker.call(METHOD_SEARCH_HOSTS, {**request, "hosts": ALL_HOSTS}, timeout_s=wait)
        kind = result.get("kind")
        if kind == "results":
            return result
        if kind == "stale-cursor":
            moved = [str(h.get("id")) for h in result.get("hosts") or []]
            raise ToolFailed("stale-cursor", f"the index of {', '.join(moved) or 'a host'} changed since that cursor "
                                             "was made: search again without cursor (page 1)",
                             hosts=[clip(m) for m in moved[:16]])
        if kind == "malformed-cursor":
            raise ToolFailed("malformed-cursor", "that cursor is not one of this search's: pass the cursor of the "
                                                 "previous page of the same query, filters and host, or none")
        raise ToolFailed("internal-error", f"{METHOD_SEARCH_HOSTS} answered kind {clip(str(kind))!r}")

    def _fit_hits(self, query: str, hits: list[dict[str, Any]], result: dict[str, Any], left_out: int,
                  live: str | None, extra: dict[str, Any], notes: list[str], budget: int) -> tuple[str, int]:
        """The largest prefix of ``hits`` (snippets shortened first) whose answer fits ``budget`` bytes."""
        page = result.get("page") or {}
        # Never the whole query: a long one would crowd out the hits it found (the agent has it anyway).
        quoted = repr(clip(query))
        for n in range(len(hits), 0 if hits else -1, -1):
            for chars in _SNIPPET_STEPS:
                compact = [self._hit(h, chars) for h in hits[:n]]
                complete = n == len(hits)
                more = bool(page.get("hasMore")) or not complete
                summary = f"{n} session(s) for {quoted}" + ("; more: pass cursor" if more and complete else "")
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
        return dump({"summary": f"max_chars {budget} is too small for any hit of {quoted}: ask with a larger "
                                f"max_chars (at most {MAX_CHARS_CAP})", "hits": []}), 0

    @staticmethod
    def _hit(h: dict[str, Any], snippet_chars: int) -> dict[str, Any]:
        ev = h.get("evidence") or {}
        found_on = h.get("executionHostIds")
        out = {"agent": h.get("agent"), "id": h.get("sessionId"), "title": _cut(h.get("title"), _TITLE_CHARS),
               **_place(h, *_FIELD_STEPS[0]), "when": _when(h.get("updatedAt")),
               "snippet": _cut(ev.get("snippet"), snippet_chars) if snippet_chars else None,
               "executionHostId": h.get("executionHostId"),
               # The same session found on several hosts (a synced home): every one of them.
               "executionHostIds": found_on if isinstance(found_on, list) and len(found_on) > 1 else None}
        return {k: v for k, v in out.items() if v not in (None, "")}

    def _live_session(self, asker: Asker) -> str | None:
        """The caller's own running session: named by the harness, else the newest one in its folder."""
        if self.caller.session_id:
            return self.caller.session_id
        cwd = self.caller.cwd
        if not asker.is_local or not cwd:
            return None
        try:
            result = asker.call(METHOD_SEARCH, search_request(f'path:"{cwd}"', limit=5, sort="newest"))
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
        asker = self.asker_for(_one_host("read_session", a.get("host"), "the hit's executionHostId"))
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
        """The window within ``budget`` bytes: messages dropped from the far end of the reading direction
        (``before``/``after`` follow), a lone one cut shorter, the header's folder and resume command cut
        further when even that does not fit."""
        s = result["session"]
        full = [{k: v for k, v in {"position": m["position"], "role": m["role"],
                                   "kind": None if m["kind"] == "text" else m["kind"], "when": _when(m["timestamp"]),
                                   "text": m["text"], "truncated": m["truncated"]}.items() if v is not None}
                for m in result["messages"]]
        text = ""
        for chars, resume_chars in _FIELD_STEPS:
            session = {k: v for k, v in {"agent": s.get("agent"), "id": s.get("sessionId"),
                                         "title": _cut(s.get("title"), _TITLE_CHARS),
                                         **_place(s, chars, resume_chars),
                                         "when": _when(s.get("updatedAt"))}.items() if v not in (None, "")}
            msgs = [dict(m) for m in full]
            before, after = result.get("before"), result.get("after")
            while True:
                text = _window(result, session, msgs, before, after, notes)
                if result_bytes(text) <= budget:
                    return text
                if len(msgs) > 1:
                    if direction == "backward" or (direction == "around" and len(msgs) % 2 == 0):
                        before = msgs.pop(0)["position"]
                    else:
                        after = msgs.pop()["position"]
                elif msgs and len(msgs[0]["text"]) > _MIN_MESSAGE_CHARS:
                    msgs[0]["text"] = _cut(msgs[0]["text"], len(msgs[0]["text"]) // 2)
                    msgs[0]["truncated"] = True
                elif msgs:
                    dropped = msgs.pop()["position"]
                    before, after = (dropped, after) if direction == "backward" else (before, dropped)
                else:
                    break
        return text

    # --- index_status -----------------------------------------------------------------------------
    def status(self, args: Parsed) -> str:
        host = _one_host("index_status", args.values.get("host"), "one host at a time")
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
            payload["status"]["degradedRoots"] = [{"root": _cut_middle(r.get("root"), n + 100),
                                                   "reason": _cut(r.get("reason"), n)} for r in roots[:5]] if n else []
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


def _window(result: dict[str, Any], session: dict[str, Any], msgs: list[dict[str, Any]], before: Any, after: Any,
            notes: list[str]) -> str:
    first = msgs[0]["position"] if msgs else None
    last = msgs[-1]["position"] if msgs else None
    summary = (f"messages {first}-{last} of {result.get('total')} in this session" if msgs
               else f"no messages in this window ({result.get('total')} in the session)")
    payload: dict[str, Any] = {"summary": summary, "session": session, "messages": msgs, "before": before,
                               "after": after}
    if result.get("anchor") is not None:
        payload["hitAt"] = result["anchor"]
    if notes:
        payload["notes"] = notes
    return dump(payload)


def _transport(asker: Asker) -> Transport:
    return "relay" if (asker.host or "").startswith("ssh:") else "paired"


def _received(asker: Asker, hit: dict[str, Any]) -> dict[str, Any]:
    """A remote host's hit as its transport may show it (docs/contract.md §6.2: receivers apply it again)."""
    return hit if asker.is_local else redact_for_transport(hit, _transport(asker))


def _one_host(tool: str, host: Any, which: str) -> Any:
    """``host`` of a tool that addresses one execution host: ``all`` is search_sessions' only."""
    if isinstance(host, str) and host.strip().lower() == ALL_HOSTS:
        raise InvalidParams(f"{tool} asks one execution host, not all: pass {which} (local, ssh:<target> or "
                            "runtime:<id>)")
    return host


def _received_merged(hit: dict[str, Any]) -> dict[str, Any]:
    """A merged hit as the transport of the host it came from may show it (its host redacted it already)."""
    host = str(hit.get("executionHostId") or "local")
    if host == "local":
        return hit
    return redact_for_transport(hit, "relay" if host.startswith("ssh:") else "paired")


def _host_lines(result: dict[str, Any], budget: int) -> dict[str, Any]:
    """One line per host of a merged search that gave no part of it: ``"<id>: <state> (<reason>)"``, the
    reasons cut until the lines take at most a third of ``budget``."""
    bad = [h for h in result.get("hosts") or [] if h.get("state") != "ok"]
    if not bad:
        return {}
    lines: list[str] = []
    for chars in _REASON_STEPS:
        lines = []
        for h in bad:
            reason = _cut(h.get("reason"), chars) if chars else None
            lines.append(f"{clip(str(h.get('id')))}: {h.get('state')}" + (f" ({reason})" if reason else ""))
        if len(dump({"hostsNotSearched": lines}).encode("utf-8")) <= budget // 3:
            break
    return {"hostsNotSearched": lines}


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
