"""Execution host ids (docs/contract.md §6): ``local``, ``ssh:<target>``, ``runtime:<environmentId>``.

Omitted means local. ``all`` and malformed ids are rejected; a remote id whose connection is
missing is an error, never a silent fall-back to the local index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aivault.errors import HostUnavailable, InvalidParams, clip

_SSH = re.compile(r"^ssh:[A-Za-z0-9._@:\[\]-]{1,255}$")
_RUNTIME = re.compile(r"^runtime:[A-Za-z0-9._-]{1,128}$")


@dataclass(frozen=True, slots=True)
class Host:
    id: str

    @property
    def is_local(self) -> bool:
        return self.id == "local"


def parse_host(value: object) -> Host:
    if value is None or value == "local":
        return Host("local")
    if not isinstance(value, str):
        raise InvalidParams("host must be a string: local, ssh:<target> or runtime:<environmentId>")
    if value == "all":
        raise InvalidParams("host 'all' is not one execution host: aiVault.searchHosts (`aivault search "
                            "--all-hosts`) searches every host as one list")
    if _SSH.match(value) or _RUNTIME.match(value):
        return Host(value)
    raise InvalidParams(f"invalid host id {clip(value)!r}: use local, ssh:<target> or runtime:<environmentId>")


def remote_unavailable(host: Host) -> HostUnavailable:
    return HostUnavailable(
        f"no connection to execution host {host.id}: connect it first. aivault never answers for a remote "
        "host from the local index."
    )
