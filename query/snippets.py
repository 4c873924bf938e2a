"""Evidence snippets: a short window of the best chunk with matches wrapped in ``[[`` ``]]``.

Only real matches are marked. A transcript's own ``[[`` or ``]]`` (bash ``[[ -f x ]]``, numpy
``[[1, 2]]``) is kept readable but broken with a zero-width space (``[\u200b[``) so that no
client can mistake it for a mark. Cutting never splits a mark; an enormous matched token is
shortened inside its mark (``[[abc…xyz]]``) and the snippet counts as cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from aivault.text import iter_tokens, normalize, token_terms

SNIPPET_CHARS = 240
MAX_SNIPPET_CHARS = 600
MAX_MARK_CHARS = 120
_ZWSP = "\u200b"
_WS = re.compile(r"\s+")
_MAX_SPANS = 400
_ASCII_WORD = re.compile(r"\w+", re.ASCII)
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_WORD_TAIL = re.compile(r"\w*(?:\+\+)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    cut: bool


def _escape(text: str) -> str:
    if "[[" not in text and "]]" not in text:
        return text
    return text.replace("[[", f"[{_ZWSP}[").replace("]]", f"]{_ZWSP}]")


class Matcher:
    """Which surface tokens match a query's terms, remembered per token: one per page of hits
    (every snippet of a page marks the same terms)."""

    __slots__ = ("_probe", "_seen", "ascii_words", "probes_rx", "terms", "tokens_rx")

    def __init__(self, terms: set[str]) -> None:
        self.terms = terms
        # Every term an ASCII token yields (the word and its identifier parts, stemmed) is a
        # substring of its lower-cased form, but for a stem's final y turned i ("happy" ->
        # "happi"): a token holding none of these probes is ruled out without cutting it into terms.
        probes = sorted({t[:-1] if t.endswith("i") else t for t in terms}, key=lambda t: (-len(t), t))
        self._probe = re.compile("|".join(map(re.escape, probes))) if probes and all(probes) else None
        # In ASCII text without "#" (which the tokenizer treats specially), the tokens that can
        # match are exactly the whole word runs (with a "++"/"#" suffix) holding a probe: one
        # regex finds them without visiting every token.
        self.ascii_words = self._probe is not None and all(p.isascii() for p in probes)
        # Faster still when every probe is made of word characters: find the probes themselves in the
        # lower-cased text (a literal alternation, ~4x faster than the regex below) and widen each to
        # the word run around it -- the same spans, since a probe never crosses a non-word character.
        self.probes_rx = re.compile("|".join(map(re.escape, probes))) \
            if self.ascii_words and all(_ASCII_WORD.fullmatch(p) for p in probes) else None
        # Compiled only where the probes' own matches cannot stand in (~0.17 ms a new query).
        self.tokens_rx = re.compile(r"(?<!\w)\w*(?:" + "|".join(map(re.escape, probes)) + r")\w*(?:\+\+)?",
                                    re.IGNORECASE | re.ASCII) if self.ascii_words and self.probes_rx is None else None
        self._seen: dict[str, tuple[str | None, bool]] = {}

    def hit(self, token: str) -> tuple[str | None, bool]:
        """The query term a surface token matches (or None), and whether only a CJK part of it is marked."""
        found = self._seen.get(token)
        if found is None:
            found = self._seen[token] = self._hit(token)
        return found

    def _hit(self, token: str) -> tuple[str | None, bool]:
        terms = self.terms
        if token.isascii():
            low = token.lower()
            if low in terms:
                return low, False
            if self._probe is not None and self._probe.search(low) is None:
                return None, False
        produced = token_terms(normalize(token))
        hit = next((t for t in produced if t in terms), None)
        return hit, hit is not None and len(produced) > 1 and len(produced[0]) == 2 and hit in token


def _word_spans(text: str, probes: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """The spans ``tokens_rx`` finds (whole ASCII word runs holding a probe, with a "++" suffix), from
    the probes' own matches in the lower-cased text."""
    low = text.lower()
    end = -1
    for m in probes.finditer(low):
        s = m.start()
        if s < end:
            continue  # another probe inside the word just taken
        start = s
        while start and low[start - 1] in _WORD_CHARS:
            start -= 1
        tail = _WORD_TAIL.match(low, m.end())
        end = tail.end() if tail is not None else m.end()
        yield start, end


