"""``aivault hosts``: the other machines, searched from here or searching this one (docs/protocol.md §5).

On a client: ``hosts [list]`` lists the configured hosts with their connections' state, ``hosts add
ssh:<target>`` and ``hosts remove`` edit the list, ``hosts pair CODE`` pairs with a runtime. On a
runtime: ``hosts invite`` prints a one-time pairing code for the client, ``hosts revoke`` withdraws a
paired client's key. On a dev box reached over ssh: ``hosts relay --stdio`` is what the client's ssh
runs. The older spellings ``aivault pair`` (``hosts invite``) and ``aivault relay`` (``hosts relay``)
still work; a client's ssh runs ``aivault relay --stdio``, which every version understands.

Like every command module's, this one's top level imports only what its parser needs (cli/__init__.py);
the modules that reach the network or the index are imported inside the commands that need them.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

from aivault.cli.common import EXIT_OK, EXIT_USAGE, CliError, Subcommands, alias
from aivault.home import Home


def register(sub: Subcommands) -> None:
    """``hosts`` and its verbs, and the older ``pair`` and ``relay``."""
    p = sub.add_parser("hosts", help="other machines: the ones searched from here (ssh dev boxes, paired runtimes) "
                                     "and the clients paired with this one")
    _list_options(p, False)  # the older spelling: `hosts [--check] [--json]` lists
    p.set_defaults(fn=cmd_hosts)
    hs = p.add_subparsers(dest="hosts_command", metavar="ACTION")
    ls = hs.add_parser("list", help="the configured hosts with their state, and the clients paired with this "
                                    "machine (the default)")
    _list_options(ls, argparse.SUPPRESS)  # no default to overwrite the noun's (`hosts --json list`)
    ls.set_defaults(fn=cmd_hosts)
    a = hs.add_parser("add", help="add ssh:<target>: a machine reached by `ssh <target> aivault relay --stdio`")
    a.add_argument("host", metavar="ssh:TARGET", help="what ssh is given to reach the machine: an alias of "
                                                    "~/.ssh/config, HOST or USER@HOST")
    a.add_argument("--ssh-command", help="the ssh command line for this host (default: $AIVAULT_SSH_COMMAND, "
                                         "config.json ssh.command, or `ssh -T -o BatchMode=yes`)")
    a.add_argument("--relay-command", help="what the remote shell runs (default `aivault relay --stdio`), e.g. "
                                           "'env AIVAULT_HOME=/data/av ~/.local/bin/aivault relay --stdio'")
    a.set_defaults(fn=cmd_hosts_add)
    r = hs.add_parser("remove", help="forget a host (a paired runtime is told to drop this machine's key)")
    r.add_argument("host", metavar="HOST", help="the host's id as `aivault hosts` lists it (ssh:... or runtime:...)")
    r.set_defaults(fn=cmd_hosts_remove)
    pr = hs.add_parser("pair", help="pair with a runtime using the code `aivault hosts invite` printed there")
    pr.add_argument("code", help="the aivault-pair:... code `aivault hosts invite` (older: `aivault pair`) printed "
                                 "on the runtime")
    pr.add_argument("--name", help="this machine's name on the runtime (default: its host name)")
    pr.set_defaults(fn=cmd_hosts_pair)
    rv = hs.add_parser("revoke", help="on a runtime: withdraw a paired client's key (it is refused at once)")
    rv.add_argument("client", metavar="NAME|FINGERPRINT",
                    help="the client's name or key fingerprint as `aivault hosts` lists it")
    rv.set_defaults(fn=cmd_hosts_revoke)
    _invite(hs.add_parser("invite", help="on a runtime: print a one-time code that pairs a client with this "
                                         "machine"))
    _relay(hs.add_parser("relay", help="serve this machine's search on stdin/stdout (what a client's ssh runs)"))

    _invite(alias(sub, "pair", "hosts invite"))
    _relay(alias(sub, "relay", "hosts relay"))


def _list_options(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--check", action="store_true", default=default,
                   help="connect to every host first (a ping), then list them")
    p.add_argument("--json", action="store_true", default=default, help="print the list as JSON")


def _invite(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", metavar="HOST:PORT",
                   help="the address clients reach this machine's listener at (default: where it listens)")
    p.add_argument("--expires-min", type=float, default=10.0, help="minutes the code stays valid (default 10)")
    p.add_argument("--json", action="store_true", help="print the code, the runtime's id and address as JSON")
    p.set_defaults(fn=cmd_pair)


def _relay(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", required=True, help="the stream is standard input and output")
    p.set_defaults(fn=cmd_relay)


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).astimezone().strftime("%Y-%m-%d %H:%M")


def cmd_hosts(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.pairing import list_clients
    from aivault.thin.client import Connection

    conn = Connection(home)
    try:
        listing = conn.hosts(check=args.check)
    finally:
        conn.close()
    clients: list[dict[str, Any]] = [{"name": c.name, "fingerprint": c.fingerprint, "pairedAt": c.paired_at}
                                     for c in list_clients(home)]
    if args.json:
        print(json.dumps({**listing, "clients": clients}))
        return EXIT_OK
    rows = listing.get("hosts") or []
    if not rows:
        print("no remote hosts: add a dev box with `aivault hosts add ssh:<target>`, or pair a runtime with "
              "`aivault hosts pair CODE`")
    for row in rows:
        if row.get("connected"):
            state = f"connected · protocol {row.get('protocol')} · aivault {row.get('version')}"
        else:
            state = "not connected" + ("" if conn.mode == "daemon" or args.check else
                                       " (no daemon keeps connections; --check connects)")
        where = f" · {row['address']}" if row.get("address") else ""
        print(f"{row['id']}{where} · {state} · last seen {_when(row.get('lastSeenAt'))}")
        if row.get("lastError"):
            print(f"    last error: {row['lastError']}")
    if clients:
        print("clients paired with this machine's listener:")
        for c in clients:
            print(f"    {c['name']} · key {c['fingerprint']} · paired {_when(c['pairedAt'])}")
    return EXIT_OK


def cmd_hosts_add(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.hostconfig import HostEntry, load_hosts, remote_host, save_hosts
    from aivault.errors import InvalidParams

    try:
        host = remote_host(args.host)
    except InvalidParams as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if not host.id.startswith("ssh:"):
        raise CliError(f"{host.id}: runtimes are added by pairing: `aivault hosts invite` (older: `aivault pair`) on "
                       "the runtime prints a code, then `aivault hosts pair CODE` here", EXIT_USAGE)
    import shlex

    hosts = load_hosts(home)
    hosts[host.id] = HostEntry(host.id, ssh_command=tuple(shlex.split(args.ssh_command)) if args.ssh_command else None,
                               relay_command=args.relay_command or None)
    save_hosts(home, hosts)
    print(f"added {host.id}. On {host.id[4:]}, its owner allows relay search with `aivault policy --relay on`; "
          f"then `aivault search --host {host.id} QUERY`.")
    return EXIT_OK


def cmd_hosts_remove(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.hostconfig import load_hosts, save_hosts

    hosts = load_hosts(home)
    entry = hosts.pop(args.host, None)
    if entry is None:
        known = ", ".join(sorted(hosts)) or "none"
        raise CliError(f"{args.host} is not a configured host (configured: {known})", EXIT_USAGE)
    note = ""
    if entry.kind == "runtime":
        note = _unpair(home, entry)
    save_hosts(home, hosts)
    print(f"removed {entry.id}{note}")
    return EXIT_OK


def _unpair(home: Home, entry: Any) -> str:
    """Ask the runtime to drop this machine's key; removing the host locally does not depend on it."""
    from dataclasses import replace

    from aivault.broker.remote.hostconfig import remote_settings
    from aivault.broker.remote.pairing import keypair
    from aivault.broker.remote.runtime_link import RuntimeLink
    from aivault.errors import AivaultError
    from aivault.protocol import METHOD_UNPAIR

    settings = replace(remote_settings(home), connect_timeout_s=5.0, request_timeout_s=5.0)
    link = RuntimeLink(entry, settings, keypair(home, "client"))
    try:
        link.submit(METHOD_UNPAIR, {}).result(15)
        return "; the runtime dropped this machine's key"
    except (AivaultError, TimeoutError) as exc:
        return (f"; the runtime could not be told to drop this machine's key ({exc}): its owner can run "
                "`aivault hosts revoke NAME` there")
    finally:
        link.close()


