"""CLI latency: the wall time a person waits for one ``aivault`` command, start to exit.

    python -m bench.cli_latency [--messages 100000] [--reps 20] [--out bench/out/cli-latency] [--no-hybrid]

Every figure is one cold process of the installed console script (``.venv/bin/aivault``), as a
shell runs it, timed from spawn to exit; the CPU it used (user + system, from ``wait4``) is beside
it, because on a shared machine the wall time also holds the time other processes ran. Measured:

* the floor: ``python -c pass`` and ``python -c "import zmq, msgpack"`` in the same interpreter;
* through a running daemon (``aivault serve`` on the corpus, lexical, no embedding running):
  ``aivault rpc aiVault.ping``, ``aivault search TERM`` (human output into a pipe) and
  ``aivault search TERM --json`` with the engine's own ``durationMs`` -- a client-mode search costs
  the ping plus the engine time;
* without a daemon (direct mode, the index opened read-only by the command itself), on the same
  index: ``aivault search TERM`` with embeddings off;
* with vectors (unless ``--no-hybrid``): a copy of the index whose vectors are written as
  bench/hybrid.py does (a sample embedded for real, reused for the rest); one untimed search builds
  the saved FAISS sidecar a daemon would have left, then ``aivault search "A FIVE TERM QUERY"`` (the
  planner's hybrid route: the query embedding, the sidecar and the model load in that process) and a
  quoted phrase (answered lexically: no vector code loads).

TERM is a mid-frequency word of the indexed text and the five-term query a draw of words from one
chunk (bench/common.py's query classes). The corpus is bench/gen_corpus.py's (Claude Code + Codex);
corpus and data directories are kept in ``--out`` and reused by the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.home import Home, write_private
from aivault.text import TOKENIZER_VERSION
from bench.common import corpus_for, env_for, pct, pick_queries, quiet, root_args

REPO = Path(__file__).resolve().parent.parent
AIVAULT = str(Path(sys.executable).parent / "aivault")


def run_once(argv: list[str], env: dict[str, str], capture: bool) -> tuple[float, float, str]:
    """One cold process: wall ms from spawn to exit, its own CPU ms (user + system, reaped with wait4), stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout is not None else b""
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode(errors='replace')}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, out.decode()


def measure(label: str, argv: list[str], env: dict[str, str], reps: int, *, engine: bool = False) -> dict[str, Any]:
    """``reps`` cold runs of ``argv`` after one untimed run (page cache, .pyc): p50/p95 wall, p50 CPU.
    A command that fails is reported (its error kept in the results) and the other figures still run."""
    try:
        return _measure(label, argv, env, reps, engine)
    except SystemExit as exc:
        print(f"  {label:44} FAILED: {str(exc)[:300]}", flush=True)
        return {"error": str(exc)}


def _measure(label: str, argv: list[str], env: dict[str, str], reps: int, engine: bool) -> dict[str, Any]:
    run_once(argv, env, engine)
    walls, cpus, engine_ms = [], [], []
    load0 = os.getloadavg()[0]
    for _ in range(reps):
        wall, cpu, out = run_once(argv, env, engine)
        walls.append(wall)
        cpus.append(cpu)
        if engine:
            engine_ms.append(float(json.loads(out).get("durationMs", float("nan"))))
    res: dict[str, Any] = {"p50": pct(walls, 50), "p95": pct(walls, 95), "cpu_p50": pct(cpus, 50), "n": reps,
                           "load": round((load0 + os.getloadavg()[0]) / 2, 1)}
    if engine:
        res["engine_p50"] = pct(engine_ms, 50)
    extra = f"  engine p50 {res['engine_p50']:6.1f} ms" if engine else ""
    print(f"  {label:44} p50 {res['p50']:7.1f} ms  p95 {res['p95']:7.1f} ms  cpu p50 {res['cpu_p50']:6.1f} ms"
          f"{extra}  (load {res['load']})", flush=True)
    return res


def _as_installed(env: dict[str, str]) -> dict[str, str]:
    """The command runs as an installed one does: it may write its bytecode cache (the untimed first run
    does), even when this shell says not to (PYTHONDONTWRITEBYTECODE would recompile every changed module)."""
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def lexical_home(out: Path, corpus: Path, manifest: dict[str, Any], seed: int) -> Home:
    """The corpus indexed with embeddings off; reused while it was built from this corpus by this tokenizer."""
    home = out / f"home-{manifest['messages']}-{seed}"
    stamp = home / "bench-corpus.json"
    want = {"messages": manifest["messages"], "seed": seed, "corpus": str(corpus), "tokenizer": TOKENIZER_VERSION}
    h = Home.resolve(home)
    if stamp.exists() and json.loads(stamp.read_text()) == want and h.db_path.exists():
        return h
    if home.exists():
        shutil.rmtree(home)
    h.ensure()
    policy.save(h, policy.Policy(True, None))
    write_private(h.config_path, b'{"embed": {"enabled": false}}')
    t0 = time.monotonic()
    proc = subprocess.run([AIVAULT, "index", *root_args(corpus)], env=env_for(home), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"aivault index failed: {proc.stderr}")
    print(f"  indexed in {time.monotonic() - t0:.1f} s: {proc.stdout.strip()}", flush=True)
    stamp.write_text(json.dumps(want))
    return h


