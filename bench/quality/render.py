"""Turn session steps into the JSONL lines Claude Code and Codex really write (docs/formats.md §1, §2).

The renderers are pure: given the steps, the session id, the project and a start time they return
the file's lines, so the same code serves the corpus writer (which puts them on disk) and the
query checks (which feed them straight to aivault's parsers to learn exactly which words the
index will see). Everything that varies (ids, pauses between records) derives from the session
id, so a rendering is a function of its inputs. The record shapes are ``tests.builders``'s, the
ones the tests and ``bench.gen_corpus`` write.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from bench.quality.incident import Step
from tests.builders import claude, codex
from tests.builders.common import iso, uuid_layout


def _abs(cwd: str, path: str) -> str:
    return path if path.startswith("/") else f"{cwd.rstrip('/')}/{path}"


def _patch_sides(body: str) -> tuple[str, str]:
    """The old and new text of an edit step's ``-``/``+`` lines (context lines go to both)."""
    old: list[str] = []
    new: list[str] = []
    for line in body.splitlines():
        if line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:
            old.append(line.removeprefix(" "))
            new.append(line.removeprefix(" "))
    return "\n".join(old), "\n".join(new)


class _Clock:
    """Deterministic pauses between records: a human types, a model thinks, a tool runs."""

    def __init__(self, start: datetime, seed: str) -> None:
        self.t = start
        self.r = random.Random(seed)

    def tick(self, lo: float, hi: float) -> datetime:
        self.t += timedelta(milliseconds=int(self.r.uniform(lo, hi) * 1000))
        return self.t

    def hex(self, n: int) -> str:
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def token(self, n: int) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def uuid4(self) -> str:
        return uuid_layout(self.hex(32), 4)


def render_claude(steps: Sequence[Step], session_id: str, cwd: str, branch: str, start: datetime) -> list[bytes]:
    """Lines of ``~/.claude/projects/<munged cwd>/<session_id>.jsonl`` for these steps.

    Consecutive assistant-side steps form one API response: they share ``message.id`` and
    ``requestId`` and are written one content block per line, as Claude Code does.
    """
    clock = _Clock(start, "claude:" + session_id)
    fields = claude.session_fields(session_id, cwd, branch)
    lines: list[bytes] = []
    parent: str | None = None
    msg_id = req_id = ""
    in_response = False

    def link() -> tuple[str, str | None]:
        nonlocal parent
        u, up = clock.uuid4(), parent
        parent = u
        return u, up

    def assistant_block(block: dict[str, Any], stop: str | None) -> None:
        nonlocal in_response, msg_id, req_id
        if not in_response:
            in_response = True
            msg_id = "msg_01" + clock.token(22)
            req_id = "req_011C" + clock.token(20)
        t = clock.tick(1.5, 9.0)
        usage = claude.token_usage(4, 40 + len(lines), cache_creation=512 + len(lines) * 37,
                                   cache_read=14_000 + len(lines) * 211)
        lines.append(orjson.dumps(claude.assistant(fields, *link(), iso(t), block, message_id=msg_id,
                                                   request_id=req_id, stop_reason=stop, usage=usage)))

    def tool(name: str, args: dict[str, Any], content: str, extra: dict[str, Any]) -> None:
        nonlocal in_response
        tid = "toolu_01" + clock.token(22)
        assistant_block(claude.tool_use_block(tid, name, args), "tool_use")
        in_response = False
        t = clock.tick(0.3, 6.0)
        lines.append(orjson.dumps(claude.tool_result(fields, *link(), iso(t), tid, content, result=extra)))

    first = True
    for step in steps:
        if step.kind == "user":
            in_response = False
            t = clock.tick(20.0, 240.0)
            if first:
                # Claude Code writes an undo checkpoint before each prompt; it is bookkeeping, not a message.
                snap = claude.file_history_snapshot("snap-" + clock.hex(8), iso(t), snapshot_message_id="snap")
                lines.append(orjson.dumps(snap))
                first = False
            lines.append(orjson.dumps(claude.user_prompt(fields, *link(), iso(t), step.text)))
        elif step.kind == "thinking":
            assistant_block(claude.thinking_block(step.text, "Eq" + clock.token(40)), None)
        elif step.kind == "assistant":
            assistant_block(claude.text_block(step.text), "end_turn")
            in_response = False
        elif step.kind == "shell":
            tool("Bash", {"command": step.text}, step.output,
                 {"stdout": step.output, "stderr": "", "interrupted": False, "isImage": False})
        elif step.kind == "read":
            path = _abs(cwd, step.text)
            body = step.output.splitlines()
            numbered = "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(body, 1))
            tool("Read", {"file_path": path}, numbered,
                 {"type": "text", "file": {"filePath": path, "content": step.output, "numLines": len(body),
                                           "startLine": 1, "totalLines": len(body)}})
        else:  # edit
            path = _abs(cwd, step.text)
            old, new = _patch_sides(step.output)
            tool("Edit", {"file_path": path, "old_string": old, "new_string": new},
                 f"The file {path} has been updated successfully.",
                 {"filePath": path, "oldString": old, "newString": new, "userModified": False,
                  "replaceAll": False})
    return lines


