"""Prime Agent sessions (docs/formats.md §17): pi's tree format in one flat folder.

Prime Agent (PrimeIntellect-ai/prime-agent) writes ``<agent dir>/sessions/<session id>.jsonl``, the agent
directory being ``$PRIME_AGENT_CODING_AGENT_DIR`` or ``~/.prime/agent``; ``PRIME_AGENT_SESSION_DIR`` (and
its older spelling ``PRIME_AGENT_CODING_AGENT_SESSION_DIR``) moves the sessions folder. The file name
can differ from the header's id, which is the session's (and what ``--session`` takes).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from aivault.scanner.parsers.pitree import SUFFIX, expand, file_unit, tree_discovery
from aivault.scanner.sources import Found, Root, Unit
from aivault.scanner.spec import AgentSpec

AGENT: Final = "prime"
RESUME: Final = "prime-agent --session"
SESSION_DIR_VARS: Final = ("PRIME_AGENT_SESSION_DIR", "PRIME_AGENT_CODING_AGENT_SESSION_DIR")


def read_unit(found: Found) -> Unit:
    """One Prime Agent session file, read whole (sources.Unit)."""
    return file_unit(found, AGENT, RESUME)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$PRIME_AGENT_SESSION_DIR`` (or the older ``PRIME_AGENT_CODING_AGENT_SESSION_DIR``) and
    ``<agent dir>/sessions`` (``PRIME_AGENT_CODING_AGENT_DIR``, default ``~/.prime/agent``), on every OS."""
    agent_var = env.get("PRIME_AGENT_CODING_AGENT_DIR")
    agent_dir = expand(agent_var, home) if agent_var else home / ".prime" / "agent"
    paths = [expand(env[v], home) for v in SESSION_DIR_VARS if env.get(v)]
    paths.append(agent_dir / "sessions")
    return [Root(AGENT, str(p)) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="Prime Agent", default_roots=default_roots, discover=tree_discovery(max_depth=0),
    read_unit=read_unit, expects="<session id>.jsonl (pi's JSONL tree, one flat folder)",
    shaped=lambda name: name.endswith(SUFFIX))
