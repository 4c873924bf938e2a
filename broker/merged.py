"""The pieces of a search merged over several execution hosts (aiVault.searchHosts, docs/contract.md §9.5)
that do not depend on how the hosts rank: which hosts a request names, asking them all at once within one
deadline, and the composite cursor that carries every host's fence and position.

Only the machine the user sits at fans out: a relay or a paired runtime refuses the method (the endpoint
table's ``remote`` is false for it), and a host asked by a coordinator answers for itself only.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from aivault.broker.remote.hosts import Host, parse_host
from aivault.errors import AivaultError, InvalidParams, MalformedCursor, clip
from aivault.home import Home
from aivault.protocol import FRESHNESS_DEADLINE_S, HostReport, Truncated, merged_results
from aivault.query.cursor import seal, unseal

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


def mint(key: bytes, pos: MergedPosition) -> str:
    """The cursor of the next page, signed by the coordinating machine's key (the hosts never see it)."""
    payload = msgpack.packb([MERGED_CURSOR_VERSION, pos.query_key,
                             [[h.host, h.generation, h.identity, h.offset] for h in pos.hosts]], use_bin_type=True)
    return "m" + seal(key, payload, _DOMAIN)


def open_cursor(key: bytes, cursor: str) -> MergedPosition:
    """Verify and decode a merged cursor; an edit anywhere, garbage or a single-host cursor is MalformedCursor."""
    if not isinstance(cursor, str) or not cursor.startswith("m"):
        raise MalformedCursor("not a merged-search cursor")
    payload = unseal(key, cursor[1:], _DOMAIN)
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


# --- the coordinator: aiVault.searchHosts -------------------------------------------------------------------
# A host whose generation moves between two rounds answers {stale: true}; the rounds start again this many times.
_RESTARTS: Final = 2
# The share of the time left that a round before the last may take: a host that hangs in the first round is
# timed out there, and the hosts that answered still have time for the rounds after it (the last round, the
# pages, may take all that is left).
_ROUND_SHARE: Final = 0.5
# What a host's answer needs to come back after its freshness wait (a loopback or LAN round trip and more).
_RETURN_MARGIN_S: Final = 0.5


class _Host:
    """One host of a merged search: how to ask it, and what it answered."""

    def __init__(self, host: Host) -> None:
        self.id = host.id
        self.host = host
        self.state = "ok"
        self.reason: str | None = None
        self.stats: dict[str, Any] | None = None
        self.fresh_cut = False
        self.vectors: str | None = None  # a hybrid search: whether this host's vectors took part (HostReport)

    def fail(self, state: str, reason: str) -> None:
        self.state, self.reason = state, reason

    def report(self) -> HostReport:
        out = HostReport(id=self.id, state=self.state)
        if self.reason is not None:
            out["reason"] = self.reason
        if self.stats is not None and self.state == "ok":
            out["generation"] = int(self.stats["generation"])
            out["freshnessTruncated"] = self.fresh_cut
            if self.vectors is not None:
                out["vectors"] = self.vectors
        return out