def render_codex(steps: Sequence[Step], session_id: str, cwd: str, branch: str, start: datetime) -> list[bytes]:
    """Lines of ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<session_id>.jsonl``.

    Like Codex itself, user and assistant text is written twice (``response_item`` and the
    ``event_msg`` stream); the parser must index one of them.
    """
    clock = _Clock(start, "codex:" + session_id)
    lines: list[bytes] = []

    def line(kind: str, payload: dict[str, Any], t: datetime | None = None) -> None:
        lines.append(orjson.dumps(codex.line(iso(t or clock.t), kind, payload)))

    repo = f"git@github.com:acme/{cwd.rstrip('/').rsplit('/', 1)[-1]}.git"
    line("session_meta", codex.session_meta(session_id, iso(clock.t), cwd, branch=branch, commit_hash=clock.hex(40),
                                            repository_url=repo))
    line("response_item", codex.user_item(codex.environment_context(cwd)))
    tokens = 0

    def call(name: str, arguments: dict[str, Any], output: str) -> None:
        cid = "call_" + clock.token(24)
        line("response_item", codex.function_call(name, json.dumps(arguments), cid), clock.tick(1.0, 8.0))
        line("response_item", codex.function_call_output(cid, output), clock.tick(0.2, 5.0))

    for step in steps:
        if step.kind == "user":
            t = clock.tick(20.0, 240.0)
            line("turn_context", codex.turn_context(cwd), t)
            line("event_msg", codex.task_started(), t)
            line("response_item", codex.user_item(step.text), t)
            line("event_msg", codex.user_event(step.text), t)
        elif step.kind == "thinking":
            t = clock.tick(1.0, 6.0)
            line("event_msg", codex.reasoning_event(step.text), t)
            line("response_item", codex.reasoning_item(step.text, "gAAAAA" + clock.token(60)), t)
        elif step.kind == "assistant":
            t = clock.tick(2.0, 12.0)
            line("event_msg", codex.agent_event(step.text), t)
            line("response_item", codex.assistant_item(step.text), t)
            tokens += 900 + 3 * len(step.text)
            total = {"input_tokens": tokens, "cached_input_tokens": tokens // 2, "output_tokens": tokens // 9,
                     "total_tokens": tokens + tokens // 9}
            line("event_msg", codex.token_count(total), t)
        elif step.kind == "shell":
            call("shell", {"command": ["bash", "-lc", step.text], "workdir": cwd}, step.output)
        elif step.kind == "read":
            call("shell", {"command": ["bash", "-lc", f"sed -n '1,200p' {step.text}"], "workdir": cwd},
                 step.output)
        else:  # edit: Codex edits through its freeform apply_patch tool
            hunk = "\n".join(step.output.splitlines()) + "\n"
            cid = "call_" + clock.token(24)
            line("response_item", codex.custom_tool_call(cid, "apply_patch", codex.update_patch(step.text, hunk)),
                 clock.tick(1.0, 8.0))
            line("response_item", codex.custom_tool_call_output(cid, codex.patch_applied(step.text)),
                 clock.tick(0.2, 2.0))
    line("event_msg", codex.task_complete(None), clock.tick(0.1, 1.0))
    return lines