def hybrid_home(out: Path, lexical: Home) -> tuple[Home, dict[str, Any] | None]:
    """A copy of the lexical index with vectors written in (bench/hybrid.py); reused when current."""
    from bench.hybrid import inject_vectors

    home = out / f"{lexical.path.name}-vectors"
    stamp = home / "bench-source.json"
    src = lexical.db_path.stat()
    want = {"source": str(lexical.db_path), "size": src.st_size, "mtime_ns": src.st_mtime_ns}
    h = Home.resolve(home)
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return h, None
    if home.exists():
        shutil.rmtree(home)
    h.ensure()
    for name in ("index.duckdb", "key", "policy.json"):
        shutil.copy2(lexical.path / name, home / name)
    t0 = time.monotonic()
    injected = inject_vectors(h)  # also turns embeddings on in its config
    print(f"  vectors written in {time.monotonic() - t0:.0f} s: {injected}", flush=True)
    stamp.write_text(json.dumps(want))
    return h, injected


def start_daemon(h: Home, corpus: Path) -> subprocess.Popen[bytes]:
    from aivault.thin.client import RpcClient

    proc = subprocess.Popen([AIVAULT, "serve", *root_args(corpus)], env=env_for(h.path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    rpc = RpcClient.for_home(h, timeout_s=120)
    deadline = time.monotonic() + 120
    try:
        while rpc.ping() is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the daemon did not start (run `aivault serve` on the data directory to see why)")
            time.sleep(0.1)
        # Its first pass finds nothing new; then wait for any merge, so no compaction runs beside the figures.
        while (phase := rpc.call("aiVault.searchStatus", {}).get("phase")) != "current":
            if phase in ("degraded", "closed") or time.monotonic() > deadline + 600:
                raise SystemExit(f"the daemon's index is {phase}, not current: see `aivault status`")
            time.sleep(0.2)
        quiet(rpc)
    finally:
        rpc.close()
    return proc


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "cli-latency")
    ap.add_argument("--no-hybrid", action="store_true", help="skip the figures with vectors (writing them embeds)")
    args = ap.parse_args(argv)
    if not Path(AIVAULT).exists():
        raise SystemExit(f"no console script at {AIVAULT}: run this with the project's venv (`./dev test` makes it)")
    args.out.mkdir(parents=True, exist_ok=True)
    corpus, manifest = corpus_for(args.out, args.messages, args.seed)
    print(f"== CLI latency: {manifest['messages']:,} messages, {args.reps} cold processes per figure", flush=True)
    lex = lexical_home(args.out, corpus, manifest, args.seed)
    queries = pick_queries(lex.db_path, args.seed)
    term = queries["1-term mid"][0]
    five = queries["5-term"][0]
    res: dict[str, Any] = {"messages": manifest["messages"], "reps": args.reps, "term": term, "five_term": five,
                           "cpus": os.cpu_count()}
    env = _as_installed(env_for(lex.path))
    py = sys.executable

    print("floor", flush=True)
    res["python_pass"] = measure("python -c pass", [py, "-c", "pass"], env, args.reps)
    res["import_zmq_msgpack"] = measure('python -c "import zmq, msgpack"', [py, "-c", "import zmq, msgpack"], env,
                                        args.reps)

    print("through the daemon", flush=True)
    daemon = start_daemon(lex, corpus)
    try:
        res["daemon_ping"] = measure("aivault rpc aiVault.ping", [AIVAULT, "rpc", "aiVault.ping"], env, args.reps)
        res["daemon_search"] = measure(f"aivault search {term}", [AIVAULT, "search", term], env, args.reps)
        res["daemon_search_json"] = measure(f"aivault search {term} --json", [AIVAULT, "search", term, "--json"],
                                            env, args.reps, engine=True)
    finally:
        stop_daemon(daemon)

    print("direct (no daemon), embeddings off", flush=True)
    res["direct_lexical"] = measure(f"aivault search {term}", [AIVAULT, "search", term], env, args.reps)
    res["direct_lexical_json"] = measure(f"aivault search {term} --json", [AIVAULT, "search", term, "--json"], env,
                                         args.reps, engine=True)

    if not args.no_hybrid:
        print("direct (no daemon), with vectors", flush=True)
        hy, injected = hybrid_home(args.out, lex)
        res["vectors_injected"] = injected
        henv = _as_installed(env_for(hy.path))
        # The first search without a saved sidecar builds it from the stored vectors and saves it.
        t0 = time.monotonic()
        try:
            _, _, out = run_once([AIVAULT, "rpc", "aiVault.searchSessions", json.dumps({"query": five, "debug": True})],
                                 henv, True)
            route = json.loads(out).get("debug", {}).get("route")
        except SystemExit as exc:
            route = None
            print(f"  the first search failed: {str(exc)[:300]}", flush=True)
        res["hybrid_route"] = route
        print(f"  first search (sidecar check or build) {time.monotonic() - t0:.1f} s; route {route!r}", flush=True)
        res["direct_hybrid"] = measure(f"aivault search '{five}'", [AIVAULT, "search", five], henv, args.reps)
        res["direct_hybrid_json"] = measure("  the same, --json", [AIVAULT, "search", five, "--json"], henv,
                                            args.reps, engine=True)
        phrase = f'"{term}"'
        res["direct_phrase_with_vectors"] = measure(f"aivault search '{phrase}' (lexical route)",
                                                    [AIVAULT, "search", phrase], henv, args.reps)

    path = args.out / "results.json"
    path.write_text(json.dumps(res, indent=2))
    print(f"written to {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
