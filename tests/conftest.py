"""Shared fixtures: data directories, transcript roots, and daemons run for real.

Every daemon here is the real thing: a DuckDB file, ZeroMQ sockets, and the scanner as a
child process. ``inproc_daemon`` runs the daemon object in the test process (the scanner is
still a separate process); ``DaemonProcess`` runs ``aivault serve`` as a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aivault import policy
from aivault.home import Home, write_private
from aivault.protocol import METHOD_RECONCILE, METHOD_SEARCH, METHOD_STATUS

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    from aivault import log

    log.configure("warning", process="tests")


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


@pytest.fixture
def home(tmp_path: Path) -> Home:
    h = Home.resolve(tmp_path / "home").ensure()
    policy.save(h, policy.Policy(True, None))
    lexical_only(h)
    return h


@pytest.fixture(autouse=True, scope="session")
def _shared_models_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Convert the embedding model once per test session, not once per data directory."""
    os.environ.setdefault("AIVAULT_MODELS_DIR", str(tmp_path_factory.mktemp("models")))


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    claude = tmp_path / "claude" / "projects"
    codex = tmp_path / "codex" / "sessions"
    claude.mkdir(parents=True)
    codex.mkdir(parents=True)
    return {"claude": claude, "codex": codex}


def root_args(roots: dict[str, Path]) -> list[str]:
    return [f"{agent}={path}" for agent, path in roots.items()]


class InprocDaemon:
    """The daemon object in this process; its scanner is a real child process."""

    def __init__(self, home: Home, roots: dict[str, Path]) -> None:
        from aivault.broker.daemon import Daemon

        self.home = home
        self.daemon = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False)
        self.daemon.start()
        self.service = self.daemon.service

    def reconcile(self, full: bool = True, timeout: float = 120) -> dict[str, Any]:
        return self.service.indexer.reconcile(full).result(timeout)

    def search(self, query: str, **params: Any) -> dict[str, Any]:
        from aivault.vault.endpoints import search_sessions

        return search_sessions(self.service, {"query": query, **params})

    def close(self) -> None:
        self.daemon.close()


def empty_roots(base: Path) -> dict[str, Path]:
    """A Claude Code and a Codex transcript root under ``base``, created empty."""
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    return roots


def merged_daemon(path: Path, roots: dict[str, Path]) -> InprocDaemon:
    """A daemon (lexical only) over ``roots`` with everything indexed and merged into sorted segments."""
    home = Home.resolve(path).ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    d = InprocDaemon(home, roots)
    try:
        d.reconcile()
        d.service.indexer.compact("all").result(120)
    except BaseException:
        d.close()
        raise
    return d


@pytest.fixture
def inproc_daemon(home: Home, roots: dict[str, Path]) -> Iterator[InprocDaemon]:
    d = InprocDaemon(home, roots)
    try:
        yield d
    finally:
        d.close()


class DaemonProcess:
    """``aivault serve`` as a subprocess, with an RPC client bound to its data directory."""

    def __init__(self, home: Home, roots: dict[str, Path] | list[str], *, extra_env: dict[str, str] | None = None,
                 schedule_args: list[str] | None = None, prefix: list[str] | None = None) -> None:
        from aivault.broker.client import RpcClient

        self.home = home
        # ``prefix`` runs the daemon under another command (e.g. prlimit), which exec()s it: same pid.
        args = [*(prefix or []), sys.executable, "-m", "aivault.cli", "serve", "--no-default-roots"]
        for spec in (roots if isinstance(roots, list) else root_args(roots)):
            args += ["--root", spec]
        self.log = open(home.path / "daemon.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args + (schedule_args or []), env=cli_env(home.path, **(extra_env or {})),
                                     stdout=self.log, stderr=self.log, start_new_session=True)
        self.rpc = RpcClient.for_home(home, timeout_s=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited early: {self.read_log()}")
            if (home.path / "daemon.sock").exists() and self.rpc.ping() is not None:
                return
            time.sleep(0.05)
        raise AssertionError(f"daemon did not answer: {self.read_log()}")

    def read_log(self) -> str:
        self.log.flush()
        return (self.home.path / "daemon.log").read_text(errors="replace")[-4000:]

    def call(self, method: str, params: Any = None, host: str | None = None) -> Any:
        return self.rpc.call(method, params if params is not None else {}, host=host)

    def search(self, query: str, **params: Any) -> dict[str, Any]:
        value: dict[str, Any] = self.call(METHOD_SEARCH, {"query": query, **params})
        return value

    def status(self) -> dict[str, Any]:
        value: dict[str, Any] = self.call(METHOD_STATUS)
        return value

    def reconcile(self, full: bool = True) -> dict[str, Any]:
        value: dict[str, Any] = self.call(METHOD_RECONCILE, {"full": full})
        return value

    def scanner_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        self.rpc.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # never leave a daemon behind; the test still fails
            self.proc.wait(10)
            raise
        finally:
            self.log.close()
        return code

    def kill(self) -> None:
        self.rpc.close()
        self.proc.kill()
        self.proc.wait(10)
        self.log.close()


def assert_indexes_agree(db: Path) -> None:
    """Every row of every indexed table is found through its ART index (indexer/integrity.py)."""
    import duckdb

    from aivault.indexer.integrity import probe_all

    con = duckdb.connect(str(db), read_only=True)
    try:
        wrong = [p for p in probe_all(con, everything=True) if not p.agrees]
    finally:
        con.close()
    assert not wrong, f"indexes that disagree with their tables: {wrong}"


def restart_and_stop_cleanly(home: Home, roots: dict[str, Path] | list[str]) -> None:
    """The step after every kill: `aivault serve` opens what the killed process left and is stopped with
    SIGTERM as soon as it answers, then every index must still find every row of its table. (A daemon's
    clean close right after a crash once dropped a killed writer's last rows from the indexes.)"""
    d = DaemonProcess(home, roots)
    code = d.stop()
    assert code == 0, f"the restarted daemon exited {code}: {(home.path / 'daemon.log').read_text()[-2000:]}"
    assert not Path(str(home.db_path) + ".wal").exists(), "a clean stop leaves no WAL"
    assert_indexes_agree(home.db_path)


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
