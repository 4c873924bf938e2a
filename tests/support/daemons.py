"""Daemons run for real: the daemon object in this process, and ``aivault serve`` as a child process.

Every daemon here is the real thing: a DuckDB file, ZeroMQ sockets, and the scanner as a child
process. ``InprocDaemon`` runs the daemon object in the test process (the scanner is still a
separate process); ``DaemonProcess`` runs ``aivault serve`` as a subprocess.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.home import Home
from aivault.protocol import METHOD_RECONCILE, METHOD_SEARCH, METHOD_STATUS
from tests.support.common import cli_env, lexical_only, root_args
from tests.support.index import assert_indexes_agree


class InprocDaemon:
    """The daemon object in this process; its scanner is a real child process. Every test that needs a daemon
    in its own process makes it here (the ``inproc_daemon`` fixture is one over the ``roots`` fixture).

    ``roots``: transcript roots by agent, or root specs as ``--root`` takes them (``agent=path``: several of
    one agent, a root that cannot be listed). By default the tests drive the passes themselves
    (``schedule=False``); ``schedule=True`` runs the daemon's own passes and watching as ``aivault serve``
    does. ``semantic`` and ``bulk`` are the daemon's options (``bulk``: a one-shot index's load).
    ``start=False`` leaves it unstarted, for what it answers before ``start()``. As a context manager it is
    closed when the block ends.
    """

    def __init__(self, home: Home, roots: dict[str, Path] | list[str], *, schedule: bool = False,
                 semantic: bool = True, bulk: bool = False, start: bool = True) -> None:
        from aivault.broker.daemon import Daemon

        self.home = home
        specs = roots if isinstance(roots, list) else root_args(roots)
        self.daemon = Daemon(home, extra_roots=specs, default_roots=False, schedule=schedule, semantic=semantic,
                             bulk=bulk)
        self.service = self.daemon.service
        if start:
            self.start()

    def start(self) -> None:
        self.daemon.start()

    def __enter__(self) -> InprocDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reconcile(self, full: bool = True, timeout: float = 120) -> dict[str, Any]:
        return self.service.indexer.reconcile(full).result(timeout)

    def search(self, query: str, **params: Any) -> dict[str, Any]:
        from aivault.vault.endpoints import search_sessions

        return dict(search_sessions(self.service, {"query": query, **params}))

    def close(self) -> None:
        self.daemon.close()


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


class DaemonProcess:
    """``aivault serve`` as a subprocess, with an RPC client bound to its data directory. Every test that needs
    a daemon as a process of its own starts it here. The constructor returns once the daemon answers, unless
    ``wait=False`` (a daemon expected not to come up: the test waits for its exit on ``proc``)."""

    def __init__(self, home: Home, roots: dict[str, Path] | list[str], *, extra_env: dict[str, str] | None = None,
                 schedule_args: list[str] | None = None, prefix: list[str] | None = None, wait: bool = True) -> None:
        from aivault.thin.client import RpcClient

        self.home = home
        # ``prefix`` runs the daemon under another command (e.g. prlimit), which exec()s it: same pid.
        args = [*(prefix or []), sys.executable, "-m", "aivault.cli", "serve", "--no-default-roots"]
        for spec in (roots if isinstance(roots, list) else root_args(roots)):
            args += ["--root", spec]
        self.log = open(home.path / "daemon.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args + (schedule_args or []), env=cli_env(home.path, **(extra_env or {})),
                                     stdout=self.log, stderr=self.log, start_new_session=True)
        self.rpc = RpcClient.for_home(home, timeout_s=60)
        if not wait:
            return
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


def restart_and_stop_cleanly(home: Home, roots: dict[str, Path] | list[str]) -> None:
    """The step after every kill: `aivault serve` opens what the killed process left and is stopped with
    SIGTERM as soon as it answers, then every index must still find every row of its table. (A daemon's
    clean close right after a crash once dropped a killed writer's last rows from the indexes.)"""
    d = DaemonProcess(home, roots)
    code = d.stop()
    assert code == 0, f"the restarted daemon exited {code}: {(home.path / 'daemon.log').read_text()[-2000:]}"
    assert not Path(str(home.db_path) + ".wal").exists(), "a clean stop leaves no WAL"
    assert_indexes_agree(home.db_path)
