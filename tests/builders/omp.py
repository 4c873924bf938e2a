"""Oh My Pi session files (docs/formats.md §17): pi's entries in Oh My Pi's folders, its title slot and sub-agents.

Oh My Pi names a cwd's folder with single dashes (``-home-dev-x``, as deja-vu observed), writes the
rewritable fixed-width title slot before the header, and keeps a sub-agent's transcript in a folder
named after the parent file's stem.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso
from tests.builders.pi import PiWriter, file_stamp

TITLE_SLOT_BYTES = 256


def omp_session_path(sessions: Path, cwd: str, session_id: str, start: datetime = BASE_TIME) -> Path:
    """``<sessions>/-<cwd with dashes>/<timestamp>_<id>.jsonl``."""
    folder = "-" + cwd.strip("/").replace("/", "-")
    return sessions / folder / f"{file_stamp(start)}_{session_id}.jsonl"


def title_slot(title: str, *, source: str = "user", updated: datetime = BASE_TIME) -> bytes:
    """The fixed-width first line: the JSON object padded (``pad``) to TITLE_SLOT_BYTES with its newline."""
    obj: dict[str, Any] = {"type": "title", "v": 1, "title": title, "source": source, "updatedAt": iso(updated),
                           "pad": ""}
    room = TITLE_SLOT_BYTES - 1 - len(orjson.dumps(obj))
    assert room >= 0, "title too long for the slot"
    obj["pad"] = " " * room
    line = orjson.dumps(obj) + b"\n"
    assert len(line) == TITLE_SLOT_BYTES
    return line


def new_session(sessions: Path, cwd: str, session_id: str, *, slot: str | None = None,
                start: datetime = BASE_TIME, **header_extra: Any) -> PiWriter:
    """A new Oh My Pi session file (with a title slot when ``slot`` is given)."""
    path = omp_session_path(sessions, cwd, session_id, start)
    path.parent.mkdir(parents=True, exist_ok=True)
    if slot is not None:
        path.write_bytes(title_slot(slot))
    return PiWriter(path, session_id=session_id, cwd=cwd, start=start, header_extra=header_extra)


def rewrite_title_slot(path: Path, title: str) -> None:
    """What ``/rename`` does to the slot: the first TITLE_SLOT_BYTES rewritten in place."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, title_slot(title), 0)
    finally:
        os.close(fd)


def move(w: PiWriter, sessions: Path, cwd: str) -> Path:
    """What moving a session to another project does: the file is written under the new cwd's folder with
    the old location added to the header's previousSessionFiles, and the old file removed."""
    old = w.file
    lines = old.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"session"'))
    head = orjson.loads(lines[at])
    head["cwd"] = cwd
    head["previousSessionFiles"] = [*head.get("previousSessionFiles", []), str(old)]
    lines[at] = orjson.dumps(head)
    new = omp_session_path(sessions, cwd, w.session_id)
    new.parent.mkdir(parents=True, exist_ok=True)
    new.write_bytes(b"\n".join(lines))
    old.unlink()
    w.path = new
    return new


def subagent(parent: PiWriter, agent: str, session_id: str) -> PiWriter:
    """A sub-agent's transcript ``<parent stem>/<agent>.jsonl``, opened with a session_init entry."""
    assert parent.path is not None
    path = parent.path.with_suffix("") / f"{agent}.jsonl"
    w = PiWriter(path, session_id=session_id, cwd=parent.cwd, start=parent.t)
    w.entry("session_init", systemPrompt=["You are a scout."], task=f"{agent}: look around", tools=["read"],
            agent=agent)
    return w
