"""Parsing a searchSessions request where it is received (docs/contract.md §2, §7).

Unknown fields are stripped, legacy ``tier``/``refresh`` are accepted and dropped, ``limit``
follows the engine's parser, and a long query is cut here (never inside a character) and
reported as ``truncated.query`` rather than refused. Wrong types for ``query``, ``scope``,
``filters`` and friends are errors (InvalidParams), not results.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aivault.errors import InvalidParams, clip
from aivault.protocol import SEARCH_MAX_LIMIT

DEFAULT_LIMIT = 20
MAX_LIMIT = SEARCH_MAX_LIMIT
MAX_QUERY_CHARS = 512
MAX_QUERY_TERMS = 48
SCOPES = ("conversation", "all")
FRESHNESS = ("indexed", "wait-until-current")
SORTS = ("relevance", "newest")

_JOINERS = frozenset("\u200d\ufe0f\ufe0e")
_OPERATOR = re.compile(r'(?<!\S)(agent|path|branch):("([^"]*)"|(\S+))')


@dataclass(frozen=True, slots=True)
class Filters:
    agents: tuple[str, ...] = ()
    scope_paths: tuple[str, ...] = ()
    since_ms: int | None = None
    since_raw: str | None = None
    sort: str = "relevance"
    branches: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str  # as given, after the length cut
    text: str  # the query with operators removed
    scope: str
    freshness: str
    limit: int
    cursor: str | None
    filters: Filters
    debug: bool
    query_truncated: bool
    operators: dict[str, list[str]] = field(default_factory=dict)


def parse_limit(value: Any) -> int:
    """docs/contract.md §2: integers clamp to 1..100; anything else (2.5, NaN, "7", missing) is 20."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_LIMIT
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or not value.is_integer():
            return DEFAULT_LIMIT
        value = int(value)
    return max(1, min(MAX_LIMIT, int(value)))


def cut_query(query: str) -> tuple[str, bool]:
    """At most MAX_QUERY_CHARS characters and MAX_QUERY_TERMS whitespace-separated terms.

    Slicing a str never splits a code point; the cut also steps back over combining marks and
    joiners so that no character loses its accent or an emoji sequence half its parts.
    """
    cut = False
    if len(query) > MAX_QUERY_CHARS:
        end = MAX_QUERY_CHARS
        while end > 0 and (unicodedata.combining(query[end]) or query[end] in _JOINERS):
            end -= 1
        while end > 0 and query[end - 1] in _JOINERS:
            end -= 1
        query, cut = query[:end], True
    words = query.split()
    if len(words) > MAX_QUERY_TERMS:
        query, cut = " ".join(words[:MAX_QUERY_TERMS]), True
    return query, cut


def parse_since(value: str) -> int:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidParams(f"filters.since must be an ISO-8601 date or time, got {clip(value)!r}") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _str_list(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidParams(f"{name} must be a list of strings")
    return tuple(value)


def normalize_path(p: str) -> str:
    return p.rstrip("/") or "/"


def parse_request(params: Any) -> SearchRequest:
    if not isinstance(params, dict):
        raise InvalidParams("searchSessions takes one object: {query, scope?, freshness?, limit?, cursor?, filters?}")
    query = params.get("query")
    if not isinstance(query, str):
        raise InvalidParams("query is required and must be a string")
    scope = params.get("scope", "all")
    if scope is None:
        scope = "all"
    if scope not in SCOPES:
        raise InvalidParams(f"scope must be one of {', '.join(SCOPES)}")
    freshness = params.get("freshness", "indexed")
    if freshness is None:
        freshness = "indexed"
    if freshness not in FRESHNESS:
        raise InvalidParams(f"freshness must be one of {', '.join(FRESHNESS)}")
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidParams("cursor must be a string")
    debug = params.get("debug", False)
    if debug is None:
        debug = False
    if not isinstance(debug, bool):
        raise InvalidParams("debug must be a boolean")
    raw_filters = params.get("filters")
    if raw_filters is None:
        raw_filters = {}
    if not isinstance(raw_filters, dict):
        raise InvalidParams("filters must be an object")
    agents = _str_list(raw_filters.get("agents"), "filters.agents")
    paths = _str_list(raw_filters.get("scopePaths"), "filters.scopePaths")
    for p in paths:
        if not p.startswith("/"):
            raise InvalidParams(f"filters.scopePaths must hold absolute paths, got {clip(p)!r}")
    since_raw = raw_filters.get("since")
    if since_raw is not None and not isinstance(since_raw, str):
        raise InvalidParams("filters.since must be an ISO-8601 string")
    sort = raw_filters.get("sort", "relevance")
    if sort is None:
        sort = "relevance"
    if sort not in SORTS:
        raise InvalidParams(f"filters.sort must be one of {', '.join(SORTS)}")

    cut, truncated = cut_query(query)
    text, operators = extract_operators(cut)
    op_agents = tuple(operators.get("agent", ()))
    op_paths = tuple(normalize_path(p) for p in operators.get("path", ()))
    filters = Filters(
        agents=tuple(sorted(set(agents) | set(op_agents))) if agents or op_agents else (),
        scope_paths=tuple(sorted({normalize_path(p) for p in paths} | set(op_paths))),
        since_ms=parse_since(since_raw) if since_raw else None,
        since_raw=since_raw,
        sort=sort,
        branches=tuple(sorted(set(operators.get("branch", ())))),
    )
    return SearchRequest(
        query=cut,
        text=text,
        scope=scope,
        freshness=freshness,
        limit=parse_limit(params.get("limit", DEFAULT_LIMIT)),
        cursor=cursor,
        filters=filters,
        debug=debug,
        query_truncated=truncated,
        operators=operators,
    )


def extract_operators(query: str) -> tuple[str, dict[str, list[str]]]:
    """``agent:NAME``, ``path:/abs/dir`` and ``branch:NAME`` become filters; the rest is text."""
    ops: dict[str, list[str]] = {}

    def take(m: re.Match[str]) -> str:
        value = m.group(3) if m.group(3) is not None else m.group(4)
        if m.group(1) == "path" and not value.startswith("/"):
            return m.group(0)  # not an absolute path: leave it as text to search
        ops.setdefault(m.group(1), []).append(value)
        return " "

    text = _OPERATOR.sub(take, query)
    return " ".join(text.split()), ops
