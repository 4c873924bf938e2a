"""The scanner's own work per agent, in-process: where a corpus's scan time goes.

    python -m bench.scan_cost --corpus DIR [--agents gemini,opencode] [--rounds 3] [--profile [--top 30]]

For every agent the corpus's ``manifest.json`` lists (``bench.gen_corpus --mix``), this does what a
scanner child does for each unit of a full pass on an empty index, minus the socket: the agent's
discovery under its roots, reading (line files and ``.jsonl.zst`` streams through
``sources.LineFile`` and the agent's line parser, whole units through its reader), and building
the batches (``BatchBuilder``: chunking, tokenizing, encoding). Per agent it prints the CPU time
split into *read* (discovery, I/O, decompression, SQLite, JSON, the parser: what differs between
agents) and *batch* (chunking and tokenizing: the same work for a message whatever its agent), per
message and per MB of transcript. One tokenizer serves all agents, as in a scanner, after an
untimed round that fills its vocabulary; the best of ``--rounds`` is kept (the machine is shared).
``--profile`` runs one more round under cProfile and prints the functions with the most own time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from aivault.redact import Redactor
from aivault.scanner.agents import SPECS
from aivault.scanner.batch import BatchBuilder
from aivault.scanner.model import Message
from aivault.scanner.reader import ReadStats
from aivault.scanner.sources import Found, LineFile, Root, RootProblem
from aivault.text import Tokenizer

_clock = time.process_time


class _Cost:
    def __init__(self, builder: BatchBuilder) -> None:
        self.builder = builder
        self.read = 0.0
        self.batch = 0.0
        self.messages = 0

    def add(self, path: str, msgs: list[Message], screened: bool = False) -> None:
        """One record's messages into the batch (a new batch when it is full), timed as batch work."""
        t0 = _clock()
        b = self.builder
        if b.full:
            b.finish(0, 0)
        idx = b.add_file({"path": path}) if not b.files else len(b.files) - 1
        b.begin_record()
        for msg in msgs:
            b.add_message(idx, self.messages, msg, screened=screened)
            self.messages += 1
        self.batch += _clock() - t0


def _scan_unit(found: Found, cost: _Cost) -> None:
    """One unit read and batched as ``scanner.scan`` does it."""
    spec = SPECS[found.agent]
    t0 = _clock()
    if found.mode == "whole":
        assert spec.read_unit is not None
        unit = spec.read_unit(found)
        cost.read += _clock() - t0
        t1 = _clock()
        redactor = cost.builder.redactor
        flagged = redactor.flag_texts([m.text for m in unit.messages]) if redactor is not None else set()
        cost.batch += _clock() - t1
        for i, msg in enumerate(unit.messages):  # every message is its own record (scan._read_whole)
            cost.add(found.path, [msg], i not in flagged)
        return
    assert spec.line_parser is not None
    parser = spec.line_parser(found.path, None)
    src = LineFile(found.path, found.mode)
    try:
        redactor = cost.builder.redactor
        lines = ((line, end, True) for line, end in src.lines(0, ReadStats())) if redactor is None \
            else redactor.screen(src.lines(0, ReadStats()))  # timed as reading: it runs ahead of the parser
        for line, _end, clean in lines:
            msgs = parser.feed(line) if line is not None else []
            if msgs:
                cost.read += _clock() - t0
                cost.add(found.path, msgs, clean)
                t0 = _clock()
    finally:
        src.close()
    cost.read += _clock() - t0


def scan_agent(corpus: Path, agent: str, info: dict[str, Any], tok: Tokenizer,
               redactor: Redactor | None = None) -> dict[str, Any]:
    cost = _Cost(BatchBuilder(tok, redactor=redactor))
    problems: list[RootProblem] = []
    units = 0
    t0 = _clock()
    for rel in info["roots"]:
        for found in SPECS[agent].discover(Root(agent, str(corpus / rel), explicit=True), problems, None, True):
            units += 1
            _scan_unit(found, cost)
    cost.read += _clock() - t0 - cost.read - cost.batch  # discovery
    if not cost.builder.empty:
        t1 = _clock()
        cost.builder.finish(0, 0)
        cost.batch += _clock() - t1
    if problems:
        print(f"  {agent}: {problems[:3]}", file=sys.stderr)
    n = max(cost.messages, 1)
    mb = info["bytes"] / 1e6
    return {"units": units, "messages": cost.messages, "read_s": cost.read, "batch_s": cost.batch,
            "read_us_per_msg": cost.read / n * 1e6, "batch_us_per_msg": cost.batch / n * 1e6,
            "read_s_per_mb": cost.read / mb if mb else 0.0}


def _plain_layout(corpus: Path) -> dict[str, dict[str, Any]]:
    """The agents of a corpus written without ``--mix``: bench.run's roots, sizes from the files."""
    roots = {"claude": ["claude/projects"], "codex": ["codex/sessions", "codex/archived_sessions"]}
    return {agent: {"roots": rels, "bytes": sum(f.stat().st_size for rel in rels
                                                 for f in (corpus / rel).rglob("*") if f.is_file())}
            for agent, rels in roots.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scan_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True, help="a corpus written by bench.gen_corpus --mix")
    ap.add_argument("--agents", default="", help="comma-separated subset of the manifest's agents")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds; the fastest of each agent is shown")
    ap.add_argument("--profile", action="store_true", help="one more round under cProfile: the hottest functions")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-redact", action="store_true", help="build batches without secret redaction (as "
                    "config.json redact.enabled false): run with and without it to see what it costs")
    args = ap.parse_args(argv)
    redactor = None if args.no_redact else Redactor()
    manifest = json.loads((args.corpus / "manifest.json").read_text())
    if "agents" not in manifest:  # the lexical bench's Claude Code + Codex corpus (bench.run)
        manifest["agents"] = _plain_layout(args.corpus)
    wanted = [a for a in args.agents.split(",") if a] or list(manifest["agents"])
    tok = Tokenizer()
    for agent in wanted:  # fills the tokenizer's vocabulary, as the first part of a real pass does
        scan_agent(args.corpus, agent, manifest["agents"][agent], tok, redactor)
    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.rounds):
        for agent in wanted:
            r = scan_agent(args.corpus, agent, manifest["agents"][agent], tok, redactor)
            if agent not in best or r["read_s"] + r["batch_s"] < best[agent]["read_s"] + best[agent]["batch_s"]:
                best[agent] = r
    print("| agent | units | messages | read CPU s | batch CPU s | read µs/message | batch µs/message "
          "| read CPU s per transcript MB |\n|---|---|---|---|---|---|---|---|")
    for agent in wanted:
        r = best[agent]
        print(f"| {agent} | {r['units']:,} | {r['messages']:,} | {r['read_s']:.2f} | {r['batch_s']:.2f} | "
              f"{r['read_us_per_msg']:.0f} | {r['batch_us_per_msg']:.0f} | {r['read_s_per_mb']:.3f} |")
    read = sum(r["read_s"] for r in best.values())
    batch = sum(r["batch_s"] for r in best.values())
    print(f"\ntotal: read {read:.2f} s + batch {batch:.2f} s = {read + batch:.2f} s CPU")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for agent in wanted:
            scan_agent(args.corpus, agent, manifest["agents"][agent], tok, redactor)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
