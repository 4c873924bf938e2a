"""``aivault search``, ``status`` and ``rpc``: asking the index, through a daemon or directly.

``--host`` addresses one execution host (docs/contract.md §6): ``local`` (the default), ``ssh:<target>`` or
``runtime:<environmentId>``; the daemon routes it, or this process when no daemon runs. ``--all-hosts`` (or
``--host all``) searches this machine and every configured host as one (aiVault.searchHosts,
docs/contract.md §9.5); ``status --all-hosts`` is a table of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from aivault.cli.common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, Subcommands, absolute, add_host
from aivault.home import Home
from aivault.protocol import AGENT_NAMES, METHOD_STATS, RPC_METHODS, search_request
from aivault.protocol import SEARCH_MAX_LIMIT as MAX_LIMIT

if TYPE_CHECKING:  # the client and the renderer are imported by the commands, not for parsing (cli/__init__.py)
    from aivault.thin.client import Connection


def register(sub: Subcommands) -> None:
    """``search``, ``status`` and ``rpc``."""
    p = sub.add_parser("search", help="search sessions")
    p.add_argument("query",
                   help="words, \"a phrase\", and operators such as agent:codex path:/home/me/api branch:main")
    p.add_argument("--agent", action="append", help=f"only this agent ({', '.join(AGENT_NAMES)}); repeatable")
    p.add_argument("--path", action="append", help="only sessions whose folder is PATH or below; repeatable")
    p.add_argument("--since", help="only sessions updated at or after this ISO-8601 date/time")
    p.add_argument("--sort", choices=("relevance", "newest"), help="order of the sessions (default relevance)")
    p.add_argument("--limit", type=int, default=10, help="sessions per page, 1 to 100 (default 10)")
    p.add_argument("--scope", choices=("conversation", "all"),
                   help="conversation: only what the user and the assistant wrote; all (default): tool calls, "
                        "their results and metadata too")
    p.add_argument("--cursor", help="the next-page cursor printed by a previous search")
    p.add_argument("--fresh", action="store_true", help="scan recently changed transcripts first (waits up to 5 s)")
    p.add_argument("--debug", action="store_true", help="include the planner's report")
    p.add_argument("--json", action="store_true", help="print the contract's result object")
    add_host(p)
    p.add_argument("--all-hosts", action="store_true",
                   help="search this machine and every configured host as one list (the same as --host all)")
    p.set_defaults(fn=cmd_search)

    p = sub.add_parser("status", help="indexing status")
    p.add_argument("--json", action="store_true", help="print the contract's status object")
    add_host(p)
    p.add_argument("--all-hosts", action="store_true",
                   help="a table of this machine and every configured host (the same as --host all)")
    p.set_defaults(fn=cmd_status)

    p = sub.add_parser("rpc", help="send one raw RPC and print the JSON answer")
    p.add_argument("method", help=f"one of {', '.join(RPC_METHODS)}")
    p.add_argument("params", nargs="?", help="JSON parameters")
    p.add_argument("--host", help="execution host: local, ssh:<target>, runtime:<id>")
    p.set_defaults(fn=cmd_rpc)


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
    if limit < 1:
        print(f"aivault: --limit {limit} is below 1; showing 1 session per page", file=sys.stderr)
    elif limit > MAX_LIMIT:
        print(f"aivault: --limit {limit} is above the maximum of {MAX_LIMIT}; showing {MAX_LIMIT} per page",
              file=sys.stderr)


def cmd_search(args: argparse.Namespace, home: Home) -> int:
    from aivault.protocol import METHOD_SEARCH_HOSTS
    from aivault.thin.client import Connection
    from aivault.thin.render import print_debug, print_host_lines, print_results

    # Human output always asks for the trace (debug): it is how a hit found by meaning alone is marked
    # (the contract's hits carry no route). --json stays the contract's object as asked.
    request = search_request(args.query, limit=args.limit,
                             agents=_check_agents(args.agent) if args.agent else None,
                             scope_paths=[absolute(p) for p in args.path] if args.path else None,
                             since=args.since, sort=args.sort, scope=args.scope, cursor=args.cursor,
                             fresh=bool(args.fresh), debug=bool(args.debug or not args.json))
    if not args.json:
        _limit_note(args.limit)
    every = _all_hosts(args)
    host = None if every else _host(args)
    conn = Connection(home)
    try:
        # Every host at once is one merged list (aiVault.searchHosts), asked of this machine.
        result = conn.call(METHOD_SEARCH_HOSTS, {**request, "hosts": "all"}) if every else conn.search(request, host)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    kind = result.get("kind")
    if kind == "results":
        print_results(result)
        if every:
            print_host_lines(result.get("hosts") or [])
        if args.debug:
            print_debug(result.get("debug") or {})
        return EXIT_OK
    if kind == "unavailable":
        message = _remote_unavailable(result.get("reason"), host) if host else \
            _unavailable_message(result.get("reason"), home, conn.index_missing)
        raise CliError(message, EXIT_UNAVAILABLE)
    if kind == "stale-cursor":
        moved = ", ".join(str(h.get("id")) for h in result.get("hosts") or [])
        if args.cursor:
            raise CliError(f"the index changed{' on ' + moved if moved else ''} since that cursor was made: "
                           "search again without --cursor")
        raise CliError("the index kept changing while the page was assembled (it is being written right now): "
                       "try again in a moment")
    raise CliError("that cursor is not valid for this search: search again without --cursor")


def _all_hosts(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "all_hosts", False)) or getattr(args, "host", None) == "all"


def _host(args: argparse.Namespace) -> str | None:
    """The remote host asked for, or None for this machine (``local`` is the same as no --host)."""
    host = getattr(args, "host", None)
    return None if host in (None, "local") else str(host)


def _remote_unavailable(reason: Any, host: str) -> str:
    if reason == "disabled":
        return f"session search is disabled on {host}: its owner turns it on there with `aivault enable`"
    if reason == "not-ready":
        return f"{host} has no index yet, or is still building it: its owner runs `aivault index` there"
    if host.startswith("ssh:"):
        return (f"{host} has no search service for ssh clients: its owner allows it there with "
                "`aivault policy --relay on` (or its aivault is too old to answer)")
    return f"{host} has no search service (its aivault may be too old to answer)"


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
    from aivault.thin.client import Connection
    from aivault.thin.render import print_status

    if _all_hosts(args):
        return _status_all(args, home)
    host = _host(args)
    conn = Connection(home)
    try:
        if host is not None:
            status = conn.status(host)
            if args.json:
                print(json.dumps(status))
                return EXIT_OK
            kind = "ssh relay" if host.startswith("ssh:") else "paired runtime"
            print_status(status, None, f"{host} · {kind} · via {conn.mode} mode")
            return EXIT_OK
        return _local_status(args, home, conn)
    finally:
        conn.close()


def _status_all(args: argparse.Namespace, home: Home) -> int:
    """``status --all-hosts``: this machine's status and each configured host's, one row each; a host that
    cannot be asked is a row with its error."""
    from aivault.errors import AivaultError
    from aivault.thin.client import Connection
    from aivault.thin.render import print_status_table

    conn = Connection(home)
    rows: list[dict[str, Any]] = []
    try:
        ids = ["local", *(str(h["id"]) for h in conn.hosts().get("hosts", []))]
        for hid in ids:
            try:
                rows.append({"id": hid, "status": conn.status(None if hid == "local" else hid)})
            except AivaultError as exc:
                rows.append({"id": hid, "error": str(exc)})
    finally:
        conn.close()
    if args.json:
        print(json.dumps({"hosts": rows}))
        return EXIT_OK
    print_status_table(rows)
    return EXIT_OK


def _local_status(args: argparse.Namespace, home: Home, conn: Connection) -> int:
    from aivault.thin.render import print_status

    status = conn.status()
    if args.json:
        print(json.dumps(status))
        return EXIT_OK
    stats = conn.call(METHOD_STATS, {}) if conn.mode == "daemon" else conn.direct_counts()
    print_status(status, stats, f"{conn.mode} mode · {home.path}")
    if conn.mode != "daemon":  # a daemon reports its own failures; a one-shot index's are only on record
        from aivault import lastrun
        from aivault.thin.render import last_run_line

        line = last_run_line(lastrun.read(home), status.get("lastSweepCompletedAt"))
        if line:
            print(line)
    if conn.index_missing:
        step = "`aivault index` (or `aivault serve`)" if status["enabled"] else "`aivault enable`, then `aivault index`"
        print(f"no index yet: run {step}")
    return EXIT_OK


def cmd_rpc(args: argparse.Namespace, home: Home) -> int:
    try:
        params = json.loads(args.params) if args.params is not None else {}
    except ValueError as exc:
        raise CliError(f"PARAMS_JSON is not valid JSON: {exc}", EXIT_USAGE) from exc
    from aivault.thin.client import Connection

    conn = Connection(home)
    try:
        value = conn.call(args.method, params, _host(args))
    finally:
        conn.close()
    print(json.dumps(value, ensure_ascii=False))
    return EXIT_OK
