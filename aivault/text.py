"""Tokenizer and chunker shared by the scanner (indexing) and the query worker (searching).

Both sides must cut text into the same terms, so there is exactly one implementation and
its version is recorded in the database (``TOKENIZER_VERSION``): a change here requires a
re-index, which a schema migration triggers.

Terms:
* words: runs of Unicode letters, digits and ``_``, lower-cased after NFKC normalization;
  a trailing ``++`` or ``#`` stays attached (``C++``, ``C#``), and ``#123`` is one term;
* identifier parts: a word that mixes case, digits or underscores is also indexed split
  (``resolveTerminalPath`` -> ``resolve``, ``terminal``, ``path``; ``foo_bar`` -> ``foo``,
  ``bar``; ``#123`` -> ``123``). Queries use whole words only, so both ``resolveTerminalPath``
  and ``resolve terminal path`` find the identifier;
* CJK: Han, Hiragana and Katakana have no spaces, so a run is indexed as overlapping
  bigrams plus single characters; a query run of two or more characters uses its bigrams.

A term is stored as a signed 64-bit hash (BLAKE2b, 8 bytes) so postings are fixed-width
integers; the vocabulary table keeps short terms' text for typo repair.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator

TOKENIZER_VERSION = 1

# A chunk is the unit of retrieval and of snippets. About a screenful of prose: long enough
# for BM25 to see context, short enough that a snippet is near its match.
CHUNK_CHARS = 1500
# SPEC §2: a tool-output line longer than this is neither indexed nor searchable.
TOOL_LINE_MAX_CHARS = 3072
# A tool message contributes at most this much text to the index; beyond it, tool output is
# bulk data (a dumped file, a log) whose tail adds cost but almost no findability.
TOOL_TEXT_MAX_CHARS = 1_000_000
# Terms longer than this are still indexed (a hash is fixed size) but not kept in the
# vocabulary used for typo repair.
VOCAB_MAX_CHARS = 32

_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RX = re.compile(rf"#\d+|[{_CJK_CLASS}]+|[^\W{_CJK_CLASS}]+(?:\+\+|#(?!\w))?")
_CJK_RX = re.compile(rf"[{_CJK_CLASS}]")
_SPLIT_RX = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[^\W\dA-Z_]+|[0-9]+")

_HASH_CACHE_MAX = 1_000_000


def term_hash(term: str) -> int:
    """The stable signed 64-bit id of a (normalized) term."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def normalize(text: str) -> str:
    """NFKC-normalize so that composed and decomposed forms (café) are the same term."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text)


def _is_cjk(token: str) -> bool:
    return _CJK_RX.match(token) is not None


def _cjk_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + list(run)


def _word_parts(token: str) -> list[str]:
    """The identifier parts of a word, or [] when the word is a plain word."""
    if token.startswith("#"):
        return [token[1:]]
    core = token.rstrip("+#")
    if core.isalpha() and (core.islower() or core.isupper() or core.istitle()):
        return []
    if core.isdigit():
        return []
    parts = [p.lower() for p in _SPLIT_RX.findall(core)]
    if len(parts) <= 1:
        return []
    return parts


class Tokenizer:
    """Turns text into term hashes, caching per distinct surface form.

    One instance per process; the cache keeps the hot path to a dict lookup per distinct
    token of a chunk.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {}
        self.new_terms: set[str] = set()  # vocabulary seen since the caller last drained it

    def _expand(self, token: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
        hit = self._cache.get(token)
        if hit is not None:
            return hit
        if len(self._cache) >= _HASH_CACHE_MAX:
            self._cache.clear()
        if _is_cjk(token):
            terms = _cjk_terms(token)
        else:
            low = token.lower()
            terms = [low, *(p for p in _word_parts(token) if p != low)]
        for t in terms:
            if len(t) <= VOCAB_MAX_CHARS:
                self.new_terms.add(t)
        value = (tuple(term_hash(t) for t in terms), tuple(terms))
        self._cache[token] = value
        return value

    def index_terms(self, text: str) -> tuple[dict[int, int], int]:
        """Term frequencies of a chunk (hash -> tf) and its length in terms."""
        tf: dict[int, int] = {}
        length = 0
        for token, n in Counter(_TOKEN_RX.findall(normalize(text))).items():
            hashes, _ = self._expand(token)
            for h in hashes:
                tf[h] = tf.get(h, 0) + n
            length += n * len(hashes)
        return tf, length

    def drain_new_terms(self) -> list[str]:
        out = list(self.new_terms)
        self.new_terms.clear()
        return out


def query_terms(text: str) -> list[str]:
    """The terms a query asks for, in order, without duplicates (whole words, CJK bigrams)."""
    seen: dict[str, None] = {}
    for token in _TOKEN_RX.findall(normalize(text)):
        if _is_cjk(token):
            for t in ([token] if len(token) == 1 else [token[i : i + 2] for i in range(len(token) - 1)]):
                seen.setdefault(t, None)
        else:
            seen.setdefault(token.lower(), None)
    return list(seen)


def query_match_forms(text: str) -> list[str]:
    """Surface forms to highlight for a query: its words, their identifier parts and CJK runs."""
    forms: dict[str, None] = {}
    for token in _TOKEN_RX.findall(normalize(text)):
        forms.setdefault(token.lower(), None)
    return list(forms)


def iter_tokens(text: str) -> Iterator[re.Match[str]]:
    """Token matches with their spans, for snippet highlighting."""
    return _TOKEN_RX.finditer(text)


def token_terms(token: str) -> list[str]:
    """All index terms a single surface token produces (used to decide what to highlight)."""
    if _is_cjk(token):
        return _cjk_terms(token)
    low = token.lower()
    return [low, *(p for p in _word_parts(token) if p != low)]


def chunk_text(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Cut text into chunks of at most ``limit`` characters, at whitespace when possible.

    A phrase spanning two chunks is not matched as a phrase (SPEC §2); each word still is.
    """
    if len(text) <= limit:
        return [text] if text.strip() else []
    out: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        end = min(start + limit, n)
        if end < n:
            cut = text.rfind(" ", start + limit // 2, end)
            if cut == -1:
                cut = text.rfind("\n", start + limit // 2, end)
            if cut != -1:
                end = cut + 1
        piece = text[start:end]
        if piece.strip():
            out.append(piece)
        start = end
    return out


def tool_index_text(text: str) -> tuple[str, int]:
    """The part of a tool call/result that is indexed, and how many lines were dropped.

    Lines longer than ``TOOL_LINE_MAX_CHARS`` are removed (not searchable, SPEC §2) and the
    text is capped at ``TOOL_TEXT_MAX_CHARS``.
    """
    if len(text) <= TOOL_LINE_MAX_CHARS:
        return text, 0
    if len(text) > TOOL_TEXT_MAX_CHARS:
        text = text[:TOOL_TEXT_MAX_CHARS]
    kept: list[str] = []
    dropped = 0
    for line in text.split("\n"):
        if len(line) > TOOL_LINE_MAX_CHARS:
            dropped += 1
        else:
            kept.append(line)
    if not dropped:
        return text, 0
    return "\n".join(kept), dropped
