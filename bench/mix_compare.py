"""Does the agent mix cost indexing speed? ``aivault index`` on two corpora of the same size, interleaved.

    python -m bench.run --mix-compare [--size 100k] [--reps 3] [--mix ...] [--codex-zst-share 0.3]

One run generates (or reuses, under ``--out``) two corpora of exactly the same number of normalized
messages from the same seed: *base*, Claude Code and Codex only (the default corpus of
``bench.gen_corpus``), and *mixed*, the same count split across Claude Code, Codex (a share of it as
``.jsonl.zst``), Gemini CLI, OpenCode (one SQLite database) and Copilot CLI. Then it runs a fresh
``aivault index`` on each, alternately (base, mixed, base, mixed, ...), and reports per corpus the
median index time, messages/s, MB/s of transcript bytes and peak RSS, the indexed text, and the
ratio mixed / base. Every run's index is checked: each agent must hold exactly the messages the
manifest counts. The machine is shared and timings move by ±30 %: only the interleaved medians
mean anything.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from aivault import policy
from aivault.home import Home, write_private
from bench.gen_corpus import generate, parse_mix

DEFAULT_MIX = "claude=0.3,codex=0.3,gemini=0.15,opencode=0.15,copilot=0.1"
DEFAULT_ZST_SHARE = 0.3
# The default corpus (bench.gen_corpus --codex-share 0.4) as a mix, so that its manifest has the
# per-agent counts and roots too; the files are the same.
BASE_MIX = {"claude": 0.6, "codex": 0.4}
# Allowed slowdown of the mixed corpus (issue step 6, item 7).
MAX_RATIO = 1.10

# Per agent: sessions, messages as parsed, and the text the index holds.
AGENT_FIGURES = """SELECT s.agent, count(*), sum(s.message_count), coalesce(sum(c.text_bytes), 0)
FROM sessions s LEFT JOIN (SELECT sess, sum(strlen(text)) AS text_bytes FROM chunks GROUP BY sess) c USING (sess)
WHERE s.present GROUP BY s.agent ORDER BY s.agent"""


def root_args(corpus: Path, manifest: dict[str, Any]) -> list[str]:
    """``--root AGENT=PATH`` for every root of every agent the manifest lists (and no default roots)."""
    args = ["--no-default-roots"]
    for agent, info in manifest["agents"].items():
        for rel in info["roots"]:
            args += ["--root", f"{agent}={corpus / rel}"]
    return args


def corpus(base: Path, label: str, n: int, seed: int, mix: dict[str, float], zst: float) -> tuple[Path, dict[str, Any]]:
    """The corpus under ``base``, generated unless one with the same parameters is already there."""
    out = base / f"corpus-{label}-{n}-{seed}"
    path = out / "manifest.json"
    if path.exists():
        manifest: dict[str, Any] = json.loads(path.read_text())
        wanted = {a: w for a, w in mix.items() if w > 0}
        if (manifest.get("mix"), manifest.get("codex_zst_share"), manifest["messages"]) == (wanted, zst, n):
            return out, manifest
    if out.exists():
        shutil.rmtree(out)
    t0 = time.monotonic()
    manifest = generate(out, n, seed=seed, mix=mix, codex_zst_share=zst)
    print(f"  generated {label}: {n:,} messages in {time.monotonic() - t0:.1f} s ({manifest['bytes'] / 1e6:.0f} MB)",
          flush=True)
    return out, manifest


def _warm(path: Path) -> None:
    """Read every file once, so that no run pays for a cold page cache the other did not."""
    for p in path.rglob("*"):
        if p.is_file():
            with p.open("rb") as fh:
                while fh.read(1 << 20):
                    pass


def index_once(corpus_dir: Path, manifest: dict[str, Any], home_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """A fresh ``aivault index`` of the corpus: wall time, RSS, and what each agent's sessions hold."""
    if home_dir.exists():
        shutil.rmtree(home_dir)
    h = Home.resolve(home_dir).ensure()
    policy.save(h, policy.Policy(True, None))
    write_private(h.config_path, b'{"embed": {"enabled": false}}')
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(corpus_dir, manifest)],
                          env={**env, "AIVAULT_HOME": str(home_dir)}, capture_output=True, text=True)
    wall = time.monotonic() - t0
    # The CPU time of the index, its scanners included (children it waited for): less sensitive than the
    # wall time to what else the shared cores run.
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr}")
    summary = json.loads(proc.stdout)
    con = duckdb.connect(str(h.db_path), read_only=True)
    try:
        rows = con.execute(AGENT_FIGURES).fetchall()
    finally:
        con.close()
    agents = {str(a): {"sessions": int(s), "messages": int(m), "text_bytes": int(t)} for a, s, m, t in rows}
    wrong = {a: (agents.get(a, {}).get("messages"), info["messages"]) for a, info in manifest["agents"].items()
             if agents.get(a, {}).get("messages") != info["messages"]}
    if wrong:
        raise SystemExit(f"the index does not hold the manifest's messages (indexed, manifest): {wrong}")
    return {"index_s": wall, "cpu_s": cpu, "elapsed_s": float(summary.get("elapsedS", wall)),
            "messages": int(summary["messages"]),
            "indexer_peak_rss_mb": summary["peakRssKb"] / 1024,
            "scanner_peak_rss_mb": summary["scannerPeakRssKb"] / 1024,
            "load_before": load0, "load_after": os.getloadavg()[0], "agents": agents}


