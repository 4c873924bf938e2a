"""``aivault search``, ``status`` and ``rpc``: asking the index, through a daemon or directly."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aivault.broker.client import Connection
from aivault.cli.common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, absolute
from aivault.home import Home
from aivault.protocol import AGENT_NAMES, METHOD_STATS
from aivault.render import print_debug, print_results, print_status


def _check_agents(names: list[str]) -> list[str]:
    """Agent names as the index spells them; an unknown name is a usage error with a hint."""
    for name in names:
        if name in AGENT_NAMES:
            continue
        if name.lower() in AGENT_NAMES:
            raise CliError(f"agent names are lower-case: use --agent {name.lower()} (not {name!r})", EXIT_USAGE)
        raise CliError(f"unknown agent {name!r}: aivault indexes {', '.join(AGENT_NAMES)}", EXIT_USAGE)
    return names


def _limit_note(limit: int) -> None:
    """The contract clamps the page size to 1..100 silently; a person typing it should hear it once."""
    from aivault.query.request import MAX_LIMIT

    if limit < 1:
        print(f"aivault: --limit {limit} is below 1; showing 1 session per page", file=sys.stderr)
    elif limit > MAX_LIMIT:
        print(f"aivault: --limit {limit} is above the maximum of {MAX_LIMIT}; showing {MAX_LIMIT} per page",
              file=sys.stderr)


def cmd_search(args: argparse.Namespace, home: Home) -> int:
    filters: dict[str, Any] = {}
    if args.agent:
        filters["agents"] = _check_agents(args.agent)
    if args.path:
        filters["scopePaths"] = [absolute(p) for p in args.path]
    if args.since:
        filters["since"] = args.since
    if args.sort:
        filters["sort"] = args.sort
    request: dict[str, Any] = {"query": args.query, "limit": args.limit, "filters": filters}
    if args.scope:
        request["scope"] = args.scope
    if args.cursor:
        request["cursor"] = args.cursor
    if args.fresh:
        request["freshness"] = "wait-until-current"
    if args.debug or not args.json:
        # Human output always asks for the trace: it is how a hit found by meaning alone is marked
        # (the contract's hits carry no route). --json stays the contract's object as asked.
        request["debug"] = True
    if not args.json:
        _limit_note(args.limit)
    conn = Connection(home)
    result = conn.search(request)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    kind = result.get("kind")
    if kind == "results":
        print_results(result)
        if args.debug:
            print_debug(result.get("debug") or {})
        return EXIT_OK
    if kind == "unavailable":
        raise CliError(_unavailable_message(result.get("reason"), home, conn.index_missing), EXIT_UNAVAILABLE)
    if kind == "stale-cursor":
        if args.cursor:
            raise CliError("the index changed since that cursor was made: search again without --cursor")
        raise CliError("the index kept changing while the page was assembled (it is being written right now): "
                       "try again in a moment")
    raise CliError("that cursor is not valid for this search: search again without --cursor")


def _unavailable_message(reason: Any, home: Home, index_missing: bool = False) -> str:
    if reason == "disabled":
        then = ", then build the index with `aivault index` (or `aivault serve`)" if index_missing else ""
        return (f"session search is disabled for {home.path}. Turn it on with `aivault enable` "
                f"(`aivault enable --history-days 90` keeps only the last 90 days){then}.")
    if reason == "not-ready" and index_missing:
        return f"no index in {home.path} yet: run `aivault index` (or `aivault serve`)"
    if reason == "not-ready":
        return "the index is still being built; try again in a moment (`aivault status` shows progress)"
    return "no search service is available here"


def cmd_status(args: argparse.Namespace, home: Home) -> int:
    conn = Connection(home)
    status = conn.status()
    if args.json:
        print(json.dumps(status))
        return EXIT_OK
    stats = conn.call(METHOD_STATS, {}) if conn.mode == "daemon" else conn.direct_counts()
    print_status(status, stats, f"{conn.mode} mode · {home.path}")
    if conn.index_missing:
        step = "`aivault index` (or `aivault serve`)" if status["enabled"] else "`aivault enable`, then `aivault index`"
        print(f"no index yet: run {step}")
    return EXIT_OK


def cmd_rpc(args: argparse.Namespace, home: Home) -> int:
    try:
        params = json.loads(args.params) if args.params is not None else {}
    except ValueError as exc:
        raise CliError(f"PARAMS_JSON is not valid JSON: {exc}", EXIT_USAGE) from exc
    conn = Connection(home)
    if args.host and conn.rpc is not None:
        value = conn.rpc.call(args.method, params, host=args.host)
    elif args.host and args.host != "local":
        from aivault.broker.hosts import parse_host, remote_unavailable

        raise remote_unavailable(parse_host(args.host))
    else:
        value = conn.call(args.method, params)
    print(json.dumps(value, ensure_ascii=False))
    return EXIT_OK
