"""The session search endpoints and the service every one of them is called with (docs/contract.md §4, §5, §7).

The endpoints are called with the service that answers them; where there is none, that is the
``NULL_SERVICE`` value (search ``unavailable/no-service``, status the sentinel). Having a service
grants no consent: one whose policy is disabled answers ``unavailable/disabled``.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from aivault.protocol import status_sentinel, unavailable
from aivault.query.reports import reading
from aivault.query.request import parse_request


class SessionSearchService(Protocol):
    def search(self, params: Any) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...


class NullService:
    """No search service here (docs/contract.md §4, §7): search answers ``unavailable/no-service`` and status the
    sentinel. A value, not an absence: every endpoint always has a service to call."""

    def search(self, params: Any) -> dict[str, Any]:
        parse_request(params)  # invalid payloads stay errors even with no service
        return unavailable("no-service")

    def status(self) -> dict[str, Any]:
        return status_sentinel()


NULL_SERVICE: Final = NullService()


def search_sessions(service: SessionSearchService, params: Any) -> dict[str, Any]:
    """The aiVault.searchSessions endpoint."""
    with reading(service):
        return service.search(params)


def search_status(service: SessionSearchService) -> dict[str, Any]:
    """The aiVault.searchStatus endpoint."""
    with reading(service):
        return service.status()
