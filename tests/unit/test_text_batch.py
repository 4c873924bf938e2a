"""The tokenizer over whole batches: the same postings as each chunk tokenized on its own."""

from __future__ import annotations

import random

from aivault.text import Tokenizer, normalize


def _alone(text: str) -> dict[int, int]:
    tok = Tokenizer()
    tok.add(0, text)
    _, terms, tf = tok.finish()
    return dict(zip(terms.tolist(), tf.tolist(), strict=True))


def test_a_batch_of_mixed_chunks_gives_each_chunk_its_own_postings() -> None:
    """ASCII and non-ASCII chunks mixed in batches, tables warm across them: per-chunk postings unchanged."""
    rnd = random.Random(11)
    words = ["fooBar", "foo_bar", "C++", "C#", "#123", "x", "HTTPServer", "café", "修復バグ", "naïve", "a+b",
             "emoji🎉", "the", "Foo", "foo", "", " ", "\n", "...", "don't", "2024-01-02", "résumé_v2"]
    tok = Tokenizer()
    for _ in range(30):
        texts = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 40))) for _ in range(rnd.randint(1, 60))]
        lengths = [tok.add(i * 3, t) for i, t in enumerate(texts)]
        chunk, terms, tf = tok.finish()
        got: dict[int, dict[int, int]] = {}
        for c, t, f in zip(chunk.tolist(), terms.tolist(), tf.tolist(), strict=True):
            got.setdefault(c, {})[t] = f
        want = {i * 3: _alone(t) for i, t in enumerate(texts) if _alone(t)}
        assert got == want
        assert [n > 0 for n in lengths] == [bool(_alone(t)) for t in texts]
        assert tok.pending_tokens == 0


def _postings(tok: Tokenizer, texts: list[str], regex_only: bool) -> tuple[list[int], list[tuple[int, int, int]]]:
    # The reference is the tokenizer before the fast path: ASCII text cut as bytes, any other by the regex.
    lengths = [tok._add_regex(i, normalize(t)) if regex_only and not t.isascii() else tok.add(i, t)
               for i, t in enumerate(texts)]
    chunk, terms, tf = tok.finish()
    # Sorted: within a chunk the rows follow the tokenizer's own term ids, which depend on what it saw first.
    return lengths, sorted(zip(chunk.tolist(), terms.tolist(), tf.tolist(), strict=True))


def test_ascii_words_between_non_ascii_separators_take_the_ascii_path_with_the_regex_results() -> None:
    """Prose with dashes, quotes, arrows or emoji is cut as ASCII, with exactly the regex path's tokens."""
    probe = Tokenizer()
    probe.add(0, "fix \u2014 the \u201clock\u201d \u2192 done \u2713 \U0001f389")
    assert probe._a_text and not probe._b_sid  # the ASCII path, not the regex
    assert probe.add(1, "caf\u00e9 \u2014 lock") == 2  # a non-ASCII word: the regex path
    # A few "+" or "#": the ASCII path, counting as the regex does ("a+b" two tokens, "+" none).
    assert probe.add(2, "a+b \u2014 C# + lock") == 4 and len(probe._a_text) == 2
    assert probe.add(3, "x += 1 \u2192 " * 13) == 26  # many: the regex path
    assert probe._b_counts == [2, 26]
    rnd = random.Random(5)
    words = ["fooBar", "foo_bar", "HTTPServer", "lock", "Locks", "x", "2024", "don", "t", "the", "DuckDB", "v2_rc1"]
    seps = [" ", "\u2014", "\u2013", "\u201c", "\u201d", "\u2019", "\u2026", "\u2192", "\u2713", "\U0001f389",
            "\u00a0", "\u3000", "\u0301", "\ufb01", "\uff21", "\u00b2", "\u00bd", "-", ".", "\n", "\ud83d", "C++", "#7",
            "na\u00efve", "\u4fee\u5fa9"]
    fast, slow = Tokenizer(), Tokenizer()
    for _ in range(40):
        texts = ["".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 30)))
                 for _ in range(rnd.randint(1, 40))]
        assert _postings(fast, texts, False) == _postings(slow, texts, True)
    assert sorted(fast.drain_new_terms()) == sorted(slow.drain_new_terms())


def test_a_batch_s_postings_are_each_token_s_terms_counted_one_by_one() -> None:
    """finish's array arithmetic equals counting every token's terms in Python, in the order it promises."""
    from collections import Counter

    from aivault.text import _ASCII_SPLIT, _TOKEN_RX, BUCKET_SHIFT

    rnd = random.Random(23)
    # Surfaces of one term, of several ("fooBar", "0x1f", CJK) and of none ("+", "#").
    words = ["lock", "Locks", "fooBar", "foo_bar", "HTTPServer", "0x1f", "+", "#", "+#", "a+b", "C++", "C#",
             "x", "the", "caf\u00e9", "\u4fee\u5fa9\u30d0\u30b0", "v2_rc1", "..."]
    tok = Tokenizer()
    for _ in range(25):
        texts = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 50))) for _ in range(rnd.randint(1, 80))]
        for i, t in enumerate(texts):
            tok.add(i, t)
        chunk, terms, tf = tok.finish()
        want: list[tuple[int, int, int]] = []
        for i, t in enumerate(texts):
            surfaces: list[str | bytes] = []
            surfaces += t.encode("ascii").translate(_ASCII_SPLIT).split() if t.isascii() else \
                _TOKEN_RX.findall(normalize(t))
            counts: Counter[int] = Counter()
            for s in surfaces:
                sid = tok._sids[s]
                start, n = tok._start[sid], tok._count[sid]
                counts.update(tok._flat[start:start + n])
            want += sorted((i, tid, f) for tid, f in counts.items())
        # In runs of the term's top bits, each run by chunk then term id (a stable sort of that order).
        assert list(zip(chunk.tolist(), terms.tolist(), tf.tolist(), strict=True)) == \
            sorted([(c, tok._tid_hash[tid], f) for c, tid, f in want], key=lambda row: row[1] >> BUCKET_SHIFT)


def test_an_ascii_chunk_s_length_is_its_count_of_translated_surfaces() -> None:
    """The ASCII path's token count (runs counted in C) equals the surfaces bytes.split gives, edges included."""
    from aivault.text import _ASCII_SPLIT

    rnd = random.Random(31)
    pieces = ["lock", "C++", "#7", "+", "#", "a+b", "x", " ", "  ", "\n", "\t", ".", "--", "(", ")", "_", "0x1f", "?!"]
    tok = Tokenizer()
    for _ in range(400):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 25)))
        assert tok.add(0, text) == len(text.encode("ascii").translate(_ASCII_SPLIT).split()), text
        tok.finish()
