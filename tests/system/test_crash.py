"""kill -9 of the scanner, and separately of the indexer, in the middle of a large stream.

After a restart every message must be indexed exactly once: the indexed content (every
chunk's session, ordinal, part and text, and every live posting) must equal a clean index
of the same files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from aivault import policy
from aivault.home import Home
from bench.gen_corpus import generate
from bench.redaction import seeded as secrets_seeded
from tests.builders import ClaudeWriter
from tests.support.common import REPO, answer, cli_env, lexical_only, pid_alive, root_args, run_cli, wait_until
from tests.support.daemons import DaemonProcess, InprocDaemon, restart_and_stop_cleanly
from tests.support.index import assert_same_index, fingerprint, generation_over_rpc

GENERATED = 60_000
SECRET_EVERY = 300  # one real-looking secret appended per this many messages (redaction must survive a kill)
MESSAGES = GENERATED + GENERATED // SECRET_EVERY


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    generate(out / "plain", GENERATED, seed=7)
    seeded, count = secrets_seeded(out / "plain", SECRET_EVERY)
    assert count == GENERATED // SECRET_EVERY
    return seeded


def _redactions(db: Path) -> dict[str, int]:
    """The secrets the index holds as markers, by kind (what `aivault status` shows)."""
    from aivault.query.reports import index_counts

    con = duckdb.connect(str(db), read_only=True)
    try:
        counts: dict[str, int] = index_counts(con)["redactions"]
        return counts
    finally:
        con.close()


def _root_args(corpus: Path) -> list[str]:
    return ["--no-default-roots", "--root", f"claude={corpus}/claude/projects",
            "--root", f"codex={corpus}/codex/sessions", "--root", f"codex={corpus}/codex/archived_sessions"]


def _index(home: Path, corpus: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aivault.cli", "index", *_root_args(corpus)],
                          env=env or cli_env(home), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def reference_db(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean index of the corpus, made in one uninterrupted run."""
    home = Home.resolve(tmp_path_factory.mktemp("ref") / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    proc = _index(home.path, corpus)
    assert proc.returncode == 0, proc.stderr
    return home.db_path


@pytest.fixture(scope="module")
def reference(reference_db: Path) -> tuple[Counter[tuple[Any, ...]], int, int]:
    fp = fingerprint(reference_db)
    assert fp[2] == MESSAGES
    assert max(fp[0].values()) == 1, "the clean index itself holds a duplicate chunk"
    assert sum(_redactions(reference_db).values()) >= GENERATED // SECRET_EVERY
    return fp


def test_kill_9_of_the_scanner_mid_stream_loses_and_duplicates_nothing(
        home: Home, corpus: Path, reference: tuple[Counter[tuple[Any, ...]], int, int], reference_db: Path) -> None:
    """The indexer respawns a SIGKILLed scanner, which resumes from committed offsets exactly once: the same
    chunks, postings and secrets counted as a clean index."""

    root_specs = [f"claude={corpus}/claude/projects", f"codex={corpus}/codex/sessions",
                  f"codex={corpus}/codex/archived_sessions"]
    with InprocDaemon(home, root_specs) as d:
        ix = d.service.indexer
        fut = ix.reconcile(full=True)
        assert wait_until(lambda: ix.generation >= 3, timeout=120), "no batch committed"
        proc = ix.slots[0].proc
        assert proc is not None and not fut.done()
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = ix.generation
        fut.result(300)
        assert ix.generation > killed_at
    assert_same_index(home.db_path, reference)
    restart_and_stop_cleanly(home, root_specs)
    assert_same_index(home.db_path, reference)
    assert _redactions(home.db_path) == _redactions(reference_db)


def test_kill_9_of_the_indexer_mid_stream_loses_and_duplicates_nothing(
        home: Home, corpus: Path, reference: tuple[Counter[tuple[Any, ...]], int, int], reference_db: Path) -> None:
    """A SIGKILLed `aivault index` leaves only committed batches; its scanner exits; a rerun completes, with
    the clean index's secrets counted once."""
    args = [sys.executable, "-m", "aivault.cli", "index", *_root_args(corpus)]
    proc = subprocess.Popen(args, env=cli_env(home.path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # A one-shot index commits bulk-sized batches (BULK_BATCH_SCALE x 4,000 messages): about two a
        # scanner here, so the kill follows the first.
        assert wait_until(lambda: generation_over_rpc(home) >= 1, timeout=120), "no batch committed"
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert children, "the indexer has no scanner child"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The orphaned scanner notices its parent is gone and exits on its own.
    assert wait_until(lambda: not any(pid_alive(int(c)) for c in children), timeout=15), "orphan scanner"
    partial = fingerprint(home.db_path)
    assert 0 < partial[2] < MESSAGES
    status = run_cli(home.path, "status", check=True).stdout
    assert f"the last `aivault index` (pid {proc.pid}" in status and "did not finish" in status, status
    restart_and_stop_cleanly(home, [])  # nothing to index: the killed writer's file, opened and closed
    assert fingerprint(home.db_path) == partial
    rerun = _index(home.path, corpus)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_index(home.db_path, reference)
    assert _redactions(home.db_path) == _redactions(reference_db)


def test_a_transcript_appended_to_while_it_is_indexed_ends_up_complete(home: Home, roots: dict[str, Path]) -> None:
    """Lines appended during a pass are picked up by the next pass, each exactly once."""

    c = ClaudeWriter(roots["claude"])
    for i in range(3000):
        c.user(f"line {i} of a long session about {'lorem ipsum dolor ' * 20}")
    stop = threading.Event()

    def appender() -> None:
        i = 3000
        while not stop.is_set() and i < 3400:
            c.user(f"line {i} appended while indexing")
            i += 1
            time.sleep(0.002)

    d = InprocDaemon(home, roots)
    t = threading.Thread(target=appender)
    try:
        t.start()
        d.service.indexer.reconcile(full=True).result(120)
        t.join()
        d.service.indexer.reconcile(full=False).result(120)
        from aivault.vault.endpoints import search_sessions

        [hit] = answer(search_sessions(d.service, {"query": "appended"}))["hits"]
        assert hit["messageCount"] == 3400
    finally:
        stop.set()
        t.join()
        d.close()
    con = duckdb.connect(str(home.db_path), read_only=True)
    try:
        dupes = con.execute("SELECT count(*) FROM (SELECT ord, part FROM chunks GROUP BY ALL HAVING count(*) > 1)")
        assert dupes.fetchone() == (0,)
        assert con.execute("SELECT count(DISTINCT ord) FROM chunks").fetchone() == (3400,)
    finally:
        con.close()


# What DuckDB 1.5.5 can leave after a writer is killed while committing a large batch: rows of
# that batch (postings; chunks, sessions, files alike) with ids past the meta row's counters,
# committed in its WAL. Injected here by a writer that then dies without closing.
_LEAK = """
import os, sys
from pathlib import Path
from aivault.indexer.store import connect, read_meta
con = connect(Path(sys.argv[1]), read_only=False)
m = read_meta(con)
[seg] = [r[0] for r in con.execute("SELECT name FROM segments WHERE state = 'active'").fetchall()]
[src] = [r[0] for r in con.execute("SELECT name FROM segments WHERE state = 'sorted'").fetchall()]
con.execute("BEGIN")
con.execute("INSERT INTO chunks SELECT * REPLACE (? AS chunk, ? AS sess) FROM chunks LIMIT 1",
            [m.next_chunk + 3, m.next_sess])
con.execute(f"INSERT INTO {seg} SELECT * REPLACE (? AS chunk, ? AS sess) FROM {src} LIMIT 50",
            [m.next_chunk + 3, m.next_sess])
con.execute("INSERT INTO sessions SELECT * REPLACE (? AS sess, ? AS file_id) FROM sessions LIMIT 1",
            [m.next_sess, m.next_file])
con.execute("INSERT INTO files SELECT * REPLACE (? AS file_id, ? AS sess) FROM files LIMIT 1",
            [m.next_file, m.next_sess])
con.execute("COMMIT")
os._exit(0)  # no close, no checkpoint: the rows live in the WAL, as after a crash
"""


def _leak(home: Home) -> dict[str, int]:
    subprocess.run([sys.executable, "-c", _LEAK, str(home.db_path)], env=cli_env(home.path), check=True, timeout=60)
    assert Path(str(home.db_path) + ".wal").exists()
    return _unfinished(home)


def _unfinished(home: Home) -> dict[str, int]:
    from aivault.indexer.store import read_meta, unfinished_rows

    con = duckdb.connect(str(home.db_path), read_only=True)
    try:
        return unfinished_rows(con, read_meta(con))
    finally:
        con.close()


def _index_args(roots: dict[str, Path]) -> list[str]:
    return ["index", "--no-default-roots", *[a for r in root_args(roots) for a in ("--root", r)]]


def _small_index(home: Home, roots: dict[str, Path]) -> None:
    for i in range(3):
        ClaudeWriter(roots["claude"]).user(f"walrus tusk number {i}").assistant(f"the walrus answer {i}")
    run_cli(home.path, *_index_args(roots), check=True)


@pytest.mark.parametrize("opener", ["reader", "writer"])
def test_rows_of_an_unfinished_commit_are_removed_on_open(home: Home, roots: dict[str, Path], opener: str) -> None:
    """Rows past the meta counters (DuckDB's remnant of a killed commit) are removed before any search counts them."""
    _small_index(home, roots)
    before = json.loads(run_cli(home.path, "search", "--json", "walrus", check=True).stdout)
    assert len(before["hits"]) == 3
    leaked = _leak(home)
    assert {"chunks", "sessions", "files"} <= set(leaked) and any(t.startswith("seg_") for t in leaked), leaked
    if opener == "reader":  # a search without a daemon opens read-only, sees the dead writer's WAL
        after = run_cli(home.path, "search", "--json", "walrus", check=True)
    else:  # the next indexer
        after = run_cli(home.path, *_index_args(roots), check=True)
    again = json.loads(run_cli(home.path, "search", "--json", "walrus", check=True).stdout)
    assert [h["sessionId"] for h in again["hits"]] == [h["sessionId"] for h in before["hits"]]
    assert _unfinished(home) == {}
    assert "a commit that never finished" in after.stderr
    restart_and_stop_cleanly(home, roots)
    assert [h["sessionId"] for h in json.loads(run_cli(home.path, "search", "--json", "walrus", check=True).stdout)[
        "hits"]] == [h["sessionId"] for h in before["hits"]]


# --- kill -9 of the daemon, then a clean restart: the ART indexes (indexer/integrity.py) --------------

def _indexed_then_killed(home: Home, roots: dict[str, Path]) -> ClaudeWriter:
    """The issue's sequence up to the kill: a small index, 5 lines appended to one transcript, `aivault
    serve` until they are searchable, kill -9. Their rows are left in the WAL."""
    writers = [ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{s}") for s in range(20)]
    for s, w in enumerate(writers):
        for i in range(10):
            w.user(f"question {i} about walrus {s}").assistant(f"answer {i} with tusk {s}")
    run_cli(home.path, *_index_args(roots), check=True)
    for i in range(5):
        writers[0].user(f"zebracorn line {i}")
    d = DaemonProcess(home, roots)
    try:
        # .get: a first page a commit overtakes answers stale-cursor, and is asked again (docs/contract.md §3)
        assert wait_until(lambda: len(d.search("zebracorn").get("hits", [])) == 1, timeout=60), d.read_log()
    finally:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
        d.rpc.close()
        d.log.close()
    assert Path(str(home.db_path) + ".wal").exists(), "the kill was meant to leave committed rows in the WAL"
    return writers[0]


def _by_id(db: Path) -> tuple[int, int, int]:
    """(zebracorn chunks in the table, of those found by an ART point lookup, their session found by one)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT chunk, sess FROM chunks WHERE text LIKE '%zebracorn%'").fetchall()
        found = sum(int(con.execute("SELECT count(*) FROM chunks WHERE chunk = ?", [c]).fetchall()[0][0])
                    for c, _ in rows)
        sess = int(con.execute("SELECT count(*) FROM sessions WHERE sess = ?", [rows[0][1]]).fetchall()[0][0])
        return len(rows), found, sess
    finally:
        con.close()


def _found_everywhere(home: Home, roots: dict[str, Path], writer: ClaudeWriter) -> None:
    """The 5 lines: by point lookups, by a direct-mode search and by a daemon's, snippet and all."""
    assert _by_id(home.db_path) == (5, 5, 1)
    direct = json.loads(run_cli(home.path, "search", "--json", "zebracorn", check=True).stdout)
    assert [h["sessionId"] for h in direct["hits"]] == [writer.session_id] and not direct["page"]["hasMore"]
    assert "zebracorn" in direct["hits"][0]["evidence"]["snippet"]
    d = DaemonProcess(home, roots)
    try:
        answer: dict[str, Any] = {}

        def results() -> bool:
            answer.update(d.search("zebracorn"))
            return bool(answer["kind"] == "results")

        assert wait_until(results, timeout=30), answer
        [hit] = answer["hits"]
        assert hit["sessionId"] == writer.session_id and "zebracorn" in hit["evidence"]["snippet"]
    finally:
        d.stop()


def test_rows_indexed_before_a_kill_stay_findable_after_a_restart_and_a_clean_stop(
        home: Home, roots: dict[str, Path]) -> None:
    """kill -9 of `aivault serve`, then `aivault serve` stopped by SIGTERM: the killed daemon's last rows stay in
    the ART indexes, so lookups, direct and daemon searches all find them."""
    writer = _indexed_then_killed(home, roots)
    restart_and_stop_cleanly(home, roots)
    _found_everywhere(home, roots, writer)


# DuckDB's own fault, with no aivault code: a read-write open of a file with a dead writer's WAL and a
# close. The replayed rows stay in the tables; the indexes no longer find them.
_DAMAGE = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
if sys.argv[2] == "older-schema":  # as a file of schema 3 (no repairs journal) would be
    con.execute("DELETE FROM schema_version WHERE version = 4")
    con.execute("DROP TABLE repairs")
con.close()
"""
# A writer that commits something unrelated to the indexes and dies: the next open is not clean.
_DIE_WITH_WAL = """
import os, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("UPDATE meta SET generation = generation + 1")
os._exit(0)
"""


@pytest.mark.parametrize("trigger", ["unclean", "older-schema"])
def test_an_index_that_disagrees_with_its_table_is_rebuilt_and_shown_in_status(
        home: Home, roots: dict[str, Path], trigger: str) -> None:
    """An index missing rows of its table is found by the writer's check (after an unclean close, or once for a
    file of an older schema), rebuilt from the table, and journalled where `aivault status` shows it."""
    writer = _indexed_then_killed(home, roots)
    subprocess.run([sys.executable, "-c", _DAMAGE, str(home.db_path), trigger], check=True, timeout=60)
    assert _by_id(home.db_path) == (5, 0, 0), "DuckDB's fault was meant to leave the indexes without the rows"
    if trigger == "unclean":
        subprocess.run([sys.executable, "-c", _DIE_WITH_WAL, str(home.db_path)], check=True, timeout=60)
        assert Path(str(home.db_path) + ".wal").exists()
    run_cli(home.path, *_index_args(roots), check=True)
    status = run_cli(home.path, "status", check=True).stdout
    assert "chunks_by_id: 5 of " in status and "sessions_by_id: 1 of " in status, status
    doctor = run_cli(home.path, "doctor", *_index_args(roots)[1:]).stdout
    assert "index repairs: 2" in doctor and "chunks_by_id: 5 of " in doctor, doctor
    d = DaemonProcess(home, roots)
    try:
        stats = d.call("aiVault.indexStats")
    finally:
        d.stop()
    kinds = {(r["kind"], r["what"].partition(":")[0]) for r in stats["repairs"]["latest"]}
    assert {("index-rebuilt", "chunks_by_id"), ("index-rebuilt", "sessions_by_id")} <= kinds
    _found_everywhere(home, roots, writer)


def test_repo_on_path() -> None:
    """The tests import the project from the checkout they live in."""
    assert str(REPO) in cli_env(Path("/nonexistent"))["PYTHONPATH"]
