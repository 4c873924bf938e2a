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
* stems: every plain ASCII word (letters only) is reduced to its English Snowball stem on both
  sides (``painted``, ``painting`` -> ``paint``), so a question finds the answer's other
  inflections. The phrase route still checks the words as written against the chunk's text; the
  vocabulary (typo repair) keeps words as written.

A term is stored as a signed 64-bit hash (BLAKE2b, 8 bytes) so postings are fixed-width
integers; the vocabulary table keeps short terms' text for typo repair.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

import Stemmer

if TYPE_CHECKING:
    import numpy as np

# 2: words are stemmed (English Snowball) on both sides.
# 3: the indexed text is redacted (aivault/redact.py): an index of version 2 may hold secrets, so it is
#    emptied and read again like one another tokenizer cut (indexer/store.reindex_if_stale).
TOKENIZER_VERSION = 3

# A chunk is the unit of retrieval and of snippets. About a screenful of prose: long enough
# for BM25 to see context, short enough that a snippet is near its match.
CHUNK_CHARS = 1500
# docs/contract.md §2: a tool-output line longer than this is neither indexed nor searchable.
TOOL_LINE_MAX_CHARS = 3072
# A tool message contributes at most this much text to the index; beyond it, tool output is
# bulk data (a dumped file, a log) whose tail adds cost but almost no findability.
TOOL_TEXT_MAX_CHARS = 1_000_000
# Terms longer than this are still indexed (a hash is fixed size) but not kept in the
# vocabulary used for typo repair.
VOCAB_MAX_CHARS = 32

