"""TraeX (TRAE CLI 2.0, ByteDance) rollouts (docs/formats.md §28).

TraeX is a closed fork of Codex's Rust CLI and writes Codex rollouts unchanged (``session_meta``,
``turn_context``, ``response_item``, ``event_msg``, ``compacted``) under ``~/.trae/cli`` instead of
``~/.codex``. So it is the Codex agent with another home, name and resume command: its parser is
:class:`CodexParser` under the wire name ``traex``, and its discovery, compressed-rollout handling
and thread names are Codex's (scanner/parsers/codex.py, docs/formats.md §2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from aivault.scanner.parsers import codex
from aivault.scanner.sources import Root


class TraexParser(codex.CodexParser):
    """A TraeX rollout: Codex's parser, with TraeX's name and resume command."""

    agent = "traex"
    resume_program = "traex resume"
    # Whether `traex resume <id>` restores the session's folder is unverified: resume from it.
    resume_in_cwd = True


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.trae/cli/sessions`` and ``~/.trae/cli/archived_sessions`` (``traex archive``), on Linux and
    macOS alike; TraeX documents no environment variable that moves them (name others with
    ``--root traex=PATH``)."""
    cli_home = home / ".trae" / "cli"
    return [Root("traex", str(cli_home / "sessions")), Root("traex", str(cli_home / "archived_sessions"))]


# Codex's spec with TraeX's roots and parser: the same rollout discovery (history.jsonl and
# session_index.jsonl are not transcripts), compressed rollouts continuing plain ones, and thread
# names from the state databases beside the sessions folder when a build writes them.
SPEC = dataclasses.replace(
    codex.SPEC, name="traex", label="TraeX (TRAE CLI)", default_roots=default_roots, line_parser=TraexParser,
    expects="YYYY/MM/DD/rollout-<time>-<uuid>.jsonl (Codex rollout JSONL)")
