"""Searching another machine over a REAL ssh (docs/protocol.md §5.1): an OpenSSH sshd on 127.0.0.1 with
throw-away host and user keys, the remote side a second data directory and HOME on this machine, and
the client reaching it with the ssh command line configured as a user would ($AIVAULT_SSH_COMMAND or
config.json's ``ssh.command``). Skipped, with the reason, when sshd or ssh is missing or sshd cannot
start (``./dev test`` installs Debian's openssh-server when it has the rights).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import policy
from aivault.broker.remote.connections import HostConnections
from aivault.broker.remote.hostconfig import SSH_COMMAND_ENV
from aivault.broker.remote.hosts import Host
from aivault.home import Home, write_private
from aivault.protocol import (
    ERR_NOT_PERMITTED,
    METHOD_CLEAR,
    METHOD_HOSTS,
    METHOD_RECONCILE,
    METHOD_SEARCH,
    STATUS_SENTINEL,
)
from tests.builders import ClaudeWriter
from tests.support.common import cli_env, run_cli, wait_until
from tests.support.daemons import DaemonProcess
from tests.support.remotes import RelayProcess, Remote, host_timeouts, make_client, make_remote
from tests.support.sshd import Sshd, sshd_server

UNVERIFIED = "Source root could not be verified."


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1 for the current user, with keys made for this test run only."""
    yield from sshd_server(tmp_path_factory)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Remote:
    """The dev box's side: an indexed data directory and HOME of its own, relay search allowed."""
    return make_remote(tmp_path_factory.mktemp("devbox"))


@pytest.fixture
def client(tmp_path: Path) -> Home:
    home = make_client(tmp_path)
    host_timeouts(home, connectTimeoutS=15, requestTimeoutS=20)
    return home


def ssh_env(client: Home, sshd: Sshd, **extra: str) -> dict[str, str]:
    """The client's environment with the ssh command line in $AIVAULT_SSH_COMMAND."""
    return cli_env(client.path, AIVAULT_SSH_COMMAND=shlex.join(sshd.ssh_words()), **extra)


def add_host(client: Home, sshd: Sshd, remote: Remote) -> None:
    run_cli(client.path, "hosts", "add", sshd.host_id, "--relay-command", remote.command(), check=True)


def test_search_over_ssh(sshd: Sshd, remote: Remote, client: Home) -> None:
    """search --host ssh: over a real sshd returns the remote's sessions stamped with the host; status is redacted."""
    add_host(client, sshd, remote)
    env = ssh_env(client, sshd)
    result = json.loads(run_cli(client.path, "search", "--host", sshd.host_id, "quokka", "--json", env=env,
                                check=True).stdout)
    assert result["kind"] == "results"
    assert sorted(h["cwd"] for h in result["hits"]) == [f"/srv/remote/p{i}" for i in range(3)]
    assert {h["executionHostId"] for h in result["hits"]} == {sshd.host_id}
    status = json.loads(run_cli(client.path, "status", "--host", sshd.host_id, "--json", env=env, check=True).stdout)
    assert status["filesIndexed"] == 3 and len(status["degradedRoots"]) >= 1
    assert {r["reason"] for r in status["degradedRoots"]} == {UNVERIFIED}
    assert str(remote.home.path) not in json.dumps(status)
    listing = run_cli(client.path, "hosts", "--check", env=env, check=True).stdout
    assert f"{sshd.host_id} · connected · protocol 1" in listing


def test_config_ssh_command_and_wait_until_current(sshd: Sshd, tmp_path: Path, client: Home) -> None:
    """config.json's ssh.command/relayCommand reach the host; wait-until-current is honoured on the remote."""
    box = make_remote(tmp_path / "box", sessions=1)
    cfg = json.loads(client.config_path.read_text())
    cfg["ssh"] = {"command": sshd.ssh_words(), "relayCommand": box.command()}
    write_private(client.config_path, json.dumps(cfg).encode())
    run_cli(client.path, "hosts", "add", sshd.host_id, check=True)
    ClaudeWriter(box.claude, cwd="/srv/remote/late").user("a wombat written after the index was built")
    now = json.loads(run_cli(client.path, "search", "--host", sshd.host_id, "wombat", "--json", check=True).stdout)
    assert now["kind"] == "results" and now["hits"] == []
    fresh = json.loads(run_cli(client.path, "search", "--host", sshd.host_id, "wombat", "--fresh", "--json",
                               check=True).stdout)
    assert [h["cwd"] for h in fresh["hits"]] == ["/srv/remote/late"]
    assert fresh["hits"][0]["executionHostId"] == sshd.host_id


