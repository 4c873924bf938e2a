"""Tests for the retrieval-quality benchmark (bench/quality): metrics, query checks, corpus, end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aivault.query.hybrid import SIMILARITY_FLOOR, fuse
from aivault.scanner.parsers.claude import ClaudeParser
from aivault.scanner.parsers.codex import CodexParser
from bench.quality import fusion, run
from bench.quality.checks import check_query, content_words, session_terms, shared_words
from bench.quality.corpus import build, load_queries
from bench.quality.incident import Incident, Step, parse_incident, parse_script
from bench.quality.labels import KINDS, label
from bench.quality.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k
from bench.quality.topics import AREAS, INCIDENTS, incident_files, load_incident, load_incidents

# A handful of incidents from different areas keeps the corpus tests fast.
SMALL = [i for i in INCIDENTS if i.key in {
    "py-pytest-asyncio-loop-closed", "js-econnreset-keepalive", "rs-borrow-mut-immut", "db-duckdb-lock-conflict",
    "docker-entrypoint-crlf", "git-detached-head-reflog", "go-concurrent-map-writes", "yaml-norway-problem",
}]


# --- metrics -------------------------------------------------------------------------------------

def test_recall_counts_relevant_in_top_k() -> None:
    """Recall@k is the share of relevant ids within the first k (2 of 3 in the top 5, 1 of 3 in the top 2)."""
    ranked = ["a", "b", "c", "d", "e"]
    assert recall_at_k(ranked, {"b", "e", "x"}, 5) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, {"b", "e", "x"}, 2) == pytest.approx(1 / 3)
    assert recall_at_k([], {"a"}, 10) == 0.0


def test_mrr_is_reciprocal_rank_of_first_hit_within_k() -> None:
    """MRR@k is 1/rank of the first relevant id (rank 3 gives 1/3) and 0 when it lies beyond k."""
    ranked = ["x", "y", "a", "b"]
    assert mrr_at_k(ranked, {"a", "b"}, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(ranked, {"a"}, 2) == 0.0
    assert mrr_at_k(["a"], {"a"}, 1) == 1.0


def test_ndcg_matches_hand_computation() -> None:
    """nDCG@4 of [x, a, y, b] with {a, b} relevant is (1/log2 3 + 1/log2 5) / (1 + 1/log2 3) = 0.6509."""
    got = ndcg_at_k(["x", "a", "y", "b"], {"a", "b"}, 4)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert got == pytest.approx(dcg / ideal)
    assert got == pytest.approx(0.65093, abs=1e-5)
    assert ndcg_at_k(["a", "b", "x"], {"a", "b"}, 10) == pytest.approx(1.0)
    # One relevant id at rank 2: 1/log2(3) over an ideal of 1.
    assert ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(0.63093, abs=1e-5)


def test_repeated_ids_count_once() -> None:
    """A session listed twice earns credit once, at its first position (so [a, a, b] has both in the top 2)."""
    assert recall_at_k(["a", "a", "b"], {"a", "b"}, 2) == 1.0
    assert ndcg_at_k(["a", "a", "b"], {"a", "b"}, 2) == pytest.approx(1.0)


def test_metrics_reject_bad_arguments() -> None:
    """k must be positive and a query must have at least one relevant id."""
    with pytest.raises(ValueError):
        recall_at_k(["a"], {"a"}, 0)
    with pytest.raises(ValueError):
        mrr_at_k(["a"], set(), 5)


def test_percentile_interpolates_between_ranks() -> None:
    """p50 of 1..4 is 2.5 and p95 is 3.85 (linear interpolation); no values give NaN."""
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert math.isnan(percentile([], 50))


# --- query checks --------------------------------------------------------------------------------

def test_topic_set_is_large_enough() -> None:
    """At least 170 incidents with unique keys, at least 50 queries per kind, distractors for about a third."""
    assert len(INCIDENTS) >= 170
    assert len({i.key for i in INCIDENTS}) == len(INCIDENTS)
    distractors = sum(1 for i in INCIDENTS if i.distractor is not None)
    assert 0.3 <= distractors / len(INCIDENTS) <= 0.4


def test_every_query_passes_its_kind_check() -> None:
    """Every paraphrase shares no content word (nor a five-letter stem) with its session; exact and mixed hold too."""
    failures = [f"{q.id}: {q.reason}" for inc in INCIDENTS for q in label(inc, ["-"]) if not q.accepted]
    assert failures == []


def test_paraphrase_rule_catches_stems_and_identifier_parts() -> None:
    """The no-shared-word rule sees identifier parts, tool-call wrappers and five-letter stems."""
    steps = parse_script("""
    U: fetchUserProfile froze with ECONNRESET
    $ ls
    > ok
    """)
    terms = session_terms(steps, "/home/x/app")
    assert {"fetchuserprofile", "fetch", "user", "profile", "bash", "command", "shell"} <= terms
    assert shared_words("profile page", terms) == ["profile"]
    assert shared_words("the test was frozen", terms) == ["frozen~froze"]
    assert shared_words("a person", {"per"}) == []  # a three-letter word is not a stem of "person"
    assert shared_words("logging", {"log"}) == ["logging~log"]  # but its inflections clash
    assert content_words("when the lock is held") == ["lock", "held"]
    assert not check_query("paraphrase", "the user waited", terms).ok
    assert check_query("paraphrase", "customer waited", terms).ok


def test_mixed_needs_exactly_one_verbatim_term() -> None:
    """A mixed query takes one term from the session verbatim; the rest must be paraphrased."""
    terms = {"econnreset", "socket", "keepalive"}
    assert check_query("mixed", "ECONNRESET after quiet periods", terms).ok
    assert not check_query("mixed", "ECONNRESET on the socket", terms).ok  # two session terms
    assert not check_query("mixed", "peers hang up after quiet periods", terms).ok  # none
    assert not check_query("mixed", "ECONNRESET sockets", terms).ok  # "sockets" shares a stem


def test_script_parser_builds_steps() -> None:
    """Script markers become steps: text continues across lines, '>' lines are a tool's output."""
    steps = parse_script("""
    U: first line
    second line
    $ make
    > built
    >
    ~ a.py
    > -x
    > +y
    A: done
    """)
    assert steps == (Step("user", "first line\nsecond line"), Step("shell", "make", "built\n"),
                     Step("edit", "a.py", "-x\n+y"), Step("assistant", "done"))
    with pytest.raises(ValueError):
        parse_script("> output without a tool\nU: hi")


