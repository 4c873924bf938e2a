"""The session search endpoints and the service every one of them is called with (docs/contract.md §4, §5, §7).

The endpoints are called with the service that answers them; where there is none, that is the
``NULL_SERVICE`` value (search ``unavailable/no-service``, status the sentinel). Having a service
grants no consent: one whose policy is disabled answers ``unavailable/disabled``.

``ServiceAnswers`` is a service as the endpoint table (broker/endpoints.py) calls it: the daemon's and
direct mode's search, status and read go through the endpoints here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from aivault.errors import InvalidParams
from aivault.protocol import (
    FRESHNESS_DEADLINE_S,
    SEARCH_MAX_LIMIT,
    SHARD_STEPS,
    ReadResult,
    SearchResult,
    Status,
    Unavailable,
    status_sentinel,
    unavailable,
)
from aivault.query.reports import reading
from aivault.query.request import SearchRequest, parse_request
from aivault.query.transcript import read_session


class SessionSearchService(Protocol):
    def search(self, params: Any) -> SearchResult: ...

    def status(self) -> Status: ...


class NullService:
    """No search service here (docs/contract.md §4, §7): search answers ``unavailable/no-service`` and status the
    sentinel. A value, not an absence: every endpoint always has a service to call."""

    def search(self, params: Any) -> SearchResult:
        parse_request(params)  # invalid payloads stay errors even with no service
        return unavailable("no-service")

    def status(self) -> Status:
        return status_sentinel()


NULL_SERVICE: Final = NullService()


def search_sessions(service: SessionSearchService, params: Any) -> SearchResult:
    """The aiVault.searchSessions endpoint."""
    with reading(service):
        return service.search(params)


def search_status(service: SessionSearchService) -> Status:
    """The aiVault.searchStatus endpoint."""
    with reading(service):
        return service.status()


# --- one step of a merged search on this host (aiVault.searchShard) ---------------------------------------
@dataclass(frozen=True, slots=True)
class ShardRequest:
    step: str  # one of SHARD_STEPS
    request: SearchRequest
    plan: dict[str, Any]  # the coordinator's plan (query/federated.combine); {} for "stats"
    offset: int  # "page": this host's rows already shown
    count: int  # "page": how many rows to rank from there
    wait_s: float  # "stats" of a wait-until-current request: the longest this host may wait for its reconcile
    rows: list[list[Any]]  # "hits": this host's sessions of a fused page, [[sess, score, chunk]] in order


def parse_shard(params: Any) -> ShardRequest:
    """``{step, request, plan?, offset?, count?, waitS?, rows?}``; invalid-params naming what is wrong."""
    if not isinstance(params, dict):
        raise InvalidParams("aiVault.searchShard takes {step, request, plan, offset, count, rows}")
    step = params.get("step")
    if step not in SHARD_STEPS:
        raise InvalidParams(f"aiVault.searchShard: step must be one of {', '.join(SHARD_STEPS)}, not {step!r:.40}")
    request = params.get("request")
    if not isinstance(request, dict) or "cursor" in request:
        raise InvalidParams("aiVault.searchShard: request must be a search request without a cursor")
    plan = params.get("plan", {})
    if not isinstance(plan, dict) or (step != "stats" and not isinstance(plan.get("generations"), dict)):
        raise InvalidParams("aiVault.searchShard: every step after stats needs the coordinator's plan")
    offset, count = params.get("offset", 0), params.get("count", 1)
    if step == "page" and (type(offset) is not int or not 0 <= offset <= 2**31 - 1
                           or type(count) is not int or not 1 <= count <= SEARCH_MAX_LIMIT + 1):
        raise InvalidParams(f"aiVault.searchShard: a page needs offset >= 0 and count 1..{SEARCH_MAX_LIMIT + 1}")
    wait_s = params.get("waitS", FRESHNESS_DEADLINE_S)
    if isinstance(wait_s, bool) or not isinstance(wait_s, int | float) or not 0 <= wait_s <= FRESHNESS_DEADLINE_S:
        raise InvalidParams(f"aiVault.searchShard: waitS must be seconds from 0 to {FRESHNESS_DEADLINE_S:g}")
    rows = params.get("rows", [])
    if step == "hits" and (not isinstance(rows, list) or len(rows) > SEARCH_MAX_LIMIT + 1 or not all(
            isinstance(r, list) and len(r) == 3 and type(r[0]) is int and isinstance(r[1], int | float)
            and not isinstance(r[1], bool) and (r[2] is None or type(r[2]) is int) for r in rows)):
        raise InvalidParams(f"aiVault.searchShard: hits needs rows [[session, score, chunk]], at most "
                            f"{SEARCH_MAX_LIMIT + 1}")
    return ShardRequest(str(step), parse_request(request), plan, int(offset), int(count), float(wait_s), rows)


@runtime_checkable
class ShardAnswerer(Protocol):
    """A service that can answer a step of a merged search (the daemon's, direct mode's)."""

    def shard(self, ask: ShardRequest) -> dict[str, Any]: ...


def search_shard(service: object, params: Any) -> dict[str, Any]:
    """The aiVault.searchShard endpoint: parsed first (a bad one is an error whatever the service), then
    answered by the service, or ``unavailable/no-service`` where none can."""
    ask = parse_shard(params)
    if not isinstance(service, ShardAnswerer):
        return dict(unavailable("no-service"))
    with reading(service):
        return service.shard(ask)


def shard_step(engine: Any, ask: ShardRequest) -> dict[str, Any]:
    """The step asked, over ``engine`` (query/federated.py)."""
    from aivault.query import federated

    if ask.step == "stats":
        return federated.query_stats(engine, ask.request)
    if ask.step == "termStats":
        return federated.term_stats(engine, ask.request, ask.plan)
    if ask.step == "probe":
        return federated.probe(engine, ask.request, ask.plan)
    if ask.step == "candidates":
        return federated.candidates(engine, ask.request, ask.plan)
    if ask.step == "hits":
        return federated.hits_of(engine, ask.request, ask.plan, ask.rows)
    return federated.page(engine, ask.request, ask.plan, ask.offset, ask.count)


class ServiceAnswers:
    """A service's search, status and read through the endpoints (the endpoint table's ``Answers``)."""

    def __init__(self, service: SessionSearchService) -> None:
        self.service = service

    def search(self, params: Any) -> SearchResult:
        return search_sessions(self.service, params)

    def status(self) -> Status:
        return search_status(self.service)

    def read(self, params: Any) -> ReadResult | Unavailable:
        return read_session(self.service, params)

    def shard(self, params: Any) -> dict[str, Any]:
        return search_shard(self.service, params)
