"""The data directory: read-only use, someone else's directory, and private files kept private."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aivault.home import Home
from tests.builders import ClaudeWriter
from tests.support.common import cli_env, run_cli

NOBODY = 65534


def _indexed(home: Home, roots: dict[str, Path]) -> None:
    ClaudeWriter(roots["claude"]).user("a question about the pelican migration")
    run_cli(home.path, "index", "--no-default-roots", "--root", f"claude={roots['claude']}", check=True)


def _read_only(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with the data directory bind-mounted read-only (a real EROFS, in a private mount namespace)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    h = shlex.quote(str(home.path))
    cli = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "aivault.cli", *args))
    script = f"mount --bind {h} {h} && mount -o remount,bind,ro {h} && exec {cli}"
    return subprocess.run(["unshare", "--mount", "sh", "-c", script], env=cli_env(home.path),
                          capture_output=True, text=True, timeout=120)


def test_a_read_only_data_directory_can_still_be_searched(home: Home, roots: dict[str, Path]) -> None:
    """On a read-only file system, search and status work (nothing is chmod-ed or created on the way), and
    enable, index, clear and serve refuse with advice."""
    _indexed(home, roots)
    out = _read_only(home, "search", "pelican", "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["hits"]) == 1
    status = _read_only(home, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["filesIndexed"] == 1, status.stderr
    # Every command that writes says why it cannot and what to do, never a bare "Read-only file system".
    for args in (["enable"], ["index", "--no-default-roots"], ["clear", "--no-default-roots"],
                 ["serve", "--no-default-roots"]):
        write = _read_only(home, *args)
        assert write.returncode != 0 and "the file system is read-only" in write.stderr, (args, write.stderr)
        assert str(home.path) in write.stderr and "Use a data directory you can write" in write.stderr, write.stderr
        assert "internal error" not in write.stderr


def _as_nobody(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the CLI as another user")
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
           sys.executable, "-m", "aivault.cli", *args]
    env = cli_env(home)
    env["HOME"] = "/nonexistent"
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd="/")


def test_someone_elses_or_an_uncreatable_data_directory_is_a_clear_message(home: Home, roots: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    """Another user's data directory, or one that cannot be created, is named in a plain message,
    never "internal error: PermissionError"."""
    _indexed(home, roots)
    os.chmod(tmp_path, 0o755)
    for args in (["search", "pelican"], ["status"], ["enable"]):
        out = _as_nobody(home.path, *args)
        assert out.returncode != 0
        assert str(home.path) in out.stderr and "internal error" not in out.stderr, out.stderr
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    out = _as_nobody(locked / "aivault", "enable")
    assert out.returncode != 0 and "permission denied" in out.stderr and str(locked) in out.stderr, out.stderr
    assert "internal error" not in out.stderr


def test_loosened_private_files_are_tightened_and_foreign_ones_refused(home: Home, roots: dict[str, Path]) -> None:
    """A key or policy.json chmod-ed 0644 is back to 0600 after the next command; a key owned by
    another user is refused with a message saying what to do."""
    _indexed(home, roots)
    for name in ("key", "policy.json"):
        os.chmod(home.path / name, 0o644)
    run_cli(home.path, "search", "pelican", check=True)
    for name in ("key", "policy.json"):
        assert stat.S_IMODE((home.path / name).stat().st_mode) == 0o600, name
    if os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chown(home.path / "key", NOBODY, NOBODY)
    out = run_cli(home.path, "search", "pelican", "--limit", "1")
    assert out.returncode != 0 and "belongs to uid" in out.stderr and "internal error" not in out.stderr
