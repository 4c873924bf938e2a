"""``aivault policy``: this machine's consent, retention and ssh relay switch (docs/contract.md §8).

    aivault policy [show]                  where they stand (--json: the stored policy)
    aivault policy enable [--history-days DAYS]
    aivault policy disable
    aivault policy retention DAYS|forever
    aivault policy relay on|off

The older spellings still work: ``aivault enable`` and ``disable``, and the options of ``policy`` itself
(``--history-days DAYS``, ``--forever``, ``--relay on|off``). Every spelling is one change of the
namespace's ``consent``, ``keep`` and ``relay``, applied by ``cmd_policy``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from aivault.cli.common import EXIT_OK, Subcommands, add_local_only, alias, positive_days
from aivault.home import Home

FOREVER = "forever"


def keep_days(value: str) -> int | str:
    """An argparse type: a whole, positive number of days, or ``forever``."""
    return FOREVER if value == FOREVER else positive_days(value)


def register(sub: Subcommands) -> None:
    """``policy`` and its verbs, and the older ``enable`` and ``disable``."""
    p = sub.add_parser("policy", help="this machine's consent, retention and ssh relay switch: show or change them",
                       description="Show this machine's consent to indexing, how much history it keeps and whether "
                                   "ssh clients may search it; a verb changes one of them.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--history-days", type=positive_days, metavar="DAYS",
                   help="keep the sessions of the last DAYS days (the older spelling of `policy retention DAYS`)")
    g.add_argument("--forever", action="store_true",
                   help="keep all history (the older spelling of `policy retention forever`)")
    p.add_argument("--relay", choices=("on", "off"),
                   help="whether `aivault relay` answers ssh clients (the older spelling of `policy relay on|off`)")
    _json(p, False)
    add_local_only(p)
    p.set_defaults(fn=cmd_policy)
    verbs = p.add_subparsers(dest="verb", metavar="VERB")

    v = verbs.add_parser("show", help="consent, retention and the relay switch as they stand (the default)")
    _verb(v)
    _enable(verbs.add_parser("enable", help="consent to indexing agent sessions"))
    _disable(verbs.add_parser("disable", help="stop indexing; keep the index copy"))
    v = verbs.add_parser("retention", help="how much history to keep: older sessions are swept from the index")
    v.add_argument("keep", type=keep_days, metavar="DAYS|forever",
                   help="the sessions of the last DAYS days, or all history")
    _verb(v)
    v = verbs.add_parser("relay", help="whether `aivault relay` answers ssh clients searching this machine "
                                       "(default off)")
    v.add_argument("relay", choices=("on", "off"), help="on: clients that reach this machine over ssh may search "
                                                        "it; off: they may not")
    _verb(v)

    _enable(alias(sub, "enable", "policy enable"))
    _disable(alias(sub, "disable", "policy disable"))


def _json(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--json", action="store_true", default=default, help="print the stored policy as JSON")


def _verb(p: argparse.ArgumentParser) -> None:
    """The options every verb takes. Their defaults are left out of the namespace, so that they do not
    overwrite what the noun's own options said (``policy --json show``)."""
    _json(p, argparse.SUPPRESS)
    add_local_only(p)
    p.set_defaults(fn=cmd_policy)


def _enable(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history-days", type=positive_days, metavar="DAYS", default=argparse.SUPPRESS,
                   help="keep only the sessions of the last DAYS days (default: the retention set before)")
    p.set_defaults(consent=True)
    _verb(p)


def _disable(p: argparse.ArgumentParser) -> None:
    p.set_defaults(consent=False)
    _verb(p)


def cmd_policy(args: argparse.Namespace, home: Home) -> int:
    """Every spelling: apply the change the command line asks for (none: show), then say where things stand."""
    from aivault import policy as policy_mod

    consent: bool | None = getattr(args, "consent", None)
    keep: int | str | None = getattr(args, "keep", None)
    if keep is None:
        keep = FOREVER if getattr(args, "forever", False) else getattr(args, "history_days", None)
    relay: str | None = getattr(args, "relay", None)
    pol = policy_mod.load(home)
    if relay is not None:
        policy_mod.set_relay(home, relay == "on")
    if consent is not None or keep is not None:
        days = pol.history_days if keep is None else None if keep == FOREVER else int(keep)
        pol = policy_mod.Policy(pol.enabled if consent is None else consent, days)
        policy_mod.save(home, pol)
    if getattr(args, "json", False):
        print(json.dumps(pol.to_json()))
        return EXIT_OK
    kept = "all history" if pol.history_days is None else f"the last {pol.history_days} days"
    if consent is True:
        print(f"session search enabled for {home.path} (keeping {kept}). Run `aivault index` or `aivault serve`.")
        return EXIT_OK
    if consent is False:
        print(f"session search disabled for {home.path}; the index copy is kept (`aivault clear` deletes it).")
        return EXIT_OK
    state = "enabled" if pol.enabled else "disabled (`aivault enable` turns it on)"
    print(f"session search {state} for {home.path}; keeping {kept}")
    relay_on = policy_mod.relay_allowed(home)
    print("ssh relay: " + ("on: `aivault relay --stdio` answers clients reaching this machine over ssh" if relay_on
                           else "off (`aivault policy relay on` lets clients search this machine over ssh)"))
    if keep is not None and pol.enabled:
        print("a running daemon applies this now; otherwise the next `aivault index` does")
    return EXIT_OK
