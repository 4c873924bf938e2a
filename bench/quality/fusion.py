"""Replay hybrid fusion offline: record what ``fuse`` is given per query, then rank it by other rules.

    python -m bench.quality.run --datasets incidents,locomo --routes hybrid --out /tmp/q7   # builds the homes
    python -m bench.quality.fusion --out /tmp/q7

A fusion rule only sees two lists per query (the lexical planner's sessions with their BM25 scores
and idf coverage, the vectors' sessions with their nearest chunk's cosine), so a rule can be
measured on both data sets in a second instead of a re-run per setting. ``capture`` opens each home
``bench.quality.run`` left (``<out>`` for the incidents, ``<out>/locomo`` for LoCoMo) with an
in-process daemon, runs every labelled query through the hybrid route and records the arguments
of ``aivault.query.engine.fuse`` (wrapped for the run: this module is the only place that does
it); ``replay`` ranks the recorded lists by a rule and scores the top ``LIMIT`` with the
benchmark's own metrics. The rule ``current`` is ``aivault.query.hybrid.fuse`` itself, so its row
must equal the benchmark's hybrid row; the others are the alternatives measured in bench/README.md
("Ranking quality").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality.corpus import load_queries
from bench.quality.run import LIMIT, request, score, summarize, wait_for_vectors

# One recorded query: its id, kind, relevant internal session ids and what fuse was given.
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Lists:
    """What ``fuse`` is given for one query."""

    lexical: list[tuple[int, float, int | None]]  # (session, BM25, evidence chunk), best first
    route: str  # the lexical planner's route
    vector: list[tuple[int, int, float]]  # (session, nearest chunk, cosine), nearest first
    coverage: dict[int, float]  # share of the query's session idf each lexical session holds
    updated: dict[int, int]  # the tie-break: updatedAt per session

    @classmethod
    def from_json(cls, got: dict[str, Any]) -> Lists:
        return cls([(int(s), float(x), None if c is None else int(c)) for s, x, c in got["lexical"]], str(got["route"]),
                   [(int(s), int(c), float(x)) for s, c, x in got["vector"]],
                   {int(k): float(v) for k, v in got["coverage"].items()},
                   {int(k): int(v) for k, v in got["updated"].items()})


# A rule ranks one query's sessions, best first.
Rule = Callable[[Lists], list[int]]

_ROOTS = {"incidents": ["claude={out}/claude/projects", "codex={out}/codex/sessions"],
          "locomo": ["claude={out}/claude/projects"]}


def capture(out: Path, roots: Sequence[str]) -> list[Row]:
    """Every accepted query of the benchmark home under ``out`` through the hybrid route, with
    the arguments ``fuse`` received for it."""
    import aivault.query.engine as engine
    from aivault.broker.daemon import Daemon
    from aivault.home import Home

    queries = [q for q in load_queries(out) if q.accepted]
    seen: list[dict[str, Any]] = []
    real = getattr(engine, "fuse")  # noqa: B009 -- the name engine.py imported, replaced for the run

    def recording(lexical: Any, lexical_route: str, vector: Any, updated: Any, sort: str, **kw: Any) -> Any:
        seen.append({"lexical": [list(x) for x in lexical], "route": lexical_route,
                     "vector": [list(x) for x in vector],
                     "coverage": {str(k): v for k, v in (kw.get("coverage") or {}).items()},
                     "updated": {str(k): v for k, v in updated.items()}})
        return real(lexical, lexical_route, vector, updated, sort, **kw)

    home = Home.resolve(out / "home")
    if not (out / "home").is_dir() or not (out / "queries.json").is_file():
        raise SystemExit(f"{out}: no benchmark home; run `python -m bench.quality.run --routes hybrid --out ...` first")
    d = Daemon(home.ensure(), extra_roots=list(roots), default_roots=False, schedule=False)
    d.start()
    setattr(engine, "fuse", recording)  # noqa: B010
    try:
        d.service.indexer.reconcile(full=True).result()
        wait_for_vectors(d.service, 600.0)
        for _ in range(600):  # the FAISS index loads in the background after start
            try:
                d.service.search(request(queries[0]), force_route="hybrid")
                break
            except ValueError:
                time.sleep(0.5)
        cur = d.service.con.cursor()
        internal = {str(s): int(i) for i, s in cur.execute("SELECT sess, session_id FROM sessions").fetchall()}
        rows: list[Row] = []
        for q in queries:
            seen.clear()
            d.service.search(request(q), force_route="hybrid")
            rows.append({"id": q.id, "kind": q.kind, "relevant": [internal[s] for s in q.relevant if s in internal],
                         "in": seen[-1] if seen else None})
        return rows
    finally:
        setattr(engine, "fuse", real)  # noqa: B010
        d.close()


def fuse_with(**weights: float) -> Rule:
    """``aivault.query.hybrid.fuse`` with other values of its keyword weights (``dominance``,
    ``coverage_weight``); with none, the shipped rule (``current``)."""
    from aivault.query.hybrid import fuse

    def rule(x: Lists) -> list[int]:
        return [f.sess for f in fuse(x.lexical, x.route, x.vector, x.updated, "relevance", coverage=x.coverage,
                                     **weights)]

    return rule


current: Rule = fuse_with()  # the shipped rule: aivault.query.hybrid.fuse at its own weights


def score_sum(a: float, b: float) -> Rule:
    """Scores instead of ranks: each loose lexical session adds ``a`` x coverage x BM25 / the best
    BM25, each vector session ``b`` x its cosine rescaled so the nearest is 1 and the last
    candidate 0; strict and dominant lexical answers keep first place as in ``fuse``."""
    from aivault.query.hybrid import DOMINANCE, SIMILARITY_FLOOR, STRICT_BONUS, STRICT_ROUTES

    def rule(x: Lists) -> list[int]:
        lexical, vector, coverage = x.lexical, x.vector, x.coverage
        strict = x.route in STRICT_ROUTES
        dominant = None
        if not strict and len(lexical) > 1 and lexical[0][1] >= DOMINANCE * lexical[1][1] > 0:
            dominant = lexical[0][0]
        best = lexical[0][1] if lexical and lexical[0][1] > 0 else 1.0
        top, last = (vector[0][2], vector[-1][2]) if vector else (0.0, 0.0)
        span = top - last if top > last else 1.0
        total: dict[int, float] = {}
        for s, bm25, _ in lexical:
            if strict or s == dominant:
                total[s] = STRICT_BONUS + a + b + bm25 / best  # above any loose session's a + b
            else:
                total[s] = a * (coverage.get(s, 0.0) if coverage else 1.0) * bm25 / best
        for s, _, sim in vector:
            if s not in total and sim < SIMILARITY_FLOOR:
                continue
            total[s] = total.get(s, 0.0) + b * (sim - last) / span
        return sorted(total, key=lambda s: (-total[s], -x.updated.get(s, -1), s))

    return rule


# Only a / b orders loose sessions (the strict ones stay above both), so b is 1 and a is varied.
# The shipped rule's own knobs: the BM25 lead that keeps a loose answer first (2.0 shipped) and the
# weight of an any-word session's coverage (2.0 shipped).
RULES: dict[str, Rule] = {"current": current, **{f"score-sum a={a:g}": score_sum(a, 1.0)
                                                 for a in (0.5, 1.0, 2.0, 3.0, 4.0)},
                          **{f"dominance {d:g}": fuse_with(dominance=d) for d in (1.2, 1.5, 3.0)},
                          **{f"coverage weight {w:g}": fuse_with(coverage_weight=w) for w in (1.5, 2.5, 3.0)}}


def replay(rows: Sequence[Row], rule: Rule, kinds: Sequence[str]) -> dict[str, Any]:
    """``rule``'s ranking of every recorded query, scored like the benchmark's routes (per kind and all)."""
    scored: list[dict[str, Any]] = []
    for r in rows:
        got = r["in"]
        if got is None:
            ranked: list[str] = []
        else:
            ranked = [str(s) for s in rule(Lists.from_json(got))[:LIMIT]]
        scored.append({"kind": r["kind"], **score(ranked, [str(s) for s in r["relevant"]])})
    return summarize(scored, kinds)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.fusion", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the --out of a bench.quality.run with vectors")
    args = ap.parse_args(argv)
    from aivault import log
    from bench.quality import locomo
    from bench.quality.labels import KINDS

    log.configure("warning", process="bench")
    sets = {"incidents": (args.out, KINDS), "locomo": (args.out / "locomo", locomo.KINDS)}
    for name, (out, kinds) in sets.items():
        if not (out / "home").is_dir():
            print(f"{name}: skipped, no benchmark home under {out}", file=sys.stderr)
            continue
        rows = capture(out, [r.format(out=out) for r in _ROOTS[name]])
        (out / "fusion-inputs.json").write_text(json.dumps(rows))
        print(f"\n[{name}] R@5 / MRR@10, {len(rows)} queries")
        print(f"{'rule':<24} " + " ".join(f"{k:>17}" for k in (*kinds, "all")))
        for label, rule in RULES.items():
            m = replay(rows, rule, kinds)
            print(f"{label:<24} " + " ".join(f"{m[k]['recall_any@5']:8.3f} /{m[k]['mrr@10']:6.3f}"
                                              for k in (*kinds, "all")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
