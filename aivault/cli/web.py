"""``aivault web``: the local search page on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys

from aivault import log
from aivault.cli.common import EXIT_OK, Subcommands
from aivault.home import Home


def register(sub: Subcommands) -> None:
    p = sub.add_parser("web", help="serve the local search page on 127.0.0.1 (prints its URL, which signs your "
                                   "browser in)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    p.add_argument("--open", action="store_true", help="open the page in a browser (through an owner-only file of "
                                                       "the data directory, so that the token is not in the "
                                                       "browser's command line)")
    p.add_argument("--host", help="search this execution host (local, ssh:<target>, runtime:<id>); for any host "
                                  "but local the page offers no consent, retention or clear")
    p.set_defaults(fn=cmd_web)


def cmd_web(args: argparse.Namespace, home: Home) -> int:
    log.configure("info", process="web")
    from aivault import tokens
    from aivault.broker.remote.hosts import parse_host
    from aivault.web.server import serve  # Starlette and uvicorn only for this command

    host = parse_host(args.host).id if args.host else None

    def announce(url: str) -> None:
        print(f"aivault web: serving {url}\n"
              "aivault web: open that address to sign this browser in (its token is in "
              f"{home.path / tokens.WEB_TOKEN}; keep it to yourself)", file=sys.stderr, flush=True)

    serve(home, port=args.port, host=host, open_browser=args.open, announce=announce)
    return EXIT_OK
