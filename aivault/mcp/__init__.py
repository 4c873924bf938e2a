"""The MCP server agents use to search their own history (``aivault mcp``).

``tools`` says what each tool takes and answers and keeps answers small; ``args`` reads the
arguments agents send; ``server`` serves the tools over stdio or streamable HTTP with the official
MCP SDK. Importing this package imports none of them (the SDK is loaded only to serve).
"""
