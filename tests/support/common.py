"""The repository's paths, the CLI as a child process, data directories and transcript roots, waiting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aivault.home import Home, write_private

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["AIVAULT_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("AIVAULT_LOG_LEVEL", "warning")
    env.update(extra)
    return env


def run_cli(home: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", *args], env=env or cli_env(home),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"aivault {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def lexical_only(h: Home) -> None:
    """Most tests exercise the lexical pipeline; semantic tests turn embeddings on themselves."""
    write_private(h.config_path, json.dumps({"embed": {"enabled": False}}).encode())


def root_args(roots: dict[str, Path]) -> list[str]:
    return [f"{agent}={path}" for agent, path in roots.items()]


def empty_roots(base: Path) -> dict[str, Path]:
    """A Claude Code and a Codex transcript root under ``base``, created empty."""
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    return roots


def json_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The structured log lines among ``lines`` (JSON, one per line); other lines are skipped."""
    events = []
    for line in lines:
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


class StderrLog:
    """A child's stderr read on a thread for its whole life (a full pipe would stop it mid-line)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        """End the child (SIGTERM, then SIGKILL after 10 s) and read the rest of its stderr."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._drain.join(10)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines the child wrote so far."""
        return json_lines(list(self.lines))


def log_events(path: Path) -> list[dict[str, Any]]:
    """The structured log lines a child process wrote to ``path``."""
    return json_lines(path.read_text(errors="replace").splitlines())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(pred: Any, timeout: float = 30, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return False


def answer(value: Mapping[str, Any]) -> dict[str, Any]:
    """A contract value (one of aivault/protocol.py's records) as the plain dict it is on the wire, so that a
    test may index any field of whichever kind came back (asserting the kind is the test's business)."""
    return dict(value)
