"""The session search endpoints and the service every one of them is called with (docs/contract.md §4, §5, §7).

The endpoints are called with the service that answers them; where there is none, that is the
``NULL_SERVICE`` value (search ``unavailable/no-service``, status the sentinel). Having a service
grants no consent: one whose policy is disabled answers ``unavailable/disabled``.

``ServiceAnswers`` is a service as the endpoint table (broker/endpoints.py) calls it: the daemon's and
direct mode's search, status and read go through the endpoints here.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from aivault.protocol import ReadResult, SearchResult, Status, Unavailable, status_sentinel, unavailable
from aivault.query.reports import reading
from aivault.query.request import parse_request
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
