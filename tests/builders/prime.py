"""Prime Agent session files (docs/formats.md §17): pi's entries, one flat folder, the header's id the session's."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.builders.common import BASE_TIME
from tests.builders.pi import PiWriter


def new_session(sessions: Path, session_id: str, *, cwd: str = "/home/dev/app", file_id: str | None = None,
                start: datetime = BASE_TIME) -> PiWriter:
    """``<sessions>/<file id>.jsonl`` (the file name may differ from the header's id)."""
    return PiWriter(sessions / f"{file_id or session_id}.jsonl", session_id=session_id, cwd=cwd, start=start)