# --- incident files --------------------------------------------------------------------------------

_GOOD = """+++
cwd = "/home/x/app"

[queries]
exact = "ECONNRESET"
paraphrase = "peers hang up"
mixed = "ECONNRESET after quiet periods"
+++
U: fetch fails with ECONNRESET
A: the keepalive socket was closed by the peer
--- distractor ---
U: fetch is slow
"""


def test_every_incident_file_parses_with_its_queries_and_sessions(tmp_path: Path) -> None:
    """Each incident file parses, holds a non-empty query of every kind, and its queries name its written session."""
    files = incident_files()
    assert len(files) == len(INCIDENTS) and {p.parent.name for p in files} == set(AREAS)
    for path in files:
        inc = load_incident(path)
        assert all(q.strip() for q in (inc.exact, inc.paraphrase, inc.mixed)), path
        assert any(s.kind == "user" for s in inc.steps), path
    queries = build(tmp_path / "all", filler_messages=0, seed=1)
    corpus = json.loads((tmp_path / "all" / "corpus.json").read_text())
    written = {s["session_id"]: s for s in corpus["sessions"]}
    assert {q.kind for q in queries} == set(KINDS) and len(queries) == len(KINDS) * len(INCIDENTS)
    for q in queries:
        assert q.relevant and all(written[sid]["incident"] == q.incident for sid in q.relevant), q.id
        assert all((tmp_path / "all" / written[sid]["path"]).is_file() for sid in q.relevant), q.id


def test_incident_file_round_trips_its_header_and_distractor() -> None:
    """A file's header gives cwd, branch (main by default) and the queries; the separator starts the distractor."""
    inc = parse_incident("k", _GOOD)
    assert (inc.key, inc.cwd, inc.branch, inc.exact) == ("k", "/home/x/app", "main", "ECONNRESET")
    assert [s.kind for s in inc.steps] == ["user", "assistant"]
    assert inc.distractor_steps == (Step("user", "fetch is slow"),)
    alone = parse_incident("k", _GOOD.split("--- distractor ---")[0].replace('cwd =', 'branch = "dev"\ncwd ='))
    assert (alone.branch, alone.distractor_steps) == ("dev", None)


