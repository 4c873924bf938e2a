"""The pieces of a search merged over several execution hosts (aiVault.searchHosts, docs/contract.md §9.5)
that do not depend on how the hosts rank: which hosts a request names, asking them all at once within one
deadline, and the composite cursor that carries every host's fence and position.

Only the machine the user sits at fans out: a relay or a paired runtime refuses the method (the endpoint
table's ``remote`` is false for it), and a host asked by a coordinator answers for itself only.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from aivault.broker.remote.hosts import Host, parse_host
from aivault.errors import AivaultError, InvalidParams, MalformedCursor, clip
from aivault.home import Home

# A hung host delays the merged answer past its deadline by at most this long (the waiting loop's grain).
DEADLINE_SLACK_S: Final = 0.25

# The settings a user may change in config.json under "mergedSearch".
DEFAULT_PARALLEL_HOSTS: Final = 4
DEFAULT_DEADLINE_S: Final = 5.0
DEFAULT_MAX_HOSTS: Final = 16


@dataclass(frozen=True, slots=True)
class MergedSettings:
    parallel_hosts: int = DEFAULT_PARALLEL_HOSTS  # hosts asked at once
    deadline_s: float = DEFAULT_DEADLINE_S  # one deadline for the whole request, every round included
    max_hosts: int = DEFAULT_MAX_HOSTS  # a host list longer than this is invalid-params


def settings(home: Home) -> MergedSettings:
    """``mergedSearch`` in config.json: ``{parallelHosts, deadlineS, maxHosts}``, each optional."""
    from aivault import config
    from aivault.errors import ConfigInvalid

    raw = config.load(home).get("mergedSearch") or {}
    if not isinstance(raw, dict):
        raise ConfigInvalid(f"{home.config_path}: 'mergedSearch' must be an object")
    unknown = sorted(set(raw) - {"parallelHosts", "deadlineS", "maxHosts"})
    if unknown:
        raise ConfigInvalid(f"{home.config_path}: unknown key mergedSearch.{unknown[0]} "
                            "(known: parallelHosts, deadlineS, maxHosts)")

    def number(key: str, default: float, low: float, high: float, whole: bool) -> float:
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or (whole and not isinstance(v, int)) \
                or not low <= v <= high:
            raise ConfigInvalid(f"{home.config_path}: mergedSearch.{key} must be a {'whole ' if whole else ''}"
                                f"number from {low:g} to {high:g}, not {v!r:.40}")
        return v

    return MergedSettings(parallel_hosts=int(number("parallelHosts", DEFAULT_PARALLEL_HOSTS, 1, 64, True)),
                          deadline_s=float(number("deadlineS", DEFAULT_DEADLINE_S, 0.5, 120, False)),
                          max_hosts=int(number("maxHosts", DEFAULT_MAX_HOSTS, 1, 256, True)))


# --- which hosts ----------------------------------------------------------------------------------------
def parse_host_set(value: object, configured: Sequence[str], max_hosts: int) -> list[Host]:
    """The hosts a merged search asks, in the order they are reported: ``"all"`` is ``local`` and every
    configured host; a list names them. invalid-params names the offending entry: a malformed or unknown
    id, a duplicate, ``all`` among ids, an empty list, or more than ``max_hosts``."""
    if value == "all":
        hosts = [Host("local"), *(parse_host(h) for h in configured)]
        if len(hosts) > max_hosts:
            raise InvalidParams(f"hosts 'all' is {len(hosts)} hosts, more than the {max_hosts} a merged search "
                                "asks (config.json mergedSearch.maxHosts); list the ones to search")
        return hosts
    if not isinstance(value, list):
        raise InvalidParams("hosts must be \"all\" or a list of host ids (local, ssh:<target>, runtime:<id>)")
    if not value:
        raise InvalidParams("hosts is an empty list: name at least one host, or \"all\"")
    if len(value) > max_hosts:
        raise InvalidParams(f"hosts lists {len(value)} hosts, more than the {max_hosts} a merged search asks "
                            "(config.json mergedSearch.maxHosts)")
    out: list[Host] = []
    seen: set[str] = set()
    known = set(configured)
    for i, entry in enumerate(value):
        if entry == "all":
            raise InvalidParams(f"hosts[{i}] is 'all' among host ids: pass \"all\" alone, or only ids")
        try:
            host = parse_host(entry)
        except InvalidParams as exc:
            raise InvalidParams(f"hosts[{i}]: {exc}") from exc
        if host.id in seen:
            raise InvalidParams(f"hosts[{i}] repeats {host.id}: name each host once")
        if not host.is_local and host.id not in known:
            raise InvalidParams(f"hosts[{i}] is {clip(host.id)}, which is not a configured host "
                                "(`aivault hosts list`; add it with `aivault hosts add`)")
        seen.add(host.id)
        out.append(host)
    return out


# --- asking every host at once ----------------------------------------------------------------------------
@dataclass(slots=True)
class Asked:
    """One host's part of a round: its answer, or why there is none."""

    host: str
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


