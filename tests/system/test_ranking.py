"""Session ranking rules (query/bm25.py, query/planner.py), checked against scores computed here by hand.

One small corpus, indexed for real (scanner child, DuckDB), every message one chunk:

* ``spread`` -- a conversation whose user says "pottery class" in one message and "kids painted"
  in another: every telling word of the question, but never more than two in one chunk;
* ``dense`` -- one message holding three of them ("kids paint pottery");
* ``redis`` -- a decision to drop a cache, its words spread over three messages;
* ``verbatim`` -- the same words in one message;
* two unrelated sessions, so that no word is in every session.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import pytest

from aivault import policy
from aivault.home import Home
from aivault.query.planner import is_question
from aivault.query.weights import SESSION_CHUNK_WEIGHT
from aivault.text import _TOKEN_RX, FUNCTION_WORDS, query_terms, token_terms
from tests.builders import ClaudeWriter
from tests.support.common import lexical_only
from tests.support.daemons import InprocDaemon

K1, B = 1.2, 0.75

CORPUS: dict[str, list[tuple[str, str]]] = {
    "spread": [("user", "we went to the pottery class"),
               ("assistant", "lovely"),
               ("user", "the kids painted bowls")],
    "dense": [("user", "my kids paint pottery at home")],
    "redis": [("user", "the cache keeps serving stale pages"),
              ("assistant", "we could drop it and read the database directly"),
              ("user", "agreed, let us remove redis then")],
    "verbatim": [("user", "drop the redis cache")],
    "other1": [("user", "the build fails on arm64 runners of the class")],
    "other2": [("user", "rename the config loader module")],
}
QUESTION = "What did the kids paint at the pottery class?"


@pytest.fixture(scope="module")
def ranked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InprocDaemon, dict[str, str]]]:
    base = tmp_path_factory.mktemp("ranking")
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    ids: dict[str, str] = {}
    for i, (name, messages) in enumerate(CORPUS.items()):
        w = ClaudeWriter(roots["claude"], cwd=f"/home/dev/r{i}")
        for role, text in messages:
            (w.user if role == "user" else w.assistant)(text)
        ids[name] = w.session_id
    home = Home.resolve(base / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    d = InprocDaemon(home, roots)
    d.reconcile()
    try:
        yield d, ids
    finally:
        d.close()


def _terms(text: str) -> list[str]:
    return [t for tok in _TOKEN_RX.findall(text) for t in token_terms(tok)]


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _bm25(tf: int, dl: float, avgdl: float, idf: float) -> float:
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


def hand_scores(query: str) -> dict[str, tuple[float, float, float]]:
    """(combined, session BM25, best-chunk BM25) of every session matching a telling word of ``query``."""
    chunks = {name: [_terms(text) for _, text in msgs] for name, msgs in CORPUS.items()}
    # A chunk's length is its number of tokens ("arm64" is one token and three terms).
    dls = {name: [len(_TOKEN_RX.findall(text)) for _, text in msgs] for name, msgs in CORPUS.items()}
    n_chunks = sum(len(c) for c in chunks.values())
    total = sum(sum(d) for d in dls.values())
    avg_chunk, avg_sess = total / n_chunks, total / len(chunks)
    words = [t for t in query_terms(query) if t not in FUNCTION_WORDS]
    cdf = {w: sum(1 for c in chunks.values() for t in c if w in t) for w in words}
    sdf = {w: sum(1 for c in chunks.values() if any(w in t for t in c)) for w in words}
    out: dict[str, tuple[float, float]] = {}
    for name, c in chunks.items():
        stf = Counter(t for terms in c for t in terms)
        sess = sum(_bm25(stf[w], sum(dls[name]), avg_sess, _idf(len(chunks), sdf[w])) for w in words if stf[w])
        best = max(sum(_bm25(Counter(t)[w], dl, avg_chunk, _idf(n_chunks, cdf[w])) for w in words if w in t)
                   for t, dl in zip(c, dls[name], strict=True))
        if sess > 0:
            out[name] = (sess, best)
    top_s = max(s for s, _ in out.values())
    top_c = max(c for _, c in out.values())
    return {k: (round(s / top_s + SESSION_CHUNK_WEIGHT * c / top_c, 6), s, c) for k, (s, c) in out.items()}


def test_a_question_ranks_the_session_holding_its_words_over_the_best_single_chunk(
        ranked: tuple[InprocDaemon, dict[str, str]]) -> None:
    """Any-word ranking scores the session as one document plus its best chunk: the conversation with
    all the question's words beats the one message holding three of them (best chunk alone: reversed)."""
    d, ids = ranked
    expected = hand_scores(QUESTION)
    assert expected["dense"][2] > expected["spread"][2]  # by best chunk alone "dense" would win
    r = d.search(QUESTION, debug=True)
    assert r["debug"]["route"] == "any"
    got = {h["sessionId"]: h["score"] for h in r["hits"]}
    order = sorted(expected, key=lambda k: -expected[k][0])
    assert [h["sessionId"] for h in r["hits"]] == [ids[k] for k in order]
    assert order[:2] == ["spread", "dense"]
    for name in order:
        assert got[ids[name]] == pytest.approx(expected[name][0], abs=1e-6), name


