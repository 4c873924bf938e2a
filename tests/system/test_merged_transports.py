"""A merged search over three machines reached each its own way, all real: this machine's index, a dev box
over a real sshd on loopback (its relay), and a runtime through a real CurveZMQ listener (a paired daemon);
compared with one index over all three machines' transcripts. Skipped with the reason when sshd cannot run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest

from aivault.broker.remote.hostconfig import HostEntry, load_hosts, save_hosts
from aivault.home import Home, write_private
from aivault.protocol import METHOD_SEARCH_HOSTS
from tests.builders import ClaudeWriter
from tests.support.common import cli_env, run_cli
from tests.support.daemons import DaemonProcess
from tests.support.merged import ask_merged, hit_rows, same_list, set_deadline, union_rows
from tests.support.remotes import distinct_lengths, host_timeouts, make_client, remote_with
from tests.support.sshd import Sshd, sshd_server

# Every text its own length, so that no two sessions tie on score (ties are listed in query/federated.py).
LAPTOP = [("claude", "the duckdb lock error" + " again" * i) for i in range(5)] + [
    ("codex", "alembic migration of the billing schema"), ("claude", "tokio runtime panic in the scheduler")]
DEVBOX = [("claude", "the duckdb lock was held by a zombie process"), ("codex", "flamegraph of the lock contention"),
          ("claude", "wal replay after a crash of the duckdb writer"), ("claude", "zebracorn renders sprites")]
RUNTIME = [("codex", "kubernetes pod eviction" + " again" * i) for i in range(3)] + [
    ("claude", "the lock error came from the duckdb writer on the runtime"), ("codex", "duckdb lock error in ci")]
LAPTOP, DEVBOX, RUNTIME = distinct_lengths(LAPTOP, DEVBOX, RUNTIME)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1 for the current user, with keys made for this test run only."""
    yield from sshd_server(tmp_path_factory)


