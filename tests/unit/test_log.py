"""The log front (aivault/log.py): structlog loaded late, settings applied before any line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support.common import REPO

# Two threads write their first lines at once while structlog is still being given the settings
# (its configure is slowed down to hold that moment open): the second line must wait for them.
_RACE = textwrap.dedent("""
    import threading, time
    from aivault import log
    log.configure("info", process="race")
    import structlog
    real = structlog.configure
    def slow_configure(**kw):
        time.sleep(0.3)
        real(**kw)
    structlog.configure = slow_configure
    first, second = log.get("a"), log.get("b")
    t = threading.Thread(target=lambda: first.info("first line"))
    t.start()
    time.sleep(0.1)
    second.info("second line")
    t.join()
""")


def test_a_line_written_while_another_thread_applies_the_settings_waits_for_them() -> None:
    """A thread's first line during another's structlog set-up goes to stderr as JSON, never to stdout."""
    proc = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    lines = [json.loads(line) for line in proc.stderr.splitlines()]
    assert sorted(d["event"] for d in lines) == ["first line", "second line"]
    assert {d["process"] for d in lines} == {"race"}
