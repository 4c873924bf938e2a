"""A search merged over several indexes (query/federated.py) answers as one index over all of them would.

Three indexes are built for real (scanner child, DuckDB, merged into sorted segments): host A from one set
of transcripts, host B from another, and a union index from both sets copied into one root. A and B differ
on purpose: A is three times B's size; "migration" is in most of A's sessions and one of B's; only B says
"kubernetes" (A says "kubernetz", as close to the misspelling "kubernetse" but in fewer chunks), so typo
repair must choose over both vocabularies and frequencies; "blue green deployment" is a phrase on B only,
while A has chunks holding the three words in another order; "zeppelin" is A's, "quasar" B's, "nebula"
both's, and no chunk holds two of them. Every query runs the federated flow (stats on A and B, combine,
the further rounds combine asks for, a page on each, merge) and must give the union index's hits -- the
same sessions, in the same order, with the same scores and snippets -- for several page windows and a
walk with a composite cursor, on the SQL path and on the NumPy path.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from aivault.query import bm25, fastrank, federated
from aivault.query.engine import Engine
from aivault.query.postings import PostingsSidecars
from aivault.query.request import SearchRequest, parse_request
from tests.builders import BASE_TIME, ClaudeWriter, CodexWriter
from tests.support.common import answer
from tests.support.daemons import InprocDaemon, merged_daemon
from tests.support.merged import federated_plan, wire

FILLER = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
          "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
          "xray", "yankee"]


class Corpus:
    """Writes sessions with distinct start times (so no two sessions share an updatedAt) and chunks of
    distinct lengths where they hold the phrase's words."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.clock = 0
        self.length = 4

    def start(self) -> Any:
        self.clock += 1
        return BASE_TIME + timedelta(minutes=13 * self.clock)

    def filler(self, lo: int = 3, hi: int = 30) -> str:
        return " ".join(self.rnd.choice(FILLER) for _ in range(self.rnd.randint(lo, hi)))

    def distinct(self) -> str:
        self.length += 3
        return " ".join(self.rnd.choice(FILLER) for _ in range(self.length))


def write_host_a(root: dict[str, Path], c: Corpus) -> None:
    for i in range(18):
        w = ClaudeWriter(root["claude"], cwd=f"/home/dev/svc-a{i % 3}", branch=f"a-{i % 2}", start=c.start())
        if i % 4 != 3:
            w.user(f"the migration of table {i} hit a timeout again {c.filler()}")
        else:
            w.user(f"timeout on the cache warmup {c.filler()}")
        w.assistant(f"{c.filler()} retried the migration with a longer lock {c.filler(0, 10)}")
        if i % 5 == 0:
            w.assistant(f"the zeppelin dashboard shows it {c.filler()}")
        if i % 6 == 1:
            w.assistant(f"nebula metrics look flat {c.filler()}")
        if i % 4 == 2:
            w.user(f"the deployment went green after the blue rollback {c.distinct()}")
        if i == 7:
            w.assistant(f"the kubernetz operator rollout was slow {c.filler()}")
        if i % 3 == 0:
            w.tool("Bash", {"command": "psql -c 'select 1'"}, f"migration log: {c.filler()}")
    for i in range(6):
        x = CodexWriter(root["codex"], cwd="/home/dev/api-a", branch="main", start=c.start())
        x.user(f"{'migration' if i % 2 else 'schema'} check {c.filler()}")
        x.assistant(f"rollout {c.filler()} done {'zeppelin' if i == 4 else ''}")


def write_host_b(root: dict[str, Path], c: Corpus) -> None:
    for i in range(5):
        w = ClaudeWriter(root["claude"], cwd=f"/home/dev/svc-b{i % 2}", branch="b", start=c.start())
        if i == 0:
            w.user(f"one migration timeout here too {c.filler()}")
        if i in (1, 2, 3):
            w.user(f"kubernetes rollout stuck {c.filler()}")
            w.assistant(f"{c.filler()} the kubernetes pods restarted")
        if i in (2, 4):
            w.user(f"we did a blue green deployment {c.distinct()}")
        if i in (0, 4):
            w.assistant(f"quasar queue drained {c.filler()}")
        if i == 3:
            w.assistant(f"nebula is fine {c.filler()}")
        w.assistant(c.filler())
    for _ in range(2):
        x = CodexWriter(root["codex"], cwd="/home/dev/api-b", branch="main", start=c.start())
        x.user(f"quasar rollout {c.filler()}")
        x.assistant(f"{c.filler()} timeout fixed")


