"""The agents aivault reads, one ``AgentSpec`` each: the wire names are ``AGENTS``
(= ``aivault.protocol.AGENT_NAMES``, docs/formats.md §13).

A spec says where the agent keeps its transcripts by default (and which environment variables move
them), how to find the units under a root, and how to read one: a line parser for append-only
files, or a reader for units read whole (JSON documents, task folders, database sessions).
``hit.agent``, ``filters.agents`` and ``--root AGENT=PATH`` all use these names.
"""

from __future__ import annotations

import importlib

from aivault.protocol import AGENT_NAMES
from aivault.scanner.spec import AgentSpec

# One module (or package) per agent under aivault/scanner/parsers/, each defining SPEC (or SPECS);
# the order is the documented one. Imported by name, so the engine depends on no parser directly.
MODULES = ("claude", "codex", "gemini", "qwen", "opencode", "crush", "goose", "cursor", "copilot", "cline", "aider",
           "amp", "antigravity", "pi", "omp", "prime", "openclaw", "hermes", "kimi", "grok", "droid", "devin", "kiro",
           "continuedev", "openhands", "zed", "traex", "tabnine", "vscode_copilot", "vibe", "dsh", "junie", "rovodev",
           "auggie")


def _registry() -> dict[str, AgentSpec]:
    specs: list[AgentSpec] = []
    for name in MODULES:
        module = importlib.import_module(f"aivault.scanner.parsers.{name}")
        found = getattr(module, "SPECS", None) or [module.SPEC]
        specs += found
    return {s.name: s for s in specs}


SPECS: dict[str, AgentSpec] = _registry()
AGENTS: tuple[str, ...] = tuple(SPECS)
if AGENTS != AGENT_NAMES:  # a module added or renamed without its wire name (or the reverse)
    raise ImportError(f"scanner agents {AGENTS} differ from aivault.protocol.AGENT_NAMES {AGENT_NAMES}")


def spec(agent: str) -> AgentSpec:
    return SPECS[agent]
