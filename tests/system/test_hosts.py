"""Remote execution hosts behind a fake ssh (docs/protocol.md §5): the relay spoken to directly, the
client's routing (broker/remote/connections.py) in this process and through a real daemon, and relays that
misbehave on purpose (tests/support/fake_relay.py). tests/system/test_ssh.py does the same paths over a real sshd.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aivault import policy
from aivault.broker.remote.connections import HostConnections
from aivault.broker.remote.hostconfig import remote_host
from aivault.broker.remote.hosts import Host
from aivault.codec import RpcRequest, encode_request, encode_stream
from aivault.errors import AivaultError, HostUnavailable, InvalidParams, NotPermitted, ProtocolVersionError
from aivault.home import Home
from aivault.protocol import (
    ERR_INVALID_PARAMS,
    ERR_METHOD_NOT_FOUND,
    ERR_NOT_PERMITTED,
    ERR_PARSE,
    METHOD_CLEAR,
    METHOD_HOSTS,
    METHOD_PING,
    METHOD_READ,
    METHOD_RECONCILE,
    METHOD_ROOTS,
    METHOD_SEARCH,
    METHOD_STATS,
    METHOD_STATUS,
    STATUS_SENTINEL,
)
from aivault.thin.client import Connection
from tests.builders import ClaudeWriter
from tests.support.common import cli_env, run_cli
from tests.support.daemons import DaemonProcess
from tests.support.fake_relay import HIT
from tests.support.remotes import (
    RelayProcess,
    Remote,
    add_ssh,
    fake_relay_command,
    fake_ssh,
    host_timeouts,
    make_client,
    make_remote,
)

UNVERIFIED = "Source root could not be verified."
DEVBOX = Host("ssh:devbox")


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Remote:
    """One indexed remote data directory (relay consent on) shared by the module's tests."""
    return make_remote(tmp_path_factory.mktemp("remote"))


@pytest.fixture
def client(tmp_path: Path) -> Home:
    home = make_client(tmp_path)
    host_timeouts(home, connectTimeoutS=5, requestTimeoutS=5)
    return home


@pytest.fixture
def conns(client: Home) -> Iterator[HostConnections]:
    hc = HostConnections(client)
    try:
        yield hc
    finally:
        hc.close()


def fake(client: Home, tmp_path: Path, host_id: str, mode: str, marker: Path | None = None) -> None:
    add_ssh(client, host_id, fake_relay_command(mode, marker), fake_ssh(tmp_path))


def search(conns: HostConnections, host: Host = DEVBOX, **params: Any) -> dict[str, Any]:
    value: dict[str, Any] = conns.call(host, METHOD_SEARCH, {"query": "quokka", **params})
    return value


# --- the relay itself --------------------------------------------------------------------------------
def test_relay_without_consent_has_no_service(remote: Remote) -> None:
    """Until `aivault policy --relay on` the relay has no service (no-service, the sentinel); then it answers."""
    policy.set_relay(remote.home, False)
    relay = RelayProcess(remote)
    try:
        assert relay.call(METHOD_PING).value["service"] is False
        assert relay.call(METHOD_SEARCH, {"query": "quokka"}).value == {"kind": "unavailable", "reason": "no-service"}
        assert relay.call(METHOD_STATUS).value == STATUS_SENTINEL
        assert relay.call(METHOD_READ, {"sessionId": "x"}).value == {"kind": "unavailable", "reason": "no-service"}
        bad = relay.call(METHOD_SEARCH, {"query": 7})
        assert not bad.ok and bad.value["code"] == ERR_INVALID_PARAMS  # a bad payload stays an error
        remote.cli("policy", "--relay", "on")
        assert relay.call(METHOD_PING).value["service"] is True  # from the next request on
        result = relay.call(METHOD_SEARCH, {"query": "quokka"}).value
        assert result["kind"] == "results" and len(result["hits"]) == 3
        policy.set_relay(remote.home, False)
        assert relay.call(METHOD_SEARCH, {"query": "quokka"}).value["reason"] == "no-service"
    finally:
        policy.set_relay(remote.home, True)
        assert relay.close() == 0


