"""One search over several indexes (hosts) at once, ranked as one index over all of them would rank it.

BM25 depends on collection statistics (chunks, their mean length, each term's document frequency, the
sessions any-word ranking takes session idf over), which differ from host to host: scores computed with
each host's own statistics do not compare. So the search runs as distributed search engines run it
(issue 35, item 2): a first round gathers every host's statistics for the query, the coordinator sums
them and decides the route as one index would, and then every host ranks its own sessions with the
summed statistics. Every value handed between the steps is plain data (dicts, lists, str, int, float,
bool, None; terms as strings), so each step can cross the wire.

The steps, on each host (``engine``: that host's query/engine.Engine) and at the coordinator::

    stats = [query_stats(engine, req) for each host]                   # round 1
    plan = combine(stats, req)
    while plan["next"] != "page":
        if plan["next"] == "termStats":                                # typo repair's candidates
            extra = [term_stats(engine, req, plan) for each host]
        else:  # "probe": the route's candidates or its maxima, scored with the summed statistics
            found = [probe(engine, req, plan) for each host]
        plan = combine(stats, req, term_stats=extra, probes=found)     # the latest answers of each kind
    pages = [page(engine, req, plan, offset_h, count) for each host]   # last round
    rows = merge(pages, req)

Rounds per route (each a request to every host): ``all`` 2 (stats, page); ``phrase`` 2 when all hosts
together have at most PHRASE_CANDIDATES chunks holding every term (each host checks its own in round 1),
else 3 (stats, probe, page: whether the phrase is found among the best PHRASE_CANDIDATES chunks of all
hosts by the summed statistics) -- and a query of several words whose phrase is not found takes the
same rounds to reach ``all``; ``any`` 3 (stats, probe, page: the best session and chunk BM25 of all
hosts, which scores are relative to);
``typo`` 4 (stats, termStats, probe, page: the closest words' document frequencies over every host's
vocabulary, then whether the repaired words match, with the maxima of the any-word route that follows if
they do not); operators only (no words) 2, and a query nothing can match 1 (``route`` "none": no page
round is needed). A host whose generation moved between rounds answers ``{"stale": true}`` and the
coordinator starts again; one whose index is not ready answers ``{"unavailable": "not-ready"}`` to
round 1, and ``combine`` leaves it (and any stale answer) out: the merge is then over the hosts that
answered, and later rounds sent to a host left out answer stale.

Hybrid: when one index would fuse lexical and vector rankings (query/hybrid.py), the plan's ``family`` is
"hybrid" with the ``model`` whose vectors take part (``_family``), and the page round is replaced by two:
``candidates`` (each host's best HYBRID_CANDIDATES on the lexical route, ranked with the summed statistics,
and its VECTOR_CANDIDATES nearest chunks when its vectors are the plan's model), ``fuse_hosts`` at the
coordinator (the union index's fusion: the best HYBRID_CANDIDATES of all hosts, the VECTOR_CANDIDATES
nearest chunks of all hosts), and ``hits_of`` for each host's sessions on the fused page.
tests/system/test_federated_hybrid.py compares it with one index's hybrid search.

How the route is decided, as query/planner.rank decides it over one index: a route is taken when it has
any match at all, in the cascade phrase -> all -> typo -> any (a question: any only). Round 1 tells,
per host, whether a chunk holds every query term under the request's filters and scope (``allMatch``):
``all`` matches when any host says so, and ``phrase`` can only match then (a phrase match holds every
term). Typo repair works on the words no host has indexed: each host lists its vocabulary's neighbours
of those words (``neighbours``), the coordinator keeps the NEIGHBOURS_MAX closest over all of them,
asks every host for the document frequencies of their stems (``termStats``) and picks as
planner.repair picks over one vocabulary (lowest distance, then most chunks, then alphabetical).

Exact: on the lexical routes and the operators-only listing, when every host answers, the merged rows
are the sessions an index over the union of the hosts' transcripts returns, in the same order, with
the same scores (floating-point sums may differ in the last bits where DuckDB adds in another order:
the scores are rounded to 6 decimals, so at worst 1e-6). tests/system/test_federated.py compares them
with such an index on every route, both sorts, filters and pages, on the SQL path and the NumPy path.
Where it can differ:

* exact ties across hosts: a single index breaks equal (score, updatedAt) by its internal session id,
  ``merge`` by the host's position in the list, then the host's own order; likewise the phrase route's
  PHRASE_CANDIDATES-th candidate when several chunks tie at its score (one index takes the lower chunk
  id, here the earlier host);
* terms with more than TERM_CAP (50,000) postings on all hosts together: one index ranks the best
  TERM_CAP of them over all segments, here each host ranks its own best TERM_CAP, or all of its own
  when it has fewer (``capped`` is reported when a host caps);
* a session indexed on two hosts (the same transcript on both) is two rows here, one in a union index;
* postings of sessions deleted since their segment was written count in a term's document frequency
  on the host that holds them, as they do in one index; an index rebuilt over the union has none;
* the debug ranks of any-word ranking (plan.ranks) are each host's own.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import duckdb

from aivault.query import bm25, hits, planner
from aivault.query.engine import Engine
from aivault.query.hybrid import (
    HYBRID_CANDIDATES,
    SIMILARITY_FLOOR,
    VECTOR_CANDIDATES,
    fuse,
    prefers_semantic,
    vector_sessions,
)
from aivault.query.planner import NEIGHBOURS_MAX, TYPO_MAX_TERMS, closest, pick_repair
from aivault.query.records import Plan, Row, Snapshot
from aivault.query.request import SearchRequest
from aivault.query.weights import PHRASE_CANDIDATES
from aivault.text import FUNCTION_WORDS, TOKENIZER_VERSION, query_terms, stem, term_hash

# What ``combine`` asks for next.
NEXT_PAGE = "page"
NEXT_TERM_STATS = "termStats"
NEXT_PROBE = "probe"


# --- round 1 ------------------------------------------------------------------------------------

def query_stats(engine: Engine, req: SearchRequest) -> dict[str, Any]:
    """This host's statistics for ``req``, read in one snapshot.

    ``{identity, generation, chunks, totalLength, sessions, df: {term: chunks holding it},
    sdf: {term: sessions holding it}, sdfRead, allMatch, neighbours: {word: [[word, distance, df]]}}``:
    the terms are query_terms(req.text) (stems); a term this host has no posting of is left out of df.
    ``sdf`` is read when any-word ranking may need it (a question; several terms and no chunk here
    holding them all), ``sdfRead`` says whether it was. ``allMatch``: a chunk here holds every term
    under the filters and scope (None for a question and a query without terms). ``neighbours``: for the
    words this host has never indexed, when typo repair may run, its vocabulary's closest words
    (planner.vocab_neighbours) with the chunks holding each one's stem here. ``phrase`` (a query of
    several words whose terms are all here): ``{candidates, found}``, this host's chunks holding every
    term, counted up to PHRASE_CANDIDATES + 1, and whether the phrase is in one of them (only when
    there are at most PHRASE_CANDIDATES).
    """
    # Asked first, outside the snapshot: in a read-only process the first call loads the vectors and the model.
    model = engine.vector_model() if prefers_semantic(req.text) and query_terms(req.text) else None
    with engine.reading() as (cur, snap):
        if snap.tokenizer != TOKENIZER_VERSION:
            return _unavailable(snap)
        return {**_stats(cur, snap, req), "vectorModel": model}


def _stats(cur: duckdb.DuckDBPyConnection, snap: Snapshot, req: SearchRequest) -> dict[str, Any]:
    terms = query_terms(req.text)
    out: dict[str, Any] = {
        "identity": snap.identity, "generation": snap.generation, "chunks": snap.n_chunks,
        "totalLength": _total_length(snap), "sessions": bm25.session_count(cur, snap), "df": {}, "sdf": {},
        "sdfRead": False, "allMatch": None, "neighbours": {}}
    if not terms:
        return out
    hashes = {t: term_hash(t) for t in terms}
    question = planner.is_question(req.text, terms)
    sdf: dict[int, int] = {}
    df = planner.document_frequencies(cur, snap, list(hashes.values()), sdf if question else None)
    here = {t: h for t, h in hashes.items() if df.get(h, 0) > 0}
    read_sdf = question
    if not question:
        matched = False
        if len(here) == len(hashes):
            filt_sql, filt_args = bm25.filter_clause(req)
            matched = bool(bm25.score(cur, req, snap, Plan("all", list(terms)), hashes, df, filt_sql, filt_args,
                                      0, 1, require_all=True))
        out["allMatch"] = matched
        pattern = planner.phrase_pattern(req.text) if len(terms) > 1 else None
        if pattern is not None and len(here) == len(hashes):
            out["phrase"] = _phrase_here(cur, snap, req, hashes, df, pattern)
        # Any-word ranking follows only when no host has such a chunk; a lone term never reaches it unrepaired.
        read_sdf = len(terms) > 1 and not matched
        if len(terms) <= TYPO_MAX_TERMS:
            out["neighbours"] = _neighbours(cur, snap, [t for t in terms if t not in here])
        if read_sdf and here:
            planner.document_frequencies(cur, snap, list(here.values()), sdf)
    out["df"] = {t: int(df[h]) for t, h in here.items()}
    out["sdf"] = {t: int(sdf[h]) for t, h in here.items() if h in sdf}
    out["sdfRead"] = read_sdf
    return out


def _phrase_here(cur: duckdb.DuckDBPyConnection, snap: Snapshot, req: SearchRequest, hashes: dict[str, int],
                 df: dict[int, int], pattern: str) -> dict[str, Any]:
    """This host's phrase candidates (chunks holding every term under the filters and scope), counted up
    to PHRASE_CANDIDATES + 1, and whether the phrase is found in them. Which chunks they are depends on
    the statistics only when there are more than PHRASE_CANDIDATES: up to that, ``found`` holds whatever
    the summed statistics, and the coordinator needs no probe when all hosts' together are that few."""
    filt_sql, filt_args = bm25.filter_clause(req)
    p = Plan("phrase", list(hashes))
    top = bm25.phrase_candidates(cur, req, snap, p, hashes, df, filt_sql, filt_args)
    found = 0 < len(top) <= PHRASE_CANDIDATES and bool(bm25.phrase_matches(cur, p, top, pattern, snap.postings))
    return {"candidates": len(top), "found": found}


