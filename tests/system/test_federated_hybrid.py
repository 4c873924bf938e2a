"""A hybrid search merged over several indexes fuses as one index over all of them would.

Hosts A and B each embed their own sessions with the real local model (all-MiniLM-L6-v2 through llama.cpp);
a third index is built over the union of their transcripts and embeds them all. The merged flow -- stats,
combine (which decides the hybrid family and its model), each host's lexical candidates and nearest
chunks, the fusion at the coordinator (query/federated.fuse_hosts), each host's hits of the fused page --
must give the union index's hybrid hits: the same sessions in the same order with the same fused scores.
Then aiVault.searchHosts over A, B and a lexical-only host C: C contributes lexically and says so.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from aivault import policy
from aivault.broker.merged import search_hosts
from aivault.broker.remote.hostconfig import HostEntry, load_hosts, save_hosts
from aivault.broker.remote.hosts import Host
from aivault.home import Home, write_private
from aivault.query import federated
from aivault.query.engine import Engine
from aivault.query.request import SearchRequest, parse_request
from aivault.vault.endpoints import search_shard
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import answer, lexical_only
from tests.support.daemons import InprocDaemon
from tests.support.merged import federated_plan, wire
from tests.support.semantic import wait_vectors

HOST_A = [
    "pytest hangs forever because the asyncio event loop was closed by an earlier fixture; we now create a "
    "fresh loop for every test",
    "my sourdough bread comes out flat; the starter needs feeding twice a day and a longer proof",
    "the sidebar overlaps the footer on narrow screens; CSS grid with minmax columns fixed the overflow",
    "the migration timed out while the table lock was held by a long transaction",
    "quarterly tax filing reminder for the accountant, receipts are in the shared folder",
    "rust borrow checker complains about a mutable reference held across an await point",
]
HOST_B = [
    "the pod keeps restarting with CrashLoopBackOff because the liveness probe hits healthz before migrations",
    "postgres deadlock between two workers updating the same rows in a different order",
    "the docker build cache is invalidated by copying the whole repository before installing dependencies",
    "a flaky network test times out on the CI runner but passes locally",
    "the garden tomatoes need more water in the summer heat",
]
HOST_C = ["the lexical host also talks about the migration lock and a flaky test"]
QUERIES = [
    "spec runner freezes awaiting coroutine scheduler",
    "why does the pod keep restarting before migrations",
    "how do I fix the deadlock in postgres",
    "layout overlaps footer on small screens",
    "baking bread at home",
    "the migration lock timeout",
    "container image rebuild is slow",
]


def _write(roots: dict[str, Path], texts: list[str]) -> None:
    for i, text in enumerate(texts):
        w = CodexWriter(roots["codex"], cwd=f"/home/dev/p{i}") if i % 2 else ClaudeWriter(roots["claude"],
                                                                                           cwd=f"/home/dev/p{i}")
        w.user(text)
        w.assistant("Understood, here is what I changed" + " indeed" * (i + len(text) % 7))


def _daemon(path: Path, roots: dict[str, Path], *, vectors: bool) -> InprocDaemon:
    home = Home.resolve(path).ensure()
    policy.save(home, policy.Policy(True, None))
    if vectors:
        write_private(home.config_path, json.dumps({"embed": {"enabled": True}}).encode())
    else:
        lexical_only(home)
    d = InprocDaemon(home, roots, semantic=vectors)
    try:
        d.reconcile()
        if vectors:
            wait_vectors(d.service.stats)
    except BaseException:
        d.close()
        raise
    return d


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, InprocDaemon]]:
    base = tmp_path_factory.mktemp("federated-hybrid")

    def roots(name: str) -> dict[str, Path]:
        out = {"claude": base / name / "claude" / "projects", "codex": base / name / "codex" / "sessions"}
        for r in out.values():
            r.mkdir(parents=True, exist_ok=True)
        return out

    made: dict[str, InprocDaemon] = {}
    try:
        for name, texts in (("a", HOST_A), ("b", HOST_B), ("c", HOST_C)):
            _write(roots(name), texts)
        union = roots("union")
        for name in ("a", "b"):
            for agent, folder in roots(name).items():
                shutil.copytree(folder, union[agent], dirs_exist_ok=True)
        made["a"] = _daemon(base / "a" / "home", roots("a"), vectors=True)
        made["b"] = _daemon(base / "b" / "home", roots("b"), vectors=True)
        made["c"] = _daemon(base / "c" / "home", roots("c"), vectors=False)
        made["union"] = _daemon(base / "union" / "home", union, vectors=True)
        yield made
    finally:
        for d in made.values():
            d.close()


def _merged(engines: list[Engine], req: SearchRequest, offset: int, count: int) -> list[tuple[str, float, Any]]:
    """The fused rows ``offset`` to ``offset + count`` over ``engines`` as (sessionId, score, snippet)."""
    plan, _ = federated_plan(engines, req)
    assert plan["family"] == "hybrid", plan
    found = [wire(federated.candidates(e, req, plan)) for e in engines]
    assert all(f["vector"] is not None for f in found), "every host's vectors take part"
    fused = federated.fuse_hosts(found, req, plan)[offset : offset + count]
    out = []
    for r in fused:
        i = [f["identity"] for f in found].index(r["host"])
        got = wire(federated.hits_of(engines[i], req, plan, [[r["sess"], r["score"], r["chunk"]]]))
        (sess, hit), = got["hits"]
        assert sess == r["sess"]
        out.append((hit["sessionId"], hit["score"], hit["evidence"]))
    return out


def _union(engine: Engine, params: dict[str, Any], offset: int, count: int) -> list[tuple[str, float, Any]]:
    got = answer(engine.search(parse_request({**params, "limit": offset + count, "debug": True})))
    assert got["debug"]["route"] == "hybrid", got["debug"]
    return [(h["sessionId"], h["score"], h["evidence"]) for h in got["hits"]][offset:]


@pytest.mark.parametrize("query", QUERIES)
def test_the_merged_hybrid_ranking_is_the_union_indexs(hosts: dict[str, InprocDaemon], query: str) -> None:
    """Each query, both sorts, several windows: the fused list over A and B is the union index's hybrid
    list -- sessions, order, fused scores (to 1e-9) and snippets."""
    engines = [hosts["a"].service.engine, hosts["b"].service.engine]
    for params in ({"query": query}, {"query": query, "filters": {"sort": "newest"}}):
        req = parse_request(params)
        for offset, count in ((0, 3), (2, 4), (0, 20)):
            merged = _merged(engines, req, offset, count)
            union = _union(hosts["union"].service.engine, params, offset, count)
            assert [m[0] for m in merged] == [u[0] for u in union], f"{params} [{offset}:+{count}]"
            for m, u in zip(merged, union, strict=True):
                assert abs(m[1] - u[1]) <= 1e-9 and m[2] == u[2], f"{params}: {m} != {u}"
    assert _merged(engines, parse_request({"query": QUERIES[0]}), 0, 1)[0][0] == \
        _union(hosts["union"].service.engine, {"query": QUERIES[0]}, 0, 1)[0][0]


def _client(base: Path) -> Home:
    home = Home.resolve(base / "client").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    hosts = load_hosts(home)
    for hid in ("ssh:b", "ssh:c"):
        hosts[hid] = HostEntry(hid, ssh_command=("ssh",), relay_command="aivault relay")
    save_hosts(home, hosts)
    return home


def test_a_host_without_vectors_contributes_lexically_and_says_so(hosts: dict[str, InprocDaemon],
                                                                   tmp_path: Path) -> None:
    """aiVault.searchHosts over A (this machine), B and C (each answering its steps as it would over the
    wire): the route is hybrid, A and B report vectors "used", C "none"; C's lexical match is in the list,
    and a paraphrase only A's vectors can find is in the list; the next page follows the cursor without
    repeating a session."""
    client = _client(tmp_path)
    by_id = {"ssh:b": hosts["b"].service, "ssh:c": hosts["c"].service}

    def remote(host: Host, body: dict[str, Any]) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(wire(search_shard(by_id[host.id], wire(body))))
        return fut

    def local(body: dict[str, Any]) -> Any:
        return wire(search_shard(hosts["a"].service, wire(body)))

    def ask(**params: Any) -> dict[str, Any]:
        return search_hosts({"hosts": "all", **params}, home=client, ask_local=local, ask_remote=remote)

    got = ask(query="the migration lock timeout")
    assert got["kind"] == "results" and got["route"] == "hybrid" and not got["partial"], got
    assert {h["id"]: h.get("vectors") for h in got["hosts"]} == {"local": "used", "ssh:b": "used",
                                                                 "ssh:c": "none"}
    assert "ssh:c" in {h["executionHostId"] for h in got["hits"]}
    para = ask(query=QUERIES[0], limit=2)
    assert any(h["executionHostId"] == "local" and "asyncio" in h["evidence"]["snippet"]
               for h in ask(query=QUERIES[0], limit=5)["hits"]), "A's vectors find the paraphrase, no word of it"
    seen = [h["sessionId"] for h in para["hits"]]
    cursor = para["page"]["cursor"]
    while cursor:
        nxt = ask(query=QUERIES[0], limit=3, cursor=cursor)
        assert nxt["kind"] == "results", nxt
        seen += [h["sessionId"] for h in nxt["hits"]]
        cursor = nxt["page"]["cursor"]
    whole = ask(query=QUERIES[0], limit=50)
    assert seen == [h["sessionId"] for h in whole["hits"]] and len(set(seen)) == len(seen)
    lexical = ask(query='"migration lock"')
    assert lexical["route"] != "hybrid" and all("vectors" not in h for h in lexical["hosts"])
