"""Kiro CLI sessions (docs/formats.md §24): three generations under two roots.

* ``$KIRO_HOME/sessions`` (``~/.kiro/sessions``): the 2.x transcripts ``cli/<uuid>.jsonl`` (each with
  its ``<uuid>.json`` sidecar) and the V3 engine's ``<hash>/<session dir>/messages.jsonl`` (with
  ``session.json``). Both are appended to, so they are ``lines`` units (scanner/parsers/kiro/jsonl.py).
  A session the V3 engine took over from 2.x lives in a ``cli_<uuid>_…`` folder and keeps its old
  ``cli/<uuid>.jsonl``; only the V3 copy is indexed.
* ``${XDG_DATA_HOME:-~/.local/share}/kiro-cli`` (macOS ``~/Library/Application Support/kiro-cli``):
  the older ``data.sqlite3``, each conversation a ``whole`` unit read read-only
  (scanner/parsers/kiro/store.py).

A root is walked two levels deep: far enough for ``<hash>/<session dir>/messages.jsonl``, not into a
V3 session's ``snapshots/`` (file checkpoints) or ``sub-executions/`` (sub-agent transcripts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from aivault.scanner.parsers.kiro.jsonl import V3_FILE, KiroParser, KiroV3Parser, make_parser
from aivault.scanner.parsers.kiro.store import DB_NAME, list_conversations, read_conversation
from aivault.scanner.parsers.sqlite_units import due, list_sessions
from aivault.scanner.sources import Found, Mode, Root, RootProblem
from aivault.scanner.spec import AgentSpec, file_discovery

__all__ = ["SPEC", "KiroParser", "KiroV3Parser", "default_roots", "discover", "make_parser"]

AGENT = "kiro"
CLI_DIR = "cli"
MAX_DEPTH = 2
# The V3 folder of a session first written by 2.x: cli_<uuid>_<suffix>.
_MIGRATED_DIR = re.compile(r"cli_([0-9A-Fa-f-]{36})")


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$KIRO_HOME/sessions`` (``~/.kiro/sessions``), and the SQLite store's folders
    ``$XDG_DATA_HOME/kiro-cli`` (``~/.local/share/kiro-cli``) and ``~/Library/Application Support/kiro-cli``."""
    kiro_home = Path(env["KIRO_HOME"]).expanduser() if env.get("KIRO_HOME") else home / ".kiro"
    data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    paths = [kiro_home / "sessions", data / "kiro-cli", home / "Library" / "Application Support" / "kiro-cli"]
    return [Root(AGENT, str(p.absolute())) for p in dict.fromkeys(paths)]


def transcript_mode(directory: str, name: str) -> Mode | None:
    """``lines`` for a 2.x ``cli/<uuid>.jsonl`` and a V3 ``<session dir>/messages.jsonl``."""
    folder = os.path.basename(directory)
    if name == V3_FILE:
        return "lines" if folder.startswith(("sess_", "cli_")) else None
    if folder == CLI_DIR and name.endswith(".jsonl") and not name.startswith("."):
        return "lines"
    return None


_files = file_discovery(transcript_mode, max_depth=MAX_DEPTH)
# Per root: the uuids of 2.x sessions whose V3 copy (a cli_<uuid>_… folder) was seen. A recent pass
# lists only changed folders, so what earlier passes saw is kept until the next full pass.
_MIGRATED: dict[str, set[str]] = {}


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The conversations of a ``data.sqlite3`` in the root (listed again only when it changed), then
    the transcripts under it, without a 2.x file the V3 engine took over."""
    listing, fresh = list_sessions(os.path.join(root.path, DB_NAME), root, problems, dirs, list_conversations)
    if listing is not None:
        yield from due(listing, fresh, full)
    found = list(_files(root, problems, dirs, full))
    migrated = _MIGRATED.setdefault(root.path, set())
    if full:
        migrated.clear()
    for f in found:
        match = _MIGRATED_DIR.match(os.path.basename(os.path.dirname(f.path)))
        if match is not None and os.path.basename(f.path) == V3_FILE:
            migrated.add(match.group(1).lower())
    for f in found:
        if os.path.basename(os.path.dirname(f.path)) == CLI_DIR and Path(f.path).stem.lower() in migrated:
            continue
        yield f


SPEC = AgentSpec(
    name=AGENT, label="Kiro CLI", default_roots=default_roots, discover=discover, line_parser=make_parser,
    read_unit=read_conversation,
    expects="cli/<uuid>.jsonl (+ <uuid>.json), <hash>/sess_<id>/messages.jsonl (+ session.json), or data.sqlite3",
    shaped=lambda name: name.endswith(".jsonl") or name == DB_NAME)
