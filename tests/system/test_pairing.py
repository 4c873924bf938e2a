"""Paired runtimes over a REAL CurveZMQ listener (docs/protocol.md §5.3): ``aivault serve --listen``
as a daemon process on a second data directory, ``aivault pair`` there, ``aivault hosts pair CODE`` on
client data directories, and the ZAP gate deciding who gets in. Each test consumes the pairing codes
it issues, so that no secret stays outstanding (one would admit unknown keys, to pair only).
"""

from __future__ import annotations

import json
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aivault.broker.remote.connections import HostConnections
from aivault.broker.remote.hostconfig import load_hosts, remote_settings
from aivault.broker.remote.hosts import Host
from aivault.broker.remote.pairing import keypair
from aivault.broker.remote.runtime_link import RuntimeLink
from aivault.errors import AivaultError, AuthenticationError, HostUnavailable
from aivault.home import Home
from aivault.protocol import (
    ERR_NOT_PERMITTED,
    METHOD_CLEAR,
    METHOD_PING,
    METHOD_RECONCILE,
    METHOD_SEARCH,
    METHOD_STATUS,
)
from tests.support.common import run_cli
from tests.support.daemons import DaemonProcess
from tests.support.remotes import Remote, host_timeouts, make_client, make_remote

UNVERIFIED = "Source root could not be verified."


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Remote, DaemonProcess]]:
    """The runtime: an indexed data directory served by a real daemon with a CurveZMQ listener."""
    remote = make_remote(tmp_path_factory.mktemp("runtime"), relay=False)
    daemon = DaemonProcess(remote.home, {}, extra_env={"HOME": str(remote.user)},
                           schedule_args=["--listen", "tcp://127.0.0.1:0"])
    try:
        yield remote, daemon
    finally:
        daemon.stop()


def new_client(base: Path, name: str) -> Home:
    home = make_client(base / name)
    host_timeouts(home, connectTimeoutS=5, requestTimeoutS=10)
    return home


def issue(remote: Remote) -> str:
    code: str = json.loads(remote.cli("pair", "--json").stdout)["code"]
    return code


def pair(client: Home, code: str, name: str) -> str:
    """Pair ``client`` as ``name``; the runtime's host id."""
    out = run_cli(client.path, "hosts", "pair", code, "--name", name, check=True).stdout
    assert f"as '{name}'" in out
    (host_id,) = load_hosts(client)
    return host_id


