"""What the merged-search tests share: asking a merged search and one index, and comparing their lists."""

from __future__ import annotations

import json
from typing import Any

import msgpack

from aivault.home import Home, write_private
from aivault.protocol import METHOD_SEARCH_HOSTS
from aivault.query import federated
from aivault.query.engine import Engine
from aivault.query.request import SearchRequest
from tests.support.common import run_cli

Row = tuple[str, str, float]  # (agent, sessionId, score)


def ask_merged(client: Home, env: dict[str, str] | None = None, **params: Any) -> dict[str, Any]:
    """``aiVault.searchHosts`` over every host, asked of ``client`` by the CLI (no daemon: direct mode)."""
    out = run_cli(client.path, "rpc", METHOD_SEARCH_HOSTS, json.dumps({"hosts": "all", **params}), env=env,
                  check=True)
    value: dict[str, Any] = json.loads(out.stdout)
    return value


def union_rows(home: Home, **params: Any) -> list[Row]:
    """One index's hits for a search request (the union index the merged list is compared with)."""
    value = json.loads(run_cli(home.path, "rpc", "aiVault.searchSessions", json.dumps(params), check=True).stdout)
    return hit_rows(value)


def hit_rows(value: dict[str, Any]) -> list[Row]:
    assert value["kind"] == "results", value
    return [(h["agent"], h["sessionId"], h["score"]) for h in value["hits"]]


def same_list(a: list[Row], b: list[Row]) -> bool:
    """The same sessions in the same order, the scores equal to 1e-6."""
    return [x[:2] for x in a] == [x[:2] for x in b] and all(abs(x[2] - y[2]) <= 1e-6 for x, y in zip(a, b, strict=True))


def set_deadline(client: Home, seconds: float) -> None:
    """config.json's mergedSearch.deadlineS for ``client``."""
    cfg = json.loads(client.config_path.read_text())
    cfg["mergedSearch"] = {**cfg.get("mergedSearch", {}), "deadlineS": seconds}
    write_private(client.config_path, json.dumps(cfg).encode())


def wire(value: Any) -> Any:
    """``value`` as it arrives over the wire: msgpack, which takes only plain data (no tuple, set, NumPy)."""
    return msgpack.unpackb(msgpack.packb(value, strict_types=True), strict_map_key=False)


def federated_plan(engines: list[Engine], req: SearchRequest) -> tuple[dict[str, Any], int]:
    """The federated plan for ``req`` over ``engines`` (query/federated.py, in this process), and the rounds
    it took (the page round included); every value crosses msgpack on its way."""
    stats = [wire(federated.query_stats(e, req)) for e in engines]
    plan: dict[str, Any] = wire(federated.combine(stats, req))
    rounds = 1
    extra: list[dict[str, Any]] | None = None
    probes: list[dict[str, Any]] | None = None
    while plan["next"] != federated.NEXT_PAGE:
        if plan["next"] == federated.NEXT_TERM_STATS:
            extra = [wire(federated.term_stats(e, req, plan)) for e in engines]
        else:
            probes = [wire(federated.probe(e, req, plan)) for e in engines]
        rounds += 1
        assert rounds < 6, plan
        plan = wire(federated.combine(stats, req, term_stats=extra, probes=probes))
    return plan, rounds + (0 if plan["route"] == "none" else 1)
