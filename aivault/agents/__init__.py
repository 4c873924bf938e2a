"""Hooking aivault into coding agents (``aivault agent install|uninstall``).

``install`` plans and applies the edits of each agent's config (the MCP server) and instruction
file; ``texts`` is what the agent is told about searching its history.
"""
