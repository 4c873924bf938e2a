"""How similar is a relevant nearest chunk, and how similar is noise? The similarity floor, measured.

    python -m bench.quality.floor --out /tmp/q [--floors 0,0.2,0.25,0.3,0.35,0.4]

Runs on the index a ``bench.quality.run`` left in ``out/home`` (its daemon saved the vectors when
it closed) through the read-only path the CLI uses without a daemon. For every accepted labelled
query it embeds the query once and reports, from its ``VECTOR_CANDIDATES`` nearest chunks, the
cosine similarity of the relevant session's nearest chunk, of the nearest chunk overall, and of
the nearest chunk of any other session; the same for nonsense queries (made-up words, random
letters, questions about things no session mentions), whose every result is noise. Then it
sweeps the floor: every query through the planner's own choice (what users get) with
``Engine.similarity_floor`` set to each value, reporting Recall@5 per kind, MRR@10 and how many
vector-only hits the nonsense queries still get. Results go to ``out/floor.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aivault.query.hybrid import VECTOR_CANDIDATES
from bench.quality.corpus import load_queries
from bench.quality.labels import KINDS, LabelledQuery
from bench.quality.metrics import mrr_at_k, percentile, recall_at_k

DEFAULT_FLOORS = (0.0, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
# Queries no session answers: words nobody uses, keyboard runs, and ordinary questions about
# things far from coding work. Each of their results is padding.
NONSENSE_FIXED = (
    "xyzzyplugh", "asdfghjkl", "qwertyuiop zxcvbnm", "frobnicate the wibble", "lorem ipsum dolor sit amet",
    "sourdough bread recipe with a long proof", "best hiking trails in patagonia in winter",
    "how do I knit a wool scarf", "my cat keeps scratching the sofa", "planting tomatoes on a balcony",
    "learning to play the cello as an adult", "what is the capital of mongolia",
    "wedding speech ideas for my brother", "how long to boil an egg", "train tickets from paris to lyon",
    "who won the football world cup in 1998", "symptoms of a cold versus the flu", "how to fold a paper crane",
    "cheap flights to lisbon in may", "what rhymes with orange", "painting a bedroom wall sage green",
    "recipe for vegan chocolate cake", "how often should I water a cactus", "tips for running a first marathon",
    "history of the roman empire", "choosing a mortgage with a fixed rate", "guitar chords for a sad song",
    "the plot of pride and prejudice", "how to remove a red wine stain", "birthday party games for kids",
)
RANDOM_QUERIES = 120
_SYLLABLES = ("bla", "vor", "ish", "tar", "nek", "zu", "plo", "grim", "fen", "dax", "ul", "mop", "quo", "rix",
              "sny", "tew", "kab", "lor", "wem", "oth")
_SEED = 7
LIMIT = 10
PERCENTILES = (0, 5, 10, 25, 50, 75, 90, 95, 100)


def nonsense_queries(seed: int = _SEED) -> list[str]:
    """The fixed list plus seeded made-up queries of one to three 'words': half random letters, half
    pronounceable pseudo-words built from syllables (closer to what a tokenizer makes of real words)."""
    rng = random.Random(seed)

    def word(i: int) -> str:
        if i % 2:
            return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 11)))

    made = [" ".join(word(i) for _ in range(rng.randint(1, 3))) for i in range(RANDOM_QUERIES)]
    return [*NONSENSE_FIXED, *made]


def _dist(values: Sequence[float]) -> dict[str, float | int]:
    return {"n": len(values), **{f"p{p}": round(percentile(values, p), 4) for p in PERCENTILES}}


def measure(engine: Any, cur: Any, queries: Sequence[LabelledQuery], nonsense: Sequence[str]) -> dict[str, Any]:
    """Similarity distributions of relevant, best and best-other nearest chunks per query kind."""
    vectors = engine.vectors
    sess_of: dict[int, str] = {}

    def neighbours(text: str) -> list[tuple[str, float]]:
        found = vectors.search(text, VECTOR_CANDIDATES)
        ids, sims = (found[0].tolist(), found[1].tolist()) if found else ([], [])
        missing = [c for c in ids if c not in sess_of]
        if missing:
            sess_of.update((int(c), str(s)) for c, s in cur.execute(
                f"SELECT c.chunk, s.session_id FROM chunks c JOIN sessions s USING (sess) "
                f"WHERE c.chunk IN ({', '.join(map(str, missing))})").fetchall())
        return [(sess_of[c], float(x)) for c, x in zip(ids, sims, strict=True) if c in sess_of]

    # relevant: the relevant session's nearest chunk (when among the candidates); relevantTop5: the
    # same when the vectors rank that session in their top five sessions (the matches a floor must
    # keep); top / other: the nearest chunk overall / of another session; gap: top minus relevant;
    # overLast: relevantTop5 minus the last candidate's similarity (a rule relative to the background).
    names = ("relevant", "relevantTop5", "top", "other", "gap", "overLast")
    per_kind: dict[str, dict[str, list[float]]] = {k: {n: [] for n in names} for k in KINDS}
    not_near = dict.fromkeys(KINDS, 0)
    for q in queries:
        near = neighbours(q.query)
        rel = [x for s, x in near if s in q.relevant]
        other = [x for s, x in near if s not in q.relevant]
        d = per_kind[q.kind]
        if near:
            d["top"].append(near[0][1])
        if other:
            d["other"].append(other[0])
        if not rel:
            not_near[q.kind] += 1
            continue
        d["relevant"].append(rel[0])
        d["gap"].append(near[0][1] - rel[0])
        if any(s in q.relevant for s in list(dict.fromkeys(s for s, _ in near))[:5]):
            d["relevantTop5"].append(rel[0])
            d["overLast"].append(rel[0] - near[-1][1])
    noise = [n for n in (neighbours(t) for t in nonsense) if n]
    return {
        "kinds": {k: {name: _dist(v) for name, v in d.items()} | {"relevantNotInCandidates": not_near[k]}
                  for k, d in per_kind.items()},
        "nonsenseTop": _dist([n[0][1] for n in noise]),
        "nonsenseOverLast": _dist([n[0][1] - n[-1][1] for n in noise]),
    }


def sweep(engine: Any, queries: Sequence[LabelledQuery], nonsense: Sequence[str],
          floors: Sequence[float]) -> list[dict[str, Any]]:
    """Recall@5 per kind, MRR@10 over all, and nonsense padding, for each floor (planner's choice)."""
    from aivault.query.request import parse_request

    rows: list[dict[str, Any]] = []
    for floor in floors:
        engine.similarity_floor = floor
        r5: dict[str, list[float]] = {k: [] for k in KINDS}
        mrr: list[float] = []
        vector_only = {k: 0 for k in KINDS}
        for q in queries:
            r = engine.search(parse_request({"query": q.query, "limit": LIMIT, "debug": True}))
            hits = [h["sessionId"] for h in r["hits"]]
            r5[q.kind].append(recall_at_k(hits, q.relevant, 5))
            mrr.append(mrr_at_k(hits, q.relevant, 10))
            vector_only[q.kind] += sum(1 for t in r["debug"]["trace"] if t["matchedBy"] == "vector")
        padded = padding = 0
        for text in nonsense:
            r = engine.search(parse_request({"query": text, "limit": LIMIT, "debug": True}))
            n = sum(1 for t in r["debug"]["trace"] if t["matchedBy"] == "vector")
            padding += n
            padded += 1 if n else 0
        row: dict[str, Any] = {"floor": floor, **{f"{k}R@5": sum(v) / len(v) if v else None for k, v in r5.items()},
               "mrr@10": sum(mrr) / len(mrr) if mrr else None,
               "vectorOnlyHitsPerQuery": {k: round(vector_only[k] / max(len(r5[k]), 1), 2) for k in KINDS},
               "nonsensePadded": padded, "nonsensePadding": padding, "nonsense": len(nonsense)}
        print(f"floor {floor:.3f}: " + "  ".join(f"{k} R@5 {row[f'{k}R@5']:.3f}" for k in KINDS)
              + f"  MRR@10 {row['mrr@10']:.3f}  vector-only hits/query "
              + ", ".join(f"{k} {v}" for k, v in row["vectorOnlyHitsPerQuery"].items())
              + f"  nonsense padded {padded}/{len(nonsense)} ({padding} hits)", flush=True)
        rows.append(row)
    return rows


def _print_dist(name: str, d: dict[str, Any]) -> None:
    print(f"  {name:<22} n={d['n']:>3}  " + "  ".join(f"p{p}={d[f'p{p}']:.3f}" for p in PERCENTILES))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.floor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a bench.quality.run work directory")
    ap.add_argument("--floors", default=",".join(map(str, DEFAULT_FLOORS)))
    args = ap.parse_args(argv)
    floors = [float(x) for x in args.floors.split(",") if x.strip()]  # none: the distributions only

    from aivault import log
    from aivault.home import Home
    from aivault.indexer.opening import open_reader
    from aivault.vault.readonly import DirectService

    log.configure("warning", process="bench")
    out = args.out.absolute()
    queries = [q for q in load_queries(out) if q.accepted]
    nonsense = nonsense_queries()
    home = Home.resolve(out / "home")
    svc = DirectService(home, open_reader(home))
    try:
        if not svc.engine.semantic_ready():
            print("the index has no usable vectors (run bench.quality.run with the vector routes first)",
                  file=sys.stderr)
            return 1
        cur = svc.con.cursor()
        dist = measure(svc.engine, cur, queries, nonsense)
        cur.close()
        print("cosine similarity of the nearest chunk (of the relevant session / overall / of another session):")
        for kind, d in dist["kinds"].items():
            print(f" {kind} (relevant session not among the {VECTOR_CANDIDATES} nearest chunks: "
                  f"{d['relevantNotInCandidates']})")
            for name in d:
                if name != "relevantNotInCandidates":
                    _print_dist(name, d[name])
        _print_dist("nonsense: top", dist["nonsenseTop"])
        _print_dist("nonsense: overLast", dist["nonsenseOverLast"])
        rows = sweep(svc.engine, queries, nonsense, floors)
    finally:
        svc.close()
    (out / "floor.json").write_text(json.dumps({"distribution": dist, "sweep": rows}, indent=1) + "\n")
    print(f"\nwrote {out / 'floor.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
