"""Per-agent tests: one module per transcript format (its reader, discovery, and its sessions end to end)."""
