"""The daemon's BM25 over memory-mapped postings (query/fastrank.py, query/postings.py) answers exactly as
the SQL path does, and its sidecars are built, used, pruned, rebuilt and cleared as documented.

One generated corpus (Claude and Codex, ~4,000 messages) is indexed for real (scanner child, DuckDB), merged
into sorted segments, then grown and partly rewritten without a merge, so the index holds sorted segments
with sidecars, an unsorted segment read from DuckDB, and postings of sessions deleted since the merge.
Every query is asked of two engines over the same connection -- one reading every posting in DuckDB, one
scoring the sidecars in NumPy -- and the whole answers (hits, scores, snippets, cursors, debug traces,
later pages) must be equal.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aivault.indexer.bm25_formula import K1, B
from aivault.query import bm25, chunk_texts, fastrank, postings, sql
from aivault.query.engine import Engine
from aivault.query.fastrank import SessionTable
from aivault.query.planner import phrase_pattern
from aivault.query.postings import PostingsSidecars, sidecar_dir
from aivault.query.request import parse_request
from aivault.query.snippets import Matcher, _best_window, _spans
from aivault.text import iter_tokens, normalize, query_terms, stem, term_hash
from bench.gen_corpus import generate
from tests.builders import ClaudeWriter
from tests.support.common import answer, empty_roots
from tests.support.daemons import InprocDaemon, merged_daemon


class Index:
    def __init__(self, daemon: InprocDaemon, roots: dict[str, Path]) -> None:
        self.daemon, self.roots = daemon, roots

    @property
    def service(self) -> Any:
        return self.daemon.service

    def engines(self) -> tuple[Engine, Engine, PostingsSidecars]:
        """An SQL engine and a sidecar engine over the daemon's connection (sidecars built)."""
        svc = self.service
        side = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
        fast = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock, postings=side)
        slow = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
        _warm(fast, side)
        return slow, fast, side


