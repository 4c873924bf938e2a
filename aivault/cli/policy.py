"""``aivault enable``, ``disable`` and ``policy``: consent and retention (docs/contract.md §8)."""

from __future__ import annotations

import argparse
import json

from aivault import policy as policy_mod
from aivault.cli.common import EXIT_OK
from aivault.home import Home


def cmd_enable(args: argparse.Namespace, home: Home) -> int:
    old = policy_mod.load(home)
    days = old.history_days if args.history_days is None else args.history_days
    policy_mod.save(home, policy_mod.Policy(True, days))
    keep = f"the last {days} days" if days else "all history"
    print(f"session search enabled for {home.path} (keeping {keep}). Run `aivault index` or `aivault serve`.")
    return EXIT_OK


def cmd_disable(args: argparse.Namespace, home: Home) -> int:
    old = policy_mod.load(home)
    policy_mod.save(home, policy_mod.Policy(False, old.history_days))
    print(f"session search disabled for {home.path}; the index copy is kept (`aivault clear` deletes it).")
    return EXIT_OK


def cmd_policy(args: argparse.Namespace, home: Home) -> int:
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


# --- parser -------------------------------------------------------------------------------------
