"""Embedding windows of consecutive messages instead of single chunks, measured offline.

    python -m bench.quality.run --datasets incidents,locomo --routes hybrid --out /tmp/q7
    python -m bench.quality.fusion --out /tmp/q7            # records fusion-inputs.json
    python -m bench.quality.windows --out /tmp/q7 --chars 1000 [--overlap]

The index embeds each chunk (one message part, at most 1,500 characters) on its own. This asks
whether vectors of a few consecutive messages find the session better: a question's words and
its answer are often in two messages. Per session the embeddable chunks, in order, are joined
into windows of at most ``--chars`` characters (a chunk longer than that is a window alone);
with ``--overlap`` the next window starts at the middle chunk of the last one. The windows are
embedded with the index's own model (cached as ``<home>/../win-<chars>-<overlap>.npy``), every
accepted query is embedded, and the 200 nearest chunks, windows, or both together give the
vector list; it is scored alone and through ``aivault.query.hybrid.fuse`` with the recorded
lexical lists (``bench.quality.fusion``), beside the recorded ``current`` row.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality.fusion import Lists, current, replay

VECTOR_CANDIDATES = 200


def windows(chunks: Sequence[tuple[int, str]], limit: int, overlap: bool) -> list[tuple[int, str]]:
    """Consecutive ``chunks`` (id, text) of one session joined by newlines into windows of at most
    ``limit`` characters, each named by its first chunk; with ``overlap`` a window starts at the
    middle chunk of the one before (and always at least one chunk further)."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(chunks):
        j, size = i, 0
        while j < len(chunks) and (j == i or size + 1 + len(chunks[j][1]) <= limit):
            size += len(chunks[j][1]) + (1 if j > i else 0)
            j += 1
        out.append((chunks[i][0], "\n".join(t for _, t in chunks[i:j])))
        if j >= len(chunks):
            break
        i = max(i + 1, (i + j) // 2) if overlap else j
    return out


def nearest_sessions(sims: Any, sess: Any, ids: Any, allowed: set[int] | None,
                     k: int = VECTOR_CANDIDATES) -> list[tuple[int, int, float]]:
    """The sessions of the ``k`` most similar items (within ``allowed``), nearest first, each with
    its nearest item and that similarity, as the vector list ``fuse`` takes."""
    import numpy as np

    seen: dict[int, tuple[int, int, float]] = {}
    taken = 0
    for i in np.argsort(-sims, kind="stable"):
        s = int(sess[i])
        if allowed is not None and s not in allowed:
            continue
        taken += 1
        if taken > k:
            break
        seen.setdefault(s, (s, int(ids[i]), float(sims[i])))
    return list(seen.values())


def measure(out: Path, chars: int, overlap: bool, kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The table's rows for one benchmark home: label -> metrics per kind (bench.quality.run.summarize)."""
    import duckdb
    import numpy as np

    from aivault.embed import make_embedder
    from aivault.home import models_dir
    from aivault.indexer import sql_write as q
    from bench.quality.corpus import load_queries

    eligible = q.VECTOR_ELIGIBLE.replace("role", "c.role").replace("kind", "c.kind")
    con = duckdb.connect(str(out / "home" / "index.duckdb"), read_only=True)
    try:
        rows = con.execute(f"""SELECT c.chunk, c.sess, c.text, v.vec FROM chunks c
            JOIN (SELECT hash, any_value(vec) AS vec FROM vectors GROUP BY hash) v USING (hash)
            WHERE {eligible} ORDER BY c.sess, c.chunk""").fetchall()
        cwd = {int(s): str(c or "") for s, c in con.execute("SELECT sess, cwd FROM sessions").fetchall()}
    finally:
        con.close()
    chunk_sess = np.array([r[1] for r in rows], np.int64)
    chunk_ids = np.array([r[0] for r in rows], np.int64)
    chunk_vecs = np.stack([np.frombuffer(r[3], "<f2").astype(np.float32) for r in rows])
    per_session: dict[int, list[tuple[int, str]]] = {}
    for chunk, sess, text, _ in rows:
        per_session.setdefault(int(sess), []).append((int(chunk), str(text)))
    win_sess: list[int] = []
    win_ids: list[int] = []
    win_text: list[str] = []
    for sess, chunks in per_session.items():
        for first, text in windows(chunks, chars, overlap):
            win_sess.append(sess)
            win_ids.append(first)
            win_text.append(text)
    embedder = make_embedder(None, models_dir())
    cache = out / f"win-{chars}-{'overlap' if overlap else 'adjacent'}.npy"
    if cache.is_file() and len(np.load(cache)) == len(win_text):
        win_vecs = np.load(cache)
    else:
        t0 = time.monotonic()
        win_vecs = np.concatenate([embedder.embed(win_text[k:k + 16]) for k in range(0, len(win_text), 16)])
        print(f"  embedded {len(win_text):,} windows (from {len(rows):,} chunks) in {time.monotonic() - t0:.0f} s",
              flush=True)
        np.save(cache, win_vecs)
    queries = [x for x in load_queries(out) if x.accepted]
    recorded = json.loads((out / "fusion-inputs.json").read_text())
    if [r["id"] for r in recorded] != [x.id for x in queries]:
        raise SystemExit(f"{out}: fusion-inputs.json is not this home's; run `python -m bench.quality.fusion` again")
    qvecs = np.concatenate([embedder.embed([x.query for x in queries[k:k + 16]]) for k in range(0, len(queries), 16)])
    all_sess, all_ids = np.concatenate([chunk_sess, np.array(win_sess)]), np.concatenate([chunk_ids, np.array(win_ids)])
    variants: dict[str, list[dict[str, Any]]] = {"chunks": [], "windows": [], "both": []}
    for x, v, rec in zip(queries, qvecs, recorded, strict=True):
        allowed = None
        if x.scope_paths:
            allowed = {s for s, c in cwd.items()
                       if any(c == p or c.startswith(p.rstrip("/") + "/") for p in x.scope_paths)}
        cs, ws = chunk_vecs @ v, win_vecs @ v
        lists = {"chunks": nearest_sessions(cs, chunk_sess, chunk_ids, allowed),
                 "windows": nearest_sessions(ws, np.array(win_sess), np.array(win_ids), allowed),
                 "both": nearest_sessions(np.concatenate([cs, ws]), all_sess, all_ids, allowed)}
        for name, vector in lists.items():
            variants[name].append({**rec, "in": {**rec["in"], "vector": [list(t) for t in vector]}})

    def vector_only(x: Lists) -> list[int]:
        return [s for s, _, _ in x.vector]

    table = {"recorded hybrid (current)": replay(recorded, current, kinds)}
    for name, replayed in variants.items():
        table[f"{name}: vector alone"] = replay(replayed, vector_only, kinds)
        table[f"{name}: hybrid"] = replay(replayed, current, kinds)
    return table


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.windows", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the --out of bench.quality.run and bench.quality.fusion")
    ap.add_argument("--chars", type=int, default=1000, help="a window's size limit in characters")
    ap.add_argument("--overlap", action="store_true", help="start each window at the middle of the one before")
    args = ap.parse_args(argv)
    from aivault import log
    from bench.quality import locomo
    from bench.quality.labels import KINDS

    log.configure("warning", process="bench")
    for name, (out, kinds) in {"incidents": (args.out, KINDS), "locomo": (args.out / "locomo", locomo.KINDS)}.items():
        if not (out / "fusion-inputs.json").is_file():
            print(f"{name}: skipped, no fusion-inputs.json under {out} (run bench.quality.fusion first)",
                  file=sys.stderr)
            continue
        table = measure(out, args.chars, args.overlap, kinds)
        print(f"\n[{name}] windows of {args.chars} characters{', overlapping' if args.overlap else ''}: R@5 / MRR@10")
        print(f"{'vectors':<28} " + " ".join(f"{k:>15}" for k in (*kinds, "all")))
        for label, m in table.items():
            print(f"{label:<28} " + " ".join(f"{m[k]['recall_any@5']:7.3f} /{m[k]['mrr@10']:6.3f}"
                                              for k in (*kinds, "all")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
