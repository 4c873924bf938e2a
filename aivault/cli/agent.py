"""``aivault agent install|uninstall AGENT``: the MCP server and an instruction, in the agent's own config."""

from __future__ import annotations

import argparse

from aivault.agents import AGENTS  # a tuple of names: no edit code is loaded for parsing
from aivault.cli.common import EXIT_OK, Subcommands
from aivault.home import Home


def register(sub: Subcommands) -> None:
    p = sub.add_parser("agent", help="register aivault's MCP server and instructions with a coding agent")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in (("install", "add the MCP server to AGENT's config and an instruction on when to use it"),
                       ("uninstall", "remove what install added")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("agent", choices=AGENTS, metavar="AGENT", help=f"one of {', '.join(AGENTS)}")
        v.add_argument("--dry-run", action="store_true", help="print the changes without writing anything")
        if verb == "install":
            v.add_argument("--http", metavar="127.0.0.1:PORT",
                           help="register `aivault mcp --http` on this address (started by you) with its bearer "
                                "token, instead of the stdio server the agent starts")
        v.set_defaults(fn=cmd_agent)


def cmd_agent(args: argparse.Namespace, home: Home) -> int:
    from aivault.agents.install import apply, http_server, plan, report

    install = args.verb == "install"
    http = http_server(home.path, args.http, dry_run=args.dry_run) if install and args.http else None
    changes = plan(args.agent, install, home.path, http=http)
    backups = {} if args.dry_run else apply(changes)
    print(report(args.agent, install, changes, backups, args.dry_run, http=http, data_dir=home.path))
    return EXIT_OK
