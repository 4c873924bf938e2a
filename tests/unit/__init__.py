"""Unit tests: one module or function each, in this process (no daemon; at most a bare child Python for isolation)."""