@pytest.mark.parametrize("broken", [
    _GOOD.replace("+++\n", "", 1),  # no header
    _GOOD.replace("+++\nU:", "U:"),  # header never closed
    _GOOD.replace('mixed = "ECONNRESET after quiet periods"\n', ""),  # a query kind missing
    _GOOD.replace('paraphrase = "peers hang up"', 'paraphrase = " "'),  # an empty query
    _GOOD.replace("[queries]", "brnach = \"dev\"\n[queries]"),  # an unknown key
    _GOOD.replace('cwd = "/home/x/app"', 'cwd = "home/x/app"'),  # a relative cwd
    _GOOD.replace('exact = "ECONNRESET"', "exact = ECONNRESET"),  # not TOML
    _GOOD + "--- distractor ---\nU: again\n",  # two distractors
    _GOOD.replace("U: fetch fails", "A: fetch fails"),  # no user step
    _GOOD.replace("A: the keepalive", "> the keepalive"),  # output without a tool
])
def test_malformed_incident_file_is_refused(tmp_path: Path, broken: str) -> None:
    """Loading refuses a file with a broken header, a missing or empty query, or a broken script, naming the file."""
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "01-good.txt").write_text(_GOOD)
    assert [i.key for i in load_incidents(tmp_path)] == ["good"]
    (tmp_path / "python" / "02-broken.txt").write_text(broken)
    with pytest.raises(ValueError, match=r"02-broken\.txt"):
        load_incidents(tmp_path)


@pytest.mark.parametrize("name", ["broken.txt", "01-Bad_Key.txt", "01-good.md", "1-other.txt", "02-good.txt"])
def test_stray_or_repeated_incident_files_are_refused(tmp_path: Path, name: str) -> None:
    """A file the loader would skip (bad name) or a repeated number or key is an error, not a silent drop."""
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "01-good.txt").write_text(_GOOD)
    (tmp_path / "python" / name).write_text(_GOOD)
    with pytest.raises(ValueError):
        load_incidents(tmp_path)
    (tmp_path / "python" / name).unlink()
    (tmp_path / "rust").mkdir()
    with pytest.raises(ValueError, match="not an area"):
        load_incidents(tmp_path)


