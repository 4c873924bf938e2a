"""Reclaiming the index file's freed blocks (indexer/reclaim.py): a copy renamed over the old file.

Every test runs the real thing: `aivault index`, a writer process reclaiming a real DuckDB file
(killed with SIGKILL at each step of the swap), and `aivault serve` searched over RPC while it
swaps. Sizes are asserted on DuckDB's own block counts (PRAGMA database_size), never on time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from aivault.home import Home
from aivault.indexer import reclaim, sql_maint
from aivault.protocol import METHOD_RECONCILE, METHOD_SEARCH, METHOD_STATS, METHOD_STATUS
from bench.gen_corpus import generate
from tests.support.common import answer, cli_env, run_cli, wait_until
from tests.support.daemons import DaemonProcess, restart_and_stop_cleanly

MESSAGES = 20_000
NEVER = {"AIVAULT_RECLAIM_MIN_FREE_MB": "1000000"}  # the index as it is without a reclaim
ALWAYS = {"AIVAULT_RECLAIM_MIN_FREE_MB": "0"}  # this corpus frees a few MB: below the default floor

# A writer process that reclaims the index and exits (what `aivault index` does at its end).
RECLAIM_CHILD = """
import json, sys
from aivault import log
from aivault.home import Home
from aivault.vault.session import WriterSession
log.configure("warning", process="reclaim-test")
s = WriterSession(Home.resolve(sys.argv[1]), default_roots=False, schedule=False, semantic=False)
try:
    done = s.service.reclaim(restart=False)
finally:
    s.close()
print(json.dumps(done))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    generate(out, MESSAGES, seed=5)
    return out


def _roots(corpus: Path) -> list[str]:
    return ["--no-default-roots", "--root", f"claude={corpus}/claude/projects",
            "--root", f"codex={corpus}/codex/sessions", "--root", f"codex={corpus}/codex/archived_sessions"]


def _new_home(path: Path) -> Home:
    from aivault import policy
    from tests.support.common import lexical_only

    h = Home.resolve(path).ensure()
    policy.save(h, policy.Policy(True, None))
    lexical_only(h)
    return h


@pytest.fixture(scope="module")
def unreclaimed(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A one-shot index of the corpus left as DuckDB leaves it: the bulk segment's blocks free."""
    h = _new_home(tmp_path_factory.mktemp("unreclaimed") / "home")
    proc = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **NEVER), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reclaim"] is None
    u = _usage(h.db_path)
    assert u.ratio > reclaim.RECLAIM_RATIO, f"the corpus left no free blocks to reclaim: {u}"
    return h


def _copy_home(src: Home, dst: Path) -> Home:
    """A copy of the data directory; a socket a killed process left behind is not copied (it cannot be)."""
    def sockets(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if stat.S_ISSOCK(os.lstat(os.path.join(folder, n)).st_mode)]

    shutil.copytree(src.path, dst, ignore=sockets)
    return Home.resolve(dst)


def _usage(db: Path) -> reclaim.Usage:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return reclaim.usage(con, db)
    finally:
        con.close()


def signature(db: Path) -> dict[str, Any]:
    """Everything a reclaim must keep: the catalog as SQL, each table's rows in their order, the meta row."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        name = reclaim.database_name(con)
        out: dict[str, Any] = {"catalog": con.execute(sql_maint.CATALOG, {"db": name}).fetchall(),
                               "meta": con.execute("SELECT * FROM meta").fetchall()}
        for (table,) in con.execute(sql_maint.TABLES_OF, [name]).fetchall():
            out[table] = con.execute(f'SELECT count(*), hash(list(hash(t) ORDER BY rowid)) FROM "{table}" t').fetchone()
        return out
    finally:
        con.close()


def _queries(db: Path) -> list[dict[str, Any]]:
    """Single words drawn from the indexed text, a two-term query, filters and both scopes."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        texts = [r[0] for r in con.execute(
            "SELECT text FROM chunks WHERE chunk % 997 = 1 ORDER BY chunk LIMIT 12").fetchall()]
    finally:
        con.close()
    words = [w for t in texts for w in t.split() if w.isalpha() and len(w) > 4][:10]
    assert len(words) >= 4, texts
    qs: list[dict[str, Any]] = [{"query": w, "limit": 10} for w in words]
    qs += [{"query": f"{words[0]} {words[1]}"}, {"query": f"agent:codex {words[2]}"},
           {"query": words[3], "scope": "conversation", "limit": 5}]
    return qs


