"""Reading one transcript unit as the scanner does, for the agents' parser tests."""

from __future__ import annotations

from pathlib import Path

from aivault.scanner.agents import SPECS
from aivault.scanner.model import KINDS, ROLES, Message
from aivault.scanner.sources import Found, Root, RootProblem, Unit, file_signature


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


def discover(agent: str, path: Path, *, explicit: bool = False, full: bool = True,
             dirs: dict[str, int] | None = None) -> tuple[list[Found], list[RootProblem]]:
    """What ``agent``'s discovery finds under the root ``path`` in one pass, and the problems it reported."""
    problems: list[RootProblem] = []
    found = list(SPECS[agent].discover(Root(agent, str(path), explicit), problems, {} if dirs is None else dirs, full))
    return found, problems


def units_by_id(agent: str, path: Path) -> dict[str, Unit]:
    """Every unit discovery finds under ``path`` (with no problem reported), read whole, by session id."""
    found, problems = discover(agent, path)
    assert problems == []
    read = SPECS[agent].read_unit
    assert read is not None, f"{agent} reads no whole units"
    return {u.session.session_id: u for u in map(read, found)}


def texts(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


def well_formed(unit: Unit) -> None:
    """Every message has a known role and kind and some text, and the session counts them all."""
    assert unit.session.message_count == len(unit.messages)
    for m in unit.messages:
        assert m.role in ROLES and m.kind in KINDS and m.text.strip()
