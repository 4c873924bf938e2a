"""Weighted Reciprocal Rank Fusion (query/hybrid.py): the rules the retrieval benchmark chose."""

from __future__ import annotations

import pytest

from aivault.query.hybrid import (
    COVERAGE_WEIGHT,
    DOMINANCE,
    LOOSE_DEPTH,
    LOOSE_WEIGHT,
    RRF_K,
    SIMILARITY_FLOOR,
    STRICT_BONUS,
    fuse,
)

UPDATED = {s: 1_000 + s for s in range(100)}


def test_strict_lexical_answers_keep_first_place_and_vectors_order_the_rest() -> None:
    """A phrase or all-words match outranks any vector-only hit; vector hits follow in their order."""
    out = fuse([(1, 5.0, 10), (2, 4.0, 20)], "all", [(7, 70, 0.6), (8, 80, 0.5), (2, 21, 0.4)], UPDATED, "relevance")
    assert [f.sess for f in out] == [2, 1, 7, 8]
    assert out[0].score == pytest.approx(STRICT_BONUS + 1 / (RRF_K + 2) + 1 / (RRF_K + 3))
    assert out[0].chunk == 20  # the lexical evidence is kept over the vector chunk


def test_loose_lexical_lists_are_cut_and_weighted_below_vectors() -> None:
    """Any-word matches count only to LOOSE_DEPTH, at LOOSE_WEIGHT: a top vector hit beats a top word hit."""
    lexical: list[tuple[int, float, int | None]] = [(s, 10.0 - s * 0.1, s) for s in range(1, 30)]
    out = fuse(lexical, "any", [(50, 500, 0.6)], UPDATED, "relevance")
    assert out[0].sess == 50 and out[0].score == pytest.approx(1 / (RRF_K + 1))
    assert out[1].sess == 1 and out[1].score == pytest.approx(LOOSE_WEIGHT / (RRF_K + 1))
    assert {f.sess for f in out} == {50, *range(1, LOOSE_DEPTH + 1)}


def test_a_dominant_any_word_match_keeps_first_place() -> None:
    """A loose lexical hit scoring DOMINANCE times the next one is treated as asked for; just below is not."""
    vector = [(50, 500, 0.6), (51, 510, 0.5)]
    out = fuse([(1, 9.0 * DOMINANCE, 1), (2, 9.0, 2)], "any", vector, UPDATED, "relevance")
    assert [f.sess for f in out][:2] == [1, 50]
    out = fuse([(1, 9.0 * DOMINANCE - 0.01, 1), (2, 9.0, 2)], "any", vector, UPDATED, "relevance")
    assert [f.sess for f in out][:2] == [50, 51]
    # A single any-word hit has nothing to dominate: an accidental match must not take first place.
    out = fuse([(1, 9.0, 1)], "any", vector, UPDATED, "relevance")
    assert out[0].sess == 50


def test_ties_break_by_newest_then_session_and_newest_sort_orders_by_time() -> None:
    """Equal fused scores order by updatedAt (newer first), then session id; sort=newest puts time first."""
    out = fuse([], "any", [(3, 30, 0.6)], UPDATED, "relevance")
    assert [f.sess for f in out] == [3]
    out = fuse([(4, 1.0, 40), (5, 1.0, 50)], "all", [(5, 51, 0.6), (4, 41, 0.6)], {4: 7, 5: 7}, "relevance")
    assert [f.sess for f in out] == [4, 5]  # equal scores and times: the lower session id first
    out = fuse([(1, 9.0, 1), (2, 8.0, 2)], "all", [], {1: 5, 2: 9}, "newest")
    assert [f.sess for f in out] == [2, 1]


def test_vector_only_sessions_below_the_floor_are_dropped_but_still_order_word_matches() -> None:
    """Below SIMILARITY_FLOOR a vector-only session is no result; a session the words found keeps its vector rank."""
    weak = SIMILARITY_FLOOR - 0.01
    vector = [(50, 500, SIMILARITY_FLOOR), (51, 510, weak), (2, 20, weak)]
    out = fuse([(1, 9.0, 10), (2, 8.0, 20)], "any", vector, UPDATED, "relevance")
    assert [f.sess for f in out] == [2, 50, 1]  # 51 is gone; 2 has both ranks, 1 only a lexical one
    assert [f.matched_by for f in out] == ["both", "vector", "lexical"]
    assert out[0].vector_rank == 3 and out[0].similarity == weak
    assert fuse([], "any", [(51, 510, weak)], UPDATED, "relevance") == []


def test_session_scored_any_word_lists_are_weighted_by_the_share_of_the_query_they_hold() -> None:
    """With coverage, every any-word session takes part at COVERAGE_WEIGHT x its share of the query: a
    session holding most of a question's words beats the top vector hit, a one-word match alone does not."""
    lexical: list[tuple[int, float, int | None]] = [(1, 1.2, 10), (2, 1.0, 20)]
    lexical += [(s, 0.5, s) for s in range(3, 30)]
    coverage = {1: 0.75, 2: 0.1, **{s: 0.1 for s in range(3, 30)}}
    out = fuse(lexical, "any", [(50, 500, 0.6), (2, 21, 0.5)], UPDATED, "relevance", coverage=coverage)
    # 1: 2 x 0.75 / 21 = 0.0714; 2 (both lists): 2 x 0.1 / 22 + 1 / 22 = 0.0545; 50: 1 / 21 = 0.0476;
    # 3 (words only): 2 x 0.1 / 23 = 0.0087.
    assert [f.sess for f in out][:4] == [1, 2, 50, 3]
    assert out[0].score == pytest.approx(COVERAGE_WEIGHT * 0.75 / (RRF_K + 1))
    assert out[1].score == pytest.approx(COVERAGE_WEIGHT * 0.1 / (RRF_K + 2) + 1 / (RRF_K + 2))
    assert len(out) == 30  # no LOOSE_DEPTH cut: all 29 word matches and the vector-only session
    # The same lists without coverage: the loose rule, cut to LOOSE_DEPTH at LOOSE_WEIGHT.
    old = fuse(lexical, "any", [(50, 500, 0.6), (2, 21, 0.5)], UPDATED, "relevance")
    assert len(old) == LOOSE_DEPTH + 1 and old[0].score == pytest.approx((LOOSE_WEIGHT + 1) / (RRF_K + 2))