def _neighbours(cur: duckdb.DuckDBPyConnection, snap: Snapshot, missing: list[str]) -> dict[str, list[list[Any]]]:
    """For each of ``missing``: its vocabulary neighbours here as [word, distance, chunks holding its stem]."""
    out: dict[str, list[list[Any]]] = {}
    for word in missing:
        rows = planner.vocab_neighbours(cur, word)
        if not rows:
            continue
        dfs = planner.document_frequencies(cur, snap, list({term_hash(stem(c)) for c, _ in rows}))
        out[word] = [[c, d, int(dfs.get(term_hash(stem(c)), 0))] for c, d in rows]
    return out


def _total_length(snap: Snapshot) -> int:
    """The chunks' summed length (meta.sum_dl) from the snapshot's mean: exact below 2**51 tokens."""
    return round(snap.avgdl * snap.n_chunks) if snap.n_chunks else 0


# --- the coordinator's plan ---------------------------------------------------------------------

def combine(stats: list[dict[str, Any]], req: SearchRequest, *, term_stats: list[dict[str, Any]] | None = None,
            probes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The global plan, from every host's ``query_stats`` (in the coordinator's host order) and the
    latest ``term_stats`` and ``probe`` answers, if any. Run again with each new answer: it replays the
    planner's cascade over the summed statistics and stops where it needs to know more.

    ``next``: "page" (``route`` decided: "phrase", "all", "typo", "any", "operators", "empty", or
    "none" when nothing matches), "termStats" (ask every host term_stats for ``ask``) or "probe"
    (ask every host probe for the routes of ``probe``). Always: ``generations`` {identity: generation},
    the summed ``chunks``, ``totalLength``, ``sessions``, ``df`` and ``sdf`` {term: count}, ``terms``
    (those ranked by), ``repaired`` {word: replacement}, ``tried``, ``capped``; with the phrase route
    ``quota`` {identity: candidates}; with the any-word route ``maxima`` [best session BM25, best chunk
    BM25]."""
    stats = [s for s in stats if "unavailable" not in s and not s.get("stale")]
    terms = query_terms(req.text)
    base: dict[str, Any] = {
        "generations": {s["identity"]: s["generation"] for s in stats},
        "chunks": sum(int(s["chunks"]) for s in stats), "totalLength": sum(int(s["totalLength"]) for s in stats),
        "sessions": sum(int(s["sessions"]) for s in stats), "repaired": {}, "tried": [], "capped": False,
        "df": {}, "sdf": {}, **_family(stats, req, terms)}
    if not terms:
        return {**base, "next": NEXT_PAGE, "route": "operators" if req.operators else "empty", "terms": []}
    df = _summed(s["df"] for s in stats)
    sdf = _summed(s["sdf"] for s in stats)
    sdf_read = all(s["sdfRead"] for s in stats)
    asked: set[str] = set()
    if term_stats:
        asked = {str(t) for t in term_stats[0].get("asked", [])}
        df.update({t: 0 for t in asked})
        sdf.update({t: 0 for t in asked})
        df.update(_summed(t["df"] for t in term_stats))
        sdf.update(_summed(t["sdf"] for t in term_stats))
    found = _routes_found(probes)
    n = max(base["chunks"], 1)
    question = planner.is_question(req.text, terms)
    phrase = planner.phrase_pattern(req.text) if len(terms) > 1 else None
    routes = ["any"] if question else ["phrase", "all", "typo", "any"] if phrase else ["all", "typo", "any"]
    all_match = any(bool(s["allMatch"]) for s in stats)
    repaired: dict[str, str] = {}
    tried: list[str] = []

    def plan(next_step: str, route: str, ranked: list[str], **more: Any) -> dict[str, Any]:
        keep = set(ranked) | set(more.pop("keep", []))
        return {**base, "next": next_step, "route": route, "terms": ranked, "repaired": dict(repaired),
                "tried": list(tried), "df": {t: df[t] for t in keep if t in df},
                "sdf": {t: sdf[t] for t in keep if t in sdf}, **more}

    for i, route in enumerate(routes):
        if route == "any" and len(terms) == 1 and not repaired:
            break
        if route == "typo":
            missing = [t for t in terms if df.get(t, 0) == 0] if len(terms) <= TYPO_MAX_TERMS else []
            cands = {w: closest(_merged_neighbours(stats, w)) for w in missing}
            stems = sorted({stem(c) for cs in cands.values() for c in cs})
            if stems and not set(stems) <= asked:
                return plan(NEXT_TERM_STATS, route, [], ask=stems)
            for w, cs in cands.items():
                chosen = pick_repair(cs, {c: df.get(stem(c), 0) for c in cs}) if cs else None
                if chosen is not None:
                    repaired[w] = chosen
            if not repaired:
                continue
        tried.append(route)
        ranked = _ranked(route, terms, repaired, df, n)
        if ranked is None:
            continue
        if route == "all":
            if all_match:
                return plan(NEXT_PAGE, route, ranked)
            continue
        if route == "phrase":
            if not all_match:  # a phrase match is a chunk holding every term
                continue
            few = [s.get("phrase", {}).get("candidates", 0) for s in stats]
            if "phrase" in found:
                quota, matched, capped = _phrase_quota(stats, found["phrase"])
            elif sum(few) <= PHRASE_CANDIDATES:  # every candidate is checked: round 1 told it all
                quota = {s["identity"]: PHRASE_CANDIDATES for s in stats}
                matched, capped = any(bool(s.get("phrase", {}).get("found")) for s in stats), False
            else:
                return plan(NEXT_PROBE, route, ranked, probe=[{"route": route, "terms": ranked}])
            if matched:
                return plan(NEXT_PAGE, route, ranked, quota=quota, capped=capped)
            continue
        if route == "any" and not sdf_read and not set(ranked) <= asked:
            # Not expected (a host reads sessions' frequencies whenever any-word ranking may follow).
            return plan(NEXT_TERM_STATS, route, [], ask=sorted(set(ranked) | asked))
        if route not in found:
            wanted = [{"route": route, "terms": ranked}]
            keep: list[str] = []
            if route == "typo" and routes[i + 1:] == ["any"]:
                # Whether the repaired words match, and the maxima of the any-word ranking that follows if not.
                after = _ranked("any", terms, repaired, df, n)
                if after is not None:
                    wanted.append({"route": "any", "terms": after})
                    keep = after
            return plan(NEXT_PROBE, route, ranked, probe=wanted, keep=keep)
        if route == "typo":
            if any(bool(f.get("matched")) for f in found["typo"]):
                return plan(NEXT_PAGE, route, ranked)
            continue
        maxima = [m["maxima"] for m in found["any"] if m.get("maxima") is not None]
        if maxima:
            return plan(NEXT_PAGE, route, ranked, maxima=[max(float(m[0]) for m in maxima),
                                                         max(float(m[1]) for m in maxima)])
    return plan(NEXT_PAGE, "none", terms)


def _family(stats: list[dict[str, Any]], req: SearchRequest, terms: list[str]) -> dict[str, Any]:
    """``family`` "hybrid" with the ``model`` whose vectors take part, as one index decides it
    (query/hybrid.prefers_semantic) when any host's vectors are ready; else "lexical". Similarities compare
    only between vectors of one model: the model most hosts have ready (a tie: the earliest host's) is
    used, and a host with another model or none contributes lexically."""
    models = [str(s["vectorModel"]) for s in stats if s.get("vectorModel")]
    if not models or not terms or not prefers_semantic(req.text):
        return {"family": "lexical", "model": None}
    count = Counter(models)
    return {"family": "hybrid", "model": max(models, key=lambda m: (count[m], -models.index(m)))}


def _summed(parts: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for t, v in part.items():
            out[str(t)] = out.get(str(t), 0) + int(v)
    return out


def _routes_found(probes: list[dict[str, Any]] | None) -> dict[str, list[dict[str, Any]]]:
    """Each probed route's answers, one per host in the order given."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in probes or []:
        for route, value in p["routes"].items():
            out.setdefault(route, []).append({**value, "identity": p["identity"]})
    return out


def _merged_neighbours(stats: list[dict[str, Any]], word: str) -> list[tuple[str, int]]:
    """The union vocabulary's NEIGHBOURS_MAX closest words to ``word``, by (distance, word), as
    planner.vocab_neighbours reads them from one vocabulary."""
    rows = {(str(c), int(d)) for s in stats for c, d, _ in s["neighbours"].get(word, [])}
    return sorted(rows, key=lambda r: (r[1], r[0]))[:NEIGHBOURS_MAX]


def _ranked(route: str, terms: list[str], repaired: dict[str, str], df: dict[str, int], n: int) -> list[str] | None:
    """The terms ``route`` ranks by, as planner.rank and bm25.score choose them (None: the route cannot
    match): the repaired words on the typo and any-word routes, function words left out of any-word
    ranking, every term required by the strict routes, and very common words left out of any-word
    ranking when others remain (bm25.score's ubiquitous cut)."""
    use = [stem(repaired[t]) if t in repaired else t for t in terms] if route in ("typo", "any") else terms
    if route == "any":
        use = [t for t in use if t not in FUNCTION_WORDS] or use
    wanted = list(dict.fromkeys(use))
    present = [t for t in wanted if df.get(t, 0) > 0]
    if not present or (route != "any" and len(present) < len(wanted)):
        return None
    if route == "any" and len(present) > 1:
        limit = max(bm25.UBIQUITOUS_SHARE * n, bm25.UBIQUITOUS_MIN_DF)
        present = [t for t in present if df.get(t, 0) <= limit] or present
    return present


def _phrase_quota(stats: list[dict[str, Any]], found: list[dict[str, Any]]) -> tuple[dict[str, int], bool, bool]:
    """Of every host's best phrase candidates, the best PHRASE_CANDIDATES over all hosts: how many each
    host checks, whether the phrase is found in any of them, and whether there were more."""
    order = {s["identity"]: i for i, s in enumerate(stats)}
    entries: list[tuple[float, int, int, bool, str]] = []
    more = 0
    for f in found:
        host = str(f["identity"])
        more += len(f["candidates"]) + (1 if f.get("more") else 0)
        entries += [(-float(score), order.get(host, len(order)), pos, bool(hit), host)
                    for pos, (score, hit) in enumerate(f["candidates"])]
    entries.sort()
    taken = entries[:PHRASE_CANDIDATES]
    quota = Counter(e[4] for e in taken)
    return dict(quota), any(e[3] for e in taken), more > PHRASE_CANDIDATES


# --- the rounds after the first -----------------------------------------------------------------

def term_stats(engine: Engine, req: SearchRequest, plan: dict[str, Any]) -> dict[str, Any]:
    """This host's chunk and session frequencies of ``plan["ask"]`` (typo repair's candidates' stems):
    ``{identity, generation, asked, df: {term: n}, sdf: {term: n}}``, or ``{stale: true}``."""
    with engine.reading() as (cur, snap):
        if _stale(snap, plan):
            return _stale_answer(snap)
        asked = [str(t) for t in plan["ask"]]
        hashes = {t: term_hash(t) for t in asked}
        sdf: dict[int, int] = {}
        df = planner.document_frequencies(cur, snap, list(hashes.values()), sdf)
        return {"identity": snap.identity, "generation": snap.generation, "asked": asked,
                "df": {t: int(df[h]) for t, h in hashes.items() if h in df},
                "sdf": {t: int(sdf[h]) for t, h in hashes.items() if h in sdf}}


def probe(engine: Engine, req: SearchRequest, plan: dict[str, Any]) -> dict[str, Any]:
    """This host's answer, with the plan's summed statistics, for each route of ``plan["probe"]``:
    ``{identity, generation, routes: {route: ...}}``, or ``{stale: true}``.

    * "phrase": ``{candidates: [[score, phrase found], ...], more}`` -- its best PHRASE_CANDIDATES chunks
      holding every term (best first) and whether it had more;
    * "typo" (and "all"): ``{matched}`` -- a chunk holds every (repaired) term under the filters;
    * "any": ``{maxima: [best session BM25, best chunk BM25] | None}`` -- None: no session matches.
    """
    with engine.reading() as (cur, snap):
        if _stale(snap, plan):
            return _stale_answer(snap)
        gsnap, df, sdf = _global(snap, plan)
        filt_sql, filt_args = bm25.filter_clause(req)
        routes: dict[str, Any] = {}
        for spec in plan["probe"]:
            route, ranked = str(spec["route"]), [str(t) for t in spec["terms"]]
            hashes = {t: term_hash(t) for t in ranked}
            p = Plan(route, list(ranked))
            if route == "phrase":
                pattern = planner.phrase_pattern(req.text)
                assert pattern is not None
                top = bm25.phrase_candidates(cur, req, gsnap, p, hashes, df, filt_sql, filt_args)
                checked = top[:PHRASE_CANDIDATES]
                matched = bm25.phrase_matches(cur, p, checked, pattern, snap.postings) if checked else set()
                routes[route] = {"candidates": [[score, chunk in matched] for chunk, _, score in checked],
                                 "more": len(top) > PHRASE_CANDIDATES}
            elif route == "any":
                best = bm25.session_maxima(cur, req, gsnap, p, list(hashes.values()), df, sdf, filt_sql, filt_args)
                routes[route] = {"maxima": list(best) if best is not None else None}
            else:
                rows = bm25.score(cur, req, gsnap, p, hashes, df, filt_sql, filt_args, 0, 1, require_all=True)
                routes[route] = {"matched": bool(rows)}
        return {"identity": snap.identity, "generation": snap.generation, "routes": routes}


def page(engine: Engine, req: SearchRequest, plan: dict[str, Any], offset: int, count: int) -> dict[str, Any]:
    """This host's ranked rows ``offset`` to ``offset + count`` for the plan (``next`` "page"), ranked with
    the plan's summed statistics, in the order one index would give them:
    ``{identity, generation, route, capped, snippetsCut, rows: [{agent, sessionId, score, updatedAt, hit}]}``
    (``hit``: the contract's Hit as hits.assemble builds it), or ``{stale: true}``.

    The coordinator asks each host for the rows after those of it already shown (its own offset) and
    merges the pages (``merge``)."""
    with engine.reading() as (cur, snap):
        if _stale(snap, plan):
            return _stale_answer(snap)
        route = str(plan["route"])
        p, rows = _rank(cur, snap, req, plan, offset, count)
        page_hits, cut = hits.assemble(cur, req, p, rows, snap.postings, redactor=engine.redaction.redactor())
    now = engine.committed_generation()
    if now is not None and now != snap.generation:
        return _stale_answer(snap, now)
    return {"identity": snap.identity, "generation": snap.generation, "route": route,
            "capped": bool(p.capped or plan.get("capped")), "snippetsCut": cut,
            "rows": [{"agent": h["agent"], "sessionId": h["sessionId"], "score": h["score"],
                      "updatedAt": h["updatedAt"], "hit": dict(h)} for h in page_hits]}


# --- hybrid: the lexical candidates of all hosts fused with their vector neighbours --------------

def candidates(engine: Engine, req: SearchRequest, plan: dict[str, Any]) -> dict[str, Any]:
    """This host's part of a hybrid search (plan ``family`` "hybrid", ``next`` "page"): its best
    HYBRID_CANDIDATES sessions on the plan's lexical route, ranked with the summed statistics, and, when
    its vectors come from the plan's ``model``, its VECTOR_CANDIDATES nearest chunks' similarities and
    the sessions they belong to under the filters:
    ``{identity, generation, route, capped, model, lexical: [[sess, score, chunk, updatedAt, coverage]],
    vector: {similarities: [...], sessions: [[sess, chunk, similarity, updatedAt]]} | None}``
    (internal session ids: ``hits`` turns the chosen ones into hits), or ``{stale: true}``."""
    model = engine.vector_model()
    found = None
    if model is not None and model == plan.get("model"):
        assert engine.vectors is not None
        found = engine.vectors.search(req.text, VECTOR_CANDIDATES)
    with engine.reading() as (cur, snap):
        if _stale(snap, plan):
            return _stale_answer(snap)
        p, rows = _rank(cur, snap, req, plan, 0, HYBRID_CANDIDATES)
        lexical = [[int(s), float(score), chunk, p.updated.get(s, -1), p.coverage.get(s)] for s, score, chunk in rows]
        vector: dict[str, Any] | None = None
        if found is not None:
            ids, sims = found
            filt_sql, filt_args = bm25.filter_clause(req)
            near = vector_sessions(cur, ids, sims, filt_sql, filt_args, req.scope == "conversation")
            vector = {"similarities": [float(x) for x in sims.tolist()],
                      "sessions": [[n.sess, n.chunk, n.similarity, n.updated] for n in near]}
        elif model is not None and model == plan.get("model"):
            vector = {"similarities": [], "sessions": []}
    return {"identity": snap.identity, "generation": snap.generation, "route": p.route, "model": model,
            "capped": bool(p.capped or plan.get("capped")), "lexical": lexical, "vector": vector}


# A host's place in the host list and its internal session id, as one key the fusion can rank by.
_HOST_SHIFT = 48


def fuse_hosts(found: list[dict[str, Any]], req: SearchRequest, plan: dict[str, Any],
               floor: float = SIMILARITY_FLOOR) -> list[dict[str, Any]]:
    """The fused ranking of every host's ``candidates`` (in the coordinator's host order), as one index
    over them all would fuse them (query/hybrid.fuse): the lexical list is the best HYBRID_CANDIDATES of
    all hosts by the summed statistics; the vector list is the sessions of the VECTOR_CANDIDATES chunks
    nearest over all hosts whose vectors take part (the same model, so similarities compare as they are),
    each at its nearest chunk. Rows ``{host: identity, sess, score, chunk, updatedAt}``, best first."""
    lexical_rows: list[dict[str, Any]] = []
    for i, f in enumerate(found):
        lexical_rows.append({"identity": f["identity"], "rows": [
            {"key": (i << _HOST_SHIFT) | int(s), "score": score, "chunk": chunk,
             "updatedAt": None if upd is None or int(upd) < 0 else int(upd), "coverage": cov}
            for s, score, chunk, upd, cov in f["lexical"]]})
    lexical = merge(lexical_rows, req)[:HYBRID_CANDIDATES]
    sims = sorted((float(x) for f in found if f.get("vector") for x in f["vector"]["similarities"]), reverse=True)
    cut = sims[VECTOR_CANDIDATES - 1] if len(sims) >= VECTOR_CANDIDATES else float("-inf")
    near = sorted(((float(sim), i, j, (i << _HOST_SHIFT) | int(s), chunk, int(upd))
                   for i, f in enumerate(found) if f.get("vector")
                   for j, (s, chunk, sim, upd) in enumerate(f["vector"]["sessions"]) if float(sim) >= cut),
                  key=lambda n: (-n[0], n[1], n[2]))
    updated = {r["key"]: -1 if r["updatedAt"] is None else int(r["updatedAt"]) for r in lexical}
    updated.update({n[3]: n[5] for n in near})
    coverage = {r["key"]: float(r["coverage"]) for r in lexical if r["coverage"] is not None}
    fused = fuse([(r["key"], float(r["score"]), r["chunk"]) for r in lexical], str(plan["route"]),
                 [(n[3], n[4], n[0]) for n in near], updated, req.filters.sort, floor=floor, coverage=coverage)
    mask = (1 << _HOST_SHIFT) - 1
    return [{"host": found[f.sess >> _HOST_SHIFT]["identity"], "sess": f.sess & mask, "score": f.score,
             "chunk": f.chunk, "updatedAt": updated.get(f.sess, -1)} for f in fused]


def hits_of(engine: Engine, req: SearchRequest, plan: dict[str, Any], rows: list[list[Any]]) -> dict[str, Any]:
    """The hits of ``rows`` ([[sess, score, chunk]], this host's sessions of a fused page, in order):
    ``{identity, generation, snippetsCut, hits: [[sess, Hit]]}`` (a session deleted since is left out), or
    ``{stale: true}``."""
    with engine.reading() as (cur, snap):
        if _stale(snap, plan):
            return _stale_answer(snap)
        p = Plan("hybrid", [str(t) for t in plan["terms"]], repaired=dict(plan["repaired"]))
        kept: list[int] = []
        page_hits, cut = hits.assemble(cur, req, p, [(int(s), float(score), None if c is None else int(c))
                                                     for s, score, c in rows], snap.postings, kept,
                                       redactor=engine.redaction.redactor())
    now = engine.committed_generation()
    if now is not None and now != snap.generation:
        return _stale_answer(snap, now)
    return {"identity": snap.identity, "generation": snap.generation, "snippetsCut": cut,
            "hits": [[sess, dict(h)] for sess, h in zip(kept, page_hits, strict=True)]}


def _rank(cur: duckdb.DuckDBPyConnection, snap: Snapshot, req: SearchRequest, plan: dict[str, Any], offset: int,
          count: int) -> tuple[Plan, list[Row]]:
    route = str(plan["route"])
    if route in ("operators", "empty"):
        return planner.rank(cur, req, snap, offset, count)  # no terms: nothing global to it
    ranked = [str(t) for t in plan["terms"]]
    p = Plan(route, list(ranked), repaired=dict(plan["repaired"]), tried=list(plan["tried"]))
    if route == "none":
        return p, []
    gsnap, df, sdf = _global(snap, plan)
    filt_sql, filt_args = bm25.filter_clause(req)
    hashes = {t: term_hash(t) for t in ranked}
    if route == "phrase":
        pattern = planner.phrase_pattern(req.text)
        assert pattern is not None
        p.capped = bool(plan.get("capped"))
        top = bm25.phrase_candidates(cur, req, gsnap, p, hashes, df, filt_sql, filt_args)
        top = top[: int(plan["quota"].get(snap.identity, 0))]
        if not top:
            return p, []
        matched = bm25.phrase_matches(cur, p, top, pattern, snap.postings)
        return p, bm25.rank_chunks(cur, req, p, [c for c in top if c[0] in matched], offset, count, snap.postings)
    if route == "any":
        p.maxima = (float(plan["maxima"][0]), float(plan["maxima"][1]))
        return p, bm25.score(cur, req, gsnap, p, hashes, df, filt_sql, filt_args, offset, count, require_all=False,
                             sdf=sdf)
    return p, bm25.score(cur, req, gsnap, p, hashes, df, filt_sql, filt_args, offset, count, require_all=True)


def _global(snap: Snapshot, plan: dict[str, Any]) -> tuple[Snapshot, dict[int, int], dict[int, int]]:
    """This host's snapshot with the plan's summed collection statistics, and the summed frequencies by
    term hash."""
    n = int(plan["chunks"])
    gsnap = replace(snap, n_chunks=n, avgdl=(int(plan["totalLength"]) / n) if n else 1.0,
                    n_sessions=int(plan["sessions"]))
    df = {term_hash(str(t)): int(v) for t, v in plan["df"].items()}
    sdf = {term_hash(str(t)): int(v) for t, v in plan["sdf"].items()}
    return gsnap, df, sdf


def _stale(snap: Snapshot, plan: dict[str, Any]) -> bool:
    return bool(plan["generations"].get(snap.identity) != snap.generation)


def _stale_answer(snap: Snapshot, now: int | None = None) -> dict[str, Any]:
    return {"identity": snap.identity, "generation": snap.generation if now is None else now, "stale": True}


def _unavailable(snap: Snapshot) -> dict[str, Any]:
    return {"identity": snap.identity, "generation": snap.generation, "unavailable": "not-ready"}


# --- merging the pages --------------------------------------------------------------------------

def merge(pages: list[dict[str, Any]], req: SearchRequest) -> list[dict[str, Any]]:
    """Every row of ``pages`` (one per host, in the coordinator's host order), each with its ``host``
    (identity), in one index's order: by score, then updatedAt (newer first; unknown last) -- with sort
    "newest" by updatedAt first -- then by the host's position, each host's rows in its own order."""
    newest = req.filters.sort != "relevance"

    def key(row: dict[str, Any]) -> tuple[float, float]:
        upd = row.get("updatedAt")
        u = float(upd) if upd is not None else float("-inf")
        return (-u, -float(row["score"])) if newest else (-float(row["score"]), -u)

    lists = [[{**row, "host": p["identity"]} for row in p["rows"]] for p in pages]
    return list(heapq.merge(*lists, key=key))
