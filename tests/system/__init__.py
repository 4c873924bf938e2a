"""System tests: daemons, child processes, kills and crashes, transports (ZeroMQ, ssh, HTTP, MCP, the browser)."""
