"""Hybrid retrieval with the real local model: vectors in the background, RRF, traces, recovery.

These tests load all-minilm-l6-v2 through llama.cpp (converted once per test session into a
shared models folder) and embed small corpora for real.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from aivault.home import Home, write_private
from tests.builders import ClaudeWriter
from tests.support.common import answer, wait_until
from tests.support.daemons import DaemonProcess, InprocDaemon
from tests.support.index import assert_indexes_agree
from tests.support.semantic import PARAPHRASE, TOPICS, semantic_on, wait_vectors, write_topics


@pytest.fixture
def semantic_daemon(home: Home, roots: dict[str, Path]) -> Any:
    semantic_on(home)
    with InprocDaemon(home, roots) as d:
        yield d


def test_a_paraphrase_is_found_by_vectors_when_words_cannot_find_it(semantic_daemon: InprocDaemon,
                                                                    roots: dict[str, Path]) -> None:
    """No query word occurs in the session, so lexical finds nothing; the vector route ranks it first."""
    ids = write_topics(roots)
    semantic_daemon.reconcile()
    wait_vectors(semantic_daemon.service.stats)
    svc = semantic_daemon.service
    lexical = answer(svc.search({"query": PARAPHRASE}, force_route="lexical"))
    assert ids["asyncio"] not in [h["sessionId"] for h in lexical["hits"]]
    vector = answer(svc.search({"query": PARAPHRASE}, force_route="vector"))
    assert vector["hits"][0]["sessionId"] == ids["asyncio"]
    hybrid = answer(svc.search({"query": PARAPHRASE, "debug": True}))
    assert hybrid["debug"]["route"] == "hybrid"
    assert hybrid["hits"][0]["sessionId"] == ids["asyncio"]


def test_the_trace_appears_only_with_debug(semantic_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """debug adds per-hit ranks per route and the fused score; without debug there is no debug key."""
    ids = write_topics(roots)
    semantic_daemon.reconcile()
    wait_vectors(semantic_daemon.service.stats)
    svc = semantic_daemon.service
    plain = answer(svc.search({"query": "why does the pod keep restarting before migrations", "limit": 2}))
    assert "debug" not in plain and set(plain) == {"kind", "hits", "page", "generation", "truncated", "durationMs"}
    r = answer(svc.search({"query": "why does the pod keep restarting before migrations", "limit": 2, "debug": True}))
    assert r["debug"]["route"] == "hybrid" and r["debug"]["plannerReport"]["route"] == "hybrid"
    trace = r["debug"]["trace"]
    assert [t["sessionId"] for t in trace] == [h["sessionId"] for h in r["hits"]]
    top = trace[0]
    assert top["sessionId"] == ids["k8s"] and top["lexicalRank"] == 1 and top["vectorRank"] == 1
    # A question: the lexical list is the any-word route, scored per session, and the top session
    # holds every telling word of it (coverage 1).
    from aivault.query.hybrid import COVERAGE_WEIGHT, RRF_K

    assert top["fusedScore"] == pytest.approx(COVERAGE_WEIGHT * 1.0 / (RRF_K + 1) + 1 / (RRF_K + 1))
    assert top["lexicalSessionRank"] == 1 and top["lexicalChunkRank"] is not None
    assert all(c["reason"] == "ranked below this page" for c in r["debug"]["cut"])
    assert r["hits"][0]["score"] == top["fusedScore"]


def test_identifiers_stay_lexical_and_unready_vectors_never_block(home: Home, roots: dict[str, Path]) -> None:
    """Code-like and quoted queries plan lexically unless they are questions; with vectors not ready a
    natural-language query answers lexically."""
    write_topics(roots)
    with InprocDaemon(home, roots) as d:  # embeddings disabled: vectors are never ready
        d.reconcile()
        r = d.search("why does the pod keep restarting", debug=True)
        assert r["debug"]["route"] in ("phrase", "all", "typo", "any") and r["hits"]
        with pytest.raises(ValueError, match="not ready"):
            answer(d.service.search({"query": "pod restarting"}, force_route="hybrid"))
    from aivault.query.hybrid import prefers_semantic

    for q in ("CrashLoopBackOff", '"event loop"', "src/app.py", "#123", "foo_bar", '"event loop" blocked',
              "`make test` fails"):
        assert not prefers_semantic(q), q
    for q in ("why does the pod keep restarting", PARAPHRASE, "resolveTerminalPath in foo_bar.ts", "flakiness",
              'What is "Little Women" about according to Joanna?', 'where did `make test` fail on arm64?'):
        assert prefers_semantic(q), q


def test_paging_and_cursors_work_on_hybrid_results(semantic_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Hybrid pages: every session once, stable, cursors bound to the query, stale after new vectors."""
    write_topics(roots)
    semantic_daemon.reconcile()
    wait_vectors(semantic_daemon.service.stats)
    svc = semantic_daemon.service
    # Every session's reply says what "changed": the words list all five (vectors alone would stop
    # at the floor), and the vectors order them.
    q = "what changed when we fixed the layout and the tests"
    seen: list[str] = []
    cursor = None
    while True:
        r = answer(svc.search({"query": q, "limit": 2, **({"cursor": cursor} if cursor else {})}))
        assert r["kind"] == "results"
        seen += [h["sessionId"] for h in r["hits"]]
        cursor = r["page"]["cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == len(TOPICS)
    first = answer(svc.search({"query": q, "limit": 2}))
    ClaudeWriter(roots["claude"], cwd="/home/dev/new").user("a brand new session about layout tests")
    semantic_daemon.reconcile()
    wait_vectors(semantic_daemon.service.stats)
    assert answer(svc.search({"query": q, "limit": 2, "cursor": first["page"]["cursor"]}))["kind"] == "stale-cursor"


def test_equal_text_is_embedded_once_and_deleted_chunks_leave_the_index(semantic_daemon: InprocDaemon,
                                                                         roots: dict[str, Path]) -> None:
    """Two sessions with the same text share one vector; a replaced file's old chunks leave FAISS."""
    a = ClaudeWriter(roots["claude"], cwd="/home/dev/a", session_id="44444444-0000-4000-8000-000000000004")
    a.user(TOPICS["bread"])
    b = ClaudeWriter(roots["claude"], cwd="/home/dev/b")
    b.user(TOPICS["bread"])
    semantic_daemon.reconcile()
    stats = wait_vectors(semantic_daemon.service.stats)
    worker = semantic_daemon.service.indexer.vec
    assert worker is not None
    assert worker.worker.stats.embedded_total == 1 and stats["vectorIndex"]["count"] == 2
    con = semantic_daemon.service.con.cursor()
    old_chunks = {r[0] for r in con.execute("SELECT chunk FROM chunks c JOIN sessions s USING (sess) "
                                            "WHERE s.session_id = ?", [a.session_id]).fetchall()}
    tmp = a.path.with_suffix(".new")
    w = ClaudeWriter(roots["claude"], cwd="/home/dev/a", session_id=a.session_id)
    w.path = tmp
    w.user(TOPICS["css"])
    os.replace(tmp, a.path)
    semantic_daemon.reconcile()
    wait_vectors(semantic_daemon.service.stats)
    index = worker.index
    assert index is not None
    ids, _ = index.search(worker.query_embedder.embed([TOPICS["bread"]])[0], 10)  # type: ignore[union-attr]
    assert not (set(ids.tolist()) & old_chunks)
    assert worker.worker.stats.embedded_total == 2  # the css text; bread was already known
    con.close()


@pytest.mark.timeout(600)
def test_a_killed_embedder_resumes_without_re_embedding(home: Home, roots: dict[str, Path]) -> None:
    """SIGKILL while embedding: committed vectors survive; the next daemon embeds only what is left."""
    semantic_on(home)
    # ~1,000 distinct texts: several publications (one per PUBLISH_EVERY_S, 0.5 s here) to interrupt
    # between. At the default 5 s an unloaded machine embedded all 1,000 before the first (CI of cd10f6c).
    for i in range(50):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/k{i}")
        for j in range(20):
            c.user(f"session {i} message {j}: {list(TOPICS.values())[(i + j) % 5]} variant {i * 100 + j}")
    d = DaemonProcess(home, roots, extra_env={"AIVAULT_LOG_LEVEL": "info", "AIVAULT_PUBLISH_EVERY_S": "0.5"})
    try:
        d.reconcile()
        # Generous: on a loaded 2-core machine the model embeds a few texts a second, not hundreds.
        assert wait_until(lambda: d.call("aiVault.indexStats").get("semanticEmbedded", 0) > 0, timeout=180,
                          interval=0.05)
        before = d.call("aiVault.indexStats")
        assert before["semanticEmbedded"] < before["semanticEligible"], "finished too fast to interrupt"
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(10)
    finally:
        if d.proc.poll() is None:  # an assertion failed before the kill: leave no daemon behind
            d.proc.kill()
            d.proc.wait(10)
        d.log.close()
    db = duckdb.connect(str(home.db_path), read_only=True)
    done_hashes = db.execute("SELECT count(DISTINCT hash) FROM vectors").fetchone()[0]  # type: ignore[index]
    total_hashes = db.execute("SELECT count(DISTINCT hash) FROM chunks WHERE role IN (0, 1) AND kind IN (0, 3)"
                              ).fetchone()[0]  # type: ignore[index]
    db.close()
    assert 0 < done_hashes < total_hashes
    (home.path / "daemon.log").unlink()
    d = DaemonProcess(home, roots, extra_env={"AIVAULT_LOG_LEVEL": "info"})
    try:
        stats = wait_vectors(lambda: d.call("aiVault.indexStats"), timeout=400)
    finally:
        d.stop()
    log = (home.path / "daemon.log").read_text()
    db = duckdb.connect(str(home.db_path), read_only=True)
    assert db.execute("SELECT count(*), count(DISTINCT hash) FROM vectors").fetchone() == (total_hashes, total_hashes)
    db.close()
    published = [json.loads(line) for line in log.splitlines() if '"vectors published"' in line]
    assert sum(p["embedded"] for p in published) == total_hashes - done_hashes
    assert stats["semanticEmbedded"] == stats["semanticEligible"]
    assert_indexes_agree(home.db_path)  # the daemon after the kill was itself restarted and stopped cleanly


def test_a_sidecar_from_another_database_is_rejected_and_rebuilt(home: Home, roots: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    """The FAISS file records identity, epoch and model; one from another database is not trusted."""
    semantic_on(home)
    write_topics(roots)
    with InprocDaemon(home, roots) as d:
        d.reconcile()
        wait_vectors(d.service.stats)
        count = d.service.indexer.vec.index.count  # type: ignore[union-attr]
    header = json.loads((home.path / "vectors.json").read_text())
    assert header["count"] == count and header["identity"] == _identity(home)
    header["identity"] = "0" * 32  # as if copied from another database
    write_private(home.path / "vectors.json", json.dumps(header).encode())
    with InprocDaemon(home, roots) as d:
        stats = wait_vectors(d.service.stats)
        assert stats["vectorIndex"]["count"] == count
        assert d.service.indexer.vec.worker.stats.embedded_total == 0  # type: ignore[union-attr]
    assert json.loads((home.path / "vectors.json").read_text())["identity"] == _identity(home)


def _identity(home: Home) -> str:
    db = duckdb.connect(str(home.db_path), read_only=True)
    try:
        return str(db.execute("SELECT identity FROM meta").fetchone()[0])  # type: ignore[index]
    finally:
        db.close()


def test_status_shows_semantic_coverage(home: Home, roots: dict[str, Path]) -> None:
    """`aivault status` (human) reports chunks embedded out of eligible and the embedding rate."""
    from tests.support.common import run_cli

    semantic_on(home)
    write_topics(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        wait_vectors(lambda: d.call("aiVault.indexStats"))
        out = run_cli(home.path, "status", check=True).stdout
    finally:
        d.stop()
    assert "semantic" in out and "embedded 10 of 10" in out


def test_read_only_processes_use_the_saved_vectors_and_fall_back_to_words_without_the_model(
        home: Home, roots: dict[str, Path]) -> None:
    """Without a daemon the saved sidecar answers hybrid; if the model cannot load, search is lexical."""
    from aivault.config import embedder_factory
    from aivault.embed import EmbedError, configured_fingerprint
    from aivault.indexer.opening import open_reader
    from aivault.indexer.vector_service import ReadOnlyVectors
    from aivault.query.engine import Engine
    from aivault.query.request import parse_request

    semantic_on(home)
    ids = write_topics(roots)
    with InprocDaemon(home, roots) as d:  # its close saves the sidecar
        d.reconcile()
        wait_vectors(d.service.stats)

    def broken() -> Any:
        raise EmbedError("model file is unreadable")

    make = embedder_factory(home)
    assert make is not None
    con = open_reader(home)
    try:
        for factory, route in ((make, "hybrid"), (broken, "any")):
            vec = ReadOnlyVectors(home, con, factory, configured_fingerprint(None))
            engine = Engine(con, home.key(), vectors=vec)
            r = answer(engine.search(parse_request({"query": PARAPHRASE + " forever", "debug": True})))
            assert r["debug"]["route"] == route, factory
            if route == "hybrid":
                assert r["hits"][0]["sessionId"] == ids["asyncio"]
            engine.close()
    finally:
        con.close()