def _warm(fast: Engine, side: PostingsSidecars) -> None:
    """Searches until ``side`` serves them: the first queues the sorted segments' sidecar builds (the
    search reads DuckDB), the next the loads of the other segments' postings into memory."""
    for _ in range(2):
        answer(fast.search(parse_request({"query": "warm"})))
        assert side.wait_built(120)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    base = tmp_path_factory.mktemp("fastrank")
    generate(base / "corpus", 4000, seed=7)
    roots = {"claude": base / "corpus" / "claude" / "projects", "codex": base / "corpus" / "codex" / "sessions"}
    d = merged_daemon(base / "home", roots)
    try:
        # After the merge: new sessions (an unsorted segment) and rewritten ones (their old postings stay
        # in the sorted segment, their sessions and chunks are gone).
        for i in range(6):
            w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/late-{i}", branch=f"late-{i}")
            w.user(f"the duckdb lock error came back in late service {i}")
            w.assistant("closing the read-only handle released the lock")
        files = sorted(roots["claude"].rglob("*.jsonl"))[:5]
        for f in files:
            f.write_text(f.read_text()[: max(len(f.read_text()) // 3, 1)].rsplit("\n", 1)[0] + "\n")
        d.reconcile()
        yield Index(d, roots)
    finally:
        d.close()


def _queries(index: Index) -> list[str]:
    """Words drawn from the indexed text, of every frequency, in ones, twos and fives; questions;
    a quoted phrase; a misspelling."""
    cur = index.service.con.cursor()
    try:
        texts = [r[0] for r in cur.execute("SELECT text FROM chunks USING SAMPLE 300 ROWS (reservoir, 11)").fetchall()]
    finally:
        cur.close()
    rnd = random.Random(5)
    words = sorted({w for t in texts for w in query_terms(t) if w.isalpha() and 3 <= len(w) <= 16})
    singles = rnd.sample(words, 30)
    pairs = [" ".join(rnd.sample(words, 2)) for _ in range(15)]
    fives = [" ".join(rnd.sample(words, 5)) for _ in range(15)]
    runs = []
    for t in texts[:15]:
        ws = [m.group(0) for m in iter_tokens(t)]
        if len(ws) >= 3:
            runs.append(" ".join(ws[:3]))
    return [*singles, *pairs, *fives, *runs, *(f'"{r}"' for r in runs[:5]),
            "what did we decide about the duckdb lock?", "where did the lock error come back?",
            "duckdb lokc", "the", "lock"]


VARIANTS: list[dict[str, Any]] = [
    {}, {"scope": "conversation"}, {"filters": {"sort": "newest"}}, {"filters": {"agents": ["codex"]}},
    {"filters": {"scopePaths": ["/home/dev"]}}, {"limit": 3}, {"debug": True},
]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    a, b = json.loads(json.dumps(a)), json.loads(json.dumps(b))
    a.pop("durationMs", None)
    b.pop("durationMs", None)
    return a == b


def _compare(slow: Engine, fast: Engine, queries: list[str]) -> int:
    asked = 0
    for q in queries:
        for v in VARIANTS:
            params = {"query": q, **v}
            a, b = answer(slow.search(parse_request(params))), answer(fast.search(parse_request(params)))
            asked += 1
            assert _same(a, b), f"{params}: the SQL and the sidecar paths differ\n{a}\n{b}"
            cursor = a.get("page", {}).get("cursor")
            if cursor:
                later = {**params, "cursor": cursor}
                a2, b2 = answer(slow.search(parse_request(later))), answer(fast.search(parse_request(later)))
                asked += 1
                assert _same(a2, b2), f"{later}: page 2 differs\n{a2}\n{b2}"
    return asked


def test_the_sidecar_path_answers_exactly_as_the_sql_path(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every route (phrase, all, typo, any, questions' session scoring), scope, filter, sort, page and trace
    is answered identically by the sidecar engine and the SQL engine, over sorted, unsorted and stale postings,
    with the chunk texts read from a text segment and past it from DuckDB."""
    monkeypatch.setattr(chunk_texts, "TEXT_MIN_CHUNKS", 100)
    slow, fast, side = index.engines()
    try:
        with fast._read() as r:
            snap = fast._snapshot(r)
            states = {state for _, state in snap.segments}
        assert snap.postings is not None, "the sidecar engine did not take the sidecar path"
        assert "sorted" in states and states - {"sorted"}, f"want sorted and unsorted segments, got {states}"
        assert side.state()["mapped"] >= 1
        assert side.state()["tails"]["segments"] >= 1, "the unsorted segment's postings were not loaded"
        assert side.state()["texts"]["segments"] == 1, side.state()
        hits = answer(fast.search(parse_request({"query": "duckdb lock"})))
        assert hits["kind"] == "results" and hits["hits"], hits
        assert _compare(slow, fast, _queries(index)) > 400
    finally:
        fast.close()
        slow.close()


def test_capped_terms_match_too(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """With TERM_CAP lowered so that common terms are capped (their best postings over all segments taken
    by impact), both paths still agree on every route."""
    monkeypatch.setattr(bm25, "TERM_CAP", 40)
    slow, fast, _ = index.engines()
    try:
        capped = answer(fast.search(parse_request({"query": "lock error"})))
        assert capped["truncated"]["candidates"] is True
        _compare(slow, fast, _queries(index)[:40])
    finally:
        fast.close()
        slow.close()


def test_a_capped_term_keeps_its_best_postings_over_all_segments(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capped term reads TERM_CAP postings in all however many segments hold it -- the best by impact
    among each sorted segment's first TERM_CAP and the other segments' rows -- on the SQL and NumPy paths."""
    cap = 40
    monkeypatch.setattr(bm25, "TERM_CAP", cap)
    _, fast, _ = index.engines()
    h = term_hash(stem("lock"))
    try:
        with fast._read() as cur:
            snap = fast._snapshot(cur)
            assert snap.postings is not None
            candidates: list[tuple[int, int, int]] = []
            holding = 0
            for name, state in snap.segments:
                first = " ORDER BY rowid LIMIT 40" if state == "sorted" else ""
                got = cur.execute(f"SELECT chunk, tf, dl FROM {name} WHERE term = {h}{first}").fetchall()
                candidates += got
                holding += bool(got)
            assert holding >= 2 and len(candidates) > cap, (holding, len(candidates))

            def impact(tf: int, dl: int) -> float:
                return tf / (tf + K1 * (1 - B + B * dl / snap.avgdl))

            best = sorted(candidates, key=lambda r: (-impact(r[1], r[2]), r[0]))[:cap]
            want = sorted(r[0] for r in best)
            parts, args = bm25._scans(snap, [h], [h], "", "", [])
            assert len(parts) == 1
            by_sql = sorted(r[0] for r in cur.execute(f"SELECT chunk FROM {parts[0]} t", args).fetchall())
            by_numpy = fastrank._gather(snap.postings, [h], False, None, {h}, cap, snap.avgdl)[1]
        assert by_sql == want
        assert sorted(by_numpy.tolist()) == want
    finally:
        fast.close()


def test_the_bm25_formulas_give_the_same_floats_in_duckdb_and_numpy() -> None:
    """indexer/bm25_formula.py's expressions as the SQL writes them (the impact of IMPACT_ORDER and the
    merge's sort, the term scores of BM25_SUM and SESSION_BM25_SUM) and as query/fastrank.py computes
    them, on the same postings and collection lengths: equal floats, bit for bit."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from aivault.indexer import bm25_formula

    rnd = np.random.default_rng(12)
    n = 20_000
    tf = rnd.integers(1, 2_000, n).astype(np.uint16)
    dl = np.maximum(tf, rnd.integers(1, 65_535, n)).astype(np.uint16)
    idf = rnd.random(n) * 12
    con = duckdb.connect()
    try:
        con.register("src", pa.table({"id": np.arange(n), "tf": tf, "dl": dl, "idf": idf}))
        con.execute("CREATE TABLE p AS SELECT id, tf::USMALLINT AS tf, dl::USMALLINT AS dl, idf FROM src")
        for avgdl in (1.0, 37.25, 123.45678901234568, 412.7391304347826, 9_876.5):
            impact = bm25_formula.IMPACT_SQL.format(**bm25_formula.SQL_VALUES, avgdl=avgdl)
            weighted = bm25_formula.weighted_sql("p.idf", "p.tf", "p.dl").format(**bm25_formula.SQL_VALUES,
                                                                                 avgdl=avgdl)
            got = con.execute(f"SELECT {impact}, {weighted} FROM p ORDER BY id").fetchnumpy()
            by_sql_impact, by_sql_weighted = (np.asarray(got[k], np.float64) for k in list(got))
            by_numpy_impact = fastrank._impact(tf, dl, avgdl)
            by_numpy_weighted = bm25_formula.weighted(idf, tf.astype(np.float64), dl.astype(np.float64), avgdl,
                                                      fastrank._K1, fastrank._K1P1, fastrank._B)
            assert np.array_equal(by_sql_impact, by_numpy_impact), avgdl
            assert np.array_equal(by_sql_weighted, by_numpy_weighted), avgdl
    finally:
        con.close()
    # The SQL is the formula's text: the statements carry it, with the constants as SQL_VALUES writes them.
    assert bm25_formula.IMPACT_SQL in sql.IMPACT_ORDER
    assert bm25_formula.weighted_sql("i.idf", "p.tf", "p.dl") in sql.BM25_SUM
    assert bm25_formula.weighted_sql("i.sidf", "st.tf", "sl.dl") in sql.SESSION_BM25_SUM
    assert float(str(K1)) == fastrank._K1 and float(str(B)) == fastrank._B


def test_unsorted_segments_read_in_duckdb_match_too(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no segment's postings kept in memory (TAIL_MAX_ROWS 0), the unsorted segment is read in DuckDB
    for every search, and both paths still agree."""
    monkeypatch.setattr(postings, "TAIL_MAX_ROWS", 0)
    slow, fast, side = index.engines()
    try:
        assert side.state()["tails"]["segments"] == 0
        assert _compare(slow, fast, _queries(index)[:40]) > 200
        assert side.state()["tails"] == {"segments": 0, "rows": 0, "loading": 0, "loads": 0, "failed": 0}
    finally:
        fast.close()
        slow.close()


def _small_merged_daemon(tmp_path: Path, seed: int) -> tuple[InprocDaemon, dict[str, Path]]:
    """A merged daemon over a generated corpus of 600 messages of its own (the files may be changed)."""
    roots = {"claude": tmp_path / "claude" / "projects", "codex": tmp_path / "codex" / "sessions"}
    generate(tmp_path / "corpus", 600, seed=seed)
    shutil.copytree(tmp_path / "corpus" / "claude" / "projects", roots["claude"])
    shutil.copytree(tmp_path / "corpus" / "codex" / "sessions", roots["codex"])
    return merged_daemon(tmp_path / "home", roots), roots


def _evidence_both_ways(svc: Any, engine: Engine, ids: list[int]) -> tuple[list[Any], list[Any]]:
    """(the text segments' evidence rows of ``ids``, DuckDB's), in one read transaction."""
    with engine._read() as cur:
        snap = engine._snapshot(cur)
        assert snap.postings is not None and snap.postings.texts, "no text segment in use"
        fast = sorted(snap.postings.evidence(ids))
        slow = sorted(cur.execute(sql.SELECT_EVIDENCE.format(chunks=", ".join(map(str, ids)))).fetchall())
    return fast, slow


def test_chunk_texts_answer_as_duckdb_after_a_file_is_read_again(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A text segment written before a file was read again (its session and chunks deleted) and before new chunks
    came gives exactly DuckDB's evidence rows for every id (gone, present, past the segment), every answer equals
    the SQL path's, and a damaged segment is not read but written again."""
    monkeypatch.setattr(chunk_texts, "TEXT_MIN_CHUNKS", 50)
    d, roots = _small_merged_daemon(tmp_path, seed=4)
    try:
        svc = d.service
        side = svc.engine.postings
        assert side is not None
        _warm(svc.engine, side)
        covered = side.state()["texts"]["covered"]
        assert covered > 0, side.state()
        victim = max(roots["claude"].rglob("*.jsonl"), key=lambda f: f.stat().st_size)
        old_text = victim.read_text()
        victim.write_text(old_text[: len(old_text) // 3].rsplit("\n", 1)[0] + "\n")
        w = ClaudeWriter(roots["claude"], cwd="/home/dev/after", branch="after")
        w.user("zanzibarquux arrived after the chunk texts were written")
        d.reconcile(full=True)
        ids = list(range(0, covered + 40))
        fast_rows, slow_rows = _evidence_both_ways(svc, svc.engine, ids)
        assert len(slow_rows) < len(ids) - 40, "the rewrite deleted no chunk inside the text segment"
        assert fast_rows == slow_rows
        words = sorted({t for t in query_terms(old_text[-3000:]) if t.isalpha() and len(t) > 3})
        queries = ["zanzibarquux", *words[:12], " ".join(words[:2]), " ".join(words[2:7]),
                   f'"{" ".join(m.group(0) for m in list(iter_tokens(old_text[-600:]))[5:8])}"']
        slow = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
        try:
            assert _compare(slow, svc.engine, queries) >= len(queries) * len(VARIANTS)
        finally:
            slow.close()
        # Damaged under a manager that has not mapped it (the daemon's own engine is not asked again).
        folder = next(p for p in sidecar_dir(svc.home.db_path).iterdir() if p.name.startswith("texts-"))
        with (folder / "text.bin").open("r+b") as f:
            f.truncate(10)
        fresh = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
        fast = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock, postings=fresh)
        try:
            _warm(fast, fresh)
            assert fresh.state()["texts"]["written"] == 1, "the damaged text segment was not written again"
            assert not folder.exists(), "the damaged text segment was not deleted"
            fast_rows, slow_rows = _evidence_both_ways(svc, fast, ids)
            assert fast_rows == slow_rows
        finally:
            fast.close()
    finally:
        d.close()


def test_a_failing_background_job_leaves_the_sidecar_thread_serving(index: Index) -> None:
    """A job on the sidecar thread that raises is logged, and the thread goes on: later jobs run, searches are
    answered as the SQL path answers them."""
    slow, fast, side = index.engines()
    try:
        ran: list[int] = []
        side.later(lambda cur: [][1])
        side.later(lambda cur: ran.append(1))
        assert side.wait_built(60) and ran == [1]
        lock = parse_request({"query": "lock"})
        assert _same(answer(slow.search(lock)), answer(fast.search(lock)))
    finally:
        fast.close()
        slow.close()


def _tail_arrays(side: PostingsSidecars, name: str) -> tuple[int, list[Any]]:
    tail = next(t for (_, seg, _), t in side._tails.items() if seg == name)
    a = tail.arrays
    return tail.rows, [a.terms, a.starts, a.chunk, a.sess, a.tf, a.dl, a.conv]


def test_a_grown_segment_is_searched_at_once_and_its_load_extended(tmp_path: Path) -> None:
    """The active segment's postings are loaded into memory; a batch appended to it is found by the very next
    search (read in DuckDB until loaded), the load is then extended by the new rows only, and the extended
    arrays equal a fresh load's, while every answer equals the SQL path's."""
    d, roots = _small_merged_daemon(tmp_path, seed=3)
    try:
        svc = d.service
        side = svc.engine.postings
        assert side is not None
        writer = ClaudeWriter(roots["claude"], cwd="/home/dev/tail", branch="tail")
        writer.user("the duckdb lock error came back in the tail service")
        d.reconcile(full=False)
        _warm(svc.engine, side)
        assert d.search("duckdb lock")["hits"]
        (name, _), = [s for s in _segments(svc) if s[1] != "sorted"]
        first_rows, _ = _tail_arrays(side, name)
        loads = side.state()["tails"]["loads"]
        writer.assistant("zanzibarquux fixed it: the read-only handle now closes before the writer opens")
        d.reconcile(full=False)
        found = d.search("zanzibarquux")  # the loaded tail has fewer rows than this snapshot: DuckDB answers
        assert [h["sessionId"] for h in found["hits"]] == [writer.session_id], found
        assert side.wait_built(60)
        assert side.state()["tails"]["loads"] == loads + 1
        rows, extended = _tail_arrays(side, name)
        assert rows > first_rows, "the segment's load was not extended by the new batch"
        assert d.search("zanzibarquux")["hits"] == found["hits"]
        fresh = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
        try:
            slow = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
            fast = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock, postings=fresh)
            _warm(fast, fresh)
            again, loaded = _tail_arrays(fresh, name)
            assert again == rows
            for x, y in zip(extended, loaded, strict=True):
                assert x.dtype == y.dtype and x.tolist() == y.tolist(), "an extended load differs from a fresh one"
            assert _compare(slow, fast, ["zanzibarquux", "duckdb lock", "tail service writer", "the"]) >= 8
        finally:
            fast.close()
            slow.close()
    finally:
        d.close()


def test_new_segments_are_loaded_into_memory_before_any_search_asks(tmp_path: Path) -> None:
    """The daemon's periodic preparation loads the postings of the segments that are not sorted into memory
    with no search having asked, so the first search after a burst reads none of them in DuckDB."""
    d, roots = _small_merged_daemon(tmp_path, seed=5)
    try:
        svc = d.service
        side = svc.engine.postings
        assert side is not None
        writer = ClaudeWriter(roots["claude"], cwd="/home/dev/eager", branch="eager")
        writer.user("the frozen segment holds qorvexane now")
        d.reconcile(full=False)
        unsorted = [name for name, state in _segments(svc) if state != "sorted"]
        assert unsorted, _segments(svc)
        svc.engine.prepare_postings()
        assert side.wait_built(60)
        assert side.state()["tails"]["segments"] == 1, side.state()
        (name,) = unsorted
        cur = svc.con.cursor()
        try:
            (count,) = cur.execute(f"SELECT count(*) FROM {name}").fetchall()[0]
        finally:
            cur.close()
        assert _tail_arrays(side, name)[0] == count > 0
        loads = side.state()["tails"]["loads"]
        with svc.engine._read() as r:
            snap = svc.engine._snapshot(r)
            assert snap.postings is not None and not snap.postings._unsorted, "a segment is still read in DuckDB"
        found = d.search("qorvexane")
        assert [h["sessionId"] for h in found["hits"]] == [writer.session_id], found
        assert side.wait_built(60) and side.state()["tails"]["loads"] == loads, "the search had to queue a load"
    finally:
        d.close()


def test_a_merged_segment_is_registered_with_its_sidecar_built(tmp_path: Path) -> None:
    """A daemon's merge builds the merged segment's sidecar before registering it: with the sidecar thread
    held busy the whole time, the first snapshot that lists the new segment already maps it, the folder
    survives the thread's next prune, and the answers equal the SQL path's."""
    d, roots = _small_merged_daemon(tmp_path, seed=6)
    try:
        svc = d.service
        side = svc.engine.postings
        assert side is not None
        writer = ClaudeWriter(roots["claude"], cwd="/home/dev/merge", branch="merge")
        writer.user("the merged segment names vintrelloquay")
        d.reconcile(full=False)
        before = {name for name, state in _segments(svc) if state == "sorted"}
        gate = threading.Event()
        side.later(lambda cur: gate.wait(120))  # the sidecar thread builds nothing until the gate opens
        prepare = svc.indexer.merges.prepare
        assert prepare is not None

        def prepare_then_prune(name: str, created_at: int) -> None:
            prepare(name, created_at)
            prune = svc.con.cursor()
            try:
                side._prune(prune)  # a prune between the build and the registration keeps the new sidecar
            finally:
                prune.close()

        svc.indexer.merges.prepare = prepare_then_prune
        try:
            svc.indexer.compact("all").result(120)
            cur = svc.con.cursor()
            try:
                identity = str(cur.execute("SELECT identity FROM meta").fetchall()[0][0])
                segs = [(str(a), str(b), int(c)) for a, b, c in
                        cur.execute("SELECT name, state, created_at FROM segments").fetchall()]
            finally:
                cur.close()
            merged = {name for name, state, _ in segs if state == "sorted"} - before
            assert merged, segs
            assert side.arrays(identity, segs) is not None, "the merged segment was registered without its sidecar"
            folder = sidecar_dir(svc.home.db_path)
            assert {p.name.partition("-")[0] for p in folder.iterdir()} >= merged, "a prune deleted the new sidecar"
        finally:
            gate.set()
        assert side.wait_built(60)
        assert {p.name.partition("-")[0] for p in folder.iterdir()} >= merged, "a prune deleted the new sidecar"
        slow = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
        try:
            assert _compare(slow, svc.engine, ["vintrelloquay", "duckdb lock", "merged segment", "the"]) >= 8
        finally:
            slow.close()
    finally:
        d.close()


def test_sidecars_are_pruned_rebuilt_and_cleared(index: Index) -> None:
    """A damaged sidecar is rebuilt rather than read; after a merge the old segment's sidecar is deleted;
    clear removes the sidecar folder with the database."""
    slow, fast, _ = index.engines()
    folder = sidecar_dir(index.service.home.db_path)
    fast.close()
    slow.close()
    built = sorted(p for p in folder.iterdir() if not p.name.startswith("tmp-"))
    assert built, "no sidecar was written"
    # A truncated file, put in place the way a copy would be (the daemon's own map keeps the old one).
    victim = built[0] / "chunk.npy"
    (built[0] / "damaged").write_bytes(victim.read_bytes()[:64])
    (built[0] / "damaged").replace(victim)
    _, fast2, side2 = index.engines()
    try:
        assert side2.built >= 1, "the damaged sidecar was not rebuilt"
        assert answer(fast2.search(parse_request({"query": "duckdb lock"})))["hits"]
    finally:
        fast2.close()
    # Merge everything: the sorted segments are replaced, their sidecars go with the next build.
    before = {p.name for p in folder.iterdir() if not p.name.startswith(chunk_texts.TEXTS_PREFIX)}
    index.service.indexer.compact("all").result(120)
    _, fast3, _ = index.engines()
    try:
        after = {p.name for p in folder.iterdir() if not p.name.startswith(chunk_texts.TEXTS_PREFIX)}
        names = {name for name, state in _segments(index.service) if state == "sorted"}
        assert after != before
        assert {p.partition("-")[0] for p in after} == names, f"sidecars {after} for the sorted segments {names}"
    finally:
        fast3.close()


def _segments(svc: Any) -> list[tuple[str, str]]:
    cur = svc.con.cursor()
    try:
        return [(str(a), str(b)) for a, b in cur.execute("SELECT name, state FROM segments").fetchall()]
    finally:
        cur.close()


def test_the_daemon_builds_uses_and_clears_its_sidecars(tmp_path: Path) -> None:
    """A daemon over a merged index writes the sidecar folder by itself, answers from it, and clear deletes it."""
    roots = empty_roots(tmp_path)
    for i in range(5):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/s{i}")
        w.user(f"the duckdb lock error in service {i}")
        w.assistant("closed the handle")
    d = merged_daemon(tmp_path / "home", roots)
    home = d.home
    try:
        first = d.search("duckdb lock")
        postings = d.service.engine.postings
        assert postings is not None and postings.wait_built(60)
        folder = sidecar_dir(home.db_path)
        assert any(folder.iterdir())
        again = d.search("duckdb lock")
        assert _same(first, again) and len(again["hits"]) == 5
        d.service.clear()
        assert not folder.exists(), "clear left the postings sidecars behind"
    finally:
        d.close()
    shutil.rmtree(tmp_path / "home", ignore_errors=True)


def test_snippet_tokens_found_by_the_probe_regex_are_those_of_the_tokenizer() -> None:
    """In ASCII text the probe regex finds exactly the tokens the tokenizer's walk marks (identifiers, "c++",
    stems ending in i, "#", "[[" and case), so snippets are unchanged."""
    rnd = random.Random(3)
    words = ["lock", "locking", "Locked", "duckdb", "DuckDB_lock", "happy", "happiness", "c++", "x++", "fooBar",
             "lockFile", "error", "errors", "run_123", "123", "#42", "issue#7", "the", "LOCK", "dbLock", "unlock",
             "Happily", "naïve", "日本語"]
    seps = [" ", ". ", "\n", "-", "/", "(", ")", "[[", "]]", "  ", "::", ",", "'"]
    for _ in range(4000):
        text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(1, 30)))
        terms = set(query_terms(" ".join(rnd.sample(words, rnd.randint(1, 3)))))
        walked = []
        m = Matcher(terms)
        for tok in iter_tokens(text):
            hit, partial = m.hit(tok.group(0))
            if hit is not None:
                s, e = tok.span()
                walked.append((s + tok.group(0).find(hit), s + tok.group(0).find(hit) + len(hit), hit)
                              if partial else (s, e, hit))
        assert _spans(text, Matcher(terms)) == walked, (text, terms)


def test_the_phrase_pattern_matches_where_the_look_behind_first_form_matches() -> None:
    """planner.phrase_pattern (first word, then a look-behind over it) finds a phrase in exactly the texts the
    plain form ``(?<!\\w)w1\\W+w2...(?!\\w)`` does: word edges, case, identifiers, "c++", "#42", CJK."""
    rnd = random.Random(11)
    words = ["lock", "Lock", "duckdb", "DuckDB_lock", "c++", "x", "#42", "issue#7", "the", "unlock", "locks",
             "日本語", "naïve", "error", "err", "_lock", "lock_", "9lock"]
    seps = [" ", ". ", "\n", "-", "/", "(", "", "_", "  ", "::", ","]
    for _ in range(3000):
        text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(1, 12)))
        query = " ".join(rnd.sample(words, rnd.randint(2, 3)))
        pattern = phrase_pattern(query)
        assert pattern is not None
        plain = r"(?<!\w)" + r"\W+".join(re.escape(m.group(0)) for m in iter_tokens(normalize(query))) + r"(?!\w)"
        assert bool(re.search(pattern, text, re.IGNORECASE)) == bool(re.search(plain, text, re.IGNORECASE)), \
            (query, text)


def test_the_snippet_window_is_the_one_the_definition_picks() -> None:
    """The one-pass window (snippets._best_window) picks what its definition says: for each span, the window a
    quarter width before it, counting the spans from there it holds whole; most distinct terms, then leftmost."""
    def defined(spans: list[tuple[int, int, str]], n: int, width: int) -> tuple[int, int]:
        if not spans or n <= width:
            return 0, min(n, width)
        best = (0, 0, 0)
        for i, (s, _, _) in enumerate(spans):
            lo = max(0, s - width // 4)
            distinct = {t for (a, b, t) in spans[i:] if a >= lo and b <= lo + width}
            if (len(distinct), -lo) > best[:2]:
                best = (len(distinct), -lo, i)
        lo = min(max(0, spans[best[2]][0] - width // 4), max(0, n - width))
        return lo, min(n, lo + width)

    rnd = random.Random(5)
    for _ in range(3000):
        spans, pos = [], 0
        for _ in range(rnd.randint(0, 60)):
            pos += rnd.randint(0, 40)
            length = rnd.choice([1, 3, 8, 20, 300])  # a token longer than the window too
            spans.append((pos, pos + length, rnd.choice("abcde")))
            pos += length
        n, width = pos + rnd.randint(0, 50), rnd.choice([10, 60, 240])
        assert _best_window(spans, n, width) == defined(spans, n, width), (spans, n, width)


def test_a_sidecar_is_not_built_into_a_nearly_full_disk(index: Index, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """When the free space would drop below the margin left to the index, no sidecar is written, the
    refusal is counted, and searches are answered (from DuckDB) exactly as before."""
    from aivault.query import postings as postings_mod

    monkeypatch.setattr(postings_mod, "FREE_MARGIN", 2**62)
    svc = index.service
    side = PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock)
    side.root = tmp_path / "sidecars"
    fast = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock, postings=side)
    slow = Engine(svc.con, svc.home.key(), lock=svc.indexer.lock)
    try:
        answer(fast.search(parse_request({"query": "warm"})))
        assert side.wait_built(60)
        assert side.state()["failed"] >= 1 and side.state()["mapped"] == 0
        left = list(side.root.iterdir()) if side.root.exists() else []
        assert left == [], f"a refused build left {left}"
        for q in ("duckdb lock", "lock error", "what did we decide about the duckdb lock?"):
            req = parse_request({"query": q})
            assert _same(answer(slow.search(req)), answer(fast.search(req)))
    finally:
        fast.close()
        slow.close()


def test_a_pages_session_rows_are_read_once_per_generation_and_follow_a_change(tmp_path: Path) -> None:
    """The sidecar path keeps each session's row for its generation (all of them read on the sidecar thread, a read
    that finds another generation keeping nothing); a retitled session shows its new title."""
    roots = empty_roots(tmp_path)
    writers = []
    for i in range(3):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/s{i}").title(f"lock saga {i}")
        w.user(f"the duckdb lock error in service {i}")
        w.assistant("closed the handle")
        writers.append(w)
    d = merged_daemon(tmp_path / "home", roots)
    try:
        postings = d.service.engine.postings
        assert postings is not None
        d.search("duckdb lock")
        assert postings.wait_built(60)
        first = d.search("duckdb lock")
        table = d.service.engine._sessions
        assert table is not None and len(table._page) == 3  # read once, kept for this generation
        assert sorted(h["title"] for h in first["hits"]) == ["lock saga 0", "lock saga 1", "lock saga 2"]
        writers[1].title("the renamed saga")
        d.reconcile()
        again = d.search("duckdb lock")
        assert d.service.engine._sessions is not table  # a new generation, a new table
        assert sorted(h["title"] for h in again["hits"]) == ["lock saga 0", "lock saga 2", "the renamed saga"]
        assert postings.wait_built(60)
        now = d.service.engine._sessions
        assert now is not None and len(now._page) == now.count == 3
        assert sorted(r[3] for r in now._page.values()) == ["lock saga 0", "lock saga 2", "the renamed saga"]
        cur = d.service.con.cursor()
        try:
            stale = SessionTable(table.key, cur)  # a table of the generation before the retitle
            stale.preload(cur)
            assert stale._page == {}, "a read in another generation kept rows"
        finally:
            cur.close()
    finally:
        d.close()


def test_two_sidecar_managers_of_one_database_build_side_by_side(index: Index) -> None:
    """Two managers in one process building the same segments at once both end with every sidecar, none failed
    (six rounds: the collisions were races)."""
    svc = index.service
    folder = sidecar_dir(svc.home.db_path)
    cur = svc.con.cursor()
    try:
        identity = str(cur.execute("SELECT identity FROM meta").fetchone()[0])
        rows = [(str(n), str(s), int(c)) for n, s, c in
                cur.execute("SELECT name, state, created_at FROM segments").fetchall()]
    finally:
        cur.close()
    assert any(state == "sorted" for _, state, _ in rows)
    for _ in range(6):
        shutil.rmtree(folder, ignore_errors=True)
        managers = [PostingsSidecars(svc.home.db_path, svc.con, svc.indexer.lock) for _ in range(2)]
        try:
            for m in managers:
                assert m.arrays(identity, rows) is None  # nothing built yet: both queue the same builds
            for m in managers:
                assert m.wait_built(120)
            for m in managers:
                assert m.arrays(identity, rows) is not None and not m._failed, m.state()
        finally:
            for m in managers:
                m.close()