# --- corpus ----------------------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_corpus_is_deterministic_per_seed(tmp_path: Path) -> None:
    """The same seed writes byte-identical trees (filler included); another seed writes different ids."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    qa = build(a, filler_messages=300, seed=7, incidents=SMALL)
    qb = build(b, filler_messages=300, seed=7, incidents=SMALL)
    # The filler generator has its own determinism tests; its set-up costs seconds, so skip it here.
    qc = build(c, filler_messages=0, seed=8, incidents=SMALL)
    assert qa == qb
    assert _tree(a) == _tree(b)
    assert {q.relevant for q in qa} != {q.relevant for q in qc}
    assert load_queries(a) == qa
    assert {q.kind for q in qa} == set(KINDS)
    assert not (a / "filler").exists()


def _expected_messages(steps: tuple[Step, ...]) -> int:
    # docs/formats.md §0: one message per content block; a tool step is a call and its result.
    return sum(2 if s.kind in ("shell", "read", "edit") else 1 for s in steps)


def test_written_sessions_parse_with_aivault_parsers(tmp_path: Path) -> None:
    """Every incident and distractor file parses cleanly with the right session id and message count."""
    out = tmp_path / "corpus"
    queries = build(out, filler_messages=0, seed=3, incidents=SMALL)
    corpus = json.loads((out / "corpus.json").read_text())
    by_key = {i.key: i for i in SMALL}
    agents = set()
    for s in corpus["sessions"]:
        path = out / s["path"]
        parser: ClaudeParser | CodexParser = (ClaudeParser(str(path)) if s["agent"] == "claude"
                                              else CodexParser(str(path)))
        messages = [m for line in path.read_bytes().splitlines() for m in parser.feed(line)]
        inc = by_key[s["incident"]]
        steps = inc.steps if s["role"] == "incident" else inc.distractor_steps
        assert steps is not None
        assert parser.stats.malformed == 0
        assert parser.session.session_id == s["session_id"]
        assert len(messages) == parser.session.message_count == _expected_messages(steps)
        assert parser.session.cwd == inc.cwd
        agents.add(s["agent"])
    assert agents == {"claude", "codex"}
    incident_ids = {s["session_id"] for s in corpus["sessions"] if s["role"] == "incident"}
    assert {sid for q in queries for sid in q.relevant} == incident_ids


def test_exact_queries_rank_first_lexically_end_to_end(tmp_path: Path) -> None:
    """Indexed by a real daemon, most exact queries find their session at rank 1 through the lexical route."""
    report = run.evaluate(tmp_path / "q", filler_messages=0, seed=1, routes=("lexical",), incidents=SMALL)
    lexical = report["routes"]["lexical"]
    assert lexical["available"]
    exact = [r for r in report["perQuery"]["lexical"] if r["kind"] == "exact"]
    assert len(exact) == len(SMALL)
    assert sum(1 for r in exact if r["rank"] == 1) >= len(SMALL) - 1
    assert lexical["metrics"]["exact"]["mrr@10"] >= 0.85
    assert report["queries"]["paraphrase"] == {"total": len(SMALL), "accepted": len(SMALL)}
    assert json.loads((tmp_path / "q" / "results.json").read_text())["routes"]["lexical"]["available"]


def test_incident_requires_a_user_step() -> None:
    """A script without a user turn is not a session and is refused when the incident is defined."""
    with pytest.raises(ValueError):
        Incident(key="k", cwd="/x", script="A: only the assistant", exact="a", paraphrase="b", mixed="c")


def test_floor_nonsense_queries_are_fixed_per_seed() -> None:
    """The similarity-floor bench asks the same nonsense every run (so its figures can be reproduced)."""
    from bench.quality.floor import NONSENSE_FIXED, RANDOM_QUERIES, nonsense_queries

    first = nonsense_queries()
    assert first == nonsense_queries() and first != nonsense_queries(seed=8)
    assert len(first) == len(set(first)) == len(NONSENSE_FIXED) + RANDOM_QUERIES and "xyzzyplugh" in first


# --- Recall_any, the session BM25 baseline, LoCoMo -------------------------------------------------

def test_recall_any_counts_a_query_found_by_any_relevant_id() -> None:
    """Recall_any@k is 1 as soon as one relevant id is in the top k (LoCoMo names several evidence sessions)."""
    from bench.quality.metrics import recall_any_at_k

    assert recall_any_at_k(["x", "b", "y"], {"a", "b", "c"}, 2) == 1.0
    assert recall_any_at_k(["x", "y", "b"], {"a", "b"}, 2) == 0.0
    assert recall_any_at_k(["b", "b"], {"b"}, 1) == 1.0


def test_session_bm25_baseline_matches_hand_computation() -> None:
    """Whole-session BM25 (k1 1.2, b 0.75): "cat" in "cat cat dog" scores 0.98083 * 4.4 / 3.65; shorter wins "dog"."""
    from bench.quality.baseline import SessionBM25

    bm = SessionBM25({"a": "Cat cat dog", "b": "dog, bird", "c": "fish"})
    idf_cat = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    assert bm.score("cat", "a") == pytest.approx(idf_cat * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2)))
    assert bm.score("cat", "a") == pytest.approx(1.18237, abs=1e-5)
    assert bm.rank("cat", 10) == ["a"]  # documents without a query word are not ranked
    assert bm.rank("dog", 10) == ["b", "a"]  # same tf, shorter document
    assert bm.rank("dog", 10, among=["a", "c"]) == ["a"]


def test_run_summaries_group_by_kind_and_planner_route() -> None:
    """summarize averages each metric per kind and over all; auto's rows are also grouped by the planner's route."""
    rows = [{"kind": "exact", "plannerRoute": "phrase", **run.score(["a", "b"], ["a"])},
            {"kind": "paraphrase", "plannerRoute": "hybrid", **run.score(["x", "y", "a"], ["a"])},
            {"kind": "paraphrase", "plannerRoute": "hybrid", **run.score(["x"], ["a"])}]
    out = run.summarize(rows)
    assert out["exact"]["recall_any@5"] == 1.0 and out["exact"]["n"] == 1
    assert out["paraphrase"]["mrr@10"] == pytest.approx((1 / 3 + 0) / 2)
    assert out["all"]["recall_any@5"] == pytest.approx(2 / 3) and out["mixed"]["n"] == 0
    routes = run.by_planner_route(rows)
    assert set(routes) == {"phrase", "hybrid"} and routes["hybrid"]["n"] == 2


_LOCOMO = {
    "speaker_a": "Ana", "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a dog"},
                  {"speaker": "Ben", "dia_id": "D1:2", "text": "What is its name?"}],
    "session_2_date_time": "9:05 am on 1 June, 2023",
    "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I ran a marathon"}],
    "session_3_date_time": "10:00 am on 2 June, 2023", "session_3": [],
    "qa": [{"question": "What did Ana adopt?", "answer": "a dog", "evidence": ["D1:1"], "category": 4},
           {"question": "Who ran?", "answer": "Ben", "evidence": ["D1:2; D2:1"], "category": 1},
           {"question": "Is Ana a cat?", "adversarial_answer": "no", "evidence": ["D1:1"], "category": 5},
           {"question": "Unanswerable", "answer": "x", "evidence": [], "category": 3}],
}


def test_locomo_conversations_become_scoped_questions_over_one_transcript_per_session(tmp_path: Path) -> None:
    """Sessions become Claude transcripts (A the user); questions of categories 1-4 with evidence, scoped by folder."""
    from datetime import UTC, datetime

    from bench.quality import locomo

    conv = locomo.parse_conversation("7", _LOCOMO)
    assert [s.number for s in conv.sessions] == [1, 2]  # the empty session 3 is no transcript
    assert conv.sessions[0].start == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [(q.category, q.evidence) for q in conv.questions] == [(4, (1,)), (1, (1, 2))]
    assert [s.kind for s in locomo.steps(conv, conv.sessions[1])] == ["user", "assistant"]  # B opened session 2
    queries = locomo.build(tmp_path, [conv])
    corpus = json.loads((tmp_path / "corpus.json").read_text())
    ids = {s["session"]: s["session_id"] for s in corpus["sessions"]}
    assert [(q.kind, q.relevant, q.scope_paths) for q in queries] == [
        ("single-hop", (ids[1],), ("/home/locomo/conv-7",)), ("multi-hop", (ids[1], ids[2]), ("/home/locomo/conv-7",))]
    path = tmp_path / corpus["sessions"][0]["path"]
    parser = ClaudeParser(str(path))
    messages = [m for line in path.read_bytes().splitlines() for m in parser.feed(line)]
    assert [m.text for m in messages] == ["I adopted a dog", "What is its name?"]
    assert parser.session.cwd == "/home/locomo/conv-7"
    assert run.request(queries[0])["filters"] == {"scopePaths": ["/home/locomo/conv-7"]}


# --- fusion replay (bench.quality.fusion) -------------------------------------------------------

def _recorded(route: str, relevant: list[int]) -> dict[str, object]:
    """One recorded query as bench.quality.fusion.capture writes it."""
    return {"id": "q", "kind": "paraphrase", "relevant": relevant,
            "in": {"lexical": [[1, 10.0, 100], [2, 8.0, 200]], "route": route,
                   "vector": [[3, 300, 0.60], [2, 201, 0.50], [4, 400, 0.40]],
                   "coverage": {"1": 0.5, "2": 1.0}, "updated": {"1": 5, "2": 5, "3": 5, "4": 5}}}


def test_score_sum_adds_coverage_weighted_bm25_to_rescaled_cosine() -> None:
    """score-sum by hand: 2 = 0.8 + 0.5, 3 = 1.0, 1 = 0.5, 4 = 0 (the last vector candidate)."""
    x = fusion.Lists.from_json(_recorded("any", [3])["in"])  # type: ignore[arg-type]
    assert fusion.score_sum(1.0, 1.0)(x) == [2, 3, 1, 4]
    # Weighing the lexical side four times as much puts both word matches first: 1 = 2.0, 2 = 3.2 + 0.5.
    assert fusion.score_sum(4.0, 1.0)(x) == [2, 1, 3, 4]


def test_score_sum_keeps_strict_answers_first_and_drops_dissimilar_vector_only_sessions() -> None:
    """A phrase route's sessions stay ahead of any vector hit; a vector-only session under the floor is no result."""
    got = _recorded("phrase", [1])["in"]
    got["vector"] = [[3, 300, 0.60], [5, 500, SIMILARITY_FLOOR - 0.01]]  # type: ignore[index]
    ranked = fusion.score_sum(0.5, 4.0)(fusion.Lists.from_json(got))  # type: ignore[arg-type]
    assert ranked[:2] == [1, 2] and 3 in ranked and 5 not in ranked


