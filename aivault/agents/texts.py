"""What ``aivault agent install`` writes for an agent to read: when to search its history, and how.

Harnesses may defer MCP tools (load them only when something asks), so the instruction matters
as much as the server: it names the situations, the tools, and a command-line fallback that works
when the tools are not loaded.
"""

from __future__ import annotations

BEGIN = "<!-- aivault:begin (written by `aivault agent install`; `aivault agent uninstall` removes it) -->"
END = "<!-- aivault:end -->"

_WHEN = """\
Search the user's past coding-agent sessions on this machine (Claude Code, Codex, Gemini CLI and
others, indexed by aivault) when:
- the user refers to earlier work ("like last time", "where did we fix…", "what did I decide about…");
- you are about to investigate an error, a flaky test or a design question that may have come up before;
- you need a command, a path or a decision from another session or another repository.

How: `search_sessions` (aivault MCP server) with a few distinctive words, a "quoted phrase", or
operators `agent:codex`, `path:/abs/dir`, `branch:name`; then `read_session` with the hit's id and the
same query to read the messages around the match. Results are small pages: pass `cursor` for more.
`index_status` says whether the index is current. Your own running session is left out.
If the tools are not available, run `aivault search "words" --json` in the shell.
Cite what you found (session title, folder, date); resume a session only if the user asks."""

SKILL = f"""\
---
name: aivault
description: Search the user's past AI coding-agent sessions on this machine (what was done, decided
  or fixed before). Use when the user refers to earlier work, or before re-investigating an error or
  decision that may have come up in another session.
---

# Searching past agent sessions with aivault

{_WHEN}
"""

BLOCK = f"""{BEGIN}
## Past agent sessions (aivault)

{_WHEN}
{END}
"""