# Each query and the route one index takes for it (sort relevance, no other option).
QUERIES: list[tuple[str, str]] = [
    ("blue green deployment", "phrase"),
    ('"blue green deployment"', "phrase"),
    ("migration", "all"),
    ("timeout migration", "all"),
    ("migration agent:claude", "all"),
    ("timeout migration path:/home/dev/svc-a1", "all"),
    ("kubernetse", "typo"),
    ("kubernetse rollout", "typo"),
    ("migratoin", "typo"),
    ("zeppelin quasar nebula", "any"),
    ("the zeppelin and quasar", "any"),
    ("zeppelin quasar nebula agent:codex", "any"),
    ("how did we fix the migration timeout?", "any"),
    ("what about the quasar queue?", "any"),
    ("agent:codex", "operators"),
    ("path:/home/dev/svc-a1", "operators"),
    ("", "empty"),
    ("unheardofword", "none"),
]
VARIANTS: list[dict[str, Any]] = [{}, {"filters": {"sort": "newest"}}, {"scope": "conversation"}]
WINDOWS = [(0, 5), (3, 4), (0, 60), (10, 7)]


@dataclass
class Host:
    daemon: InprocDaemon
    sql: Engine
    fast: Engine


def _host(path: Path, write: Any, c: Corpus | None, roots: dict[str, Path]) -> Host:
    for r in roots.values():
        r.mkdir(parents=True, exist_ok=True)
    if write is not None:
        write(roots, c)
    d = merged_daemon(path / "home", roots)
    svc = d.service
    side = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
    fast = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock, postings=side)
    for _ in range(2):  # the first search queues the sidecar builds, the next the loads of the others
        answer(fast.search(parse_request({"query": "warm"})))
        assert side.wait_built(120)
    sql_engine = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
    return Host(d, sql_engine, fast)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, Host, Host]]:
    base = tmp_path_factory.mktemp("federated")
    c = Corpus(3)

    def roots(name: str) -> dict[str, Path]:
        return {"claude": base / name / "claude" / "projects", "codex": base / name / "codex" / "sessions"}

    made: list[Host] = []
    try:
        made.append(_host(base / "a", write_host_a, c, roots("a")))
        made.append(_host(base / "b", write_host_b, c, roots("b")))
        union = roots("union")
        for name in ("a", "b"):
            for agent, folder in roots(name).items():
                shutil.copytree(folder, union[agent], dirs_exist_ok=True)
        made.append(_host(base / "union", None, None, union))
        yield made[0], made[1], made[2]
    finally:
        for h in made:
            h.fast.close()
            h.sql.close()
            h.daemon.close()


def _window(engines: list[Engine], req: SearchRequest, plan: dict[str, Any], offset: int,
            count: int) -> list[dict[str, Any]]:
    """Merged rows ``offset`` to ``offset + count``: each host asked for its first ``offset + count``."""
    pages = [wire(federated.page(e, req, plan, 0, offset + count)) for e in engines]
    return federated.merge(pages, req)[offset : offset + count]


