"""What secret redaction costs: one-shot indexing and search with it on and off, side by side (issue 36).

    python -m bench.redaction --messages 100000 [--rounds 2] [--every 500]

A generated corpus gets one real-looking secret (tests/builders/secrets.py, every kind in turn, as an
agent writes it: an env line, JSON, a curl command, a PEM block) appended to the transcript of one
Claude session in ``every`` messages' worth -- a tool output where a key was printed. It is indexed by
``aivault index`` with redaction on and with it off (config.json ``redact.enabled``), the two alternated
``rounds`` times so that the machine's noise falls on both; the best of each is kept. Then the same
queries run in direct mode over each index, on and off, for search latency. The figures go to
bench/README.md "Secret redaction".
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from aivault import policy
from aivault.home import Home, write_private
from bench.common import corpus_for, env_for, pick_queries, root_args, time_queries
from tests.builders.claude import tool_result
from tests.builders.secrets import samples


def seeded(corpus: Path, every: int) -> tuple[Path, int]:
    """A copy of ``corpus`` with one secret per ``every`` messages appended to Claude sessions (as a tool
    output line); the copy and how many secrets it holds."""
    out = corpus.with_name(corpus.name + f"-secrets-{every}")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(corpus, out)
    manifest = json.loads((corpus / "manifest.json").read_text())
    want = max(1, int(manifest["messages"]) // every)
    files = sorted((out / "claude").rglob("*.jsonl"))
    pool = samples()
    for i in range(want):
        path = files[i % len(files)]
        last = orjson.loads(path.read_bytes().splitlines()[-1])
        fields = {k: last[k] for k in ("sessionId", "cwd", "version", "gitBranch") if k in last}
        record = tool_result({"isSidechain": False, "userType": "external", **fields}, f"seed-{i}",
                             last.get("uuid"), last.get("timestamp", "2026-03-01T10:00:00.000Z"), f"toolu_seed_{i}",
                             pool[i % len(pool)].text)
        with path.open("ab") as fh:
            fh.write(orjson.dumps(record) + b"\n")
    return out, want


def index(corpus: Path, home_dir: Path, redact: bool) -> tuple[float, dict[str, Any]]:
    """``aivault index`` over ``corpus`` into a fresh data directory; its wall time and summary."""
    if home_dir.exists():
        shutil.rmtree(home_dir)
    h = Home.resolve(home_dir).ensure()
    policy.save(h, policy.Policy(True, None))
    write_private(h.config_path, json.dumps({"embed": {"enabled": False}, "redact": {"enabled": redact}}).encode())
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(corpus)],
                          env=env_for(home_dir), capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def search_latency(home_dir: Path, queries: dict[str, list[str]], redact: bool) -> dict[str, dict[str, float]]:
    from aivault.indexer.opening import open_reader
    from aivault.query.engine import Engine
    from aivault.redact import Policy

    h = Home.resolve(home_dir)
    con = open_reader(h)
    try:
        engine = Engine(con, h.key(), redaction=Policy(enabled=redact))
        from aivault.query.request import parse_request

        return time_queries(lambda q: dict(engine.search(parse_request({"query": q, "limit": 20}))), queries)
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.redaction", description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=500, help="one secret per this many messages (default 500)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--base", type=Path, default=None, help="where corpora and indexes go (default: a temp dir)")
    args = ap.parse_args(argv)
    base = args.base or Path(tempfile.mkdtemp(prefix="aivault-redaction-bench-"))
    corpus, manifest = corpus_for(base, args.messages, args.seed)
    corpus, secrets = seeded(corpus, args.every)
    walls: dict[bool, list[float]] = {True: [], False: []}
    summary: dict[bool, dict[str, Any]] = {}
    for r in range(args.rounds):
        for redact in ((True, False) if r % 2 == 0 else (False, True)):
            wall, summary[redact] = index(corpus, base / f"home-{'on' if redact else 'off'}", redact)
            walls[redact].append(wall)
            print(f"  round {r + 1} redaction {'on ' if redact else 'off'}: {wall:.1f} s", flush=True)
    on, off = min(walls[True]), min(walls[False])
    n = int(manifest["messages"]) + secrets
    print(f"{n:,} messages ({manifest['bytes'] / 1e6:.0f} MB, {secrets:,} secrets seeded), best of {args.rounds}:")
    print(f"  index, redaction off: {off:.1f} s = {n / off:,.0f} msg/s")
    print(f"  index, redaction on:  {on:.1f} s = {n / on:,.0f} msg/s  ({100 * off / on:.1f} % of off)")
    queries = pick_queries(Home.resolve(base / "home-on").db_path, args.seed)
    lat = {redact: search_latency(base / f"home-{'on' if redact else 'off'}", queries, redact)
           for redact in (False, True)}
    for name in queries:
        a, b = lat[False][name], lat[True][name]
        print(f"  search {name:14} p50 off {a['p50']:6.1f} ms  on {b['p50']:6.1f} ms   "
              f"p95 off {a['p95']:6.1f}  on {b['p95']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