def test_the_trace_shows_the_session_and_chunk_lexical_ranks(ranked: tuple[InprocDaemon, dict[str, str]]) -> None:
    """debug.trace names, per hit, its rank by session BM25 and by best-chunk BM25."""
    d, ids = ranked
    trace = {e["sessionId"]: e for e in d.search(QUESTION, debug=True)["debug"]["trace"]}
    assert (trace[ids["spread"]]["lexicalSessionRank"], trace[ids["spread"]]["lexicalChunkRank"]) == (1, 2)
    assert (trace[ids["dense"]]["lexicalSessionRank"], trace[ids["dense"]]["lexicalChunkRank"]) == (2, 1)
    assert trace[ids["spread"]]["lexicalRank"] == 1 and trace[ids["spread"]]["vectorRank"] is None
    # A strict route ranks by the best chunk alone: no session rank.
    strict = d.search("pottery class", debug=True)["debug"]
    assert strict["route"] == "phrase"
    assert strict["trace"][0]["lexicalSessionRank"] is None and strict["trace"][0]["lexicalChunkRank"] == 1


def test_a_question_skips_the_phrase_and_all_words_routes(ranked: tuple[InprocDaemon, dict[str, str]]) -> None:
    """A question goes to any-word ranking at once; the same words without the question form keep the
    cascade, whose first route with a match answers (only the verbatim session)."""
    d, ids = ranked
    q = d.search("where did we decide to drop the redis cache?", debug=True)
    assert q["debug"]["route"] == "any" and q["debug"]["plannerReport"]["route"] == "any"
    found = [h["sessionId"] for h in q["hits"]]
    assert set(found[:2]) == {ids["redis"], ids["verbatim"]}
    exact = d.search("drop the redis cache", debug=True)
    assert exact["debug"]["route"] == "phrase" and [h["sessionId"] for h in exact["hits"]] == [ids["verbatim"]]
    # Quoted, or without two telling words, or neither ending in "?" nor opening with a wh-word, a
    # query is not planned as a question.
    assert is_question("where did we drop the cache", query_terms("where did we drop the cache"))
    for text in ('what "drop the redis cache"', "what is redis?", "Could not find directory of OpenSSL"):
        assert not is_question(text, query_terms(text)), text


def test_an_inflected_question_word_finds_the_other_inflection(ranked: tuple[InprocDaemon, dict[str, str]]) -> None:
    """Stemming on both sides: "painting" finds "painted" and "paint"; "removed" finds "remove"."""
    d, ids = ranked
    assert {h["sessionId"] for h in d.search("painting")["hits"]} == {ids["spread"], ids["dense"]}
    assert [h["sessionId"] for h in d.search("removed redis")["hits"]] == [ids["redis"]]


def test_hand_scores_use_the_corpus_as_written() -> None:
    """The hand computation itself: a word only "dense" holds scores only there (guards the helper)."""
    s = hand_scores("home")
    assert set(s) == {"dense"} and s["dense"][0] == pytest.approx(1 + SESSION_CHUNK_WEIGHT)
