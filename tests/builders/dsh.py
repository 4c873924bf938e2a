"""DeepSeek Harness session logs (docs/formats.md §32) and a writer that appends them as dsh does.

``header`` and ``event`` build the log's records; ``DshWriter`` keeps a session's ``seq`` and time
and appends each batch of events as one zstd frame (``compressed=True``, the default persistence) or
as plain lines (raw persistence), under ``<dsh home>/sessions/<project slug>/<session id>/``.
"""

from __future__ import annotations

import uuid as _uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import zstandard

from tests.builders.common import BASE_TIME, epoch_ms

PROVIDER = "deepseek-official"
MODEL = "deepseek-v4"


def project_slug(cwd: str) -> str:
    """dsh's project folder name (pi's encoding): ``/work/pgbouncer-lab`` -> ``--work-pgbouncer-lab--``."""
    return "--" + cwd.lstrip("/\\").replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def session_dir(dsh_home: Path, cwd: str, session_id: str) -> Path:
    return dsh_home / "sessions" / project_slug(cwd) / session_id


def header(session_id: str, created: int, cwd: str | None, *, version: int = 0, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "session", "version": version, "id": session_id, "createdAt": created}
    if cwd is not None:
        d["cwd"] = cwd
    d["delegationDepth"] = extra.pop("delegationDepth", 0)
    d.update(extra)
    return d


def event(kind: str, seq: int, at: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": at, "data": data, **extra}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def reasoning(value: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": value}


def user_data(content: list[dict[str, Any]], source: str = "user", **source_extra: Any) -> dict[str, Any]:
    return {"content": content, "source": {"kind": source, **source_extra}, "role": "user"}


def assistant_data(turn: int, step: int, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"turn": turn, "step": step, "message": {"role": "assistant", "content": content,
                                                   "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}}}


def tool_result_data(turn: int, step: int, call_id: str, output: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": [text(output)]}
    if is_error:
        block["isError"] = True
    return {"turn": turn, "step": step, "message": {"role": "user", "source": {"kind": "tool", "callId": call_id},
                                                   "content": [block]}}


class DshWriter:
    """Appends one session's events; every ``write`` is one append (one zstd frame when compressed)."""

    def __init__(self, dsh_home: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 compressed: bool = True, start: datetime = BASE_TIME, **header_extra: Any) -> None:
        self.session_id = session_id or f"session-{_uuid.uuid4()}"
        self.cwd = cwd
        folder = session_dir(dsh_home, cwd, self.session_id)
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ("session.jsonl.zstd" if compressed else "session.jsonl")
        self.compressed = compressed
        self.t = epoch_ms(start)
        self.seq = 0
        self.turn = 0
        self.write([header(self.session_id, self.t, cwd, **header_extra)])

    def write(self, records: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(r) + b"\n" for r in records)
        if self.compressed:
            data = zstandard.ZstdCompressor(write_checksum=True).compress(data)
        with self.path.open("ab") as f:
            f.write(data)

    def next(self, kind: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """The next event (seq and time advance)."""
        self.t += 1000
        e = event(kind, self.seq, self.t, data, **extra)
        self.seq += 1
        return e

    def user(self, prompt: str, *, reply: str | None = None, thinking: str | None = None,
             tool: tuple[str, dict[str, Any], str] | None = None) -> DshWriter:
        """One turn: the prompt, an optional tool call and its result, and the reply (one append)."""
        self.turn += 1
        turn = self.turn
        rows = [self.next("turn/start", {"turn": turn}), self.next("user/message", user_data([text(prompt)]))]
        step = 1
        if tool is not None:
            name, args, output = tool
            call_id = f"call-{turn}"
            rows += [self.next("step/start", {"turn": turn, "step": step}),
                     self.next("assistant/message", assistant_data(turn, step, [text(f"Running {name}.")])),
                     self.next("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": name,
                                             "arguments": orjson.dumps(args).decode()}),
                     self.next("tool/result", tool_result_data(turn, step, call_id, output)),
                     self.next("step/end", {"turn": turn, "step": step})]
            step += 1
        if reply is not None:
            content = ([reasoning(thinking)] if thinking else []) + [text(reply)]
            rows += [self.next("step/start", {"turn": turn, "step": step}),
                     self.next("assistant/message", assistant_data(turn, step, content)),
                     self.next("step/end", {"turn": turn, "step": step})]
        rows.append(self.next("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
        self.write(rows)
        return self

    def injected(self, body: str, plugin: str = "@deepseek-ai/dsh-system-prompt") -> DshWriter:
        """A plugin's context sent as a user message (source.kind "plugin")."""
        self.write([self.next("user/message", user_data([text(body)], "plugin", plugin=plugin))])
        return self

    def title(self, value: str, source: str = "llm") -> DshWriter:
        self.write([self.next("session/title", {"title": value, "source": {"kind": source}})])
        return self

    def interrupted(self, prompt: str, streamed: list[str]) -> DshWriter:
        """A turn whose answer was streamed (a packed text-chunks row) but never finished."""
        self.turn += 1
        turn = self.turn
        rows = [self.next("turn/start", {"turn": turn}), self.next("user/message", user_data([text(prompt)])),
                self.next("step/start", {"turn": turn, "step": 1})]
        self.t += 10
        rows.append({"type": "text-chunks", "seq0": self.seq, "time0": self.t,
                     "data": {"turn": turn, "step": 1, "index": 0, "dt": [5] * (len(streamed) - 1),
                              "texts": streamed}})
        self.seq += len(streamed)
        self.write(rows)
        return self