@pytest.fixture(scope="module")
def world(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The laptop (client, with its own index), the dev box over ssh, the runtime paired over CurveZMQ, and the
    union index; the runtime's daemon runs for the module."""
    base = tmp_path_factory.mktemp("three")
    laptop = remote_with(base / "laptop", LAPTOP, relay=False)
    devbox = remote_with(base / "devbox", DEVBOX)
    runtime = remote_with(base / "runtime", RUNTIME, relay=False)
    daemon = DaemonProcess(runtime.home, {}, extra_env={"HOME": str(runtime.user)},
                           schedule_args=["--listen", "tcp://127.0.0.1:0"])
    try:
        client = laptop.home
        host_timeouts(client, connectTimeoutS=15, requestTimeoutS=20)
        # A generous deadline: each call is a cold process opening its host connections, on a machine that may be
        # busy; the tests of the deadline itself set theirs.
        set_deadline(client, 30)
        run_cli(client.path, "hosts", "add", sshd.host_id, "--relay-command", devbox.command(), check=True)
        code = json.loads(runtime.cli("pair", "--json").stdout)["code"]
        run_cli(client.path, "hosts", "pair", code, "--name", "laptop", check=True)
        runtime_id = next(h for h in load_hosts(client) if h.startswith("runtime:"))
        union = make_client(base / "union")
        roots = [f"{agent}={base / m / agent}" for m in ("laptop", "devbox", "runtime")
                 for agent in ("claude", "codex")]
        run_cli(union.path, "index", "--no-default-roots", *[a for r in roots for a in ("--root", r)], check=True)
        yield {"client": client, "union": union, "sshd": sshd, "ssh_id": sshd.host_id, "runtime_id": runtime_id,
               "runtime": runtime, "daemon": daemon, "base": base}
    finally:
        daemon.stop()


def _env(world: dict[str, Any]) -> dict[str, str]:
    return cli_env(world["client"].path, AIVAULT_SSH_COMMAND=shlex.join(world["sshd"].ssh_words()))










@pytest.mark.parametrize("sort", ["relevance", "newest"])
@pytest.mark.parametrize("query", ["\"lock error\"", "duckdb lock", "zebracorm", "duckdb zombie kubernetes"])
def test_three_transports_rank_as_one_index(world: dict[str, Any], query: str, sort: str) -> None:
    """Phrase, all words, typo repair and any word, both sorts: local + ssh + runtime give the union index's list,
    each hit naming the host it came from."""
    merged = ask_merged(world["client"], _env(world), query=query, limit=30, filters={"sort": sort})
    assert {h["id"]: h["state"] for h in merged["hosts"]} == {
        "local": "ok", world["ssh_id"]: "ok", world["runtime_id"]: "ok"}, merged["hosts"]
    union = union_rows(world["union"], query=query, limit=30, filters={"sort": sort})
    assert same_list(hit_rows(merged), union), (query, merged)
    assert {h["executionHostId"] for h in merged["hits"]} <= {"local", world["ssh_id"], world["runtime_id"]}


def test_pages_change_size_and_a_write_on_one_host_makes_the_cursor_stale_naming_it(world: dict[str, Any]) -> None:
    """Pages of 2 then 3 follow the union's list; after a commit on the runtime the next page is stale-cursor
    naming the runtime only."""
    whole = union_rows(world["union"], query="duckdb lock", limit=50)
    first = ask_merged(world["client"], _env(world), query="duckdb lock", limit=2)
    second = ask_merged(world["client"], _env(world), query="duckdb lock", limit=3, cursor=first["page"]["cursor"])
    assert same_list(hit_rows(first) + hit_rows(second), whole[:5]) and second["page"]["hasMore"]
    ClaudeWriter(world["base"] / "runtime" / "claude", cwd="/srv/late").user("a late lock on the runtime")
    world["daemon"].reconcile()
    stale = ask_merged(world["client"], _env(world), query="duckdb lock", limit=3, cursor=second["page"]["cursor"])
    assert stale["kind"] == "stale-cursor" and [h["id"] for h in stale["hosts"]] == [world["runtime_id"]], stale


def test_a_host_down_and_one_hung_are_listed_within_theset_deadline(world: dict[str, Any]) -> None:
    """A runtime whose listener is gone is failed and an ssh host whose command never answers is timeout, both
    within the deadline; the other hosts' sessions come back and the result is partial."""
    client: Home = world["client"]
    hosts = load_hosts(client)
    paired = hosts[world["runtime_id"]]
    hosts["runtime:gone"] = HostEntry("runtime:gone", address="tcp://127.0.0.1:9", server_key=paired.server_key)
    # The same sshd, reached as another target, whose remote command never answers.
    hosts["ssh:127.0.0.1"] = HostEntry("ssh:127.0.0.1", relay_command="sleep 600")
    save_hosts(client, hosts)
    cfg = json.loads(client.config_path.read_text())
    cfg["mergedSearch"] = {"deadlineS": 8}
    write_private(client.config_path, json.dumps(cfg).encode())
    try:
        value = ask_merged(world["client"], _env(world), query="duckdb lock", limit=5)
        states = {h["id"]: h["state"] for h in value["hosts"]}
        assert states["local"] == "ok" and states[world["ssh_id"]] == "ok" and states[world["runtime_id"]] == "ok"
        assert states["runtime:gone"] == "failed" and states["ssh:127.0.0.1"] == "timeout", value
        assert value["partial"] is True and value["hits"] and value["durationMs"] <= 8000 + 250
    finally:
        hosts = load_hosts(client)
        for hid in ("runtime:gone", "ssh:127.0.0.1"):
            hosts.pop(hid, None)
        save_hosts(client, hosts)
        cfg["mergedSearch"] = {"deadlineS": 30}
        write_private(client.config_path, json.dumps(cfg).encode())


def test_a_merged_search_is_never_routed_to_a_runtime(world: dict[str, Any]) -> None:
    """The merged search is asked of the machine the user sits at: addressed to a runtime, it is refused."""
    out = run_cli(world["client"].path, "rpc", METHOD_SEARCH_HOSTS, json.dumps({"query": "x", "hosts": ["local"]}),
                  "--host", world["runtime_id"], env=_env(world))
    assert out.returncode != 0 and "refused for any host but local" in out.stderr, out.stderr


def test_wait_until_current_is_honoured_per_host_and_said_per_host(world: dict[str, Any]) -> None:
    """A transcript written on the runtime after its last pass is found by a merged wait-until-current search
    (its daemon reconciles within the deadline); the dev box's relay, with no daemon to reconcile, says its
    freshness was cut, and the result's truncated.freshness says so too."""
    ClaudeWriter(world["base"] / "runtime" / "claude", cwd="/srv/fresh").user("a platypus seen just now")
    value = ask_merged(world["client"], _env(world), query="platypus", limit=5, freshness="wait-until-current")
    assert [h["cwd"] for h in value["hits"]] == ["/srv/fresh"], value
    assert value["hits"][0]["executionHostId"] == world["runtime_id"]
    fresh = {h["id"]: h.get("freshnessTruncated") for h in value["hosts"]}
    assert fresh[world["runtime_id"]] is False and fresh[world["ssh_id"]] is True, value["hosts"]
    assert value["truncated"]["freshness"] is True