def _default_name() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9._@-]", "-", socket.gethostname())[:64] or "client"


def cmd_hosts_pair(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.hostconfig import HostEntry, load_hosts, remote_settings, save_hosts
    from aivault.broker.remote.pairing import PairingCode, keypair
    from aivault.broker.remote.runtime_link import RuntimeLink
    from aivault.errors import AivaultError, InvalidParams
    from aivault.protocol import METHOD_PAIR

    try:
        code = PairingCode.decode(args.code)
    except InvalidParams as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if code.expires_at <= time.time() * 1000:
        raise CliError(f"that pairing code expired at {_when(code.expires_at)}: run `aivault hosts invite` (older: "
                       "`aivault pair`) on the runtime for a new one")
    name = args.name or _default_name()
    entry = HostEntry(f"runtime:{code.environment_id}", address=code.address, server_key=code.server_key,
                      paired_at=int(time.time() * 1000))
    settings = remote_settings(home)
    link = RuntimeLink(entry, settings, keypair(home, "client"))
    try:
        value = link.submit(METHOD_PAIR, {"secret": code.secret, "name": name}).result(
            settings.request_timeout_s + 5)
    except AivaultError as exc:
        raise CliError(f"pairing with {entry.id} at {code.address} failed: {exc}") from exc
    finally:
        link.close()
    hosts = load_hosts(home)
    hosts[entry.id] = entry
    save_hosts(home, hosts)
    print(f"paired with {entry.id} at {code.address} as {value.get('client', name)!r}. Search it with "
          f"`aivault search --host {entry.id} QUERY`.")
    return EXIT_OK


def cmd_hosts_revoke(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.pairing import list_clients, revoke_clients

    gone = revoke_clients(home, args.client)
    if not gone:
        known = ", ".join(f"{c.name} ({c.fingerprint})" for c in list_clients(home)) or "none"
        raise CliError(f"no paired client is named {args.client!r} (paired: {known})", EXIT_USAGE)
    for c in gone:
        print(f"revoked {c.name} (key {c.fingerprint}): its next request is refused, and so is its next connection")
    return EXIT_OK


def cmd_pair(args: argparse.Namespace, home: Home) -> int:
    import socket

    from aivault.broker.remote.pairing import issue_code
    from aivault.protocol import METHOD_PING
    from aivault.thin.client import RpcClient, connect_daemon

    if not 0 < args.expires_min <= 24 * 60:
        raise CliError("--expires-min must be above 0 and at most a day (1440)", EXIT_USAGE)
    rpc: RpcClient | None = connect_daemon(home)
    listen = None
    if rpc is not None:
        try:
            listen = (rpc.call(METHOD_PING, {}) or {}).get("listen")
        finally:
            rpc.close()
    if not listen:
        raise CliError("no paired listener runs here: start the daemon with one, e.g. "
                       "`aivault serve --listen tcp://0.0.0.0:7455`, then run `aivault hosts invite` again")
    host, _, port = str(listen).removeprefix("tcp://").rpartition(":")
    if args.address:
        address = args.address if args.address.startswith("tcp://") else f"tcp://{args.address}"
    elif host in ("0.0.0.0", "*", "[::]", "::"):
        raise CliError(f"the listener takes connections on every address ({listen}): say which one clients reach "
                       f"with --address, e.g. --address {socket.gethostname()}:{port}", EXIT_USAGE)
    else:
        address = f"tcp://{host}:{port}"
    code = issue_code(home, address, args.expires_min * 60)
    if args.json:
        print(json.dumps({"code": code.encode(), "environmentId": code.environment_id, "address": code.address,
                          "expiresAt": code.expires_at}))
        return EXIT_OK
    print(f"pairing code for runtime:{code.environment_id} at {code.address}, valid once until "
          f"{_when(code.expires_at)}:\n\n{code.encode()}\n\non the client: aivault hosts pair '{code.encode()}'")
    return EXIT_OK


def cmd_relay(args: argparse.Namespace, home: Home) -> int:
    from aivault.broker.remote.relay import serve_stdio

    return serve_stdio(home)
