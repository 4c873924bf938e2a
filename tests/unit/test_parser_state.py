"""The line parsers' states (scanner/parsers/base.py): derived from one dataclass each, stored as
existing indexes hold them, read back leniently about keys and strictly about types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import msgpack
import pytest

from aivault.errors import ParserStateError
from aivault.scanner.agents import SPECS
from aivault.scanner.model import ParseStats
from aivault.scanner.parsers.base import ParserState, stored_as

# The keys each parser's state() writes, in order: indexes built by earlier versions hold exactly
# these (a renamed key would make every stored state unreadable, and every file be read again).
STORED_KEYS = {
    "claude": ["v", "sid", "parent", "decided", "agent_id", "cwd", "branch", "t0", "t1", "n", "custom", "ai",
               "summary", "first_user", "pending", "uuids", "msg_id", "hashes", "bg_checked", "bg_sibling", "stats"],
    "codex": ["v", "meta", "sid", "parent", "meta_cwd", "turn_cwd", "branch", "t0", "t1", "n", "thread_name",
              "first_user", "items", "recent", "child_start", "replaying", "commands", "raw_wanted", "stats"],
    "copilot": ["v", "sid", "cwd", "branch", "t0", "t1", "n", "first_user", "calls", "reasoning", "stats"],
    "cursor": ["v", "t0", "t1", "n", "first_user", "stats"],
    "goose": ["v", "title", "cwd", "first_user", "started", "updated", "count", "seen", "stats"],
    "antigravity": ["v", "title", "first_user", "cwd", "branch", "parent", "lineage", "t0", "t1", "n", "stats"],
    "kimi": ["v", "cwd", "profile", "t0", "t1", "n", "first_user", "prompt", "loop", "stats"],
    "droid": ["v", "sid", "title", "cwd", "parent", "t0", "t1", "n", "first_user", "stats"],
    "kiro": ["v", "t0", "t1", "n", "ts", "first_user", "cwd", "parent", "prefix_done", "stats"],
}
STORED_KEYS["traex"] = STORED_KEYS["codex"]  # the Codex parser under TraeX's name


def test_every_line_parser_writes_the_keys_existing_indexes_hold() -> None:
    """A fresh parser's state has the stored keys in the stored order (msgpack keeps the order)."""
    line_agents = {name for name, spec in SPECS.items() if spec.line_parser is not None}
    assert line_agents == set(STORED_KEYS)
    for agent, keys in STORED_KEYS.items():
        factory = SPECS[agent].line_parser
        assert factory is not None
        state = factory("/x/a.jsonl", None).state()
        assert list(state) == keys, agent
        assert state["stats"] == [0, 0, 0, {}], agent


@dataclass(slots=True)
class _Sample(ParserState):
    VERSION: ClassVar[int] = 3
    AGENT: ClassVar[str] = "sample"

    name: str | None = stored_as("nm")
    at: int | None = stored_as("t")
    count: int = stored_as("n", 0)
    seen: bool = stored_as("seen", False)
    hashes: list[int] = stored_as("h", factory=list)
    pairs: list[tuple[str, str]] = stored_as("p", factory=list)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


def test_a_state_round_trips_through_msgpack_under_its_stored_keys() -> None:
    """to_wire writes "v" then each field under its key; from_wire gives the same state back."""
    state = _Sample("a", 5, 2, True, [1, 2], [("leaf", "title")], ParseStats(3, 1, 1, {"x": 1}))
    wire = state.to_wire()
    assert wire == {"v": 3, "nm": "a", "t": 5, "n": 2, "seen": True, "h": [1, 2], "p": [["leaf", "title"]],
                    "stats": [3, 1, 1, {"x": 1}]}
    assert _Sample.from_wire(msgpack.unpackb(msgpack.packb(wire), raw=False)) == state
    assert _Sample.load(None) == _Sample()


def test_the_written_state_does_not_change_with_the_parser() -> None:
    """A batch holds the state written when it was cut: lists and counters are copies."""
    state = _Sample(hashes=[1], pairs=[("a", "b")])
    wire = state.to_wire()
    state.hashes.append(2)
    state.pairs.append(("c", "d"))
    state.stats.extra["y"] = 1
    assert wire["h"] == [1] and wire["p"] == [["a", "b"]] and wire["stats"][3] == {}


def test_missing_keys_are_empty_and_unknown_keys_are_ignored() -> None:
    """A state written before a field existed reads as that field's empty value."""
    state = _Sample.from_wire({"v": 3, "stats": [0, 0, 0, {}], "later": "ignored"})
    assert state == _Sample()


@pytest.mark.parametrize("bad", [
    None, [], {}, {"v": 2, "stats": [0, 0, 0, {}]}, {"v": 3},
    {"v": 3, "stats": [0, 0, 0, {}], "nm": 1}, {"v": 3, "stats": [0, 0, 0, {}], "t": "soon"},
    {"v": 3, "stats": [0, 0, 0, {}], "t": True}, {"v": 3, "stats": [0, 0, 0, {}], "n": "many"},
    {"v": 3, "stats": [0, 0, 0, {}], "h": ["x"]}, {"v": 3, "stats": [0, 0, 0, {}], "h": "x"},
    {"v": 3, "stats": [0, 0, 0, {}], "p": [["only one"]]}, {"v": 3, "stats": [0, 0, 0, {}], "p": [[1, 2]]},
    {"v": 3, "stats": [0, 0, {}]}, {"v": 3, "stats": [0, "x", 0, {}]}, {"v": 3, "stats": [0, 0, 0, {"k": "v"}]},
])
def test_another_version_or_a_wrong_type_is_refused(bad: object) -> None:
    """ParserStateError, upon which the scanner reads the file again from its start."""
    with pytest.raises(ParserStateError):
        _Sample.from_wire(bad)


def test_a_field_without_a_stored_key_or_of_an_unknown_type_is_refused() -> None:
    """Every field says its key, and holds a type whose stored form the base knows."""

    @dataclass(slots=True)
    class Unkeyed(ParserState):
        VERSION: ClassVar[int] = 1
        AGENT: ClassVar[str] = "x"
        name: str | None = None

    @dataclass(slots=True)
    class Odd(ParserState):
        VERSION: ClassVar[int] = 1
        AGENT: ClassVar[str] = "x"
        ratio: float = stored_as("r", 0.0)

    for cls in (Unkeyed, Odd):
        with pytest.raises(TypeError):
            cls().to_wire()