def test_replay_of_the_current_rule_is_hybrid_fuse_and_is_scored_like_a_route() -> None:
    """'current' ranks exactly as aivault.query.hybrid.fuse; replay scores the ranking with the benchmark's metrics."""
    rec = _recorded("any", [1])
    x = fusion.Lists.from_json(rec["in"])  # type: ignore[arg-type]
    want = [f.sess for f in fuse(x.lexical, x.route, x.vector, x.updated, "relevance", coverage=x.coverage)]
    assert fusion.current(x) == want
    rank = want.index(1) + 1
    m = fusion.replay([rec], fusion.current, KINDS)
    assert m["paraphrase"]["mrr@10"] == pytest.approx(1 / rank) and m["paraphrase"]["n"] == 1
    m = fusion.replay([rec], fusion.score_sum(1.0, 1.0), KINDS)
    assert m["paraphrase"]["mrr@10"] == pytest.approx(1 / 3)  # session 1 is third by hand above


def test_fuse_with_replays_the_shipped_rule_at_other_weights() -> None:
    """By hand (k = 20): shipped 2 (2/22 + 1/22) > 1 (1/21, ties 3 by id) > 3 > 4; a 1.2 lead makes 1
    dominant; coverage weight 1 drops 1 (0.5/21) below the vector-only 3 and 4."""
    x = fusion.Lists.from_json(_recorded("any", [1])["in"])  # type: ignore[arg-type]
    assert fusion.current(x) == fusion.fuse_with()(x) == [2, 1, 3, 4]
    assert fusion.fuse_with(dominance=1.2)(x) == [1, 2, 3, 4]
    assert fusion.fuse_with(coverage_weight=1.0)(x) == [2, 3, 4, 1]


