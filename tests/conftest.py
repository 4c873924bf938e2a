"""Shared fixtures: data directories, transcript roots, and a daemon run for real in this process.

The helpers these fixtures use, and that tests call directly, live in tests/support/; this file
holds only fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import policy
from aivault.home import Home
from tests.support.common import lexical_only
from tests.support.daemons import InprocDaemon


@pytest.fixture(autouse=True, scope="session")
def _quiet_logs() -> None:
    from aivault import log

    log.configure("warning", process="tests")


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


@pytest.fixture
def inproc_daemon(home: Home, roots: dict[str, Path]) -> Iterator[InprocDaemon]:
    """The daemon in this process over the ``roots`` fixture (tests/support/daemons.py ``InprocDaemon``)."""
    with InprocDaemon(home, roots) as d:
        yield d
