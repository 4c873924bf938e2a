"""The shared tokenizer: index and query sides agree, identifiers split, Unicode survives."""

from __future__ import annotations

import random

from aivault.text import (
    _TOKEN_RX,
    TOOL_LINE_MAX_CHARS,
    Tokenizer,
    chunk_text,
    normalize,
    query_terms,
    query_words,
    stem,
    surface_terms,
    term_hash,
    token_terms,
    tool_index_text,
)


def _postings(text: str) -> dict[int, int]:
    tok = Tokenizer()
    tok.add(0, text)
    _, terms, tf = tok.finish()
    return dict(zip(terms.tolist(), tf.tolist(), strict=True))


def _regex_postings(text: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for token in _TOKEN_RX.findall(normalize(text)):
        for t in token_terms(token):
            out[term_hash(t)] = out.get(term_hash(t), 0) + 1
    return out


def test_the_fast_ascii_path_yields_exactly_the_regex_terms() -> None:
    """bytes.translate+split on ASCII text gives the same postings as the reference regex."""
    rnd = random.Random(5)
    alphabet = "abcXYZ019_+#.-/ ()[]{}:;,\n\t'\"=<>!?@$%^&*~`|\\"
    for _ in range(300):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 120)))
        assert _postings(text) == _regex_postings(text), text


def test_identifiers_are_indexed_whole_and_split() -> None:
    """camelCase, snake_case, digits and acronyms produce the whole word and its parts."""
    assert surface_terms("resolveTerminalPath") == ["resolveterminalpath", "resolve", "terminal", "path"]
    assert surface_terms("foo_bar") == ["foo_bar", "foo", "bar"]
    assert surface_terms("HTTPServer") == ["httpserver", "http", "server"]
    assert surface_terms("#123") == ["#123", "123"]
    assert surface_terms("C++") == ["c++"]
    assert surface_terms("plain") == ["plain"]
    # The index terms are the same words stemmed.
    assert token_terms("resolveTerminalPath") == ["resolveterminalpath", "resolv", "termin", "path"]
    assert token_terms("foo_bar") == ["foo_bar", "foo", "bar"]


def test_plain_words_are_stemmed_on_both_sides_and_identifiers_are_not() -> None:
    """Inflections share one term (painted/painting/paints), identifiers with digits or _ keep theirs."""
    assert {stem(w) for w in ("painted", "painting", "paints", "paint")} == {"paint"}
    assert token_terms("Painting") == ["paint"] and query_terms("painted classes") == ["paint", "class"]
    assert stem("foo_bar") == "foo_bar" and stem("x86") == "x86" and stem("c++") == "c++" and stem("修復") == "修復"
    assert query_words("Painted Classes") == ["painted", "classes"]
    assert _postings("she paints") == _postings("she painted") == _postings("she painting")


def test_the_vocabulary_keeps_words_as_written() -> None:
    """Typo repair suggests real words: the vocabulary gets "widgets", never the stem "widget"."""
    tok = Tokenizer()
    tok.add(0, "widgets and Widgets")
    tok.finish()
    assert tok.drain_new_terms() == ["widgets", "and"]


def test_queries_use_whole_words_and_cjk_bigrams() -> None:
    """A query asks for whole lower-cased words; CJK runs become bigrams; duplicates collapse."""
    assert query_terms("Fix resolveTerminalPath in foo_bar.ts fix") == ["fix", "resolveterminalpath", "in",
                                                                         "foo_bar", "ts"]
    assert query_terms("fixes fixed") == ["fix"]
    assert query_terms("修復バグ") == ["修復", "復バ", "バグ"]
    assert query_terms("C++ #42 C#") == ["c++", "#42", "c#"]


def test_every_query_term_is_an_index_term_of_the_same_text() -> None:
    """Whatever the text, the terms a query derives from it are among the terms indexed for it."""
    samples = ["café Café CAFÉ cafe\u0301", "修復 バグを修復した", "안녕하세요 세계", "a.b foo_bar.ts C++ C# #123",
               "naïveFoo HTTPServer getURLForID", "emoji 🎉 done"]
    for text in samples:
        indexed = set(_postings(text))
        assert {term_hash(t) for t in query_terms(text)} <= indexed, text


def test_chunks_cover_the_text_and_respect_the_limit() -> None:
    """Chunking loses no characters, cuts at whitespace when it can, and bounds each chunk."""
    text = " ".join(f"word{i}" for i in range(2000))
    chunks = chunk_text(text, 500)
    assert "".join(chunks) == text
    assert all(len(c) <= 500 for c in chunks)
    assert all(c.endswith(" ") for c in chunks[:-1])
    assert chunk_text("   ") == []


def test_long_tool_lines_are_dropped_from_the_index_text() -> None:
    """Tool lines longer than 3,072 characters are removed; the others stay."""
    text = "keep me\n" + "x" * (TOOL_LINE_MAX_CHARS + 1) + "\nkeep too"
    kept, dropped = tool_index_text(text)
    assert dropped == 1 and kept == "keep me\nkeep too"
    exact = "y" * TOOL_LINE_MAX_CHARS
    assert tool_index_text(exact) == (exact, 0)
