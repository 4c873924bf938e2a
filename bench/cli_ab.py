"""One CLI call, timed interleaved against another revision of the code (A/B, call by call).

    .venv/bin/python -m bench.cli_ab --rev HEAD~1 --home DATA_DIR [--reps 16] -- search WORD --json

This machine's speed drifts by a third within an hour, so two figures from runs minutes apart
do not show a 20 ms change. Here each repetition runs the old code (a git worktree of ``--rev``,
made under ``bench/out/ab-<rev>`` and byte-compiled) and then the working tree, with the venv's
console script, the same environment and the same data directory, and reports the p50 of wall
and of CPU time (user + system from ``wait4``) of each. ``PYTHONPATH`` selects the code: the
console script's own ``import aivault`` finds the worktree first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("aivault", "scanner", "indexer", "query", "broker")


def worktree(rev: str) -> Path:
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True,
                         capture_output=True, text=True).stdout.strip()
    path = REPO / "bench" / "out" / f"ab-{sha}"
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), sha], check=True,
                       capture_output=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=path, check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=REPO, check=True,
                   capture_output=True)
    return path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return (time.perf_counter() - t0) * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", required=True, help="the revision to compare the working tree with")
    ap.add_argument("--home", type=Path, required=True, help="the data directory both run against")
    ap.add_argument("--reps", type=int, default=16)
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the aivault command, after --")
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    script = str(Path(sys.executable).with_name("aivault"))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base.update(AIVAULT_HOME=str(a.home), AIVAULT_LOG_LEVEL="warning")
    sides = {f"A {a.rev}": worktree(a.rev), "B working tree": REPO}
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in sides}
    for path in sides.values():  # one untimed call each: page cache, bytecode
        timed([script, *args], {**base, "PYTHONPATH": str(path)})
    for _ in range(a.reps):
        for name, path in sides.items():
            wall, cpu = timed([script, *args], {**base, "PYTHONPATH": str(path)})
            results[name][0].append(wall)
            results[name][1].append(cpu)
    print(f"aivault {' '.join(args)}: {a.reps} interleaved calls each")
    for name, (wall_ms, cpu_ms) in results.items():
        wall, cpu = statistics.median(wall_ms), statistics.median(cpu_ms)
        print(f"  {name:24s} wall p50 {wall:7.1f} ms   cpu p50 {cpu:7.1f} ms")


if __name__ == "__main__":
    main()
