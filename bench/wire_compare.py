"""The answers of every RPC method, as a client sees them, recorded so that two revisions can be compared.

A structural change (moving the life cycle, the endpoint table, typed contract values) must leave the
wire as it was. This indexes the sample transcripts shipped in ``samples/`` into a throw-away data
directory with the code under ``--code`` (a checkout; the working tree by default), then asks every
method -- searches with filters, pages followed by their cursors, reads, status, root reports, hosts,
ping, and requests that must fail -- through ``aivault rpc``, first without a daemon (direct mode),
then through ``aivault serve``. Values that differ from run to run (times, pids, paths, the database
identity inside cursors) are replaced by placeholders; everything else is kept as answered.

    .venv/bin/python -m bench.wire_compare --out /tmp/after.json
    git worktree add /tmp/before <rev>
    .venv/bin/python -m bench.wire_compare --code /tmp/before --out /tmp/before.json
    .venv/bin/python -m bench.wire_compare --compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

SEARCH = "aiVault.searchSessions"
QUERIES: list[dict[str, Any]] = [
    {"query": "DuckDB lock"},
    {"query": "lock", "limit": 2},
    {"query": "lock", "limit": 2, "filters": {"sort": "newest"}},
    {"query": "修復"},
    {"query": "agent:codex migration"},
    {"query": "resolveTerminalPath"},
    {"query": "webhook signature", "filters": {"agents": ["gemini", "claude"]}},
    {"query": "tests hung event loop", "filters": {"since": "2026-01-01T00:00:00Z"}},
    {"query": "the", "filters": {"scopePaths": ["/home/dev"]}},
    {"query": "\"data race\" token bucket"},
    {"query": "nonexistentwordxyzzy"},
    {"query": ""},
    {"query": "lock", "debug": True, "limit": 3},
    {"query": "lock", "limit": "x"},
    {"query": "lock", "cursor": "not-a-cursor"},
    {"query": "lock", "filters": {"agents": "claude"}},
    {"query": "lock", "filters": {"agents": ["nobody"]}},
    {"query": 5},
    {"query": "x" * 700},
]
OTHER: list[tuple[str, Any, str | None]] = [
    ("aiVault.searchStatus", {}, None),
    ("aiVault.rootReport", {"roots": ["/nonexistent", str(REPO / "samples" / "claude" / "projects")]}, None),
    ("aiVault.listHosts", {"check": False}, None),
    ("aiVault.ping", {}, None),
    ("aiVault.noSuchMethod", {}, None),
    (SEARCH, {"query": "lock"}, "ssh:nowhere.invalid"),
    (SEARCH, {"query": "lock"}, "all"),
    ("aiVault.searchStatus", {}, "runtime:nope"),
    ("aiVault.readSession", {"sessionId": "no-such-session"}, None),
    ("aiVault.readSession", {}, None),
    ("aiVault.reconcile", {"full": "yes"}, None),
]
_VOLATILE_KEYS = {"tookMs", "durationMs", "pid", "ms", "elapsedS", "home"}
# When this run's indexer looked, not what it found: session times (updatedAt...) are kept.
_VOLATILE_TIMES = {"lastReconcileAt", "lastSweepCompletedAt"}
# Aider's samples are named (its history lives in each repository). The agents of issue 37 that ./dev demo
# names with --root are not: a revision older than them would refuse the name.
_NAMED_ROOTS = ("--root", f"aider={REPO / 'samples' / 'aider'}")
_CURSOR = re.compile(r"^[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}$")


def _env(home: Path, code: Path) -> dict[str, str]:
    # Every sample an environment variable can point at (./dev demo also names Oh My Pi's with --root,
    # which a revision without that agent would refuse).
    s = REPO / "samples"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIVAULT_", "CLAUDE_", "CODEX_"))}
    env.update(HOME=str(home.parent / "empty-home"), AIVAULT_HOME=str(home), PYTHONPATH=str(code),
               AIVAULT_LOG_LEVEL="warning", TZ="UTC",
               CLAUDE_CONFIG_DIR=f"{s}/claude", CODEX_HOME=f"{s}/codex", GEMINI_CLI_HOME=f"{s}/gemini",
               QWEN_HOME=f"{s}/qwen/.qwen", XDG_DATA_HOME=f"{s}/opencode/.local/share",
               CRUSH_GLOBAL_DATA=f"{s}/crush/.local/share/crush", GOOSE_PATH_ROOT=f"{s}/goose",
               CURSOR_DATA_DIR=f"{s}/cursor/.cursor", COPILOT_HOME=f"{s}/copilot/.copilot",
               XDG_CONFIG_HOME=f"{s}/cline/.config", AMP_DATA_DIR=f"{s}/amp/.local/share/amp",
               ANTIGRAVITY_APP_DATA_DIR=f"{s}/antigravity/.gemini/antigravity-cli",
               PI_CODING_AGENT_DIR=f"{s}/pi/.pi/agent", PRIME_AGENT_CODING_AGENT_DIR=f"{s}/prime/.prime/agent",
               OPENCLAW_STATE_DIR=f"{s}/openclaw/.openclaw", HERMES_HOME=f"{s}/hermes/.hermes",
               KIMI_CODE_HOME=f"{s}/kimi/.kimi-code", KIMI_SHARE_DIR=f"{s}/kimi/.kimi", GROK_HOME=f"{s}/grok/.grok",
               FACTORY_HOME=f"{s}/droid/.factory", KIRO_HOME=f"{s}/kiro/.kiro",
               CONTINUE_GLOBAL_DIR=f"{s}/continue/.continue", OPENHANDS_PERSISTENCE_DIR=f"{s}/openhands/.openhands",
               VIBE_HOME=f"{s}/vibe/.vibe", DSH_HOME=f"{s}/dsh/.dsh", JUNIE_HOME=f"{s}/junie/.junie")
    return env


def _cli(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd="/")
    if check and proc.returncode != 0:
        raise SystemExit(f"aivault {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def _normalize(value: Any, cursors: dict[str, str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _VOLATILE_KEYS:
                continue
            if k in _VOLATILE_TIMES and isinstance(v, int):
                out[k] = "<time>"
            elif k == "identity" and isinstance(v, str):
                out[k] = "<identity>"
            else:
                out[k] = _normalize(v, cursors)
        return out
    if isinstance(value, list):
        return [_normalize(v, cursors) for v in value]
    if isinstance(value, str) and _CURSOR.match(value):
        return cursors.setdefault(value, f"<cursor {len(cursors) + 1}>")
    return value


def _ask(env: dict[str, str], method: str, params: Any, host: str | None) -> tuple[Any, Any]:
    """(the raw answer or None, what is recorded: the answer, or the error's exit code and message)."""
    args = ["rpc", method, json.dumps(params, ensure_ascii=False)] + (["--host", host] if host else [])
    proc = _cli(env, *args, check=False)
    if proc.returncode == 0:
        value = json.loads(proc.stdout)
        return value, value
    return None, {"exit": proc.returncode, "stderr": proc.stderr.strip()}


def record(env: dict[str, str]) -> dict[str, Any]:
    """Every request's normalized answer, in one mode (whatever `aivault rpc` finds: daemon or direct)."""
    out: dict[str, Any] = {}
    cursors: dict[str, str] = {}
    first_hit: dict[str, Any] | None = None
    for i, q in enumerate(QUERIES):
        raw, rec = _ask(env, SEARCH, q, None)
        out[f"search {i} {json.dumps(q, ensure_ascii=False)[:80]}"] = _normalize(rec, cursors)
        page = 2
        while isinstance(raw, dict) and raw.get("kind") == "results" and (raw.get("page") or {}).get("cursor") \
                and page <= 3:
            raw, rec = _ask(env, SEARCH, {**q, "cursor": raw["page"]["cursor"]}, None)
            out[f"search {i} page {page}"] = _normalize(rec, cursors)
            page += 1
        if first_hit is None and isinstance(raw, dict) and raw.get("hits"):
            first_hit = raw["hits"][0]
    for method, params, host in OTHER:
        _, rec = _ask(env, method, params, host)
        out[f"{method} {json.dumps(params)[:60]} host={host}"] = _normalize(rec, cursors)
    if first_hit is not None:
        sid, agent = first_hit["sessionId"], first_hit["agent"]
        for extra in ({}, {"query": "lock"}, {"from": 0, "direction": "forward", "count": 2},
                      {"from": 3, "direction": "backward", "count": 2}, {"from": 2, "direction": "around"},
                      {"scope": "all", "count": 3, "maxChars": 120}, {"count": "many"}):
            _, rec = _ask(env, "aiVault.readSession", {"sessionId": sid, "agent": agent, **extra}, None)
            out[f"readSession {json.dumps(extra)}"] = _normalize(rec, cursors)
    return out


def run(code: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aivault-wire-") as tmp:
        home = Path(tmp) / "home"
        (Path(tmp) / "empty-home").mkdir()
        env = _env(home, code)
        _cli(env, "enable")
        (home / "config.json").write_text(json.dumps({"embed": {"enabled": False}}))
        _cli(env, "index", *_NAMED_ROOTS)
        result = {"direct": record(env)}
        daemon = subprocess.Popen([sys.executable, "-m", "aivault.cli", "serve", *_NAMED_ROOTS], env=env, cwd="/",
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while _cli(env, "rpc", "aiVault.ping", check=False).stdout.find('"pid"') < 0:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit("the daemon did not answer")
                time.sleep(0.2)
            _cli(env, "rpc", "aiVault.reconcile", '{"full": true}')
            result["daemon"] = record(env)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)
        return result


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The requests whose answers differ (each with both answers, cut)."""
    diffs = []
    for mode in sorted(set(a) | set(b)):
        for key in sorted(set(a.get(mode, {})) | set(b.get(mode, {}))):
            x, y = a.get(mode, {}).get(key), b.get(mode, {}).get(key)
            if x != y:
                diffs.append(f"{mode} · {key}\n  before: {json.dumps(x, ensure_ascii=False)[:400]}\n"
                             f"  after:  {json.dumps(y, ensure_ascii=False)[:400]}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.wire_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout whose code answers (default: this one)")
    ap.add_argument("--out", type=Path, help="write the recorded answers here")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="compare two recordings")
    args = ap.parse_args(argv)
    if args.compare:
        diffs = compare(*(json.loads(p.read_text()) for p in args.compare))
        for d in diffs:
            print(d)
        n = sum(len(v) for v in json.loads(args.compare[0].read_text()).values())
        print(f"{len(diffs)} of {n} answers differ")
        return 1 if diffs else 0
    result = run(args.code.resolve())
    text = json.dumps(result, ensure_ascii=False, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text)
        print(f"{sum(len(v) for v in result.values())} answers recorded in {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