def test_hosts_relay_is_the_relay_and_policy_relay_its_switch(remote: Remote) -> None:
    """`aivault hosts relay --stdio` serves the relay stream as `relay --stdio` does, and `aivault policy relay off|on`
    withdraws and restores its service from the next request on."""
    relay = RelayProcess(remote, [sys.executable, "-m", "aivault.cli", "hosts", "relay", "--stdio"])
    try:
        assert relay.call(METHOD_PING).value["service"] is True
        remote.cli("policy", "relay", "off")
        assert not policy.relay_allowed(remote.home)
        assert relay.call(METHOD_SEARCH, {"query": "quokka"}).value == {"kind": "unavailable", "reason": "no-service"}
        assert "ssh relay: off" in remote.cli("policy", "show").stdout
        remote.cli("policy", "relay", "on")
        assert len(relay.call(METHOD_SEARCH, {"query": "quokka"}).value["hits"]) == 3
    finally:
        policy.set_relay(remote.home, True)
        assert relay.close() == 0


def test_relay_serves_search_only_for_its_own_machine(remote: Remote) -> None:
    """A relay client gets search/status/read/ping: control methods are not-permitted, another host is never reached."""
    relay = RelayProcess(remote)
    try:
        for method in (METHOD_CLEAR, METHOD_RECONCILE, METHOD_STATS, METHOD_ROOTS, METHOD_HOSTS):
            rep = relay.call(method, {})
            assert not rep.ok and rep.value["code"] == ERR_NOT_PERMITTED, (method, rep.value)
            assert "belong to that machine's owner" in rep.value["message"]
        rep = relay.call(METHOD_SEARCH, {"query": "quokka"}, host="ssh:elsewhere")
        assert not rep.ok and rep.value["code"] == ERR_NOT_PERMITTED and "never forwards" in rep.value["message"]
        rep = relay.call(METHOD_SEARCH, {"query": "quokka"}, host="all")
        assert not rep.ok and rep.value["code"] == ERR_INVALID_PARAMS
        rep = relay.call("aiVault.noSuchThing", {})
        assert not rep.ok and rep.value["code"] == ERR_METHOD_NOT_FOUND
        ping = relay.call(METHOD_PING).value
        assert ping["service"] is True and "pid" not in ping and "home" not in ping
        status = relay.call(METHOD_STATUS).value
        assert status["filesIndexed"] == 3
        assert status["degradedRoots"] and all(r["reason"] == UNVERIFIED for r in status["degradedRoots"])
        hits = relay.call(METHOD_SEARCH, {"query": "quokka"}).value["hits"]
        assert len(hits) == 3 and {h["cwd"] for h in hits} == {f"/srv/remote/p{i}" for i in range(3)}
        # The sender does not stamp: the receiving client stamps the host it addressed.
        assert all("executionHostId" not in h for h in hits)
    finally:
        assert relay.close() == 0


def test_relay_stream_errors(remote: Remote) -> None:
    """A valid frame that is no request is answered and the stream goes on; broken framing is parse-error, then EOF."""
    relay = RelayProcess(remote)
    try:
        frames = encode_request(b"not the remote frame key", RpcRequest("bad-sig", METHOD_PING, {}, None))
        relay.send_raw(encode_stream(frames))
        rep = relay.recv()
        assert rep.id == "bad-sig" and not rep.ok and rep.value["name"] == "authentication-failed"
        assert relay.call(METHOD_PING).ok  # the stream went on
        relay.send_raw(b"\x00" + b"x" * 16)  # a frame count of 0
        rep = relay.recv()
        assert rep.id == "?" and not rep.ok and rep.value["code"] == ERR_PARSE
        assert relay.at_eof()
    finally:
        assert relay.close() == 1


# --- the client: fake ssh, real relay ----------------------------------------------------------------
def test_search_over_ssh_stamps_the_host_and_redacts_status(remote: Remote, client: Home, tmp_path: Path) -> None:
    """search/status --host ssh: without a daemon: the remote's sessions, each stamped, status with fixed reasons."""
    add_ssh(client, "ssh:devbox", remote.command(), fake_ssh(tmp_path))
    out = run_cli(client.path, "search", "--host", "ssh:devbox", "quokka", "--json", check=True)
    result = json.loads(out.stdout)
    assert result["kind"] == "results" and len(result["hits"]) == 3
    assert {h["executionHostId"] for h in result["hits"]} == {"ssh:devbox"}
    human = run_cli(client.path, "search", "--host", "ssh:devbox", "quokka", check=True).stdout
    assert human.count("claude @ ssh:devbox") == 3
    status = json.loads(run_cli(client.path, "status", "--host", "ssh:devbox", "--json", check=True).stdout)
    assert status["filesIndexed"] == 3 and status["degradedRoots"]
    assert all(r["reason"] == UNVERIFIED for r in status["degradedRoots"])
    # The client's own (empty) data directory answered nothing: its index was never even made.
    assert not (client.path / "index.duckdb").exists()