def search_hosts(params: Any, *, home: Home, ask_local: Callable[[dict[str, Any]], Any],
                 ask_remote: Callable[[Host, dict[str, Any]], Any]) -> dict[str, Any]:
    """aiVault.searchHosts: ``params`` is a search request plus ``hosts`` ("all" or a list of ids). Every host
    named is asked one step at a time (query/federated.py), all hosts at once within one deadline; the pages
    are merged as one index over all of them would rank them. A host that fails, refuses, is disabled or
    misses the deadline is listed with its state and reason in ``hosts``, and ``partial`` says the list
    lacks it. ``ask_local`` answers this machine's steps; ``ask_remote`` returns a remote host's (a Future)."""
    from aivault.broker.remote.hostconfig import load_hosts
    from aivault.protocol import METHOD_SEARCH_HOSTS, MovedHost, malformed_cursor, merged_stale_cursor
    from aivault.query import federated
    from aivault.query.cursor import query_key
    from aivault.query.request import parse_request

    t0 = time.monotonic()
    if not isinstance(params, dict):
        raise InvalidParams(f"{METHOD_SEARCH_HOSTS} takes a search request with hosts: \"all\" or [host ids]")
    request = {k: v for k, v in params.items() if k != "hosts"}
    req = parse_request(request)
    st = settings(home)
    hosts = [_Host(h) for h in parse_host_set(params.get("hosts"), list(load_hosts(home)), st.max_hosts)]
    until = t0 + st.deadline_s
    qk = query_key(req)
    key = home.key()
    position: MergedPosition | None = None
    if req.cursor is not None:
        try:
            position = open_cursor(key, req.cursor)
        except MalformedCursor:
            return dict(malformed_cursor())
        if position.query_key != qk or set(position.host_ids()) - {h.id for h in hosts}:
            return dict(malformed_cursor())
    shard_request = {k: v for k, v in request.items() if k != "cursor"}

    def ask(hid: str, body: dict[str, Any]) -> Any:
        host = next(h.host for h in hosts if h.id == hid)
        return ask_local(body) if host.is_local else ask_remote(host, body)

    def round_of(live: list[_Host], body: dict[str, Any],
                 own: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """Every live host's answer to ``body`` (with its own parameters from ``own``: a page's offset, a hits
        step's rows); a host that gives none is marked and left out. A round before the last (the page, or a
        hybrid search's hits) takes at most _ROUND_SHARE of the time left."""
        answers: dict[str, Any] = {}

        def one(hid: str) -> Any:
            return ask(hid, body if own is None else {**body, **own.get(hid, {})})

        now = time.monotonic()
        last = body["step"] in ("page", "hits")
        asked = fan_out([h.id for h in live], one, parallel=st.parallel_hosts,
                        until=until if last else now + max(until - now, 0) * _ROUND_SHARE)
        for h, a in zip(live, asked, strict=True):
            if not a.ok:
                h.fail(*failure_reason(a, st.deadline_s))
            elif not isinstance(a.value, dict):
                h.fail("failed", f"answered a step with something that is not a map: {a.value!r:.120}")
            elif a.value.get("kind") == "unavailable":
                h.fail("unavailable", str(a.value.get("reason")))
            else:
                answers[h.id] = a.value
        return answers

    for _ in range(_RESTARTS + 1):
        live = [h for h in hosts if h.state == "ok"]
        # wait-until-current: each host waits for its reconcile within what this round may take, less the
        # time its answer needs to come back.
        wait_s = min(FRESHNESS_DEADLINE_S, max(0.0, (until - time.monotonic()) * _ROUND_SHARE - _RETURN_MARGIN_S))
        got = round_of(live, {"step": "stats", "request": shard_request, "waitS": round(wait_s, 3)})
        for h in live:
            if h.id in got:
                h.stats = got[h.id]
                h.fresh_cut = bool(got[h.id].get("freshnessTruncated"))
        live = [h for h in hosts if h.state == "ok" and h.stats is not None]
        seen: dict[str, str] = {}
        for h in live:
            assert h.stats is not None
            ident = str(h.stats["identity"])
            if ident in seen:  # the same index reached twice (a host id and its alias)
                h.fail("failed", f"the same index as {seen[ident]} (identity {ident[:12]}): searched once")
            seen.setdefault(ident, h.id)
        live = [h for h in live if h.state == "ok"]
        if position is not None:
            moved = [p for p in position.hosts if any(
                h.id == p.host and h.stats is not None
                and (h.stats["identity"] != p.identity or h.stats["generation"] != p.generation) for h in live)]
            if moved:
                return dict(merged_stale_cursor([
                    MovedHost(id=p.host, generation=next(int(h.stats["generation"]) for h in live
                                                         if h.id == p.host and h.stats),
                              expectedGeneration=p.generation) for p in moved]))
        stats = [h.stats for h in live if h.stats is not None]
        if not stats:
            return _answer([], None, False, hosts, req, t0, route=None, capped=False, cut=0)
        plan = federated.combine(stats, req)
        extra: list[dict[str, Any]] | None = None
        probes: list[dict[str, Any]] | None = None
        stale = False
        while plan["next"] != federated.NEXT_PAGE and not stale:
            step = "termStats" if plan["next"] == federated.NEXT_TERM_STATS else "probe"
            got = round_of(live, {"step": step, "request": shard_request, "plan": plan})
            stale = any(v.get("stale") for v in got.values()) or len(got) < len(live)
            if stale:
                break
            if step == "termStats":
                extra = [got[h.id] for h in live]
            else:
                probes = [got[h.id] for h in live]
            plan = federated.combine(stats, req, term_stats=extra, probes=probes)
        if stale:
            for h in hosts:
                h.stats = None
            continue
        offsets = {p.host: p.offset for p in position.hosts} if position is not None else {}
        paging = [h for h in live if position is None or h.id in offsets]
        for h in live:
            if h not in paging:
                h.fail("skipped", "it did not answer the first page of this search; search again to include it")
        if plan.get("family") == "hybrid":
            out = _hybrid_page(round_of, paging, offsets, plan, shard_request, req)
            if out is None:  # an index moved between the rounds
                for h in hosts:
                    h.stats = None
                continue
            hits, more, shown, capped, cut = out
            taken = Counter(str(r["host"]) for r in shown)
            cursor = None
            if more:
                positions = tuple(HostPosition(h.id, int(h.stats["generation"]), str(h.stats["identity"]),
                                               offsets.get(h.id, 0) + taken.get(str(h.stats["identity"]), 0))
                                  for h in paging if h.state == "ok" and h.stats is not None)
                cursor = mint(key, MergedPosition(qk, positions))
            return _answer(hits, cursor, more, hosts, req, t0, route="hybrid", capped=capped, cut=cut)
        got = round_of(paging, {"step": "page", "request": shard_request, "plan": plan, "count": req.limit + 1},
                       {hid: {"offset": n} for hid, n in offsets.items()})
        if any(v.get("stale") for v in got.values()):
            for h in hosts:
                h.stats = None
            continue
        answered = [h for h in paging if h.id in got]
        pages = [got[h.id] for h in answered]
        by_identity = {str(got[h.id]["identity"]): h for h in answered}
        rows = federated.merge(pages, req)
        shown, more = rows[: req.limit], len(rows) > req.limit
        taken = Counter(str(r["host"]) for r in shown)
        hits = _stamped(shown, by_identity)
        cursor = None
        if more:
            positions = tuple(HostPosition(h.id, int(got[h.id]["generation"]), str(got[h.id]["identity"]),
                                           offsets.get(h.id, 0) + taken.get(str(got[h.id]["identity"]), 0))
                              for h in answered)
            cursor = mint(key, MergedPosition(qk, positions))
        return _answer(hits, cursor, more, hosts, req, t0, route=str(plan.get("route")),
                       capped=any(bool(p.get("capped")) for p in pages),
                       cut=sum(int(p.get("snippetsCut", 0)) for p in pages))
    for h in hosts:
        if h.state == "ok":
            h.fail("failed", "its index kept changing between the rounds of the search: try again")
    return _answer([], None, False, hosts, req, t0, route=None, capped=False, cut=0)


_Round = Callable[[list[_Host], dict[str, Any], dict[str, dict[str, Any]] | None], dict[str, Any]]


def _hybrid_page(round_of: _Round, paging: list[_Host], offsets: dict[str, int], plan: dict[str, Any],
                 shard_request: dict[str, Any], req: Any) -> tuple[list[dict[str, Any]], bool, list[dict[str, Any]],
                                                                   bool, int] | None:
    """A hybrid search's last two rounds: every host's lexical candidates and vector neighbours, fused at the
    coordinator as one index would fuse them (query/federated.fuse_hosts), then each host's hits of the
    page cut from the fused list. The page starts at the sum of the hosts' offsets (the fused list is the
    same while no fence moves). (hits, has more, the fused rows shown, capped, snippets cut), or None when an
    index moved between the rounds."""
    from aivault.query import federated

    got = round_of(paging, {"step": "candidates", "request": shard_request, "plan": plan}, None)
    if any(v.get("stale") for v in got.values()):
        return None
    answered = [h for h in paging if h.id in got]
    for h in answered:
        ans = got[h.id]
        h.vectors = "used" if ans.get("vector") is not None else "other-model" if ans.get("model") else "none"
    fused = federated.fuse_hosts([got[h.id] for h in answered], req, plan)
    start = sum(offsets.values())
    window = fused[start: start + req.limit + 1]
    more, shown = len(window) > req.limit, window[: req.limit]
    by_identity = {str(got[h.id]["identity"]): h for h in answered}
    rows: dict[str, list[list[Any]]] = {}
    for r in shown:
        rows.setdefault(by_identity[str(r["host"])].id, []).append([r["sess"], r["score"], r["chunk"]])
    asked = [h for h in answered if h.id in rows]
    found = round_of(asked, {"step": "hits", "request": shard_request, "plan": plan},
                     {hid: {"rows": r} for hid, r in rows.items()})
    if any(v.get("stale") for v in found.values()):
        return None
    page_hits = {(str(v["identity"]), int(sess)): hit for v in found.values() for sess, hit in v["hits"]}
    merged = [{"host": r["host"], "agent": hit["agent"], "sessionId": hit["sessionId"], "hit": hit}
              for r in shown if (hit := page_hits.get((str(r["host"]), int(r["sess"])))) is not None]
    return (_stamped(merged, by_identity), more, shown, any(bool(got[h.id].get("capped")) for h in answered),
            sum(int(v.get("snippetsCut", 0)) for v in found.values()))


def _stamped(rows: list[dict[str, Any]], by_identity: dict[str, _Host]) -> list[dict[str, Any]]:
    """The hits of the merged rows, each naming its host; the same agent session found on several hosts (a
    synced home) is one hit, where it ranked first, naming every host it was found on."""
    out: list[dict[str, Any]] = []
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        host = by_identity[str(row["host"])].id
        ident = (str(row["agent"]), str(row["sessionId"]))
        if ident in first:
            first[ident]["executionHostIds"].append(host)
            continue
        hit = {**row["hit"], "executionHostId": host, "executionHostIds": [host]}
        first[ident] = hit
        out.append(hit)
    return out


def _answer(hits: list[dict[str, Any]], cursor: str | None, more: bool, hosts: list[_Host], req: Any, t0: float, *,
            route: str | None, capped: bool, cut: int) -> dict[str, Any]:
    reports = [h.report() for h in hosts]
    truncated = Truncated(candidates=capped, snippets=cut, query=bool(req.query_truncated),
                          freshness=any(r.get("freshnessTruncated") for r in reports))
    return dict(merged_results(hits, cursor=cursor, has_more=more, hosts=reports, truncated=truncated, route=route,
                               duration_ms=round((time.monotonic() - t0) * 1000, 3)))
