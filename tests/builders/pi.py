"""pi session files (docs/formats.md §17) and a writer of whole sessions for tests.

A session is a ``session`` header, then entries linked by ``id``/``parentId``. ``PiWriter`` keeps the
leaf as pi's ``SessionManager`` does: every entry it appends hangs under the last one, ``branch`` moves
the leaf back to an earlier entry (``/tree``), so the next entry starts a sibling branch. Oh My Pi
(tests/builders/omp.py), Prime Agent (tests/builders/prime.py) and OpenClaw (tests/builders/openclaw.py)
write the same entries; their builders place the files and add their own entries.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms, iso

VERSION = 3
PROVIDER = "anthropic"
MODEL = "claude-sonnet-4-5"

Sink = Callable[[dict[str, Any]], None]


def encode_cwd(cwd: str) -> str:
    """pi's sessions folder for a cwd: without its leading separator, ``/``, ``\\`` and ``:`` as ``-``,
    between ``--`` and ``--``."""
    body = cwd.lstrip("/\\")
    for ch in "/\\:":
        body = body.replace(ch, "-")
    return f"--{body}--"


def file_stamp(t: datetime) -> str:
    """The time in a session file's name: the ISO start with ``:`` and ``.`` as ``-``."""
    return iso(t).replace(":", "-").replace(".", "-")


def pi_session_path(sessions: Path, cwd: str, session_id: str, start: datetime = BASE_TIME) -> Path:
    """``<sessions>/--<cwd>--/<timestamp>_<id>.jsonl``, as pi names a new session's file."""
    return sessions / encode_cwd(cwd) / f"{file_stamp(start)}_{session_id}.jsonl"


def header(session_id: str, cwd: str | None, t: datetime, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "session", "version": VERSION, "id": session_id, "timestamp": iso(t)}
    if cwd is not None:
        d["cwd"] = cwd
    d.update(extra)
    return d


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def user_message(value: str | list[dict[str, Any]], t: datetime) -> dict[str, Any]:
    return {"role": "user", "content": [text(value)] if isinstance(value, str) else value, "timestamp": epoch_ms(t)}


def assistant_message(blocks: list[dict[str, Any]], t: datetime, *, model: str = MODEL,
                      stop: str = "stop") -> dict[str, Any]:
    return {"role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": PROVIDER,
            "model": model, "usage": {"input": 900, "output": 40, "cacheRead": 0, "cacheWrite": 0,
                                      "totalTokens": 940, "cost": {"total": 0.003}},
            "stopReason": stop, "timestamp": epoch_ms(t)}


def tool_result_message(call_id: str, name: str, output: str | list[dict[str, Any]], t: datetime, *,
                        is_error: bool = False) -> dict[str, Any]:
    content = [text(output)] if isinstance(output, str) else output
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": content,
            "isError": is_error, "timestamp": epoch_ms(t)}


class PiWriter:
    """Appends one session's entries (to ``path``, or to ``sink`` for a store that is not a file); ids are
    8 hex digits, times advance two seconds per entry."""

    def __init__(self, path: Path | None, *, session_id: str, cwd: str | None = "/home/dev/app",
                 start: datetime = BASE_TIME, sink: Sink | None = None, header_extra: dict[str, Any] | None = None,
                 write_header: bool = True) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        self.t = start
        self.sink = sink
        self.last: str | None = None
        self.count = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        if write_header:
            self.write(header(session_id, cwd, start, **(header_extra or {})))

    @property
    def file(self) -> Path:
        """The session file (a writer into another store has none)."""
        assert self.path is not None, "this writer writes into a store, not a file"
        return self.path

    def write(self, obj: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(obj)
            return
        assert self.path is not None
        with self.path.open("ab") as f:
            f.write(orjson.dumps(obj) + b"\n")

    def entry(self, kind: str, **fields: Any) -> str:
        """Write one entry as the child of the leaf and make it the leaf; returns its id."""
        self.t += timedelta(seconds=2)
        self.count += 1
        ident = f"{self.count:08x}"
        self.write({"type": kind, "id": ident, "parentId": self.last, "timestamp": iso(self.t), **fields})
        self.last = ident
        return ident

    def branch(self, entry_id: str | None) -> PiWriter:
        """Move the leaf to an earlier entry (``/tree``): the next entry starts a new branch there."""
        self.last = entry_id
        return self

    def model(self, provider: str = PROVIDER, model_id: str = MODEL) -> PiWriter:
        self.entry("model_change", provider=provider, modelId=model_id)
        return self

    def user(self, value: str | list[dict[str, Any]]) -> PiWriter:
        self.entry("message", message=user_message(value, self.t + timedelta(seconds=2)))
        return self

    def assistant(self, value: str, *, thinking: str | None = None) -> PiWriter:
        blocks = ([{"type": "thinking", "thinking": thinking}] if thinking else []) + [text(value)]
        self.entry("message", message=assistant_message(blocks, self.t + timedelta(seconds=2)))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str, *, is_error: bool = False,
             say: str | None = None) -> PiWriter:
        """An assistant turn calling ``name`` (after ``say``, when given), and the tool's result."""
        call_id = f"call_{self.count + 1}"
        blocks = ([text(say)] if say else []) + [{"type": "toolCall", "id": call_id, "name": name, "arguments": args}]
        self.entry("message", message=assistant_message(blocks, self.t + timedelta(seconds=2), stop="toolUse"))
        self.entry("message", message=tool_result_message(call_id, name, output, self.t + timedelta(seconds=2),
                                                          is_error=is_error))
        return self

    def name(self, value: str) -> PiWriter:
        """``/name``: a session_info entry."""
        self.entry("session_info", name=value)
        return self

    def compaction(self, summary: str, first_kept: str | None = None) -> PiWriter:
        self.entry("compaction", summary=summary, firstKeptEntryId=first_kept or "", tokensBefore=5000)
        return self

    def branch_summary(self, from_id: str, summary: str) -> PiWriter:
        self.entry("branch_summary", fromId=from_id, summary=summary)
        return self

    def custom_message(self, content: str, *, display: bool, custom_type: str = "extension") -> PiWriter:
        self.entry("custom_message", customType=custom_type, content=content, display=display)
        return self
