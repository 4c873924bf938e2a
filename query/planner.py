"""The lexical planner: the route cascade phrase -> all -> typo -> any, term statistics, typo repair.

Each route is tried in turn and the first with any match at all answers, whatever page was asked
for, so that every page of one query comes from the same route:

* ``phrase`` -- the query's words in order, whole (only for a query of several words);
* ``all`` -- every term in one chunk;
* ``typo`` -- as ``all``, with words the index has never seen replaced by their closest indexed
  word (short queries only);
* ``any`` -- any of the telling words (not function words, not ubiquitous ones).
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from aivault.query import bm25, sql
from aivault.query.records import Plan, Row, Snapshot
from aivault.query.request import SearchRequest
from aivault.text import FUNCTION_WORDS, VOCAB_MAX_CHARS, iter_tokens, normalize, query_terms, stem, term_hash

# Typo repair is tried for queries of at most this many terms.
TYPO_MAX_TERMS = 3
# A question asks in words, not for them: its answer rarely holds the question's words in order, or
# all of them in one chunk (LoCoMo dev: 0.876 R@5 through the cascade, see bench/README.md), so it
# is ranked by any-word BM25 from the start. A question ends with "?" or opens with a wh-word, and
# has at least QUESTION_MIN_TELLING words that are not function words; a quoted query never is one.
QUESTION_WORDS = frozenset(["what", "when", "where", "who", "whom", "whose", "which", "why", "how"])
QUESTION_MIN_TELLING = 2


def rank(cur: duckdb.DuckDBPyConnection, req: SearchRequest, snap: Snapshot, offset: int,
         count: int) -> tuple[Plan, list[Row]]:
    """``count`` sessions from ``offset`` on, by the first route that matches anything."""
    terms = query_terms(req.text)
    filt_sql, filt_args = bm25.filter_clause(req)
    if not terms:
        if not req.operators:
            return Plan("empty", []), []
        plan = Plan("operators", [])
        plan.tried.append("operators")
        statement = sql.SELECT_FILTERED_SESSIONS.format(filters=filt_sql)
        return plan, [(int(a), float(b), None) for a, b, _ in
                      cur.execute(statement, [*filt_args, count, offset]).fetchall()]
    hashes = {t: term_hash(t) for t in terms}
    sdf: dict[int, int] = {}
    question = is_question(req.text, terms)
    # A question goes straight to any-word ranking: its session frequencies are read with the rest.
    df = document_frequencies(cur, snap, list(hashes.values()), sdf if question else None)
    tried: list[str] = []
    phrase = phrase_pattern(req.text) if len(terms) > 1 else None
    routes = ["any"] if question else ["phrase", "all", "typo", "any"] if phrase else ["all", "typo", "any"]
    repaired: dict[str, str] = {}
    memo: dict[str, Any] = {}  # the phrase route's all-terms candidates, reused by "all"
    evidence: dict[int, tuple[Any, ...]] = {}  # chunk rows the phrase route read, for every route's page
    for route in routes:
        if route == "any" and len(terms) == 1 and not repaired:
            break  # the same as "all" for a single known term
        if route == "typo":
            # In a long description an unknown word is more likely absent than misspelled, and
            # scanning the vocabulary costs: repair only short queries.
            missing = [t for t in terms if df.get(hashes[t], 0) == 0] if len(terms) <= TYPO_MAX_TERMS else []
            repaired = repair(cur, snap, missing) if missing else {}
            if not repaired:
                continue
            for new in repaired.values():
                hashes[stem(new)] = term_hash(stem(new))  # the vocabulary keeps words as written
            df.update(document_frequencies(cur, snap, [hashes[stem(n)] for n in repaired.values()]))
        tried.append(route)
        use = [stem(repaired[t]) if t in repaired else t for t in terms] if route in ("typo", "any") else terms
        if route == "any":
            # Any-word matching on "the" or "my" alone is noise: keep the words that say something.
            use = [t for t in use if t not in FUNCTION_WORDS] or use
        present = {t: hashes[t] for t in dict.fromkeys(use) if df.get(hashes[t], 0) > 0}
        require_all = route in ("phrase", "all", "typo")
        if not present or (require_all and len(present) < len(dict.fromkeys(use))):
            continue
        if route == "any" and any(h not in sdf for h in present.values()):
            # Fell through the strict routes: the session frequencies the any-word score needs.
            document_frequencies(cur, snap, [h for h in present.values() if h not in sdf], sdf)
        plan = Plan(route, list(present), tried=list(tried), repaired=dict(repaired), evidence=evidence)
        args = (cur, req, snap, plan, present, df, filt_sql, filt_args)
        pat = phrase if route == "phrase" else None
        rows = bm25.score(*args, offset, count, require_all=require_all, phrase=pat, memo=memo, sdf=sdf)
        # A route answers when it has any match at all, whatever page was asked for.
        if rows or (offset > 0 and bm25.score(*args, 0, 1, require_all=require_all, phrase=pat, memo=memo,
                                              sdf=sdf)):
            return plan, rows
    return Plan(tried[-1] if tried else "all", terms, tried=tried, repaired=repaired), []


def is_question(text: str, terms: list[str]) -> bool:
    """A natural-language question (see QUESTION_WORDS): ranked by any-word BM25 from the start."""
    stripped = text.strip()
    if not stripped or '"' in stripped or "`" in stripped:
        return False
    return question_shaped(stripped, terms)


def question_shaped(text: str, terms: list[str]) -> bool:
    """Ends with "?" or opens with a wh-word, with QUESTION_MIN_TELLING telling words -- quotes or
    not (a question may name a title: 'what is "Little Women" about?')."""
    stripped = text.strip()
    words = [m.group(0).lower() for m in iter_tokens(normalize(stripped))]
    if not words or not (stripped.endswith("?") or words[0] in QUESTION_WORDS):
        return False
    return sum(1 for t in terms if t not in FUNCTION_WORDS) >= QUESTION_MIN_TELLING


def repair(cur: duckdb.DuckDBPyConnection, snap: Snapshot, missing: list[str]) -> dict[str, str]:
    """Closest indexed words to query words the index has never seen (typo repair)."""
    out: dict[str, str] = {}
    for word in missing:
        cands = closest(vocab_neighbours(cur, word))
        if not cands:
            continue
        dfs = document_frequencies(cur, snap, [term_hash(stem(c)) for c in cands])
        chosen = pick_repair(cands, {c: dfs.get(term_hash(stem(c)), 0) for c in cands})
        if chosen is not None:
            out[word] = chosen
    return out


# The vocabulary's neighbours a repair chooses among (SELECT_VOCAB_NEIGHBOURS's LIMIT).
NEIGHBOURS_MAX = 20


def vocab_neighbours(cur: duckdb.DuckDBPyConnection, word: str) -> list[tuple[str, int]]:
    """The vocabulary's words within the edit distance typo repair allows of ``word`` (a query term), with
    their distances: the NEIGHBOURS_MAX first by (distance, word); none for a word repair leaves alone."""
    if len(word) < 4 or len(word) > VOCAB_MAX_CHARS or not word.isalpha():
        return []
    dist = 1 if len(word) <= 5 else 2
    rows = cur.execute(sql.SELECT_VOCAB_NEIGHBOURS,
                       [word, len(word) - dist, len(word) + dist, word[0], word[1], dist]).fetchall()
    return [(str(t), int(d)) for t, d in rows]


def closest(rows: list[tuple[str, int]]) -> list[str]:
    """The candidates of a repair: those of ``rows`` (by distance, then word) at the smallest distance."""
    if not rows:
        return []
    best_d = rows[0][1]
    return [t for t, d in rows if d == best_d]


def pick_repair(cands: list[str], dfs: dict[str, int]) -> str | None:
    """The candidate whose stem the most chunks hold (``dfs``: by candidate), then the first alphabetically;
    None when none is held at all."""
    ranked = sorted(cands, key=lambda c: (-dfs.get(c, 0), c))
    return ranked[0] if dfs.get(ranked[0], 0) > 0 else None


def document_frequencies(cur: duckdb.DuckDBPyConnection, snap: Snapshot, hashes: list[int],
                         sessions: dict[int, int] | None = None) -> dict[int, int]:
    """Chunks holding each term hash, over every segment of the snapshot (absent terms are missing);
    ``sessions``, when given, gets the number of sessions holding each."""
    if snap.postings is not None:
        found: dict[int, int] = snap.postings.document_frequencies(hashes, sessions)
        return found
    if sessions is None:
        branches = [bm25.term_scan(name, state, hashes, "term") for name, state in snap.segments]
        union = " UNION ALL ".join(b for group in branches for b in group)
        return {int(t): int(n) for t, n in cur.execute(sql.SELECT_DF.format(scans=union)).fetchall()}
    branches = [bm25.term_scan(name, state, hashes, "term, sess") for name, state in snap.segments]
    union = " UNION ALL ".join(b for group in branches for b in group)
    rows = cur.execute(sql.SELECT_DF_SESSIONS.format(scans=union)).fetchall()
    sessions.update({int(t): int(s) for t, _, s in rows})
    return {int(t): int(n) for t, n, _ in rows}


def phrase_pattern(text: str) -> str | None:
    r"""A pattern matching the query's words in order, whole, separated only by non-word characters.

    It opens with the first word, and checks the character before it afterwards (a fixed-width look
    behind over that word): the same matches as ``(?<!\w)first...``, but Python's engine can then
    look for the first word's text instead of trying the look-behind at every position (~3x faster
    over a phrase's 100 candidate chunks)."""
    words = [m.group(0) for m in iter_tokens(normalize(text))]
    if len(words) < 2:
        return None
    first = re.escape(words[0])
    return first + r"(?<!\w" + first + ")" + "".join(r"\W+" + re.escape(w) for w in words[1:]) + r"(?!\w)"
