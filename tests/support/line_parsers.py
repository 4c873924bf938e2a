"""What every line parser's tests share: the lines the scanner feeds, and resuming from saved state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgpack

from aivault.scanner.model import Message


class LineParser(Protocol):
    @property
    def session(self) -> Any: ...

    @property
    def stats(self) -> Any: ...

    def feed(self, line: bytes) -> list[Message]: ...

    def state(self) -> dict[str, Any]: ...


def file_lines(path: Path) -> list[bytes]:
    """The lines the scanner would feed: split on newlines, without the empty tail after the last one."""
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """The state as the indexer stores it: through msgpack and back."""
    restored = msgpack.unpackb(msgpack.packb(state, use_bin_type=True), raw=False)
    assert isinstance(restored, dict)
    return restored


def assert_resumes_at_every_split(make: Callable[[dict[str, Any] | None], LineParser], path: Path) -> None:
    """Parsing lines 1..k, saving state through msgpack and resuming for k+1..n equals one whole pass,
    for every k; the state stays under 8 KiB."""
    lines = file_lines(path)
    full = make(None)
    full_messages = [m for line in lines for m in full.feed(line)]
    head = make(None)
    head_messages: list[Message] = []
    for k in range(len(lines) + 1):
        if k:
            head_messages.extend(head.feed(lines[k - 1]))
        state = roundtrip(head.state())
        assert len(msgpack.packb(state)) < 8192, f"state too large after {k} lines"
        tail = make(state)
        assert tail.session == head.session
        tail_messages = [m for line in lines[k:] for m in tail.feed(line)]
        assert head_messages + tail_messages == full_messages, f"messages differ when split after {k} lines"
        assert tail.session == full.session, f"session differs when split after {k} lines"
        assert tail.stats == full.stats, f"stats differ when split after {k} lines"
