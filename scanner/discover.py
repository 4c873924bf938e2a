"""Where transcripts live: the default roots of every agent, and roots named on the command line.

Each agent's default roots (and the environment variables that move them) come from its spec
(aivault/scanner/agents.py); extra roots come from ``--root AGENT=PATH`` or ``"roots"`` in
config.json. A default root that does not exist is simply an agent the user does not run; an
extra root that does not exist, or any root or sub-folder that cannot be listed, is reported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from aivault.errors import InvalidRoot
from aivault.scanner.agents import AGENTS, SPECS
from aivault.scanner.sources import Found, Root, RootProblem

__all__ = ["AGENTS", "Found", "Root", "RootProblem", "default_roots", "parse_root_spec"]


def parse_root_spec(spec: str) -> Root:
    """``AGENT=PATH`` with a known agent (the agent decides how the folder is read)."""
    agent, sep, path = spec.partition("=")
    if not sep or agent not in SPECS or not path:
        raise InvalidRoot(f"root {spec!r} must look like AGENT=PATH with AGENT one of {', '.join(AGENTS)}")
    return Root(agent=agent, path=os.path.abspath(os.path.expanduser(path)), explicit=True)


def default_roots(env: Mapping[str, str] | None = None) -> list[Root]:
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or str(Path.home()))
    return [root for spec in SPECS.values() for root in spec.default_roots(env, home)]