# English function words (NLTK's stop-word list plus the conjunctions, prepositions and modals
# it lacks). They are indexed like any word, so a phrase or an all-words query containing them
# still matches exactly; only the any-word route leaves them out when the query has other words,
# since "the" or "my" matching on their own is noise, not evidence.
_FUNCTION_TEXT = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing a an the and but if or
because as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where
why how all any both each few more most other some such no nor not only own same so than too very s
t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma
mightn mustn needn shan shouldn wasn weren won wouldn
since though although unless whether whenever via per upon within without onto across among toward
towards despite yet also ever even another every either neither would could might must shall may
"""
_STEMMER = Stemmer.Stemmer("english")


def stem(term: str) -> str:
    """The English Snowball stem of a plain ASCII word (``painting`` -> ``paint``); any other term
    (identifiers with digits or ``_``, ``c++``, CJK, non-ASCII words) is its own stem."""
    if term.isascii() and term.isalpha():
        return str(_STEMMER.stemWord(term))
    return term


# The function words and their stems ("does" -> "doe", "during" -> "dure"): query terms are stems.
FUNCTION_WORDS: frozenset[str] = frozenset(_FUNCTION_TEXT.split()) | frozenset(
    stem(w) for w in _FUNCTION_TEXT.split())

_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# ASCII text is cut with bytes.translate + split (C loops, ~4x faster than the regex): every
# byte that is not a word character, "+" or "#" becomes a space. A resulting surface that
# holds "+" or "#" is re-cut by the regex once, when first seen, so both paths yield the same
# terms. Non-ASCII text goes through the regex.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+#")
_ASCII_SPLIT = bytes.maketrans(bytes(range(256)), bytes(i if i in _WORD_BYTES else 32 for i in range(256)))
# A translated text's tokens are its runs of non-space bytes: with every other byte made "a", each
# run but a leading one starts at a " a" (bytes.count, a C search; 1.5x faster than counting
# bytes.split's list, which also allocates every token).
_RUN_MARK = bytes.maketrans(bytes(range(256)), bytes(32 if i == 32 else 97 for i in range(256)))

# Surface tokens. Plain \w+ first: it is by far the most frequent match and the cheapest to
# try; tokens holding CJK characters are split further, once per distinct form (token_terms).
_TOKEN_RX = re.compile(r"\w+(?:\+\+|#(?!\w))?|#\d+")
_CJK_RX = re.compile(rf"[{_CJK_CLASS}]")
_CJK_SPLIT_RX = re.compile(rf"([{_CJK_CLASS}]+)")
_SPLIT_RX = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[^\W\dA-Z_]+|[0-9]+")
# A non-ASCII word character (é, 修, ²...). Text without one, once normalized, has only ASCII
# words: its other non-ASCII characters (— “ ” … → ✓, emoji) separate words as a space does.
# (The ASCII range first: most characters of such text are ASCII, and a range is cheaper to test
# than the word class; 3x faster on the 1M corpus's non-ASCII chunks, the same set.)
_NON_ASCII_WORD_RX = re.compile(r"[^\x00-\x7f\W]")
# Such text is cut as ASCII if it holds at most this many "+" and "#" (each costs a lookup of its
# surface's regex tokens); beyond, as code does, the regex cuts it.
_SIGNS_MAX = 12

# A batch's postings come in runs of term ids by their top bits: 64 ranges (Tokenizer.finish).
BUCKET_SHIFT = 58

# Surface forms remembered per process before the tables start over (bounds scanner memory).
_TABLE_MAX = 2_000_000


def term_hash(term: str) -> int:
    """The stable signed 64-bit id of a (normalized) term."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def normalize(text: str) -> str:
    """NFKC-normalize so that composed and decomposed forms (café) are the same term."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text)


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
    """Turns the chunks of a batch into postings: (chunk index, term hash, tf) arrays.

    An ASCII chunk (or one whose non-ASCII characters only separate words) is translated and kept
    until ``finish``, which cuts the whole batch's ASCII text at once (numpy) and maps each distinct
    token to its surface id (Arrow's dictionary encoding, then one dict lookup per distinct token);
    other text is cut by the regex and looked up per token. Each distinct surface form is expanded
    to its terms once per process and kept in a CSR table, and the batch's (chunk, term) pairs are
    counted with numpy. One instance per process.
    """

    def __init__(self) -> None:
        self._reset_tables()
        self._reset_batch()
        self.new_terms: list[str] = []  # vocabulary seen since the caller last drained it

    def _reset_tables(self) -> None:
        self._sids: dict[str | bytes, int] = {}
        self._tids: dict[str, int] = {}
        self._vocab: set[str] = set()  # surface words already sent as vocabulary
        self._surplus: dict[bytes, int] = {}  # surfaces holding "+" or "#": their regex tokens - 1
        # int64 arrays (appends in C); finish() reads them through numpy views it drops before returning.
        self._tid_hash = array("q")
        self._start = array("q")  # per surface id: offset of its terms in _flat
        self._count = array("q")  # per surface id: how many terms it yields
        self._flat = array("q")  # term ids, grouped by surface id

    def _reset_batch(self) -> None:
        self._b_sid = array("l")
        self._b_chunks: list[int] = []
        self._b_counts: list[int] = []
        # ASCII chunks, translated (word bytes kept, every other byte a space): their tokens are
        # looked up once per distinct token of the batch in finish(), not once per occurrence here.
        self._a_text: list[bytes] = []
        self._a_chunks: list[int] = []
        self._a_counts: list[int] = []

    def _new_surface(self, token: str | bytes) -> int:
        sid = len(self._count)
        self._sids[token] = sid
        if isinstance(token, bytes):
            text = token.decode("ascii")
            pieces = _TOKEN_RX.findall(text) if "+" in text or "#" in text else [text]
        else:
            pieces = [token]
        # Each piece counts on its own, as the regex path counts it; the stems of one piece are
        # distinct (token_terms).
        words = [w for piece in pieces for w in surface_terms(piece)]
        terms = [t for piece in pieces for t in token_terms(piece)]
        self._start.append(len(self._flat))
        self._count.append(len(terms))
        for w in words:
            # The vocabulary (typo repair) keeps words as written: a repair names a real word.
            if w not in self._vocab and len(w) <= VOCAB_MAX_CHARS:
                self._vocab.add(w)
                self.new_terms.append(w)
        for t in terms:
            tid = self._tids.get(t)
            if tid is None:
                tid = len(self._tid_hash)
                self._tids[t] = tid
                self._tid_hash.append(term_hash(t))
            self._flat.append(tid)
        return sid

    def add(self, chunk: int, text: str) -> int:
        """Tokenize one chunk of the batch; returns its length in tokens (BM25's dl)."""
        if text.isascii():
            return self._add_ascii(chunk, text.encode("ascii").translate(_ASCII_SPLIT))
        text = normalize(text)
        signs = text.count("+") + text.count("#")
        if signs <= _SIGNS_MAX and _NON_ASCII_WORD_RX.search(text) is None:
            # ASCII words between non-ASCII separators (prose with dashes, quotes and arrows): each
            # non-ASCII character becomes "?", which the translation makes a space, so the surfaces
            # and their terms are the regex's. The length is the regex's count of tokens, as for
            # any non-ASCII text (an ASCII text's stays its count of surfaces, as indexes were built).
            cut = text.encode("ascii", "replace").translate(_ASCII_SPLIT)
            n = self._add_ascii(chunk, cut)
            return n + self._sign_surplus(cut) if signs else n
        return self._add_regex(chunk, text)

    def _sign_surplus(self, cut: bytes) -> int:
        """How many more tokens the regex finds in ``cut`` than it has surfaces: a surface holding
        "+" or "#" may be several tokens ("a+b") or none ("+"). No token spans a separator, so each
        such surface cut alone gives what the regex gives in the whole text."""
        surplus = 0
        end = 0
        while True:
            plus, sharp = cut.find(b"+", end), cut.find(b"#", end)
            at = sharp if plus < 0 or 0 <= sharp < plus else plus
            if at < 0:
                return surplus
            start = cut.rfind(b" ", 0, at) + 1
            end = cut.find(b" ", at)
            if end < 0:
                end = len(cut)
            surface = cut[start:end]
            extra = self._surplus.get(surface)
            if extra is None:
                extra = len(_TOKEN_RX.findall(surface.decode("ascii"))) - 1
                self._surplus[surface] = extra
            surplus += extra

    def _add_ascii(self, chunk: int, cut: bytes) -> int:
        """A chunk's translated ASCII text, cut in ``finish``; returns its token count."""
        marked = cut.translate(_RUN_MARK)
        n = marked.count(b" a") + marked.startswith(b"a")
        if n:
            self._a_text.append(cut)
            self._a_chunks.append(chunk)
            self._a_counts.append(n)
        return n

    def _add_regex(self, chunk: int, text: str) -> int:
        """A chunk's normalized text cut by the regex, each token looked up now; returns its token count."""
        toks = _TOKEN_RX.findall(text)
        if not toks:
            return 0
        ids = list(map(self._sids.get, toks))
        if None in ids:
            for i, sid in enumerate(ids):
                if sid is None:
                    tok = toks[i]
                    found = self._sids.get(tok)
                    ids[i] = found if found is not None else self._new_surface(tok)
        self._b_sid.extend(ids)  # type: ignore[arg-type]
        self._b_chunks.append(chunk)
        self._b_counts.append(len(ids))
        return len(toks)

    @property
    def pending_tokens(self) -> int:
        return len(self._b_sid) + sum(self._a_counts)

    def _ascii_sids(self) -> np.ndarray:
        """The surface id of every token of the batch's ASCII chunks, in order.

        The translated texts are joined and cut at their spaces with numpy, and Arrow hashes the
        tokens into a dictionary (exact byte equality, in C): the Python dict is asked once per
        distinct token of the batch instead of once per occurrence.
        """
        # Imported here: the query side imports this module for query_terms and must not pay for
        # the indexer's batch code (NumPy and pyarrow.compute cost a direct-mode CLI search ~100 ms).
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self._a_text:
            return np.zeros(0, np.int64)
        buf = np.frombuffer(b" ".join(self._a_text), np.uint8)
        word = buf != 32
        edges = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        offsets = np.zeros(len(starts) + 1, np.int64)
        np.cumsum(np.flatnonzero(edges == -1) - starts, out=offsets[1:])
        if len(starts) != sum(self._a_counts):
            raise AssertionError("the ASCII chunks were cut into other tokens than bytes.split gave")
        toks = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts),
                                                [None, pa.py_buffer(offsets), pa.py_buffer(buf[word])])
        enc = pc.dictionary_encode(toks)
        distinct = enc.dictionary.to_pylist()
        ids = list(map(self._sids.get, distinct))
        if None in ids:
            for i, sid in enumerate(ids):
                if sid is None:
                    ids[i] = self._new_surface(distinct[i])
        out: np.ndarray = np.asarray(ids, dtype=np.int64)[enc.indices.to_numpy(zero_copy_only=False)]
        return out

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's postings (chunk uint32, term int64, tf uint16), in runs of ``term >> BUCKET_SHIFT``
        ascending and by chunk within each run; the batch is cleared."""
        import numpy as np

        a_sid = self._ascii_sids()
        start, count, flat, hashes = (np.frombuffer(self._start, np.int64), np.frombuffer(self._count, np.int64),
                                      np.frombuffer(self._flat, np.int64), np.frombuffer(self._tid_hash, np.int64))
        sid = np.concatenate([np.array(self._b_sid, dtype=np.int64), a_sid])
        chunk = np.repeat(np.array(self._b_chunks + self._a_chunks, dtype=np.int64),
                          np.array(self._b_counts + self._a_counts, dtype=np.int64))
        # Each token's terms: its surface's first term, then the further ones of the surfaces with
        # several (one token in eight) -- the order does not matter, the keys are sorted below.
        n = count[sid]
        first = start[sid]
        if not bool(n.all()):
            held = n > 0  # a surface of no term at all ("+", "#")
            first, chunk, n = first[held], chunk[held], n[held]
        more = np.flatnonzero(n > 1)
        key = (chunk << 32) | flat[first]
        if len(more):
            extra = n[more] - 1
            rows = np.repeat(more, extra)
            within = np.arange(1, len(rows) + 1) - np.repeat(np.cumsum(extra) - extra, extra)
            key = np.concatenate([key, (chunk[rows] << 32) | flat[first[rows] + within]])
        # np.unique's counts, by a stable sort: the keys come in runs of ascending chunks (the
        # regex-path chunks, then the ASCII ones), which timsort merges in linear time -- 2.2x
        # faster than np.unique's quicksort on a bulk batch (bench/README.md).
        key.sort(kind="stable")
        opens = np.empty(len(key), bool)  # where a run of equal keys starts
        opens[:1] = True
        np.not_equal(key[1:], key[:-1], out=opens[1:])
        at = np.flatnonzero(opens)
        uniq, tf = key[at], np.diff(at, append=len(key))
        terms = hashes[uniq & 0xFFFFFFFF]
        # Ordered by the term's top six bits (stably: by chunk within each of those 64 ranges). A bulk
        # batch's postings then fill DuckDB row groups that each span a few ranges, and a merge that
        # sorts in term ranges (indexer/segments.py term_ranges) skips most row groups outside its
        # range by their min/max: at 1M messages the final sort took 10.2 s instead of 12.0.
        order = np.argsort((terms >> BUCKET_SHIFT).astype(np.int8), kind="stable")
        out = ((uniq[order] >> 32).astype(np.uint32), terms[order],
               np.minimum(tf[order], 65535).astype(np.uint16))
        del start, count, flat, hashes  # the arrays may grow again only once no view is left
        self._reset_batch()
        if len(self._count) > _TABLE_MAX:
            self._reset_tables()
        return out

    def drain_new_terms(self) -> list[str]:
        out = self.new_terms
        self.new_terms = []
        return out


def query_terms(text: str) -> list[str]:
    """The terms a query asks for, in order, without duplicates (whole words stemmed, CJK bigrams)."""
    return list(dict.fromkeys(stem(w) for w in query_words(text)))


def query_words(text: str) -> list[str]:
    """The query's words as written (lower-cased, not stemmed), in order, without duplicates."""
    seen: dict[str, None] = {}
    for token in _TOKEN_RX.findall(normalize(text)):
        if _CJK_RX.search(token) is None:
            seen.setdefault(token.lower(), None)
            continue
        for piece in _CJK_SPLIT_RX.split(token):
            piece = piece.strip("_")
            if not piece:
                continue
            if _CJK_RX.match(piece):
                grams = [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]
                for g in grams:
                    seen.setdefault(g, None)
            else:
                seen.setdefault(piece.lower(), None)
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
    """All index terms one surface token produces: the word and its identifier parts (stemmed),
    or CJK n-grams."""
    return [t for t in dict.fromkeys(stem(w) for w in surface_terms(token)) if t]


def surface_terms(token: str) -> list[str]:
    """The words one surface token holds, as written (lower-cased, not stemmed): the word and its
    identifier parts, or CJK n-grams."""
    if _CJK_RX.search(token) is None:
        low = token.lower()
        return [low, *(p for p in _word_parts(token) if p != low)]
    out: list[str] = []
    for piece in _CJK_SPLIT_RX.split(token):
        if not piece or piece == "_":
            continue
        if _CJK_RX.match(piece):
            out += _cjk_terms(piece)
        else:
            out += surface_terms(piece.strip("_"))
    return [t for t in dict.fromkeys(out) if t]


def chunk_text(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Cut text into chunks of at most ``limit`` characters, at whitespace when possible.

    A phrase spanning two chunks is not matched as a phrase (docs/contract.md §2); each word still is.
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

    Lines longer than ``TOOL_LINE_MAX_CHARS`` are removed (not searchable, docs/contract.md §2) and the
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
