"""pi coding agent sessions (docs/formats.md §17), read whole through the shared tree (scanner/parsers/pitree.py).

pi writes ``<agent dir>/sessions/--<cwd>--/<timestamp>_<id>.jsonl``; the agent directory is
``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``, and the sessions folder alone moves with
``PI_CODING_AGENT_SESSION_DIR`` or the ``sessionDir`` key of the agent directory's ``settings.json``.
Every file is a ``whole`` unit: its live branch can only be told from the whole tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from aivault.scanner.parsers.jsonutil import loads_line
from aivault.scanner.parsers.pitree import SUFFIX, expand, file_unit, tree_discovery
from aivault.scanner.parsers.textutil import nonblank
from aivault.scanner.sources import Found, Root, Unit
from aivault.scanner.spec import AgentSpec

AGENT: Final = "pi"
RESUME: Final = "pi --session"
SETTINGS_MAX_BYTES: Final = 1024 * 1024  # settings.json is a small hand-edited file


def read_unit(found: Found) -> Unit:
    """One pi session file, read whole (sources.Unit)."""
    return file_unit(found, AGENT, RESUME)


def _settings_session_dir(agent_dir: Path, home: Path) -> Path | None:
    """The ``sessionDir`` of ``<agent dir>/settings.json`` when it is an absolute or ``~`` path (a relative
    one is taken from the directory pi starts in, which a scanner cannot know)."""
    try:
        with open(agent_dir / "settings.json", "rb") as f:
            doc = loads_line(f.read(SETTINGS_MAX_BYTES))
    except OSError:
        return None
    value = nonblank(doc.get("sessionDir")) if isinstance(doc, dict) else None
    if value is None or not (value.startswith("~") or Path(value).is_absolute()):
        return None
    return expand(value, home)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$PI_CODING_AGENT_SESSION_DIR``, the ``sessionDir`` of ``settings.json``, and ``<agent dir>/sessions``
    (``PI_CODING_AGENT_DIR``, default ``~/.pi/agent``; a leading ``~`` is the home), on every OS."""
    agent_dir = expand(env["PI_CODING_AGENT_DIR"], home) if env.get("PI_CODING_AGENT_DIR") else home / ".pi" / "agent"
    paths: list[Path] = []
    if env.get("PI_CODING_AGENT_SESSION_DIR"):
        paths.append(expand(env["PI_CODING_AGENT_SESSION_DIR"], home))
    configured = _settings_session_dir(agent_dir, home)
    if configured is not None:
        paths.append(configured)
    paths.append(agent_dir / "sessions")
    return [Root(AGENT, str(p)) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="pi", default_roots=default_roots, discover=tree_discovery(), read_unit=read_unit,
    expects="--<cwd>--/<timestamp>_<session id>.jsonl (JSONL tree: session header, id/parentId entries)",
    shaped=lambda name: name.endswith(SUFFIX))