def test_relay_refuses_until_the_owner_allows_it(sshd: Sshd, remote: Remote, client: Home) -> None:
    """Before `aivault policy --relay on` on the remote: no-service and the status sentinel; after it, results."""
    policy.set_relay(remote.home, False)
    try:
        add_host(client, sshd, remote)
        env = ssh_env(client, sshd)
        refused = run_cli(client.path, "search", "--host", sshd.host_id, "quokka", env=env)
        assert refused.returncode == 3
        assert "has no search service for ssh clients: its owner allows it there with `aivault policy --relay on`" \
            in refused.stderr
        status = run_cli(client.path, "status", "--host", sshd.host_id, "--json", env=env, check=True)
        assert json.loads(status.stdout) == STATUS_SENTINEL
        # Consent on the client grants nothing there: only the remote's owner can turn it on.
        assert run_cli(client.path, "policy", "--relay", "on", "--host", sshd.host_id).returncode == 2
        remote.cli("policy", "--relay", "on")
        allowed = json.loads(run_cli(client.path, "search", "--host", sshd.host_id, "quokka", "--json", env=env,
                                     check=True).stdout)
        assert len(allowed["hits"]) == 3
    finally:
        policy.set_relay(remote.home, True)


def test_local_control_is_refused_for_relay_clients(sshd: Sshd, remote: Remote, client: Home) -> None:
    """Over ssh, clear and indexing are not-permitted by the relay itself; the consent/retention CLIs refuse --host."""
    add_host(client, sshd, remote)
    env = ssh_env(client, sshd)
    for args in (["clear"], ["enable"], ["policy", "--history-days", "30"]):
        proc = run_cli(client.path, *args, "--host", sshd.host_id, env=env)
        assert proc.returncode == 2 and "run this command on" in proc.stderr, (args, proc.stderr)
    rpc = run_cli(client.path, "rpc", METHOD_CLEAR, "{}", "--host", sshd.host_id, env=env)
    assert rpc.returncode != 0 and "local control" in rpc.stderr, rpc.stderr
    # The relay itself, past the client's own refusals, over the same ssh.
    relay = RelayProcess(remote, [*sshd.ssh_words(), "--", sshd.target, remote.command()])
    try:
        for method in (METHOD_CLEAR, METHOD_RECONCILE):
            rep = relay.call(method, {})
            assert not rep.ok and rep.value["code"] == ERR_NOT_PERMITTED and rep.value["name"] == "not-permitted"
        # The remote's index is as it was.
        assert len(relay.call(METHOD_SEARCH, {"query": "quokka"}).value["hits"]) == 3
    finally:
        assert relay.close() == 0


def test_cursors_do_not_cross_hosts(sshd: Sshd, remote: Remote, client: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cursor from one ssh host pages there and is malformed-cursor on another host id, even of the same machine."""
    add_host(client, sshd, remote)
    twin = Host("ssh:127.0.0.1")  # the same sshd and relay under another id
    run_cli(client.path, "hosts", "add", twin.id, "--relay-command", remote.command(), check=True)
    host = Host(sshd.host_id)
    monkeypatch.setenv(SSH_COMMAND_ENV, shlex.join(sshd.ssh_words()))
    conns = HostConnections(client)
    try:
        first = conns.call(host, METHOD_SEARCH, {"query": "quokka", "limit": 1})
        cursor = first["page"]["cursor"]
        assert first["page"]["hasMore"] and cursor.startswith("@")
        second = conns.call(host, METHOD_SEARCH, {"query": "quokka", "limit": 1, "cursor": cursor})
        assert second["hits"][0]["sessionId"] != first["hits"][0]["sessionId"]
        assert conns.call(twin, METHOD_SEARCH, {"query": "quokka", "limit": 1, "cursor": cursor}) == \
            {"kind": "malformed-cursor"}
        assert conns.call(twin, METHOD_SEARCH, {"query": "quokka", "limit": 1})["hits"][0]["executionHostId"] == \
            twin.id
    finally:
        conns.close()


def test_daemon_keeps_the_ssh_connection_and_lists_it(sshd: Sshd, remote: Remote, tmp_path: Path) -> None:
    """The client's daemon opens the ssh link on first use, lists it as connected, idle-closes it and re-opens it."""
    client = make_client(tmp_path)
    host_timeouts(client, connectTimeoutS=15, requestTimeoutS=20, idleTimeoutS=1)
    add_host(client, sshd, remote)
    daemon = DaemonProcess(client, {}, extra_env={"AIVAULT_SSH_COMMAND": shlex.join(sshd.ssh_words())})
    try:
        def row() -> dict[str, object]:
            hosts: list[dict[str, object]] = daemon.call(METHOD_HOSTS, {"check": False})["hosts"]
            return next(h for h in hosts if h["id"] == sshd.host_id)

        assert row()["state"] == "closed"  # opened on first use, not before
        result = daemon.call(METHOD_SEARCH, {"query": "quokka"}, host=sshd.host_id)
        assert {h["executionHostId"] for h in result["hits"]} == {sshd.host_id}
        first = row()
        assert first["protocol"] == 1 and first["lastError"] is None and first["lastSeenAt"]
        listing = run_cli(client.path, "hosts", check=True).stdout
        assert f"{sshd.host_id} · " in listing and "last seen never" not in listing
        assert wait_until(lambda: row()["state"] == "closed", timeout=20, interval=0.5)  # idle timeout: 1 s
        again = daemon.call(METHOD_SEARCH, {"query": "burrow"}, host=sshd.host_id)
        assert len(again["hits"]) == 3
    finally:
        daemon.stop()
