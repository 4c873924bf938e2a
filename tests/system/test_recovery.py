"""Recovery paths when they are needed: a damaged index, a lock, a full disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from aivault.home import Home
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import cli_env, run_cli, wait_until
from tests.support.daemons import DaemonProcess


def _corpus(roots: dict[str, Path], sessions: int = 4, messages: int = 300) -> None:
    for s in range(sessions):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{s}")
        for i in range(messages):
            c.user(f"question {i} of project {s} about the marmot migration and its schema")
    CodexWriter(roots["codex"]).user("codex asks about lemurs").assistant("and answers")


def _index(home: Home, roots: dict[str, Path], prefix: list[str] | None = None,
           timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    args = [*(prefix or []), sys.executable, "-m", "aivault.cli", "index", "--no-default-roots"]
    for agent, path in roots.items():
        args += ["--root", f"{agent}={path}"]
    return subprocess.run(args, env=cli_env(home.path, **env), capture_output=True, text=True, timeout=timeout)


def _scribble(path: Path, offset: int, n: int = 512) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(os.urandom(n))


def test_clear_works_on_an_index_that_cannot_be_opened(home: Home, roots: dict[str, Path]) -> None:
    """`aivault clear` deletes a truncated index without opening it, rebuilds, and search works again."""
    _corpus(roots)
    assert _index(home, roots).returncode == 0
    size = home.db_path.stat().st_size
    os.truncate(home.db_path, size // 2)
    broken = run_cli(home.path, "search", "marmot")
    assert broken.returncode != 0 and "damaged" in broken.stderr and "aivault clear" in broken.stderr
    assert "internal error" not in broken.stderr
    args = ["clear", "--no-default-roots"] + [a for agent, p in roots.items() for a in ("--root", f"{agent}={p}")]
    cleared = run_cli(home.path, *args)
    assert cleared.returncode == 0, cleared.stderr
    hits = json.loads(run_cli(home.path, "search", "marmot", "--json", check=True).stdout)["hits"]
    assert len(hits) == 4


def test_a_checksum_error_is_reported_as_damage_not_as_a_lock(home: Home, roots: dict[str, Path]) -> None:
    """Random bytes over a header block read as a damaged index with the rebuild command, never as
    'held read-write by another process'; a real lock still reads as a lock, naming the pid."""
    _corpus(roots)
    assert _index(home, roots).returncode == 0
    backup = home.path / "backup.duckdb"
    shutil.copy(home.db_path, backup)
    _scribble(home.db_path, 8192)
    for args in (["search", "marmot"], ["status"]):
        out = run_cli(home.path, *args)
        assert out.returncode != 0, out.stdout
        assert "damaged" in out.stderr and "aivault clear" in out.stderr and "held" not in out.stderr, out.stderr
    shutil.copy(backup, home.db_path)
    holder = duckdb.connect(str(home.db_path))
    try:
        out = run_cli(home.path, "search", "marmot")
    finally:
        holder.close()
    assert "held read-write by process" in out.stderr and str(os.getpid()) in out.stderr
    assert "damaged" not in out.stderr


def test_index_does_not_report_success_for_an_index_that_fails_its_read_check(home: Home,
                                                                            roots: dict[str, Path]) -> None:
    """After a scribble in the middle of the file, `index` fails with the damage and the rebuild
    command instead of printing "indexed" over an index that search cannot read."""
    _corpus(roots, sessions=8, messages=500)
    assert _index(home, roots).returncode == 0
    size = home.db_path.stat().st_size
    for off in range(size // 4, size - 4096, size // 8):
        _scribble(home.db_path, off, 4096)
    ClaudeWriter(roots["claude"], cwd="/home/dev/new").user("a new session about tapirs")
    out = _index(home, roots)
    assert out.returncode != 0, out.stdout
    assert "damaged" in out.stderr and "aivault clear" in out.stderr
    assert "indexed" not in out.stdout


def _fsize_limit() -> list[str]:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    return ["prlimit"]


def test_a_full_disk_stops_a_one_shot_index_with_a_clear_message_and_loses_nothing(home: Home,
                                                                                 roots: dict[str, Path]) -> None:
    """With the file-size limit reached, `index` exits non-zero saying "disk full … nothing … lost"
    within a bounded time (it used to retry for ever), a later `status` without a daemon says so; the next run
    with space completes the index."""
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("the first small session about ibex")
    assert _index(home, roots).returncode == 0
    limit = home.db_path.stat().st_size + 64 * 1024
    _corpus(roots, sessions=6, messages=1500)
    t0 = time.monotonic()
    out = _index(home, roots, prefix=[*_fsize_limit(), f"--fsize={limit}"], timeout=120)
    assert out.returncode != 0, out.stdout
    assert "disk full" in out.stderr and "nothing already indexed was lost" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert time.monotonic() - t0 < 90
    # Later, without a daemon, status still says how the last index ended and what to do.
    status = run_cli(home.path, "status", check=True).stdout
    assert "the last `aivault index` stopped" in status and "disk full" in status, status
    assert "Free some space" in status, status
    again = _index(home, roots)
    assert again.returncode == 0, again.stderr
    assert "the last `aivault index`" not in run_cli(home.path, "status", check=True).stdout
    hits = json.loads(run_cli(home.path, "search", "marmot", "--json", "--limit", "50", check=True).stdout)["hits"]
    assert sorted(h["messageCount"] for h in hits) == [1500] * 6
    assert len(json.loads(run_cli(home.path, "search", "ibex", "--json", check=True).stdout)["hits"]) == 1


def test_a_checkpoint_the_disk_refuses_after_the_pass_fails_the_one_shot_index_clearly(
        home: Home, roots: dict[str, Path]) -> None:
    """Batches fit in the WAL but the file cannot grow when `index` checkpoints before its final merge:
    it exits non-zero saying the disk is full and nothing was lost; the next run with space finishes."""
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("the first small session about ibex")
    assert _index(home, roots).returncode == 0
    limit = home.db_path.stat().st_size + 65536
    _corpus(roots, sessions=2, messages=200)
    out = _index(home, roots, prefix=[*_fsize_limit(), f"--fsize={limit}"], AIVAULT_RECLAIM_MIN_FREE_MB="0")
    assert out.returncode != 0, out.stdout
    assert "disk full" in out.stderr and "nothing already indexed was lost" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "indexed" not in out.stdout
    again = _index(home, roots)
    assert again.returncode == 0, again.stderr
    hits = json.loads(run_cli(home.path, "search", "marmot", "--json", "--limit", "50", check=True).stdout)["hits"]
    assert sorted(h["messageCount"] for h in hits) == [200] * 2
    assert len(json.loads(run_cli(home.path, "search", "ibex", "--json", check=True).stdout)["hits"]) == 1


def test_a_daemon_on_a_full_disk_is_degraded_and_resumes_when_space_returns(home: Home,
                                                                           roots: dict[str, Path]) -> None:
    """The daemon reports `degraded` with the reason while it cannot write, keeps answering searches,
    and indexes what is waiting by itself once the limit is lifted."""
    prefix = _fsize_limit()
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("the first small session about ibex")
    assert _index(home, roots).returncode == 0
    limit = home.db_path.stat().st_size + 64 * 1024
    d = DaemonProcess(home, roots, prefix=[*prefix, f"--fsize={limit}:unlimited"])  # soft:hard
    try:
        _corpus(roots, sessions=6, messages=1500)
        with pytest.raises(Exception):  # noqa: B017 - whatever the reconcile reports, it is not success
            d.reconcile()
        assert wait_until(lambda: d.status()["phase"] == "degraded", timeout=60)
        stats = d.call("aiVault.indexStats")
        assert "disk is full" in (stats.get("writeError") or ""), stats
        assert len(d.search("ibex")["hits"]) == 1  # still answering
        subprocess.run(["prlimit", "--pid", str(d.proc.pid), "--fsize=unlimited"], check=True)

        def caught_up() -> bool:
            try:
                r = d.search("marmot", limit=50)
            except Exception:
                return False
            return r.get("kind") == "results" and sorted(h["messageCount"] for h in r["hits"]) == [1500] * 6

        assert wait_until(caught_up, timeout=90, interval=1.0), d.read_log()
        assert wait_until(lambda: d.status()["phase"] == "current", timeout=60)
    finally:
        d.stop()


# A writer that commits rows into the WAL and dies: the next writer must write them into the file.
_DIE_WITH_A_BIG_WAL = """
import os, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE crash_pad AS SELECT range AS n, repeat('x', 40) AS pad FROM range(300000)")
os._exit(0)
"""


def test_a_full_disk_when_a_writer_opens_a_crashed_index_says_disk_full_not_damaged(
        home: Home, roots: dict[str, Path]) -> None:
    """A writer opening a file its last writer left with a WAL checkpoints it first; when the disk refuses that,
    the message is "disk full" with what to do, never "damaged … aivault clear"; with space it opens."""
    ClaudeWriter(roots["claude"], cwd="/home/dev/first").user("the first small session about ibex")
    assert _index(home, roots).returncode == 0
    subprocess.run([sys.executable, "-c", _DIE_WITH_A_BIG_WAL, str(home.db_path)], check=True, timeout=60)
    assert Path(str(home.db_path) + ".wal").exists()
    limit = home.db_path.stat().st_size
    out = _index(home, roots, prefix=[*_fsize_limit(), f"--fsize={limit}"])
    assert out.returncode != 0, out.stdout
    assert "disk full" in out.stderr and "Free some space" in out.stderr, out.stderr
    assert "damaged" not in out.stderr and "aivault clear" not in out.stderr, out.stderr
    again = _index(home, roots)
    assert again.returncode == 0, again.stderr
    assert len(json.loads(run_cli(home.path, "search", "ibex", "--json", check=True).stdout)["hits"]) == 1

