"""Vector neighbours are results only when similar enough, are marked, and are the same without a daemon.

Real DuckDB, the real local model (all-minilm-l6-v2 through llama.cpp) and real daemons; the
corpus is the five unrelated sessions of tests/system/test_semantic.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from aivault.home import Home
from aivault.query.hybrid import SIMILARITY_FLOOR
from aivault.thin.render import SIMILAR_TAG, print_results
from tests.support.common import answer
from tests.support.daemons import DaemonProcess, InprocDaemon, restart_and_stop_cleanly
from tests.support.semantic import PARAPHRASE, semantic_on, wait_vectors, write_topics

NONSENSE = ("xyzzyplugh", "qwrtzp vbnmkl", "best hiking trails in patagonia in winter")
# No word of this occurs in the k8s session (nor in any other); only its meaning matches.
HEALTH_PARAPHRASE = "container health check fails at boot"
QUERIES = (PARAPHRASE, HEALTH_PARAPHRASE, "why does the pod keep restarting before migrations",
           "web page columns collide on a phone", "accountant paperwork deadline", *NONSENSE)


@pytest.fixture
def embedded(home: Home, roots: dict[str, Path]) -> Any:
    """A daemon in this process over the five sessions, every eligible chunk embedded."""
    semantic_on(home)
    ids = write_topics(roots)
    with InprocDaemon(home, roots) as d:
        d.reconcile()
        wait_vectors(d.service.stats)
        yield d, ids


def _sessions(result: dict[str, Any]) -> list[str]:
    assert result["kind"] == "results", result
    return [h["sessionId"] for h in result["hits"]]


def test_a_nonsense_query_gets_no_vector_padding_from_the_daemon(embedded: tuple[InprocDaemon, dict[str, str]]) -> None:
    """Made-up words and an off-topic question find nothing: their nearest chunks are below the floor."""
    d, _ = embedded
    for q in NONSENSE:
        r = d.search(q, debug=True)
        assert r["debug"]["route"] == "hybrid", q  # the vectors were asked, and said nothing
        assert r["hits"] == [] and r["debug"]["trace"] == [], (q, r["debug"])


def test_the_floor_keeps_a_genuine_paraphrase_and_drops_the_rest(embedded: tuple[InprocDaemon,
                                                                                 dict[str, str]]) -> None:
    """A paraphrase sharing no word with its session is still found first; unrelated sessions are not listed."""
    d, ids = embedded
    for q, want in ((PARAPHRASE, ids["asyncio"]), (HEALTH_PARAPHRASE, ids["k8s"])):
        r = d.search(q, debug=True)
        assert _sessions(r) == [want], (q, r["debug"]["trace"])
        top = r["debug"]["trace"][0]
        assert top["matchedBy"] == "vector" and top["lexicalRank"] is None
        assert top["similarity"] >= SIMILARITY_FLOOR


def test_a_vector_only_hit_is_marked_in_the_trace_and_by_render(embedded: tuple[InprocDaemon,
                                                                                dict[str, str]]) -> None:
    """debug.trace says which route found each hit, and the human output tags the hits found by meaning only."""
    d, ids = embedded
    meaning = d.search(PARAPHRASE, debug=True)
    words = d.search("why does the pod keep restarting before migrations", debug=True)
    assert [t["matchedBy"] for t in meaning["debug"]["trace"]] == ["vector"]
    assert words["debug"]["trace"][0]["sessionId"] == ids["k8s"] and words["debug"]["trace"][0]["matchedBy"] == "both"
    out = io.StringIO()
    print_results(meaning, out)
    head = out.getvalue().splitlines()[0]
    assert head.startswith(" 1.") and head.endswith(SIMILAR_TAG)
    assert "1 session(s) (1 by similar meaning only)" in out.getvalue()
    out = io.StringIO()
    print_results(words, out)
    assert SIMILAR_TAG not in out.getvalue() and "by similar meaning" not in out.getvalue()
    # Without debug there is nothing to tell by: nothing is tagged, and the contract's shape is unchanged.
    plain = d.search(PARAPHRASE)
    out = io.StringIO()
    print_results(plain, out)
    assert "debug" not in plain and SIMILAR_TAG not in out.getvalue()


def test_direct_and_daemon_modes_answer_with_the_same_sessions(home: Home, roots: dict[str, Path]) -> None:
    """A daemon killed before saving its vector sidecar: the read-only CLI path still answers as the daemon did."""
    from aivault.indexer.opening import open_reader
    from aivault.vault.readonly import DirectService

    semantic_on(home)
    write_topics(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        wait_vectors(lambda: d.call("aiVault.indexStats"))
        daemon = {q: _sessions(d.search(q)) for q in QUERIES}
    finally:
        # Killed, not stopped: it saves its sidecar only when it stops or after a quiet spell.
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(10)
        d.log.close()
    assert not (home.path / "vectors.json").exists()
    assert daemon[PARAPHRASE] and daemon[HEALTH_PARAPHRASE]
    svc = DirectService(home, open_reader(home))
    try:
        direct = {q: _sessions(answer(svc.search({"query": q}))) for q in QUERIES}
        routes = {q: answer(svc.search({"query": q, "debug": True}))["debug"]["route"] for q in QUERIES}
    finally:
        svc.close()
        svc.con.close()  # DirectService leaves its handle to its opener; a writer opens the file next
    assert direct == daemon
    assert set(routes.values()) == {"hybrid"}
    # The index rebuilt from DuckDB was saved: the next process (or daemon) loads it as it is.
    assert json.loads((home.path / "vectors.json").read_text())["count"] == 10
    restart_and_stop_cleanly(home, roots)
