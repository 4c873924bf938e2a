"""Retention undone without a daemon: a one-shot `aivault index` brings back what a shorter retention removed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from aivault import policy
from aivault.home import Home
from tests.builders import ClaudeWriter
from tests.support.common import lexical_only, root_args, run_cli


def _sessions(home: Home) -> set[str]:
    out = run_cli(home.path, "rpc", "aiVault.searchSessions", json.dumps({"query": "otter", "limit": 100}), check=True)
    return {h["sessionId"] for h in json.loads(out.stdout)["hits"]}


def test_growing_retention_restores_swept_sessions_on_the_next_index(tmp_path: Path, roots: dict[str, Path]) -> None:
    """90 days keeps the recent session and sweeps the March ones; --forever and a one-shot index bring every
    one back (they were only swept, the transcripts are unchanged); 90 days again sweeps them once more."""
    home = Home.resolve(tmp_path / "home").ensure()
    lexical_only(home)
    old = [ClaudeWriter(roots["claude"], cwd=f"/home/dev/old{i}").user(f"the otter number {i} in march")
           for i in range(3)]
    recent = ClaudeWriter(roots["claude"], cwd="/home/dev/new", start=datetime.now(UTC)).user("a recent otter")
    args = ["index", *[a for spec in root_args(roots) for a in ("--root", spec)], "--no-default-roots"]
    policy.save(home, policy.Policy(True, 90))
    run_cli(home.path, *args, check=True)
    assert _sessions(home) == {recent.session_id}
    policy.save(home, policy.Policy(True, None))
    run_cli(home.path, *args, check=True)
    assert _sessions(home) == {recent.session_id, *(w.session_id for w in old)}
    policy.save(home, policy.Policy(True, 90))
    run_cli(home.path, *args, check=True)
    assert _sessions(home) == {recent.session_id}
    policy.save(home, policy.Policy(True, 365))
    run_cli(home.path, *args, check=True)
    assert _sessions(home) == {recent.session_id, *(w.session_id for w in old)}
