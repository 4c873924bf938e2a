"""``aiVault.readSession``: a bounded window of one indexed session's messages (docs/protocol.md §1.8).

The messages are read back from the index, not from the transcript: every message the scanner
indexed is stored as its chunks (``chunks.text``, cut without overlap), so joining a message's
chunks in order gives its indexed text back -- tool output without the over-long lines the index
leaves out (docs/contract.md §2.4). A transcript file may be gone, or on another host, or locked by
its agent; the index answers for it all the same, and a daemon's process is the only one that may
read its database while it runs (docs/design.md §1).

A window is chosen by position (a message's ordinal in its session, stable across scopes):
``forward`` or ``backward`` from ``from``, or ``around`` an anchor -- ``from``, else the message
holding the most of ``query``'s words (the hit of a search for it). Each message is cut to
``maxChars`` and says whether it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import duckdb

from aivault.errors import InvalidParams, SessionNotFound
from aivault.indexer.duck import one
from aivault.protocol import (
    AGENT_NAMES,
    CONVERSATION_ROLES,
    Kind,
    Message,
    ReadResult,
    Role,
    SessionInfo,
    Unavailable,
    unavailable,
)
from aivault.query import sql
from aivault.query.reports import reading
from aivault.query.request import SCOPES, cut_query
from aivault.redact import Redactor
from aivault.text import query_terms

DEFAULT_COUNT = 10
MAX_COUNT = 50
DEFAULT_MESSAGE_CHARS = 2000
MIN_MESSAGE_CHARS = 40
MAX_MESSAGE_CHARS = 20_000
MAX_ID_CHARS = 256
# The words of a query that place the window; more only slow the one ranking statement down.
MAX_ANCHOR_TERMS = 16
DIRECTIONS = ("forward", "backward", "around")


@dataclass(frozen=True, slots=True)
class ReadRequest:
    session_id: str
    agent: str | None
    query: str | None
    start: int | None  # the wire's ``from``
    direction: str
    count: int
    max_chars: int
    scope: str


def _int(params: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer clamped into [low, high]; a missing field is ``default``; anything else is refused."""
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, float) and not math.isnan(value) and not math.isinf(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParams(f"{name} must be a whole number ({low}-{high}), got {value!r:.40}")
    return max(low, min(high, value))


def parse_read_request(params: Any) -> ReadRequest:
    """The request as the wire carries it; unknown fields are dropped, wrong types refused."""
    if not isinstance(params, dict):
        raise InvalidParams("aiVault.readSession takes a map: {sessionId, agent?, query?, from?, direction?, count?, "
                            "maxChars?, scope?}")
    sid = params.get("sessionId")
    if not isinstance(sid, str) or not sid or len(sid) > MAX_ID_CHARS:
        raise InvalidParams(f"sessionId must be a session id (a non-empty string of at most {MAX_ID_CHARS} "
                            "characters), as a search hit gives it")
    agent = params.get("agent")
    if agent is not None and agent not in AGENT_NAMES:
        raise InvalidParams(f"agent must be one of {', '.join(AGENT_NAMES)}, got {agent!r:.40}")
    query = params.get("query")
    if query is not None and not isinstance(query, str):
        raise InvalidParams("query must be a string: the search whose hit the window is centred on")
    query = cut_query(query)[0] if query and query.strip() else None
    start = params.get("from")
    if start is not None:
        start = _int(params, "from", 0, 0, 2**31 - 1)
    direction = params.get("direction")
    if direction is None:
        direction = "around" if query is not None or start is not None else "forward"
    if direction not in DIRECTIONS:
        raise InvalidParams(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r:.40}")
    scope = params.get("scope", "all")
    if scope not in SCOPES:
        raise InvalidParams(f"scope must be one of {', '.join(SCOPES)}, got {scope!r:.40}")
    return ReadRequest(sid, agent, query, start, str(direction),
                       _int(params, "count", DEFAULT_COUNT, 1, MAX_COUNT),
                       _int(params, "maxChars", DEFAULT_MESSAGE_CHARS, MIN_MESSAGE_CHARS, MAX_MESSAGE_CHARS),
                       str(scope))


def _scope_clause(scope: str) -> str:
    if scope != "conversation":
        return ""
    return sql.CONVERSATION_CHUNKS.format(roles=", ".join(str(int(r)) for r in CONVERSATION_ROLES), kind=Kind.TEXT)


def _window(positions: list[int], req: ReadRequest, anchor: int | None) -> list[int]:
    """The positions of the page: ``count`` of them, from, up to or around the anchor."""
    n = req.count
    if req.direction == "forward":
        at = req.start if req.start is not None else (anchor if anchor is not None else positions[0])
        return [p for p in positions if p >= at][:n]
    if req.direction == "backward":
        at = req.start if req.start is not None else (anchor if anchor is not None else positions[-1])
        return [p for p in positions if p <= at][-n:]
    centre = anchor if anchor is not None else positions[0]
    i = next((k for k, p in enumerate(positions) if p >= centre), len(positions) - 1)
    lo = max(0, min(i - (n - 1) // 2, len(positions) - n))
    return positions[lo : lo + n]


def read_messages(cur: duckdb.DuckDBPyConnection, req: ReadRequest, *, redactor: Redactor | None) -> ReadResult:
    """The answer, read in one snapshot of ``cur``'s database; its title and texts redacted by ``redactor``
    (aivault/redact.py; None: as indexed)."""
    cur.execute(sql.BEGIN_READ)
    try:
        return _read(cur, req, redactor)
    finally:
        cur.execute(sql.END_READ)


def _shown(redactor: Redactor | None, text: Any) -> Any:
    return redactor.redact_text(text) if redactor is not None and isinstance(text, str) and text else text


def _read(cur: duckdb.DuckDBPyConnection, req: ReadRequest, redactor: Redactor | None) -> ReadResult:
    gen = one(cur, sql.SELECT_GENERATION)
    rows = cur.execute(sql.SELECT_SESSION_BY_ID.format(agent=sql.SESSION_AGENT if req.agent else ""),
                       [req.session_id, *([req.agent] if req.agent else [])]).fetchall()
    if not rows:
        raise SessionNotFound(f"no session {req.session_id!r:.80} in this index"
                              + (f" for agent {req.agent}" if req.agent else "")
                              + ": use a sessionId from a search hit (an index rebuild or the retention sweep may "
                                "have removed it)")
    agents = sorted({str(r[1]) for r in rows})
    if req.agent is None and len(agents) > 1:
        raise InvalidParams(f"session id {req.session_id!r:.80} belongs to sessions of {', '.join(agents)}: "
                            "pass agent to say which")
    m = rows[0]
    sess = int(m[0])
    scope = _scope_clause(req.scope)
    positions = [int(r[0]) for r in cur.execute(sql.SELECT_POSITIONS.format(scope=scope), [sess]).fetchall()]
    session = SessionInfo(agent=m[1], sessionId=m[2], title=_shown(redactor, m[3]), cwd=m[4], branch=m[5],
                          updatedAt=m[6],
                          messageCount=int(m[7]), resumeCommand=m[8], source="present" if m[9] else "unverifiable")
    anchor = _anchor(cur, sess, scope, req)
    base = ReadResult(session=session, messages=[], anchor=anchor, total=len(positions), before=None, after=None,
                      generation=int(gen[0]) if gen else 0)
    if not positions:
        return base
    page = _window(positions, req, anchor)
    if not page:
        return base
    limit = req.max_chars + 1
    got = cur.execute(sql.SELECT_MESSAGES.format(positions=", ".join(str(p) for p in page), scope=scope),
                      [limit, sess]).fetchall()
    messages: list[Message] = []
    for ord_, role, kind, ts, text, chars in got:
        body = _shown(redactor, str(text or ""))
        cut = len(body) > req.max_chars
        messages.append(Message(position=int(ord_), role=Role(int(role)).wire, kind=Kind(int(kind)).wire, timestamp=ts,
                                text=body[: req.max_chars], truncated=cut, chars=int(chars or 0)))
    first, last = page[0], page[-1]
    earlier = [p for p in positions if p < first]
    later = [p for p in positions if p > last]
    return ReadResult(session=session, messages=messages, anchor=anchor, total=len(positions),
                      before=earlier[-1] if earlier else None, after=later[0] if later else None,
                      generation=base["generation"])


def _anchor(cur: duckdb.DuckDBPyConnection, sess: int, scope: str, req: ReadRequest) -> int | None:
    """The position the window centres on: the message holding the most of the query's words."""
    if req.query is None:
        return None
    terms = query_terms(req.query)[:MAX_ANCHOR_TERMS]
    if not terms:
        return None
    matches = " + ".join([sql.WORD_IN_CHUNK] * len(terms))
    row = one(cur, sql.SELECT_BEST_POSITION.format(scope=scope, matches=matches), [*terms, sess])
    return int(row[0]) if row and row[1] else None


@runtime_checkable
class SessionReader(Protocol):
    """A service that can answer aiVault.readSession (the daemon's, direct mode's)."""

    def read_session(self, req: ReadRequest) -> ReadResult | Unavailable: ...


def read_session(service: object, params: Any) -> ReadResult | Unavailable:
    """The aiVault.readSession endpoint: the request is parsed first (a bad one is an error whatever
    the service), then answered by the service, or ``unavailable/no-service`` when it cannot read."""
    req = parse_read_request(params)
    if not isinstance(service, SessionReader):
        return unavailable("no-service")
    with reading(service):
        return service.read_session(req)
