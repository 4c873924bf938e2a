"""``aivault mcp``: the MCP server for coding agents (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import argparse
import sys

from aivault import log
from aivault.cli.common import EXIT_OK
from aivault.home import Home


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mcp", help="serve the MCP tools (search_sessions, read_session, index_status) to an agent")
    p.add_argument("--http", metavar="127.0.0.1:PORT",
                   help="serve streamable HTTP on this loopback address instead of stdio (PORT 0: a free port)")
    p.set_defaults(fn=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, home: Home) -> int:
    # stdout is the protocol's channel under stdio: logs go to stderr, one line per tool call.
    log.configure("info", process="mcp")
    from aivault.mcp.server import serve_http, serve_stdio  # the SDK only for this command

    if args.http:
        serve_http(home, args.http, announce=lambda url: print(f"aivault mcp: serving {url}", file=sys.stderr,
                                                                flush=True))
    else:
        serve_stdio(home)
    return EXIT_OK