def test_host_ids_and_unknown_hosts(remote: Remote, client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """`all` and malformed ids are invalid-params for one host's search (the CLI's `--host all` is the merged
    search over every host, aiVault.searchHosts); a host not configured, or whose ssh fails, is host-unavailable."""
    for bad in ("all", "ssh:", "devbox", "runtime:", "ssh:-oProxyCommand=x"):
        if bad != "all":
            proc = run_cli(client.path, "search", "--host", bad, "quokka", "--json")
            assert proc.returncode == 1 and "aivault: invalid request:" in proc.stderr, (bad, proc.stderr)
            assert "use local, ssh:<target> or runtime:<environmentId>" in proc.stderr
        conn = Connection(client)
        try:
            with pytest.raises(InvalidParams):
                conn.call(METHOD_SEARCH, {"query": "quokka"}, bad)
        finally:
            conn.close()
    with pytest.raises(InvalidParams, match="local is this machine"):
        remote_host("local")
    proc = run_cli(client.path, "search", "--host", "ssh:nowhere", "quokka")
    assert proc.returncode != 0 and "not a configured host" in proc.stderr and "aivault hosts add" in proc.stderr
    failing = tmp_path / "failing-ssh"
    failing.write_text("#!/bin/sh\necho 'ssh: Could not resolve hostname nowhere: Name or service not known' >&2\n"
                       "exit 255\n")
    failing.chmod(0o755)
    add_ssh(client, "ssh:unreachable", remote.command(), str(failing))
    proc = run_cli(client.path, "search", "--host", "ssh:unreachable", "quokka")
    assert proc.returncode == 3 and "ssh could not connect or log in (exit status 255): ssh: Could not resolve " \
        "hostname nowhere" in proc.stderr, proc.stderr
    assert proc.stderr.startswith("aivault: ") and proc.stderr.count("\n") == 1  # a sentence, no log records
    with pytest.raises(HostUnavailable, match="Could not resolve hostname"):
        search(conns, Host("ssh:unreachable"))


def test_relay_dying_mid_request_then_reconnects(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """A relay that exits during a search fails that request with host-unavailable; the next request re-opens."""
    marker = tmp_path / "died-once"
    fake(client, tmp_path, "ssh:devbox", "die", marker)
    with pytest.raises(HostUnavailable, match="lost mid-request") as err:
        search(conns)
    assert "exit status 3" in str(err.value)
    assert marker.exists()
    result = search(conns)  # at once: a connection that worked is re-opened without backoff
    assert result["kind"] == "results" and result["hits"][0]["executionHostId"] == "ssh:devbox"


def test_hung_relay_is_unavailable_within_the_request_timeout(client: Home, conns: HostConnections,
                                                             tmp_path: Path) -> None:
    """A relay that stops answering after the greeting: host-unavailable after requestTimeoutS, never local results."""
    fake(client, tmp_path, "ssh:devbox", "hang")
    host_timeouts(client, requestTimeoutS=2)
    t0 = time.monotonic()
    with pytest.raises(HostUnavailable, match="no answer from ssh:devbox within 2 s") as err:
        search(conns)
    assert time.monotonic() - t0 < 30  # bounded: the call came back (the test's own limit, not a benchmark)
    assert "never answers for a remote host from the local index" in str(err.value)


def test_ssh_that_never_starts_the_relay(client: Home, tmp_path: Path) -> None:
    """An ssh that hangs before the preamble is host-unavailable after connectTimeoutS, its noise quoted."""
    add_ssh(client, "ssh:devbox", "echo 'motd: welcome'; exec sleep 120", fake_ssh(tmp_path))
    host_timeouts(client, connectTimeoutS=2)
    proc = run_cli(client.path, "search", "--host", "ssh:devbox", "quokka", timeout=60)
    assert proc.returncode != 0
    assert "did not answer within 2 s of opening the connection" in proc.stderr, proc.stderr


def test_old_remote_maps_method_not_found(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """A host answering -32601 is unavailable/no-service for search and read, the sentinel for status."""
    fake(client, tmp_path, "ssh:devbox", "old")
    assert search(conns) == {"kind": "unavailable", "reason": "no-service"}
    assert conns.call(DEVBOX, METHOD_READ, {"sessionId": "s-1"}) == {"kind": "unavailable", "reason": "no-service"}
    assert conns.call(DEVBOX, METHOD_STATUS, {}) == STATUS_SENTINEL
    proc = run_cli(client.path, "search", "--host", "ssh:devbox", "quokka")
    assert proc.returncode != 0 and "aivault policy --relay on" in proc.stderr


def test_lying_remote_is_corrected(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """Hits claiming another host are stamped with the one addressed; exposure is applied again by the receiver."""
    fake(client, tmp_path, "ssh:devbox", "liar")
    result = search(conns)
    hit = result["hits"][0]
    assert HIT["executionHostId"] == "local" and hit["executionHostId"] == "ssh:devbox"
    assert hit["resumeCommand"] == "codex resume s-1"  # the remote's CODEX_HOME dropped
    assert result["page"]["cursor"].startswith("@") and result["page"]["cursor"].endswith(".remote-cursor")
    status = conns.call(DEVBOX, METHOD_STATUS, {})
    assert [r["reason"] for r in status["degradedRoots"]] == [UNVERIFIED, UNVERIFIED]
    assert "homePath" not in status and status["filesFailed"] == 1


def test_garbage_stream_is_unavailable(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """Bytes after the preamble that are no stream message: host-unavailable naming the broken stream."""
    fake(client, tmp_path, "ssh:devbox", "garbage")
    with pytest.raises(HostUnavailable, match="did not speak the relay stream"):
        search(conns)


def test_login_shell_noise_is_skipped(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """What a login shell prints before the preamble is skipped: the search is answered."""
    fake(client, tmp_path, "ssh:devbox", "noise")
    assert search(conns)["hits"][0]["executionHostId"] == "ssh:devbox"


def test_wrong_protocol_version(client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """Replies of another protocol version are protocol-version, not a hang and not a result."""
    fake(client, tmp_path, "ssh:devbox", "version")
    with pytest.raises(ProtocolVersionError):
        search(conns)


def test_cursor_bound_to_its_host(remote: Remote, client: Home, conns: HostConnections, tmp_path: Path) -> None:
    """A remote cursor pages on its host only: on another host, or locally, it is malformed-cursor."""
    ssh = fake_ssh(tmp_path)
    add_ssh(client, "ssh:devbox", remote.command(), ssh)
    add_ssh(client, "ssh:twin", remote.command(), ssh)  # the same machine under another id
    first = search(conns, limit=1)
    cursor = first["page"]["cursor"]
    assert first["page"]["hasMore"] and cursor.startswith("@")
    second = search(conns, limit=1, cursor=cursor)
    assert second["kind"] == "results" and second["hits"][0]["sessionId"] != first["hits"][0]["sessionId"]
    assert search(conns, Host("ssh:twin"), limit=1, cursor=cursor)["kind"] == "malformed-cursor"
    # The client's own index, with two sessions of its own.
    for i in range(2):
        ClaudeWriter(tmp_path / "local-claude", cwd=f"/home/me/p{i}").user(f"a local quokka number{i}")
    run_cli(client.path, "index", "--no-default-roots", "--root", f"claude={tmp_path / 'local-claude'}", check=True)
    local = run_cli(client.path, "search", "quokka", "--cursor", cursor, "--json")
    assert json.loads(local.stdout) == {"kind": "malformed-cursor"}, local.stderr
    mine = json.loads(run_cli(client.path, "search", "quokka", "--limit", "1", "--json", check=True).stdout)
    assert mine["hits"][0]["cwd"].startswith("/home/me/") and mine["page"]["hasMore"]
    assert search(conns, limit=1, cursor=mine["page"]["cursor"])["kind"] == "malformed-cursor"
    with pytest.raises(NotPermitted):
        conns.call(DEVBOX, METHOD_CLEAR, {})  # never even sent


# --- through a real daemon ---------------------------------------------------------------------------
def test_daemon_routes_to_the_host_and_lists_it(remote: Remote, tmp_path: Path) -> None:
    """The client's daemon routes --host ssh: (stamped), keeps the connection, and `aivault hosts` shows its state."""
    client = make_client(tmp_path)
    host_timeouts(client, connectTimeoutS=5, requestTimeoutS=5)
    ssh = fake_ssh(tmp_path)
    add_ssh(client, "ssh:devbox", remote.command(), ssh)
    add_ssh(client, "ssh:liar", fake_relay_command("old"), ssh)
    marker = tmp_path / "died-once"
    add_ssh(client, "ssh:flaky", fake_relay_command("die", marker), ssh)
    daemon = DaemonProcess(client, {})
    try:
        result = daemon.call(METHOD_SEARCH, {"query": "quokka"}, host="ssh:devbox")
        assert len(result["hits"]) == 3 and {h["executionHostId"] for h in result["hits"]} == {"ssh:devbox"}
        status = daemon.call(METHOD_STATUS, host="ssh:devbox")
        assert all(r["reason"] == UNVERIFIED for r in status["degradedRoots"])
        assert daemon.call(METHOD_STATUS, host="ssh:liar") == STATUS_SENTINEL
        with pytest.raises(AivaultError) as err:
            daemon.call(METHOD_SEARCH, {"query": "quokka"}, host="ssh:flaky")
        assert err.value.code == HostUnavailable.code
        with pytest.raises(AivaultError) as err:
            daemon.call(METHOD_CLEAR, {}, host="ssh:devbox")
        assert err.value.code == ERR_NOT_PERMITTED
        with pytest.raises(AivaultError) as err:
            daemon.call(METHOD_SEARCH, {"query": "quokka"}, host="all")
        assert err.value.code == ERR_INVALID_PARAMS
        listing = json.loads(run_cli(client.path, "hosts", "--json", check=True).stdout)
        rows = {r["id"]: r for r in listing["hosts"]}
        assert rows["ssh:devbox"]["connected"] is True and rows["ssh:devbox"]["protocol"] == 1
        assert rows["ssh:flaky"]["connected"] is False and "exit status 3" in rows["ssh:flaky"]["lastError"]
        human = run_cli(client.path, "hosts", check=True).stdout
        assert "ssh:devbox · connected · protocol 1" in human and "last error:" in human
        # The daemon's own index is untouched by remote answers: its local search has no quokka.
        local = daemon.call(METHOD_SEARCH, {"query": "quokka"})
        assert local.get("hits", []) == []
    finally:
        daemon.stop()


def test_hosts_add_and_remove(client: Home) -> None:
    """`hosts add` stores ssh:<target> and its command lines, refuses runtimes and bad targets; `remove` forgets."""
    env = cli_env(client.path)
    out = run_cli(client.path, "hosts", "add", "ssh:me@devbox", "--ssh-command", "ssh -p 2222 -i /k/id",
                  "--relay-command", "env AIVAULT_HOME=/data/av aivault relay --stdio", env=env, check=True)
    assert "aivault policy --relay on" in out.stdout
    stored = json.loads((client.path / "hosts.json").read_text())["hosts"]["ssh:me@devbox"]
    assert stored == {"sshCommand": ["ssh", "-p", "2222", "-i", "/k/id"],
                      "relayCommand": "env AIVAULT_HOME=/data/av aivault relay --stdio"}
    assert run_cli(client.path, "hosts", "add", "runtime:ci-7").returncode != 0
    assert run_cli(client.path, "hosts", "add", "ssh:-oProxyCommand=evil").returncode != 0
    listing = run_cli(client.path, "hosts", check=True).stdout
    assert "ssh:me@devbox · not connected" in listing
    assert run_cli(client.path, "hosts", "remove", "ssh:me@devbox", check=True).returncode == 0
    assert "no remote hosts" in run_cli(client.path, "hosts", check=True).stdout


def test_hosts_list_is_what_bare_hosts_prints(client: Home) -> None:
    """`hosts list` prints what `hosts` does, and `hosts list --json` (or `hosts --json list`) what `hosts --json`
    does."""
    run_cli(client.path, "hosts", "add", "ssh:me@devbox", check=True)
    assert run_cli(client.path, "hosts", "list", check=True).stdout == run_cli(client.path, "hosts", check=True).stdout
    listing = json.loads(run_cli(client.path, "hosts", "--json", check=True).stdout)
    assert [r["id"] for r in listing["hosts"]] == ["ssh:me@devbox"]
    for args in (["list", "--json"], ["--json", "list"]):
        assert json.loads(run_cli(client.path, "hosts", *args, check=True).stdout) == listing
