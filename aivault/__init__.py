"""aivault: local-first search over the transcripts AI coding agents leave on disk."""

from __future__ import annotations

__version__ = "0.1.0"
