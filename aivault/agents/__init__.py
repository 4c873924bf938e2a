"""Hooking aivault into coding agents (``aivault agent install|uninstall``).

``install`` plans and applies the edits of each agent's config (the MCP server) and instruction
file; ``texts`` is what the agent is told about searching its history.
"""

from __future__ import annotations

# The agents aivault can hook into; here, not in ``install``, so the CLI parses its arguments
# without loading the edit code (difflib, tempfile, ...).
AGENTS = ("claude-code", "codex", "gemini")