def _comparable(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in r.items() if k != "durationMs"}
    out["page"] = {"hasMore": r.get("page", {}).get("hasMore")}
    return out


def _direct_answers(h: Home, queries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """What a search without a daemon answers, and the second-page cursor of the first query."""
    from aivault.indexer.opening import open_reader
    from aivault.vault.readonly import DirectService

    con = open_reader(h)
    svc = DirectService(h, con)
    try:
        answers = [answer(svc.search(q)) for q in queries]
        return [_comparable(a) for a in answers], answers[0]["page"]["cursor"]
    finally:
        svc.engine.close()
        con.close()


def _page_two(h: Home, query: dict[str, Any], cursor: str) -> dict[str, Any]:
    from aivault.indexer.opening import open_reader
    from aivault.vault.readonly import DirectService

    con = open_reader(h)
    svc = DirectService(h, con)
    try:
        return _comparable(answer(svc.search({**query, "cursor": cursor})))
    finally:
        svc.engine.close()
        con.close()


def _reclaim_child(h: Home, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", RECLAIM_CHILD, str(h.path)], env=cli_env(h.path, **ALWAYS, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_one_shot_index_leaves_the_file_within_1_3x_its_used_data(corpus: Path, tmp_path: Path) -> None:
    """`aivault index` merges its bulk segment in the reclaim's copy: the file never holds the postings
    twice and ends <= 1.3x its used blocks, reported in --json; a second run has nothing to do."""
    h = _new_home(tmp_path / "home")
    proc = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **ALWAYS), timeout=600)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)["reclaim"]
    assert done["done"] is True, done
    assert done["merged"]["inputs"] == ["seg_1"], done  # the bulk segment, merged on the way
    assert done["before"]["fileBytes"] <= reclaim.RECLAIM_RATIO * done["before"]["usedBytes"], done
    assert _registry(h.db_path) == [("sorted", _segment_rows(h.db_path, done["merged"]["target"])), ("active", 0)]
    u = _usage(h.db_path)
    assert u.file_bytes <= reclaim.RECLAIM_RATIO * u.used_bytes, u
    assert done["after"]["fileBytes"] == u.file_bytes
    assert not reclaim.tmp_path(h.db_path).exists()
    assert not Path(str(h.db_path) + ".wal").exists()
    # A second run over unchanged files has nothing to reclaim and stays within the ratio.
    again = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **ALWAYS), timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reclaim"] is None
    u = _usage(h.db_path)
    assert u.file_bytes <= reclaim.RECLAIM_RATIO * u.used_bytes, u


def _registry(db: Path) -> list[tuple[str, int]]:
    """The segments as searches see them: (state, rows), oldest first."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = con.execute("SELECT name, state FROM segments ORDER BY created_at, name").fetchall()
        return [(str(state), int(con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]))  # type: ignore[index]
                for name, state in names]
    finally:
        con.close()


def _segment_rows(db: Path, name: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {name}").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def content(db: Path) -> dict[str, Any]:
    """What searches read, whatever the segments are called: every table's rows in order (the
    observations' timestamps and the segment counter aside), the vocabulary's distinct terms in
    their first order, and each segment's postings in order, by state."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out: dict[str, Any] = {"meta": con.execute("SELECT * EXCLUDE (next_segment) FROM meta").fetchall(),
                               "vocab": con.execute("SELECT term FROM vocab_log QUALIFY row_number() OVER "
                                                    "(PARTITION BY term ORDER BY rowid) = 1 ORDER BY rowid").fetchall()}
        segments = dict(con.execute("SELECT name, state FROM segments").fetchall())
        out["segments"] = sorted((state, con.execute(f"SELECT count(*), hash(list(hash(p) ORDER BY rowid)) "
                                                     f"FROM {name} p").fetchone()) for name, state in segments.items())
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            if table not in segments and table not in ("meta", "vocab_log", "segments", "observations"):
                out[table] = con.execute(f'SELECT count(*), hash(list(hash(t) ORDER BY rowid)) FROM "{table}" t'
                                         ).fetchone()
        return out
    finally:
        con.close()