def fan_out(hosts: Sequence[str], ask: Callable[[str], Any], *, parallel: int, until: float) -> list[Asked]:
    """``ask(host)`` for every host, at most ``parallel`` outstanding at once, until the monotonic time
    ``until``; in the order of ``hosts``. ``ask`` returns a value or a Future of one (a remote host's
    connection answers with a Future and needs no thread); a local ask runs on a thread of its own. A host
    not answered by ``until`` is ``timed_out`` and its request is left to finish on its own."""
    results = [Asked(h) for h in hosts]
    pending: list[int] = list(range(len(hosts)))
    running: dict[int, Future[Any]] = {}
    done = threading.Condition()

    def settle(i: int, fut: Future[Any]) -> None:
        exc = fut.exception()
        if exc is not None:
            results[i].error = exc
        else:
            results[i].value = fut.result()
        with done:
            done.notify_all()

    def start(i: int) -> None:
        fut: Future[Any] = Future()

        def local() -> None:
            try:
                fut.set_result(ask(hosts[i]))
            except BaseException as exc:
                fut.set_exception(exc)

        try:
            answer = None
            threaded = hosts[i] == "local"
            if not threaded:
                answer = ask(hosts[i])
        except BaseException as exc:  # refused before it was sent (a malformed request, no connection)
            fut.set_exception(exc)
            threaded = False
        else:
            if not threaded:
                if isinstance(answer, Future):
                    fut = answer
                else:
                    fut.set_result(answer)
        running[i] = fut
        if threaded:
            threading.Thread(target=local, name=f"merged-{hosts[i]}", daemon=True).start()
        fut.add_done_callback(functools.partial(settle, i))

    with done:
        while pending or running:
            while pending and len([f for f in running.values() if not f.done()]) < parallel:
                start(pending.pop(0))
            if all(f.done() for f in running.values()) and not pending:
                break
            left = until - time.monotonic()
            if left <= 0:
                break
            done.wait(min(left, DEADLINE_SLACK_S))
    for i in range(len(hosts)):
        fut = running.get(i)
        if fut is None or not fut.done():
            results[i].timed_out = True
            results[i].value = None
            results[i].error = None
    return results


def failure_reason(asked: Asked, deadline_s: float) -> tuple[str, str]:
    """A host's state and reason for the result's per-host section, for a host that gave no answer."""
    if asked.timed_out:
        return "timeout", f"no answer within the {deadline_s:g} s deadline"
    exc = asked.error
    if isinstance(exc, AivaultError):
        from aivault.protocol import ERROR_CODES

        return "failed", f"{ERROR_CODES.get(exc.code, 'error')}: {exc}"
    return "failed", f"{exc.__class__.__name__}: {exc}"


# --- the composite cursor ---------------------------------------------------------------------------------
MERGED_CURSOR_VERSION: Final = 1
_DOMAIN: Final = b"aivault-merged-cursor\0"
_MAX_OFFSET: Final = 2**31 - 1
_MAX_GENERATION: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class HostPosition:
    host: str
    generation: int
    identity: str
    offset: int  # this host's rows already shown


@dataclass(frozen=True, slots=True)
class MergedPosition:
    query_key: bytes  # the request's (query.cursor.query_key) and the plan's: a cursor belongs to one query
    hosts: tuple[HostPosition, ...]  # in the host set's order

    def host_ids(self) -> tuple[str, ...]:
        return tuple(h.host for h in self.hosts)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise MalformedCursor("not base64url") from exc
    if not text or _b64(data) != text:  # one spelling only: every edit is detected
        raise MalformedCursor("not canonical base64url")
    return data


def _mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, _DOMAIN + payload, hashlib.sha256).digest()


def mint(key: bytes, pos: MergedPosition) -> str:
    """The cursor of the next page, signed by the coordinating machine's key (the hosts never see it)."""
    payload = msgpack.packb([MERGED_CURSOR_VERSION, pos.query_key,
                             [[h.host, h.generation, h.identity, h.offset] for h in pos.hosts]], use_bin_type=True)
    return f"m{_b64(payload)}.{_b64(_mac(key, payload))}"


def open_cursor(key: bytes, cursor: str) -> MergedPosition:
    """Verify and decode a merged cursor; an edit anywhere, garbage or a single-host cursor is MalformedCursor."""
    if not isinstance(cursor, str) or not cursor.startswith("m"):
        raise MalformedCursor("not a merged-search cursor")
    body, dot, sig = cursor[1:].partition(".")
    if not dot:
        raise MalformedCursor("no signature")
    payload, mac = _unb64(body), _unb64(sig)
    if not hmac.compare_digest(mac, _mac(key, payload)):
        raise MalformedCursor("bad signature")
    try:
        version, qk, rows = msgpack.unpackb(payload, raw=False)
        hosts = tuple(HostPosition(*row) for row in rows)
    except Exception as exc:
        raise MalformedCursor("bad payload") from exc
    if version != MERGED_CURSOR_VERSION or not isinstance(qk, bytes) or not hosts or any(
            not isinstance(h.host, str) or type(h.generation) is not int or not 0 <= h.generation <= _MAX_GENERATION
            or not isinstance(h.identity, str) or type(h.offset) is not int or not 0 <= h.offset <= _MAX_OFFSET
            for h in hosts) or len({h.host for h in hosts}) != len(hosts):
        raise MalformedCursor("bad payload")
    return MergedPosition(qk, hosts)
