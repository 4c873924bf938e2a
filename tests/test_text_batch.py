"""The tokenizer over whole batches: the same postings as each chunk tokenized on its own."""

from __future__ import annotations

import random

from aivault.text import Tokenizer


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
