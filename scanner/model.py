"""The normalized shapes every transcript parser produces (docs/formats.md §0).

A parser turns the lines of one transcript file into :class:`Message` records and keeps a
:class:`SessionInfo` up to date. Its whole memory between two passes over the same file is
``Parser.state()``: a small msgpack-serializable dict that the indexer commits together with
the byte offset it belongs to, so an interrupted pass resumes exactly where the last committed
batch ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

RoleName = Literal["user", "assistant", "tool", "system"]
KindName = Literal["text", "tool_call", "tool_result", "thinking"]

# The wire names of aivault.protocol.Role / Kind (its integers travel), in code order; a test checks
# they agree. Named apart from those enums: these are the strings a parser writes.
ROLES: tuple[RoleName, ...] = ("user", "assistant", "tool", "system")
KINDS: tuple[KindName, ...] = ("text", "tool_call", "tool_result", "thinking")


@dataclass(slots=True)
class Message:
    """One content block of a transcript, normalized."""

    role: RoleName
    kind: KindName
    text: str
    ts: int | None  # epoch milliseconds, None when the record carries no time


@dataclass(slots=True)
class SessionInfo:
    """What a parser knows about the session of the file it reads, cumulative over all lines."""

    agent: str  # "claude" | "codex" | ...
    session_id: str  # the agent's own id; the file stem when the transcript has none
    title: str | None = None  # already resolved by the agent's title precedence
    cwd: str | None = None
    branch: str | None = None
    started_at: int | None = None  # epoch ms
    updated_at: int | None = None  # epoch ms
    message_count: int = 0  # messages emitted so far for this file
    resume_command: str | None = None  # e.g. "claude --resume <id>"; never run by us
    parent_session_id: str | None = None  # subagent / fork parent, when known


@dataclass(slots=True)
class ParseStats:
    """Counters a parser keeps about input it had to skip or repair."""

    lines: int = 0
    malformed: int = 0  # not JSON, or JSON of an unexpected shape
    skipped: int = 0  # well-formed bookkeeping records that are not messages
    # Named counters: duplicates dropped ("duplicate_blocks", "duplicate_stream") and skipped
    # records by reason ("unknown_record:<type>", "unknown_item:<type>", "unparsed_record:<type>"),
    # a bounded key set (scanner.parsers.base.count_skip).
    extra: dict[str, int] = field(default_factory=dict)


class Parser(Protocol):
    """What the scanner needs from a parser of one agent's transcript format.

    Contract:
    * ``feed`` is given one complete line (without its trailing newline) and returns the
      messages it produced. It never raises: a malformed line increments ``stats.malformed``
      and yields nothing.
    * ``state()`` returns everything needed to continue after the last fed line in a new
      process: ``Parser(path, state)`` followed by feeding the remaining lines must give the
      same messages and session info as one uninterrupted pass. Keep it small (bounded, a few
      KB at most): it is stored with every batch (the line parsers derive it from one dataclass,
      scanner/parsers/base.py).
    * ``session`` reflects every line fed so far (title precedence already applied).
    """

    agent: str

    @property
    def stats(self) -> ParseStats: ...

    @property
    def session(self) -> SessionInfo: ...

    def feed(self, line: bytes) -> list[Message]: ...

    def state(self) -> dict[str, Any]: ...