def _index_until_killed(h: Home, corpus: Path, step: str, marker: Path) -> None:
    """`aivault index`, SIGKILLed when its reclaim reaches ``step``."""
    _kill_when_paused(subprocess.Popen([sys.executable, "-m", "aivault.cli", "index", "--json", *_roots(corpus)],
                                       env=cli_env(h.path, **ALWAYS, AIVAULT_RECLAIM_PAUSE=f"{step}:{marker}"),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), marker)
    marker.unlink()


def _kill_when_paused(child: subprocess.Popen[str], marker: Path) -> None:
    """SIGKILL ``child`` once it has written ``marker`` (the reclaim's pause hook); fail if it never does."""
    try:
        assert wait_until(lambda: marker.exists() or child.poll() is not None, timeout=300), "never reached the step"
        assert marker.exists(), child.communicate()[1]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


@pytest.fixture(scope="module")
def unmerged(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A one-shot index killed as its reclaim's copy began: every batch committed, the bulk segment
    not yet merged (and a leftover copy, which the next writer removes)."""
    h = _new_home(tmp_path_factory.mktemp("unmerged") / "home")
    _index_until_killed(h, corpus, "attached", tmp_path_factory.mktemp("marker") / "paused")
    assert [state for state, _ in _registry(h.db_path)] == ["active"], _registry(h.db_path)
    assert reclaim.tmp_path(h.db_path).exists()
    return h


@pytest.fixture(scope="module")
def merged(corpus: Path, unmerged: Home, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """``unmerged`` finished by `aivault index`: its pass finds nothing new, its copy merges."""
    h = _copy_home(unmerged, tmp_path_factory.mktemp("merged") / "home")
    proc = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **ALWAYS), timeout=600)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)["reclaim"]
    assert done["done"] is True and done["merged"]["inputs"] == ["seg_1"], done
    return h


def test_the_merge_in_the_copy_writes_what_merging_in_place_writes(corpus: Path, unmerged: Home, merged: Home,
                                                                    tmp_path: Path) -> None:
    """From one unmerged index, merging in the copy and merging in place give the same rows, postings
    (in order), vocabulary, meta row and search answers; only the copy leaves no free blocks."""
    h = _copy_home(unmerged, tmp_path / "home")
    proc = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **NEVER), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reclaim"] is None  # under the reclaim's floor: merged in place, not copied
    in_place, copied = content(h.db_path), content(merged.db_path)
    assert [state for state, _ in in_place["segments"]] == ["active", "sorted"]
    assert in_place["segments"][0][1][0] == 0 and in_place["segments"][1][1][0] > 100_000
    assert copied == in_place
    assert _usage(h.db_path).ratio > reclaim.RECLAIM_RATIO
    assert _usage(merged.db_path).ratio <= reclaim.RECLAIM_RATIO
    queries = _queries(h.db_path)
    answers = _direct_answers(h, queries)[0]
    assert all(a["kind"] == "results" for a in answers) and sum(len(a["hits"]) for a in answers) > 20
    assert _direct_answers(merged, queries)[0] == answers


def test_a_merge_in_the_copy_sorted_in_parts_writes_what_one_sort_writes(corpus: Path, unmerged: Home, merged: Home,
                                                                          tmp_path: Path) -> None:
    """The copy's merge sorted one term range after another (over AIVAULT_SORT_PART_ROWS postings) writes
    exactly the index one sort writes: rows, postings in order, vocabulary, meta row."""
    h = _copy_home(unmerged, tmp_path / "home")
    rows = _registry(h.db_path)[0][1]
    proc = run_cli(h.path, "index", "--json", *_roots(corpus), timeout=600,
                   env=cli_env(h.path, **ALWAYS, AIVAULT_SORT_PART_ROWS=str(-(-rows // 4))))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reclaim"]["merged"] == {"target": "seg_2", "inputs": ["seg_1"], "sortParts": 4}
    assert content(h.db_path) == content(merged.db_path)


@pytest.mark.parametrize("step", reclaim.STEPS)
def test_kill_9_at_each_step_of_a_merging_copy_loses_nothing(corpus: Path, unmerged: Home, merged: Home,
                                                             tmp_path: Path, step: str) -> None:
    """SIGKILL while `aivault index` merges in its copy: the index opens whole (unmerged before the
    rename, merged after), and the next `aivault index` ends with exactly the uninterrupted result."""
    h = _copy_home(unmerged, tmp_path / "home")
    _index_until_killed(h, corpus, step, tmp_path / "paused")
    states = [state for state, _ in _registry(h.db_path)]
    assert states == (["sorted", "active"] if step == "renamed" else ["active"]), states
    assert reclaim.tmp_path(h.db_path).exists() == (step != "renamed")
    queries = _queries(merged.db_path)
    found = _direct_answers(h, queries)[0]
    assert all(a["kind"] == "results" for a in found) and sum(len(a["hits"]) for a in found) > 20

    again = run_cli(h.path, "index", "--json", *_roots(corpus), env=cli_env(h.path, **ALWAYS), timeout=600)
    assert again.returncode == 0, again.stderr
    assert ("interrupted reclaim" in again.stderr) == (step != "renamed"), again.stderr
    assert not reclaim.tmp_path(h.db_path).exists()
    assert content(h.db_path) == content(merged.db_path)
    assert _usage(h.db_path).ratio <= reclaim.RECLAIM_RATIO
    assert _direct_answers(h, queries)[0] == _direct_answers(merged, queries)[0]
    restart_and_stop_cleanly(h, [])


def test_a_reclaim_keeps_every_row_identity_generation_and_search_answer(unreclaimed: Home, tmp_path: Path) -> None:
    """Same catalog, rows (in order), meta row, search answers and cursors after the swap; the file shrinks."""
    h = _copy_home(unreclaimed, tmp_path / "home")
    before = signature(h.db_path)
    queries = _queries(h.db_path)
    answers, cursor = _direct_answers(h, queries)
    assert all(a["kind"] == "results" for a in answers) and sum(len(a["hits"]) for a in answers) > 20
    assert cursor is not None, "the first query should have a second page"
    page_two = _page_two(h, queries[0], cursor)
    used = _usage(h.db_path).used_bytes

    child = _reclaim_child(h)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    done = json.loads(out)
    assert done["done"] is True and done["before"]["usedBytes"] == used, done

    assert signature(h.db_path) == before
    u = _usage(h.db_path)
    assert u.file_bytes <= reclaim.RECLAIM_RATIO * u.used_bytes, u
    assert _direct_answers(h, queries)[0] == answers
    # A cursor minted before the swap still pages on: the identity and the generation are the same.
    assert _page_two(h, queries[0], cursor) == page_two


@pytest.mark.parametrize("step", reclaim.STEPS)
def test_kill_9_at_each_step_leaves_a_complete_database(unreclaimed: Home, tmp_path: Path, step: str) -> None:
    """SIGKILL at a step of the swap: the database opens with every row; the next writer removes the leftover."""
    h = _copy_home(unreclaimed, tmp_path / "home")
    before = signature(h.db_path)
    marker = tmp_path / "paused"
    _kill_when_paused(_reclaim_child(h, AIVAULT_RECLAIM_PAUSE=f"{step}:{marker}"), marker)
    tmp = reclaim.tmp_path(h.db_path)
    assert tmp.exists() == (step != "renamed")
    assert signature(h.db_path) == before, "the database is not the complete old or new one"

    # The next writer to open the index removes the leftover (and says so), then reclaims.
    again = _reclaim_child(h)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert ("interrupted reclaim" in err) == (step != "renamed"), err
    assert not tmp.exists() and not Path(str(tmp) + ".wal").exists()
    assert signature(h.db_path) == before
    u = _usage(h.db_path)
    assert u.file_bytes <= reclaim.RECLAIM_RATIO * u.used_bytes, u
    assert (json.loads(out) is None) == (step == "renamed")
    restart_and_stop_cleanly(h, [])


def test_not_enough_disk_space_refuses_with_the_reason(unreclaimed: Home, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without room for the copy the reclaim is refused with a reason; the file is untouched."""
    from aivault.vault.session import WriterSession

    h = _copy_home(unreclaimed, tmp_path / "home")
    before, size = signature(h.db_path), h.db_path.stat().st_size
    monkeypatch.setattr(reclaim, "RECLAIM_MIN_FREE_BYTES", 0)
    monkeypatch.setattr(reclaim, "SPACE_MARGIN_BYTES", 1 << 62)  # more than any disk has free
    s = WriterSession(h, default_roots=False, schedule=False, semantic=False)
    try:
        done = s.service.reclaim(restart=False)
    finally:
        s.close()
    assert done is not None and done["done"] is False and "not enough free disk space" in done["reason"], done
    assert h.db_path.stat().st_size == size and signature(h.db_path) == before
    assert not reclaim.tmp_path(h.db_path).exists()


def test_a_daemon_answers_searches_and_reconciles_across_a_swap(corpus: Path, unreclaimed: Home,
                                                                 tmp_path: Path) -> None:
    """`aivault serve` reclaims after its merges; searches during the copy and the swap all answer the same."""
    from aivault.thin.client import RpcClient

    h = _new_home(tmp_path / "home")
    marker = tmp_path / "paused"
    roots = {"claude": corpus / "claude" / "projects", "codex": corpus / "codex" / "sessions"}
    # Small segments, so that the daemon freezes and merges as it indexes; the reclaim is held 3 s
    # after its copy, with the indexer stopped and the old file serving.
    env = {**ALWAYS, "AIVAULT_LOG_LEVEL": "info", "AIVAULT_FREEZE_ROWS": "20000",
           "AIVAULT_RECLAIM_PAUSE": f"detached:{marker}:3"}
    d = DaemonProcess(h, roots, extra_env=env)
    try:
        d.call(METHOD_RECONCILE, {"full": True})
        assert d.call(METHOD_STATS)["lastReclaim"] is None
        # The daemon holds its file: the words come from the one-shot index of the same corpus.
        queries = _queries(unreclaimed.db_path)
        expected = [_comparable(d.call(METHOD_SEARCH, q)) for q in queries]
        assert all(a["kind"] == "results" for a in expected) and sum(len(a["hits"]) for a in expected) > 20
        generation = d.call(METHOD_STATUS)["generation"]

        answers: list[tuple[float, int, dict[str, Any]]] = []
        failures: list[str] = []
        stop = threading.Event()

        def search_loop() -> None:
            client = RpcClient.for_home(h, timeout_s=60)
            try:
                i = 0
                while not stop.is_set():
                    q = queries[i % len(queries)]
                    try:
                        answers.append((time.monotonic(), i % len(queries), _comparable(client.call(METHOD_SEARCH, q))))
                    except Exception as exc:  # any error reaching the client is a failure of this test
                        failures.append(f"{exc.__class__.__name__}: {exc}")
                    i += 1
                    time.sleep(0.02)
            finally:
                client.close()

        searcher = threading.Thread(target=search_loop, daemon=True)
        searcher.start()
        assert wait_until(marker.exists, timeout=240), f"no reclaim began: {d.read_log()}"
        held = time.monotonic()
        # A reconcile asked while the indexer is stopped waits for the next one and then answers.
        summary = d.call(METHOD_RECONCILE, {"full": False})
        assert summary["generation"] == generation
        assert wait_until(lambda: (d.call(METHOD_STATS).get("lastReclaim") or {}).get("done"), timeout=120), \
            d.read_log()
        time.sleep(1)
        stop.set()
        searcher.join(60)

        assert not failures, failures[:5]
        assert any(held <= t <= held + 3 for t, _, _ in answers), "no search was answered while the reclaim held"
        wrong = [(i, a) for _, i, a in answers if a != expected[i]]
        assert not wrong, wrong[:2]
        st = d.call(METHOD_STATS)
        disk = st["disk"]
        assert disk["fileBytes"] <= reclaim.RECLAIM_RATIO * disk["usedBytes"], st
        assert st["lastReclaim"]["before"]["fileBytes"] > reclaim.RECLAIM_RATIO * disk["usedBytes"]
        assert d.call(METHOD_STATUS)["generation"] == generation
        assert [_comparable(d.call(METHOD_SEARCH, q)) for q in queries] == expected
        shown = run_cli(h.path, "status")
        assert shown.returncode == 0 and "index file" in shown.stdout and "reclaimed" in shown.stdout, shown
    finally:
        d.stop()

