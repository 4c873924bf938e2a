"""Reading one transcript unit as the scanner does, for the agents' parser tests."""

from __future__ import annotations

from pathlib import Path

from aivault.scanner.agents import SPECS
from aivault.scanner.model import KINDS, ROLES
from aivault.scanner.sources import Found, Unit, file_signature


def whole_unit(agent: str, path: Path) -> Unit:
    """The file at ``path`` read whole by ``agent``'s reader, identified as a scanner's discovery would."""
    read = SPECS[agent].read_unit
    assert read is not None, f"{agent} reads no whole units"
    st = path.stat()
    return read(Found(str(path), agent, st.st_dev, st.st_ino, st.st_size, file_signature(str(path)) or 0, "whole"))


def timed_shape(unit: Unit) -> list[tuple[str, str, str]]:
    """(role, kind, text) of every message, after checking each is well formed and has a time."""
    assert unit.session.message_count == len(unit.messages)
    for m in unit.messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip() and m.ts is not None
    return [(m.role, m.kind, m.text) for m in unit.messages]