def search(client: Home, host_id: str, *args: str) -> Any:
    return json.loads(run_cli(client.path, "search", "--host", host_id, "quokka", "--json", *args,
                              check=True).stdout)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_pair_then_search(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """`aivault pair` prints a one-time code; `hosts pair CODE` registers; the client searches runtime:<id>."""
    remote, _ = runtime
    printed = remote.cli("pair").stdout
    code = next(w.strip("'") for w in printed.split() if w.strip("'").startswith("aivault-pair:"))
    assert "valid once until" in printed and "tcp://127.0.0.1:" in printed
    client = new_client(tmp_path, "laptop")
    host_id = pair(client, code, "laptop")
    assert host_id.startswith("runtime:") and host_id in printed
    entry = load_hosts(client)[host_id]
    assert entry.address is not None and entry.address.startswith("tcp://127.0.0.1:") and entry.server_key
    result = search(client, host_id)
    assert sorted(h["cwd"] for h in result["hits"]) == [f"/srv/remote/p{i}" for i in range(3)]
    assert {h["executionHostId"] for h in result["hits"]} == {host_id}
    human = run_cli(client.path, "search", "--host", host_id, "burrow", check=True).stdout
    assert human.count(f"claude @ {host_id}") == 3
    status = json.loads(run_cli(client.path, "status", "--host", host_id, "--json", check=True).stdout)
    assert status["filesIndexed"] == 3 and {r["reason"] for r in status["degradedRoots"]} == {UNVERIFIED}
    assert f"{host_id} · {entry.address}" in run_cli(client.path, "hosts", check=True).stdout
    listed = json.loads(remote.cli("hosts", "--json").stdout)["clients"]
    assert "laptop" in [c["name"] for c in listed]
    # Every key file is 0600 in a 0700 folder, on both ends.
    for home, files in ((remote.home, ["server.key", *[f"clients/{c['fingerprint']}.json" for c in listed]]),
                        (client, ["client.key"])):
        curve = home.path / "curve"
        assert mode(curve) == 0o700
        for name in files:
            assert mode(curve / name) == 0o600, name
    assert "secretKey" in (client.path / "curve" / "client.key").read_text()
    assert not list((remote.home.path / "curve" / "pairing").iterdir())  # the secret is gone once used


def test_hosts_invite_is_pair(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """`hosts invite` on the runtime prints a code as `pair` does; a client pairs with it and searches the runtime."""
    remote, _ = runtime
    printed = remote.cli("hosts", "invite").stdout
    assert "valid once until" in printed and "aivault hosts pair 'aivault-pair:" in printed
    code = next(w.strip("'") for w in printed.split() if w.strip("'").startswith("aivault-pair:"))
    client = new_client(tmp_path, "invited")
    host_id = pair(client, code, "invited")
    assert host_id in printed and len(search(client, host_id)["hits"]) == 3
    listed = json.loads(remote.cli("hosts", "list", "--json").stdout)["clients"]
    assert "invited" in [c["name"] for c in listed]


def test_unpaired_client_is_refused_at_zap(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """A key never registered is refused in the handshake: authentication-failed at once, a clear message."""
    remote, _ = runtime
    paired = new_client(tmp_path, "paired")
    host_id = pair(paired, issue(remote), "paired")
    stranger = new_client(tmp_path, "stranger")
    shutil.copy(paired.path / "hosts.json", stranger.path / "hosts.json")  # knows the address and key, not paired
    proc = run_cli(stranger.path, "search", "--host", host_id, "quokka", timeout=60)
    assert proc.returncode != 0
    assert f"{host_id} refused this machine's key (ZAP status 400): it was never paired there or it was " \
           "revoked" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1  # one line for a person, no log records
    conns = HostConnections(stranger)
    try:
        with pytest.raises(AuthenticationError):
            conns.call(Host(host_id), METHOD_STATUS, {})
    finally:
        conns.close()


def test_pairing_secret_is_single_use(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """A code registers exactly one key: a second client with the same code is refused, also while another is out."""
    remote, _ = runtime
    code = issue(remote)
    first = new_client(tmp_path, "first")
    pair(first, code, "first")
    second = new_client(tmp_path, "second")
    again = run_cli(second.path, "hosts", "pair", code, "--name", "second")
    assert again.returncode == 1 and "pairing with runtime:" in again.stderr and "refused" in again.stderr
    assert not (second.path / "hosts.json").exists()
    fresh = issue(remote)  # now a secret is outstanding: the unknown key gets in, but only to pair
    again = run_cli(second.path, "hosts", "pair", code, "--name", "second")
    assert again.returncode == 1 and "that pairing secret is not valid here: it was used already" in again.stderr
    pair(second, fresh, "second")
    names = [c["name"] for c in json.loads(remote.cli("hosts", "--json").stdout)["clients"]]
    assert names.count("first") == 1 and names.count("second") == 1


def test_revoke_stops_the_key_at_once(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """`hosts revoke NAME` on the runtime refuses the client's next request on its open connection, and new ones."""
    remote, _ = runtime
    client = new_client(tmp_path, "revokee")
    host_id = pair(client, issue(remote), "revokee")
    conns = HostConnections(client)
    try:
        assert len(conns.call(Host(host_id), METHOD_SEARCH, {"query": "quokka"})["hits"]) == 3
        out = remote.cli("hosts", "revoke", "revokee").stdout
        assert out.startswith("revoked revokee (key ")
        with pytest.raises(AuthenticationError, match="key is not registered here"):
            conns.call(Host(host_id), METHOD_SEARCH, {"query": "quokka"})  # the same connection
    finally:
        conns.close()
    proc = run_cli(client.path, "search", "--host", host_id, "quokka")
    assert proc.returncode != 0 and "refused this machine's key" in proc.stderr
    assert "revokee" not in [c["name"] for c in json.loads(remote.cli("hosts", "--json").stdout)["clients"]]
    assert remote.cli("hosts", "revoke", "revokee", check=False).returncode == 2  # nothing left to revoke


def test_hosts_remove_withdraws_the_key(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """`hosts remove runtime:<id>` on the client tells the runtime to drop its key (aiVault.unpair)."""
    remote, _ = runtime
    client = new_client(tmp_path, "leaver")
    host_id = pair(client, issue(remote), "leaver")
    out = run_cli(client.path, "hosts", "remove", host_id, check=True).stdout
    assert out == f"removed {host_id}; the runtime dropped this machine's key\n"
    assert load_hosts(client) == {}
    assert "leaver" not in [c["name"] for c in json.loads(remote.cli("hosts", "--json").stdout)["clients"]]


def test_paired_client_cannot_clear_or_change_anything(runtime: tuple[Remote, DaemonProcess], tmp_path: Path) -> None:
    """The runtime itself refuses a paired client's clear and reconcile (not-permitted); the control CLIs refuse."""
    remote, daemon = runtime
    client = new_client(tmp_path, "meddler")
    host_id = pair(client, issue(remote), "meddler")
    entry = load_hosts(client)[host_id]
    link = RuntimeLink(entry, remote_settings(client), keypair(client, "client"))  # past the client's own refusal
    try:
        ping = link.submit(METHOD_PING, {}).result(15)
        assert ping["service"] is True and "home" not in ping and "pid" not in ping
        for method in (METHOD_CLEAR, METHOD_RECONCILE):
            with pytest.raises(AivaultError) as err:
                link.submit(method, {}).result(15)
            assert err.value.code == ERR_NOT_PERMITTED, method
    finally:
        link.close()
    for args in (["clear"], ["disable"], ["enable"], ["policy", "--history-days", "30"]):
        proc = run_cli(client.path, *args, "--host", host_id)
        assert proc.returncode == 2 and "run this command on" in proc.stderr, (args, proc.stderr)
    assert daemon.status()["enabled"] is True and len(search(client, host_id)["hits"]) == 3


def test_runtime_not_listening_is_unavailable(tmp_path: Path) -> None:
    """A paired runtime whose listener is gone: host-unavailable saying so, never the local index."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = new_client(tmp_path, "orphan")
    public, _ = keypair(client, "server")  # any valid key: nothing listens anyway
    (client.path / "hosts.json").write_text(json.dumps({"hosts": {"runtime:gone-1": {
        "address": f"tcp://127.0.0.1:{port}", "serverKey": public.decode(), "pairedAt": 1}}}))
    conns = HostConnections(client)
    try:
        with pytest.raises(HostUnavailable, match=r"refuses connections at tcp://127\.0\.0\.1:"):
            conns.call(Host("runtime:gone-1"), METHOD_SEARCH, {"query": "quokka"})
    finally:
        conns.close()
