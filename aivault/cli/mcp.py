"""``aivault mcp``: the MCP server for coding agents (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import argparse
import sys

from aivault import log
from aivault.cli.common import EXIT_OK, Subcommands
from aivault.home import Home


def register(sub: Subcommands) -> None:
    p = sub.add_parser("mcp", help="serve the MCP tools (search_sessions, read_session, index_status) to an agent")
    p.add_argument("--http", metavar="127.0.0.1:PORT",
                   help="serve streamable HTTP on this loopback address instead of stdio (PORT 0: a free port); "
                        "requests need the bearer token it prints")
    p.set_defaults(fn=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, home: Home) -> int:
    # stdout is the protocol's channel under stdio: logs go to stderr, one line per tool call.
    log.configure("info", process="mcp")
    from aivault.mcp.server import serve_stdio  # the SDK only for this command

    if args.http:
        from aivault import tokens
        from aivault.mcp.http_transport import serve_http

        def announce(url: str, token: str) -> None:
            print(f"aivault mcp: serving {url}\n"
                  f"aivault mcp: every request needs the header 'Authorization: Bearer {token}' (the token is in "
                  f"{home.path / tokens.MCP_TOKEN}; keep it to yourself). `aivault agent install AGENT --http "
                  f"{url.split('/')[2]}` writes both into an agent's configuration.", file=sys.stderr, flush=True)

        serve_http(home, args.http, announce=announce)
    else:
        serve_stdio(home)
    return EXIT_OK