def _spans(text: str, matcher: Matcher) -> list[tuple[int, int, str]]:
    """(start, end, term) for every token of ``text`` that matches a query term."""
    out: list[tuple[int, int, str]] = []
    hit_of = matcher.hit
    fast = matcher.ascii_words and "#" not in text and text.isascii()
    if fast and matcher.probes_rx is not None:
        found: Iterator[tuple[int, int]] = _word_spans(text, matcher.probes_rx)
    else:
        found = (m.span() for m in (matcher.tokens_rx.finditer(text) if fast  # type: ignore[union-attr]
                                    else iter_tokens(text)))
    for start, end in found:
        token = text[start:end]
        hit, partial = hit_of(token)
        if hit is None:
            continue
        if partial:
            # A CJK run: mark only the part the query asked for, not the whole run.
            i = token.find(hit)
            out.append((start + i, start + i + len(hit), hit))
        else:
            out.append((start, end, hit))
        if len(out) >= _MAX_SPANS:
            break
    return out


def _best_window(spans: list[tuple[int, int, str]], n: int, width: int) -> tuple[int, int]:
    """The window of ``width`` characters showing the most distinct terms: for each span in turn,
    the window opening a quarter width before it, counting that span and the later ones it holds
    whole; the first best wins. Spans are in order and do not overlap, so the spans a window holds
    are consecutive and both ends only move forward: one pass with a count per term (a page of
    common words has hundreds of spans per chunk)."""
    if not spans or n <= width:
        return 0, min(n, width)
    best_score, best_i = (0, 0), 0
    held: dict[str, int] = {}
    j = 0  # spans[i:j] are the ones the current window holds
    for i, (s, _, _) in enumerate(spans):
        lo = max(0, s - width // 4)
        hi = lo + width
        j = max(j, i)
        while j < len(spans) and spans[j][1] <= hi:
            t = spans[j][2]
            held[t] = held.get(t, 0) + 1
            j += 1
        score = (len(held), -lo)
        if score > best_score:
            best_score, best_i = score, i
        if j > i:  # span i leaves before the next window
            t = spans[i][2]
            if held[t] == 1:
                del held[t]
            else:
                held[t] -= 1
    lo = max(0, spans[best_i][0] - width // 4)
    lo = min(lo, max(0, n - width))  # near the end: show a full window, not a short tail
    return lo, min(n, lo + width)


def make_snippet(text: str, terms: set[str] | Matcher, width: int = SNIPPET_CHARS) -> Snippet:
    """The snippet of ``text`` marking ``terms`` (a Matcher shares the token tests across a page)."""
    spans = _spans(text, terms if isinstance(terms, Matcher) else Matcher(terms))
    lo, hi = _best_window(spans, len(text), width)
    # Never cut a mark: widen the window to whole spans that straddle its edges.
    for s, e, _ in spans:
        if s < lo < e:
            lo = s
        if s < hi < e:
            hi = e
    cut = lo > 0 or hi < len(text)
    parts: list[str] = []
    pos = lo
    for s, e, _ in spans:
        if s < lo or e > hi or s < pos:
            continue
        before = _escape(_WS.sub(" ", text[pos:s]))
        if before.endswith("["):
            before += _ZWSP  # "[" + "[[" would read as a mark opening early
        parts.append(before)
        token = text[s:e]
        if len(token) > MAX_MARK_CHARS:
            token = token[: MAX_MARK_CHARS // 2] + "…" + token[-(MAX_MARK_CHARS // 2 - 1):]
            cut = True
        parts.append("[[" + _escape(token) + "]]")
        pos = e
        if text[pos:pos + 1] == "]":
            parts.append(_ZWSP)
    parts.append(_escape(_WS.sub(" ", text[pos:hi])))
    body = "".join(parts).strip()
    if len(body) > MAX_SNIPPET_CHARS:
        body = _trim_outside_marks(body, MAX_SNIPPET_CHARS)
        cut = True
    if lo > 0:
        body = "…" + body
    if hi < len(text):
        body = body + "…"
    return Snippet(body, cut)


def _trim_outside_marks(body: str, limit: int) -> str:
    """Shorten to about ``limit`` characters without ending inside a mark."""
    cut_at = limit
    open_at = body.rfind("[[", 0, cut_at)
    close_at = body.rfind("]]", 0, cut_at)
    if open_at > close_at:  # the cut would fall inside a mark: end before it opens
        cut_at = open_at
    return body[:cut_at].rstrip()