def compare(base: Path, n: int, seed: int, reps: int, mix_text: str, zst: float, env: dict[str, str]) -> dict[str, Any]:
    """Both corpora, ``reps`` interleaved index runs of each, medians and ratios."""
    print(f"== mix compare: {n:,} messages, {reps} runs each, interleaved", flush=True)
    corpora = {"base": corpus(base, "base", n, seed, BASE_MIX, 0.0),
               "mixed": corpus(base, "mixed", n, seed, parse_mix(mix_text), zst)}
    for path, _ in corpora.values():
        _warm(path)
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "mixed": []}
    for rep in range(reps):
        for label in ("base", "mixed"):
            path, manifest = corpora[label]
            r = index_once(path, manifest, base / f"home-mix-{label}", env)
            runs[label].append(r)
            print(f"  {label:5} run {rep + 1}: {r['index_s']:.2f} s (CPU {r['cpu_s']:.1f} s), "
                  f"{manifest['messages'] / r['index_s']:,.0f} msg/s, "
                  f"RSS indexer {r['indexer_peak_rss_mb']:.0f} MB, scanner {r['scanner_peak_rss_mb']:.0f} MB "
                  f"(load {r['load_before']:.1f} -> {r['load_after']:.1f})", flush=True)
    out: dict[str, Any] = {"messages": n, "seed": seed, "reps": reps, "mix": mix_text, "codex_zst_share": zst}
    for label, (path, manifest) in corpora.items():
        rs = runs[label]
        med = statistics.median(r["index_s"] for r in rs)
        text = sum(a["text_bytes"] for a in rs[0]["agents"].values())
        out[label] = {
            "corpus": str(path), "sessions": manifest["sessions"], "transcript_mb": manifest["bytes"] / 1e6,
            "indexed_text_mb": text / 1e6, "index_s": med, "index_s_min": min(r["index_s"] for r in rs),
            "index_s_max": max(r["index_s"] for r in rs), "msgs_per_s": n / med,
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "mb_per_s": manifest["bytes"] / 1e6 / med, "text_mb_per_s": text / 1e6 / med,
            "indexer_peak_rss_mb": statistics.median(r["indexer_peak_rss_mb"] for r in rs),
            "scanner_peak_rss_mb": statistics.median(r["scanner_peak_rss_mb"] for r in rs),
            "agents": {a: {**info, "indexed_text_mb": rs[0]["agents"][a]["text_bytes"] / 1e6,
                           "transcript_mb": info["bytes"] / 1e6} for a, info in manifest["agents"].items()},
            "runs": rs,
        }
    out["ratio"] = out["mixed"]["index_s"] / out["base"]["index_s"]
    out["pair_ratio"] = statistics.median(m["index_s"] / b["index_s"] for b, m in zip(runs["base"], runs["mixed"],
                                                                                     strict=True))
    return out


# (row, the result's key, how its value is printed); the ratio column divides mixed by base.
_ROWS: list[tuple[str, str, str]] = [
    ("sessions", "sessions", "{:,}"),
    ("transcript MB on disk", "transcript_mb", "{:.1f}"),
    ("indexed text MB", "indexed_text_mb", "{:.1f}"),
    ("index time s", "index_s", "{:.2f}"),
    ("CPU s (indexer + scanners)", "cpu_s", "{:.1f}"),
    ("msg/s", "msgs_per_s", "{:,.0f}"),
    ("MB/s of transcript bytes", "mb_per_s", "{:.1f}"),
    ("MB/s of indexed text", "text_mb_per_s", "{:.2f}"),
    ("indexer peak RSS MB", "indexer_peak_rss_mb", "{:.0f}"),
    ("scanner peak RSS MB", "scanner_peak_rss_mb", "{:.0f}"),
]


def table(res: dict[str, Any]) -> str:
    """The comparison as Markdown tables (medians of the runs; index time also min–max)."""
    b, m = res["base"], res["mixed"]
    lines = [f"| {res['messages']:,} messages, median of {res['reps']} interleaved runs | base: Claude + Codex "
             f"| mixed: {res['mix']}, {res['codex_zst_share']:.0%} of Codex as .zst | mixed / base |",
             "|---|---|---|---|"]
    for name, key, fmt in _ROWS:
        cells = [fmt.format(r[key]) for r in (b, m)]
        ratio = f"{m[key] / b[key]:.3f}"
        if key == "index_s":
            cells = [f"{c} ({r['index_s_min']:.2f}–{r['index_s_max']:.2f})" for c, r in zip(cells, (b, m), strict=True)]
            ratio = f"**{res['ratio']:.3f}** (median of pairs {res['pair_ratio']:.3f})"
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} |")
    lines += ["", "| mixed corpus, per agent | messages | sessions | transcript MB | indexed text MB |",
              "|---|---|---|---|---|"]
    for agent, a in m["agents"].items():
        extra = f" ({a['zst_sessions']} as .zst)" if "zst_sessions" in a else ""
        lines.append(f"| {agent}{extra} | {a['messages']:,} | {a['sessions']:,} | {a['transcript_mb']:.1f} "
                     f"| {a['indexed_text_mb']:.1f} |")
    return "\n".join(lines)


def run(base: Path, n: int, seed: int, reps: int, mix_text: str, zst: float, env: dict[str, str]) -> int:
    res = compare(base, n, seed, reps, mix_text, zst, env)
    (base / "mix_compare.json").write_text(json.dumps(res, indent=2))
    print()
    print(table(res))
    verdict = "within" if res["ratio"] <= MAX_RATIO else "OVER"
    print(f"\nmixed / base index time: {res['ratio']:.3f} ({verdict} the {MAX_RATIO:.2f} bound)")
    return 0
