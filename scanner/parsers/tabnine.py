"""Tabnine CLI sessions (docs/formats.md §29): Gemini CLI's chat log under Tabnine's own folder.

Tabnine CLI is a fork of Gemini CLI that keeps its ChatRecordingService: the same JSONL log per
session (metadata line, message records, ``$set`` and ``$rewindTo``), laid out as
``~/.tabnine/agent/tmp/<project>/chats/session-<time>-<id8>.jsonl`` with sub-agents in
``chats/<parent id>/<id>.jsonl`` and a ``projects.json`` registry in ``~/.tabnine/agent``. So this
module is the Gemini reader (scanner/parsers/gemini/) with Tabnine's roots, its assistant message
type (``tabnine``; Gemini-family records may still say ``gemini``) and its command.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from aivault.scanner.parsers.gemini import (
    SESSION_PREFIX,
    chats_discovery,
    gemini_unit,
    legacy_predecessor,
    read_settled,
    replay_file,
    session_file_mode,
)
from aivault.scanner.parsers.gemini.records import ASSISTANT_TYPES
from aivault.scanner.sources import Found, Root, Unit
from aivault.scanner.spec import AgentSpec

AGENT: Final = "tabnine"
# Gemini CLI's resume flag, which the fork keeps as far as is known (unverified on a real install).
RESUME: Final = "tabnine --resume"
TABNINE_ASSISTANT_TYPES: Final = ASSISTANT_TYPES | {"tabnine"}


def read_unit(found: Found) -> Unit:
    """One Tabnine CLI session file, read whole and replayed as Gemini CLI's loader does."""
    fb = read_settled(found.path)
    skips: dict[str, int] = {}
    return gemini_unit(found.path, AGENT, fb, replay_file(found.path, fb, skips), resumable=True,
                       command=RESUME, assistant_types=TABNINE_ASSISTANT_TYPES)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.tabnine/agent/tmp``; ``GEMINI_CLI_HOME`` replaces ``$HOME`` as it does for Gemini CLI, whose
    storage code the fork inherits (``$GEMINI_CLI_HOME/.tabnine/agent/tmp``)."""
    base = Path(env["GEMINI_CLI_HOME"]).expanduser().absolute() if env.get("GEMINI_CLI_HOME") else home
    return [Root(AGENT, str(base / ".tabnine" / "agent" / "tmp"))]


SPEC = AgentSpec(
    name=AGENT, label="Tabnine CLI", default_roots=default_roots,
    discover=chats_discovery(session_file_mode), read_unit=read_unit, predecessor=legacy_predecessor,
    expects="<project>/chats/session-<time>-<id>.jsonl (sub-agents chats/<parent>/<id>.jsonl)",
    shaped=lambda name: name.startswith(SESSION_PREFIX) and name.endswith((".json", ".jsonl")))
