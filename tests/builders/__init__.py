"""Builders of real-format agent transcripts, one module per format (docs/formats.md).

Each format module holds pure record functions (shared with ``bench.gen_corpus`` and
``bench.quality.render``) and a writer that appends whole sessions for tests; ``common`` holds
timestamps, directory names and UUIDs.
"""

from __future__ import annotations

from tests.builders.claude import ClaudeWriter
from tests.builders.codex import CodexWriter
from tests.builders.common import BASE_TIME, iso, munge

__all__ = ["BASE_TIME", "ClaudeWriter", "CodexWriter", "iso", "munge"]