def _walk(engines: list[Engine], req: SearchRequest, plan: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """Every merged row, page by page of ``size``, each host asked only for the rows after those of it
    already shown (a composite cursor: one offset per host)."""
    shown = [0 for _ in engines]
    out: list[dict[str, Any]] = []
    while True:
        pages = [wire(federated.page(e, req, plan, shown[i], size)) for i, e in enumerate(engines)]
        rows = federated.merge(pages, req)[:size]
        for r in rows:
            shown[[p["identity"] for p in pages].index(r["host"])] += 1
        out += rows
        if len(rows) < size:
            return out


def _union(engine: Engine, params: dict[str, Any], offset: int, count: int) -> tuple[list[dict[str, Any]], str]:
    """The union index's hits ``offset`` to ``offset + count`` and its route."""
    got = answer(engine.search(parse_request({**params, "limit": offset + count, "debug": True})))
    assert got["kind"] == "results", got
    return list(got["hits"])[offset:], str(got["debug"]["route"])


def _union_all(engine: Engine, params: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """Every hit of the union index, page by page through its cursor."""
    out: list[dict[str, Any]] = []
    got = answer(engine.search(parse_request({**params, "limit": size})))
    while True:
        out += got["hits"]
        cursor = got["page"]["cursor"]
        if not cursor:
            return out
        got = answer(engine.search(parse_request({**params, "limit": size, "cursor": cursor})))


def _assert_same(merged: list[dict[str, Any]], union: list[dict[str, Any]], what: str) -> None:
    assert [(r["agent"], r["sessionId"]) for r in merged] == [(h["agent"], h["sessionId"]) for h in union], (
        f"{what}: other sessions or order\nmerged {[(r['sessionId'][:8], r['score']) for r in merged]}\n"
        f"union  {[(h['sessionId'][:8], h['score']) for h in union]}")
    for r, h in zip(merged, union, strict=True):
        assert abs(float(r["score"]) - float(h["score"])) <= 1e-6 + 1e-12, f"{what}: {r['score']} != {h['score']}"
        assert {**r["hit"], "score": 0} == {**h, "score": 0}, f"{what}: the hit differs\n{r['hit']}\n{h}"


def _check_all(a: Host, b: Host, union: Host, fast: bool) -> None:
    engines = [a.fast, b.fast] if fast else [a.sql, b.sql]
    reference = union.fast if fast else union.sql
    for e in [*engines, reference]:
        with e.reading() as (_, snap):
            assert (snap.postings is not None) == fast, "the engine did not take the path under test"
    seen_routes: set[str] = set()
    for query, route in QUERIES:
        for variant in VARIANTS:
            params = {"query": query, **variant}
            req = parse_request(params)
            plan, _ = federated_plan(engines, req)
            for offset, count in WINDOWS:
                want, union_route = _union(reference, params, offset, count)
                if plan["route"] not in ("none",):
                    assert plan["route"] == union_route, f"{params}: route {plan['route']} != {union_route}"
                _assert_same(_window(engines, req, plan, offset, count), want, f"{params} [{offset}:+{count}]")
            _assert_same(_walk(engines, req, plan, 3), _union_all(reference, params, 3), f"{params} walked by 3")
            if not variant:
                assert plan["route"] == route, f"{query!r}: route {plan['route']}, want {route}"
            seen_routes.add(plan["route"])
    assert seen_routes >= {"phrase", "all", "typo", "any", "operators"}, seen_routes


def test_the_merged_search_equals_the_union_index_on_the_sql_path(hosts: tuple[Host, Host, Host]) -> None:
    """On the SQL path, every route (phrase, all, typo, any, questions, operators only) with filters, both
    sorts and scopes, merged over hosts A and B gives the union index's hits, order and scores, in every
    page window and through a composite cursor."""
    _check_all(*hosts, fast=False)


def test_the_merged_search_equals_the_union_index_on_the_numpy_path(hosts: tuple[Host, Host, Host]) -> None:
    """On the memory-mapped NumPy path, the same queries merged over A and B give the union index's answers."""
    _check_all(*hosts, fast=True)


def test_the_hosts_may_answer_on_different_paths(hosts: tuple[Host, Host, Host]) -> None:
    """Host A on the SQL path and host B on the NumPy path (a direct-mode host beside a daemon) still merge
    into the union index's answers: the values crossing between them are the same floats."""
    a, b, union = hosts
    for query, _ in QUERIES:
        params = {"query": query}
        req = parse_request(params)
        plan, _ = federated_plan([a.sql, b.fast], req)
        want, _ = _union(union.sql, params, 0, 60)
        _assert_same(_window([a.sql, b.fast], req, plan, 0, 60), want, f"{params} mixed paths")


def test_the_statistics_change_the_ranking(hosts: tuple[Host, Host, Host]) -> None:
    """Each host's own scores are not the union's (so the test above proves something), and typo repair
    over host A alone would choose A's word where the union chooses B's."""
    a, b, union = hosts
    own = {(h["agent"], h["sessionId"]): h["score"] for e in (a.sql, b.sql)
           for h in answer(e.search(parse_request({"query": "migration", "limit": 60})))["hits"]}
    merged = {(h["agent"], h["sessionId"]): h["score"] for h in _union(union.sql, {"query": "migration"}, 0, 60)[0]}
    assert own.keys() == merged.keys()
    assert any(abs(own[k] - merged[k]) > 1e-3 for k in own)
    alone = answer(a.sql.search(parse_request({"query": "kubernetse", "debug": True})))
    assert alone["debug"]["repairedTerms"] == {"kubernets": "kubernetz"}
    plan, _ = federated_plan([a.sql, b.sql], parse_request({"query": "kubernetse"}))
    assert plan["repaired"] == {"kubernets": "kubernetes"}
    together = answer(union.sql.search(parse_request({"query": "kubernetse", "debug": True})))
    assert together["debug"]["repairedTerms"] == plan["repaired"]


@pytest.mark.parametrize("fast", [False, True])
def test_few_phrase_candidates_are_chosen_over_all_hosts(hosts: tuple[Host, Host, Host], fast: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """With PHRASE_CANDIDATES lowered to 2, which chunks the phrase is looked for in is decided over both
    hosts' candidates by the summed statistics, as the union index decides it."""
    for module in (bm25, fastrank, federated):
        monkeypatch.setattr(module, "PHRASE_CANDIDATES", 2)
    a, b, union = hosts
    engines = [a.fast, b.fast] if fast else [a.sql, b.sql]
    reference = union.fast if fast else union.sql
    probed = set()
    for query in ("blue green deployment", "green blue deployment", "deployment green", "the blue rollback"):
        for variant in VARIANTS:
            params = {"query": query, **variant}
            req = parse_request(params)
            plan, rounds = federated_plan(engines, req)
            want, route = _union(reference, params, 0, 60)
            assert plan["route"] == route, (params, plan["route"], route)
            _assert_same(_window(engines, req, plan, 0, 60), want, f"{params} few candidates")
            if rounds == 3:
                probed.add(plan["route"])
    assert probed == {"phrase", "all"}, "the phrase probe was not asked, or never decided both ways"


def test_rounds_and_timings(hosts: tuple[Host, Host, Host], capsys: pytest.CaptureFixture[str]) -> None:
    """Each route takes the documented number of rounds; the time of a stats round and of a page beside a
    normal search on this corpus is printed (for the record, not asserted)."""
    a, b, union = hosts
    want = {"all": 2, "phrase": 2, "any": 3, "typo": 4, "operators": 2, "empty": 2, "none": 1}
    for query, route in QUERIES:
        plan, rounds = federated_plan([a.fast, b.fast], parse_request({"query": query}))
        assert plan["route"] == route and rounds == want[route], (query, plan["route"], rounds)
    for fast in (False, True):
        engines = [a.fast, b.fast] if fast else [a.sql, b.sql]
        reference = union.fast if fast else union.sql
        t_stats = t_page = t_search = 0.0
        n = 0
        for _ in range(5):
            for query, _route in QUERIES:
                req = parse_request({"query": query, "limit": 20})
                t0 = time.perf_counter()
                stats = [federated.query_stats(e, req) for e in engines]
                t1 = time.perf_counter()
                plan, _ = federated_plan(engines, req)
                t2 = time.perf_counter()
                for e in engines:
                    federated.page(e, req, plan, 0, 20)
                t3 = time.perf_counter()
                reference.search(req)
                t4 = time.perf_counter()
                assert stats
                t_stats, t_page, t_search = t_stats + (t1 - t0) / 2, t_page + (t3 - t2) / 2, t_search + (t4 - t3)
                n += 1
        with capsys.disabled():
            print(f"\n{'numpy' if fast else 'sql'} path, mean over {n} queries: stats round {1e3 * t_stats / n:.2f} ms "
                  f"a host, page {1e3 * t_page / n:.2f} ms a host, union search {1e3 * t_search / n:.2f} ms")


def test_a_host_that_moved_on_answers_stale(hosts: tuple[Host, Host, Host]) -> None:
    """A host whose generation is not the one its statistics were read at answers stale to every later round
    instead of ranking with statistics of another state."""
    a, b, _ = hosts
    req = parse_request({"query": "zeppelin quasar nebula"})
    stats = [federated.query_stats(e, req) for e in (a.sql, b.sql)]
    plan = federated.combine(stats, req)
    assert plan["next"] == federated.NEXT_PROBE
    moved = {**plan, "generations": {**plan["generations"], stats[0]["identity"]: stats[0]["generation"] - 1}}
    assert federated.probe(a.sql, req, moved)["stale"] is True
    assert "stale" not in federated.probe(b.sql, req, moved)
    assert federated.page(a.fast, req, moved, 0, 5)["stale"] is True
    assert federated.term_stats(a.sql, req, {**moved, "ask": ["zeppelin"]})["stale"] is True
