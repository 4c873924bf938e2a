"""Automatic checks that each labelled query is what its kind claims to be.

The words a session "contains" are the terms aivault's own tokenizer produces from the messages
aivault's own parsers extract from the rendered transcript, in *both* agents' formats (an incident
may be written as either, and each format adds a few words of its own: ``Bash``/``command`` for
Claude, ``shell``/``workdir``/``apply_patch`` for Codex). Whole words and identifier parts both
count, so ``fetchUserProfile`` forbids "user" and "profile" in a paraphrase.

* exact: every query term occurs in the session;
* paraphrase: no query content word (after lower-casing and dropping STOP_WORDS) occurs in the
  session, nor any word sharing its first five letters with it ("froze" clashes with "frozen").
  Shorter words are held to the same idea (see ``_related``), so inflections cannot slip through
  either way;
* mixed: exactly one whitespace-delimited term of the query occurs in the session verbatim (all
  its words), and the rest of the query obeys the paraphrase rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aivault.scanner.model import Message
from aivault.scanner.parsers.claude import ClaudeParser
from aivault.scanner.parsers.codex import CodexParser
from aivault.text import FUNCTION_WORDS, iter_tokens, normalize, query_words, surface_terms
from bench.quality.incident import Step
from bench.quality.render import render_claude, render_codex

# Function words only (aivault.text.FUNCTION_WORDS), so nothing that carries topic meaning
# escapes the check.
STOP_WORDS: frozenset[str] = FUNCTION_WORDS

_PREFIX = 5
_CHECK_START = datetime(2026, 1, 1, tzinfo=UTC)


def parsed_messages(lines: Sequence[bytes], agent: str, name: str) -> list[Message]:
    """Messages aivault's parser for ``agent`` extracts from these lines."""
    parser: ClaudeParser | CodexParser = ClaudeParser(name) if agent == "claude" else CodexParser(name)
    out: list[Message] = []
    for line in lines:
        out += parser.feed(line)
    return out


def text_terms(texts: Iterable[str]) -> set[str]:
    """The words the index holds (whole words and identifier parts, lower-cased, as written: the
    rules compare words, so the index's stemming does not change which queries pass) of the texts."""
    terms: set[str] = set()
    for text in texts:
        for match in iter_tokens(normalize(text)):
            terms.update(surface_terms(match.group(0)))
    return terms


def session_terms(steps: Sequence[Step], cwd: str, branch: str = "main") -> set[str]:
    """Every term the index could hold for this session, whichever agent's format it is written in."""
    sid = "00000000-0000-4000-8000-000000000000"
    claude = parsed_messages(render_claude(steps, sid, cwd, branch, _CHECK_START), "claude", f"/c/{sid}.jsonl")
    codex = parsed_messages(render_codex(steps, sid, cwd, branch, _CHECK_START), "codex",
                            f"/x/rollout-2026-01-01T00-00-00-{sid}.jsonl")
    return text_terms(m.text for m in [*claude, *codex])


def content_words(query: str) -> list[str]:
    """The query's terms minus stop words (the words a paraphrase must not share)."""
    return [w for w in query_words(query) if w not in STOP_WORDS]


_SUFFIXES = ("s", "es", "d", "ed", "ing", "er", "ers")


def _inflects(short: str, word: str) -> bool:
    """``word`` is ``short`` plus a common English ending (doubling a final consonant allowed)."""
    return any(word in (short + suffix, short + short[-1] + suffix) for suffix in _SUFFIXES)


def _related(a: str, b: str) -> bool:
    """Same word, or the same stem as far as a five-letter prefix can tell.

    Words of four letters or more clash when they share their first five letters, or when the
    shorter one (four letters) is a prefix of the other ("lock"/"locks", "test"/"testing").
    Words of three letters or fewer are too short for prefixes ("per" is not "person"), so they
    clash only with their inflections ("log"/"logs"/"logging", "fix"/"fixed").
    """
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) <= 3:
        return _inflects(short, long_)
    n = min(_PREFIX, len(short))
    return a[:n] == b[:n]


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str  # why it was rejected; empty when accepted


def shared_words(query: str, terms: set[str]) -> list[str]:
    """Query content words that occur in ``terms`` or share a five-letter prefix with one of them."""
    by_head: dict[str, list[str]] = {}
    # A function word in the session ("when") says nothing about its topic, so it forbids nothing
    # ("whenever" stays allowed).
    for t in terms - STOP_WORDS:
        by_head.setdefault(t[:1], []).append(t)
    clashes: list[str] = []
    for w in content_words(query):
        hit = next((t for t in by_head.get(w[:1], ()) if _related(w, t)), None)
        if hit is not None:
            clashes.append(w if hit == w else f"{w}~{hit}")
    return clashes


def check_query(kind: str, query: str, terms: set[str]) -> Verdict:
    """Whether ``query`` satisfies the rule of its ``kind`` against the session's ``terms``."""
    words = content_words(query)
    if not words:
        return Verdict(False, "no content words")
    if kind == "exact":
        missing = [w for w in query_words(query) if w not in terms]
        return Verdict(not missing, f"not in the session: {', '.join(missing)}" if missing else "")
    if kind == "paraphrase":
        clashes = shared_words(query, terms)
        return Verdict(not clashes, f"shares {', '.join(clashes)}" if clashes else "")
    if kind == "mixed":
        # One whitespace-delimited term ("pytest-asyncio", "max.poll.records") is taken from the
        # session verbatim; everything else must obey the paraphrase rule.
        anchors: list[str] = []
        context_clashes: list[str] = []
        context = 0
        for chunk in query.split():
            chunk_words = content_words(chunk)
            if not chunk_words:
                continue
            if all(w in terms for w in chunk_words):
                anchors.append(chunk)
            else:
                context += 1
                context_clashes += shared_words(chunk, terms)
        if len(anchors) != 1:
            return Verdict(False, f"needs exactly one session term, has {anchors or 'none'}")
        if context_clashes:
            return Verdict(False, f"context shares {', '.join(context_clashes)}")
        if not context:
            return Verdict(False, "nothing paraphrased")
        return Verdict(True, "")
    raise ValueError(f"unknown query kind {kind!r}")
