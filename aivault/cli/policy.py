"""``aivault enable``, ``disable`` and ``policy``: consent and retention (docs/contract.md §8)."""

from __future__ import annotations

import argparse
import json

from aivault.cli.common import EXIT_OK, Subcommands, add_local_only, positive_days
from aivault.home import Home


def register(sub: Subcommands) -> None:
    """``policy``, ``enable`` and ``disable``."""
    p = sub.add_parser("policy", help="show or change retention")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--history-days", type=positive_days, metavar="DAYS",
                   help="keep the sessions of the last DAYS days (older ones are swept)")
    g.add_argument("--forever", action="store_true", help="keep all history")
    p.add_argument("--json", action="store_true", help="print the stored policy as JSON")
    p.add_argument("--relay", choices=("on", "off"),
                   help="whether `aivault relay` answers ssh clients on this machine (default off)")
    add_local_only(p)
    p.set_defaults(fn=cmd_policy)

    p = sub.add_parser("enable", help="consent to indexing agent sessions")
    p.add_argument("--history-days", type=positive_days, metavar="DAYS",
                   help="keep only the sessions of the last DAYS days (default: the retention set before)")
    add_local_only(p)
    p.set_defaults(fn=cmd_enable)

    p = sub.add_parser("disable", help="stop indexing; keep the index copy")
    add_local_only(p)
    p.set_defaults(fn=cmd_disable)


def cmd_enable(args: argparse.Namespace, home: Home) -> int:
    from aivault import policy as policy_mod

    old = policy_mod.load(home)
    days = old.history_days if args.history_days is None else args.history_days
    policy_mod.save(home, policy_mod.Policy(True, days))
    keep = f"the last {days} days" if days else "all history"
    print(f"session search enabled for {home.path} (keeping {keep}). Run `aivault index` or `aivault serve`.")
    return EXIT_OK


def cmd_disable(args: argparse.Namespace, home: Home) -> int:
    from aivault import policy as policy_mod

    old = policy_mod.load(home)
    policy_mod.save(home, policy_mod.Policy(False, old.history_days))
    print(f"session search disabled for {home.path}; the index copy is kept (`aivault clear` deletes it).")
    return EXIT_OK


def cmd_policy(args: argparse.Namespace, home: Home) -> int:
    from aivault import policy as policy_mod

    pol = policy_mod.load(home)
    changed = args.forever or args.history_days is not None
    relay = getattr(args, "relay", None)
    if relay is not None:
        policy_mod.set_relay(home, relay == "on")
    if args.forever:
        pol = policy_mod.Policy(pol.enabled, None)
        policy_mod.save(home, pol)
    elif args.history_days is not None:
        pol = policy_mod.Policy(pol.enabled, args.history_days)
        policy_mod.save(home, pol)
    if args.json:
        print(json.dumps(pol.to_json()))
        return EXIT_OK
    keep = "all history" if pol.history_days is None else f"the last {pol.history_days} days"
    state = "enabled" if pol.enabled else "disabled (`aivault enable` turns it on)"
    print(f"session search {state} for {home.path}; keeping {keep}")
    relay_on = policy_mod.relay_allowed(home)
    print("ssh relay: " + ("on: `aivault relay --stdio` answers clients reaching this machine over ssh" if relay_on
                           else "off (`aivault policy --relay on` lets clients search this machine over ssh)"))
    if changed and pol.enabled:
        print("a running daemon applies this now; otherwise the next `aivault index` does")
    return EXIT_OK

