"""The host-independent parts of a merged search (broker/merged.py): the host set, asking hosts at once
within one deadline, and the composite cursor."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from aivault.broker.merged import (
    DEADLINE_SLACK_S,
    HostPosition,
    MergedPosition,
    failure_reason,
    fan_out,
    mint,
    open_cursor,
    parse_host_set,
    settings,
)
from aivault.errors import ConfigInvalid, HostUnavailable, InvalidParams, MalformedCursor
from aivault.home import Home

CONFIGURED = ["ssh:devbox", "runtime:cloud-1"]
KEY = b"k" * 32


def test_all_is_local_then_every_configured_host_and_a_list_keeps_its_order() -> None:
    """`all` asks this machine first and then each configured host; a list is asked as written."""
    assert [h.id for h in parse_host_set("all", CONFIGURED, 16)] == ["local", "ssh:devbox", "runtime:cloud-1"]
    assert [h.id for h in parse_host_set(["runtime:cloud-1", "local"], CONFIGURED, 16)] == ["runtime:cloud-1", "local"]


@pytest.mark.parametrize(("hosts", "named"), [
    (["local", "local"], "hosts[1] repeats local"),
    (["local", "all"], "hosts[1] is 'all' among host ids"),
    (["ssh:elsewhere"], "hosts[0] is ssh:elsewhere, which is not a configured host"),
    (["ftp:x"], "hosts[0]: invalid host id"),
    ([7], "hosts[0]: host must be a string"),
    ([], "empty list"),
    ("local", "hosts must be \"all\" or a list"),
    (["local", "ssh:devbox", "runtime:cloud-1"], "more than the 2"),
])
def test_a_bad_host_set_is_invalid_params_naming_the_entry(hosts: Any, named: str) -> None:
    """Malformed, unknown, repeated, `all` among ids, empty, not a list, too many: each is named."""
    with pytest.raises(InvalidParams, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_host_set(hosts, CONFIGURED, 2)


def test_the_settings_come_from_config_json_with_their_bounds(tmp_path: Path) -> None:
    """Defaults without a config; a value out of range or an unknown key is ConfigInvalid naming it."""
    home = Home.resolve(tmp_path / "h").ensure()
    assert settings(home).deadline_s == 5.0 and settings(home).parallel_hosts == 4
    home.config_path.write_text('{"mergedSearch": {"deadlineS": 2.5, "parallelHosts": 2}}')
    assert (settings(home).deadline_s, settings(home).parallel_hosts, settings(home).max_hosts) == (2.5, 2, 16)
    home.config_path.write_text('{"mergedSearch": {"parallelHosts": 0}}')
    with pytest.raises(ConfigInvalid, match=r"mergedSearch\.parallelHosts"):
        settings(home)
    home.config_path.write_text('{"mergedSearch": {"deadline": 3}}')
    with pytest.raises(ConfigInvalid, match=r"unknown key mergedSearch\.deadline"):
        settings(home)


def test_fan_out_answers_within_the_deadline_with_a_hung_host_and_a_refusal() -> None:
    """A host that never answers is timed out at the deadline (plus at most the slack); the others' answers
    and errors come back in the host order; local asks run on their own threads."""
    hung: Future[Any] = Future()
    asked: list[str] = []

    def ask(host: str) -> Any:
        asked.append(host)
        if host == "local":
            time.sleep(0.05)
            return {"from": "local"}
        if host == "ssh:hung":
            return hung
        if host == "ssh:down":
            raise HostUnavailable("ssh: connect to host down port 22: Connection refused")
        fut: Future[Any] = Future()
        threading.Timer(0.1, lambda: fut.set_result({"from": host})).start()
        return fut

    t0 = time.monotonic()
    out = fan_out(["local", "ssh:hung", "ssh:down", "runtime:ok"], ask, parallel=4, until=t0 + 1.0)
    took = time.monotonic() - t0
    assert 1.0 <= took <= 1.0 + DEADLINE_SLACK_S + 0.1
    assert [a.host for a in out] == ["local", "ssh:hung", "ssh:down", "runtime:ok"]
    assert out[0].ok and out[0].value == {"from": "local"} and out[3].value == {"from": "runtime:ok"}
    assert out[1].timed_out and failure_reason(out[1], 1.0) == ("timeout", "no answer within the 1 s deadline")
    state, reason = failure_reason(out[2], 1.0)
    assert state == "failed" and reason.startswith("host-unavailable: ssh: connect")


def test_fan_out_keeps_at_most_parallel_hosts_outstanding() -> None:
    """With parallel=2 the third host is asked only once one of the first two has answered."""
    futures: dict[str, Future[Any]] = {h: Future() for h in ("ssh:a", "ssh:b", "ssh:c")}
    order: list[str] = []

    def ask(host: str) -> Any:
        order.append(host)
        if host == "ssh:a":
            threading.Timer(0.2, lambda: futures[host].set_result(1)).start()
        else:
            threading.Timer(0.05, lambda: futures[host].set_result(1)).start()
        return futures[host]

    seen_c_before_a_or_b: list[bool] = []
    real_ask = ask

    def watching(host: str) -> Any:
        if host == "ssh:c":
            seen_c_before_a_or_b.append(not (futures["ssh:a"].done() or futures["ssh:b"].done()))
        return real_ask(host)

    out = fan_out(["ssh:a", "ssh:b", "ssh:c"], watching, parallel=2, until=time.monotonic() + 2)
    assert all(a.ok for a in out) and order == ["ssh:a", "ssh:b", "ssh:c"] and seen_c_before_a_or_b == [False]


def test_a_merged_cursor_round_trips_and_every_edit_is_malformed() -> None:
    """The cursor carries each host's fence and position; a flipped character, another key or a single-host
    cursor is malformed."""
    pos = MergedPosition(b"q" * 16, (HostPosition("local", 7, "id-a", 3), HostPosition("ssh:devbox", 2, "id-b", 0)))
    cur = mint(KEY, pos)
    assert open_cursor(KEY, cur) == pos
    for i in range(1, len(cur)):
        if cur[i] == ".":
            continue
        edited = cur[:i] + ("A" if cur[i] != "A" else "B") + cur[i + 1:]
        with pytest.raises(MalformedCursor):
            open_cursor(KEY, edited)
    with pytest.raises(MalformedCursor):
        open_cursor(b"x" * 32, cur)
    with pytest.raises(MalformedCursor):
        open_cursor(KEY, cur[1:])  # a single-host cursor's shape