# --- embedding windows (bench.quality.windows) --------------------------------------------------

def test_windows_join_consecutive_chunks_up_to_the_limit_and_overlap_from_the_middle() -> None:
    """Windows by hand: 4+1+4 = 9 fits 10, a fifth chunk would not; overlapping ones restart mid-window."""
    from bench.quality.windows import windows

    chunks = [(1, "aaaa"), (2, "bbbb"), (3, "cccc"), (4, "dddddddddddd"), (5, "ee")]
    assert windows(chunks, 10, overlap=False) == [(1, "aaaa\nbbbb"), (3, "cccc"), (4, "dddddddddddd"), (5, "ee")]
    assert windows(chunks, 10, overlap=True) == [(1, "aaaa\nbbbb"), (2, "bbbb\ncccc"), (3, "cccc"),
                                                 (4, "dddddddddddd"), (5, "ee")]
    assert windows(chunks, 100, overlap=True) == [(1, "aaaa\nbbbb\ncccc\ndddddddddddd\nee")]  # one is enough


def test_nearest_sessions_keep_each_sessions_nearest_item_within_scope_and_count() -> None:
    """Sessions in order of their nearest item; out-of-scope items are skipped; only k items are looked at."""
    import numpy as np

    from bench.quality.windows import nearest_sessions

    sims = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    sess = np.array([7, 8, 7, 9, 6])
    ids = np.array([70, 80, 71, 90, 60])
    assert nearest_sessions(sims, sess, ids, None, k=5) == [(7, 70, 0.9), (8, 80, 0.8), (9, 90, 0.6), (6, 60, 0.5)]
    assert nearest_sessions(sims, sess, ids, {8, 6}, k=5) == [(8, 80, 0.8), (6, 60, 0.5)]
    assert nearest_sessions(sims, sess, ids, None, k=2) == [(7, 70, 0.9), (8, 80, 0.8)]
