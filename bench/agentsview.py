"""AgentsView side by side (PyPI `agentsview`, a Go binary with SQLite FTS5), run offline.

It is installed into its own virtual environment under the bench output folder on first use.
It discovers transcripts under $HOME, so a throw-away HOME links to the corpus; its sync time
and its HTTP search latency for the same queries are measured exactly like ours.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

VERSION = "0.46.1"


def _binary(base: Path) -> Path:
    found = shutil.which("agentsview")
    if found:
        return Path(found)
    venv = base.parent / "agentsview-venv"
    exe = venv / "bin" / "agentsview"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"agentsview=={VERSION}"], check=True)
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def run_agentsview(corpus: Path, base: Path, queries: dict[str, list[str]], reps: int = 2) -> dict[str, Any]:
    exe = _binary(base)
    if base.exists():
        shutil.rmtree(base)
    home = base / "home"
    data = base / "data"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir(parents=True)
    data.mkdir()
    (home / ".claude" / "projects").symlink_to(corpus / "claude" / "projects")
    (home / ".codex" / "sessions").symlink_to(corpus / "codex" / "sessions")
    (home / ".codex" / "archived_sessions").symlink_to(corpus / "codex" / "archived_sessions")
    if (corpus / "codex" / "session_index.jsonl").exists():
        shutil.copy(corpus / "codex" / "session_index.jsonl", home / ".codex" / "session_index.jsonl")
    env = {**os.environ, "HOME": str(home), "AGENTSVIEW_DATA_DIR": str(data), "AGENTSVIEW_TELEMETRY_ENABLED": "0",
           "DO_NOT_TRACK": "1", "AGENTSVIEW_DISABLE_UPDATE_CHECK": "1", "AGENTSVIEW_NO_BROWSER": "1",
           "AGENTSVIEW_NO_DAEMON": "1"}
    t0 = time.monotonic()
    sync = subprocess.run([str(exe), "sync"], env=env, capture_output=True, text=True, timeout=3600)
    sync_s = time.monotonic() - t0
    if sync.returncode != 0:
        raise RuntimeError(f"agentsview sync failed: {sync.stderr[-500:]}")
    port = _free_port()
    server = subprocess.Popen([str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--no-browser"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api/v1/search"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}?q=warmup&limit=20", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        search: dict[str, dict[str, float]] = {}
        for name, qs in queries.items():
            lat: list[float] = []
            for _ in range(reps):
                for q in qs:
                    t = time.perf_counter()
                    body = urllib.request.urlopen(f"{url}?{urllib.parse.urlencode({'q': q, 'limit': 20})}",
                                                  timeout=60).read()
                    lat.append((time.perf_counter() - t) * 1000)
                    json.loads(body)
            search[name] = {"p50": _pct(lat, 50), "p95": _pct(lat, 95), "n": len(lat)}
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
    db = data / "sessions.db"
    size = sum(p.stat().st_size for p in data.iterdir() if p.name.startswith("sessions.db"))
    print(f"  agentsview: sync {sync_s:.1f} s, db {size / 1e6:.0f} MB", flush=True)
    for name, v in search.items():
        print(f"  agentsview {name:14} p50 {v['p50']:7.1f} ms  p95 {v['p95']:7.1f} ms", flush=True)
    return {"sync_s": sync_s, "db_mb": size / 1e6, "search": search, "db": str(db)}
