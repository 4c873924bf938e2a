"""Turn session steps into the JSONL lines Claude Code and Codex really write (FORMATS.md §1, §2).

The renderers are pure: given the steps, the session id, the project and a start time they return
the file's lines, so the same code serves the corpus writer (which puts them on disk) and the
query checks (which feed them straight to aivault's parsers to learn exactly which words the
index will see). Everything that varies (ids, pauses between records) derives from the session
id, so a rendering is a function of its inputs.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.quality.incident import Step

CLAUDE_VERSION = "2.1.40"
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_VERSION = "0.120.0"
CODEX_MODEL = "gpt-5-codex"


def iso(t: datetime) -> str:
    """RFC 3339 with milliseconds and a Z, as both agents write it."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def munge(cwd: str) -> str:
    """Claude Code's project directory name: every non-alphanumeric character becomes '-'."""
    return "".join(c if c.isalnum() else "-" for c in cwd)


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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


def render_claude(steps: Sequence[Step], session_id: str, cwd: str, branch: str, start: datetime) -> list[bytes]:
    """Lines of ``~/.claude/projects/<munged cwd>/<session_id>.jsonl`` for these steps.

    Consecutive assistant-side steps form one API response: they share ``message.id`` and
    ``requestId`` and are written one content block per line, as Claude Code does.
    """
    clock = _Clock(start, "claude:" + session_id)
    lines: list[bytes] = []
    parent: str | None = None
    msg_id = req_id = ""
    in_response = False

    def env(kind: str, t: datetime) -> dict[str, Any]:
        nonlocal parent
        u = str(_uuid_from(clock))
        e = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
             "sessionId": session_id, "version": CLAUDE_VERSION, "gitBranch": branch, "type": kind,
             "uuid": u, "timestamp": iso(t)}
        parent = u
        return e

    def assistant_block(block: dict[str, Any], stop: str | None) -> None:
        nonlocal in_response, msg_id, req_id
        if not in_response:
            in_response = True
            msg_id = "msg_01" + clock.token(22)
            req_id = "req_011C" + clock.token(20)
        t = clock.tick(1.5, 9.0)
        lines.append(_dumps({**env("assistant", t), "requestId": req_id, "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": CLAUDE_MODEL, "content": [block],
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 4, "cache_creation_input_tokens": 512 + len(lines) * 37,
                      "cache_read_input_tokens": 14_000 + len(lines) * 211, "output_tokens": 40 + len(lines)}}}))

    def tool(name: str, args: dict[str, Any], content: str, extra: dict[str, Any]) -> None:
        nonlocal in_response
        tid = "toolu_01" + clock.token(22)
        assistant_block({"type": "tool_use", "id": tid, "name": name, "input": args}, "tool_use")
        in_response = False
        t = clock.tick(0.3, 6.0)
        lines.append(_dumps({**env("user", t), "message": {"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": content, "is_error": False}]},
            "toolUseResult": extra}))

    first = True
    for step in steps:
        if step.kind == "user":
            in_response = False
            t = clock.tick(20.0, 240.0)
            if first:
                # Claude Code writes an undo checkpoint before each prompt; it is bookkeeping, not a message.
                lines.append(_dumps({"type": "file-history-snapshot", "messageId": "snap-" + clock.hex(8),
                                     "snapshot": {"messageId": "snap", "trackedFileBackups": {}, "timestamp": iso(t)},
                                     "isSnapshotUpdate": False}))
                first = False
            lines.append(_dumps({**env("user", t), "message": {"role": "user", "content": step.text},
                                 "permissionMode": "default"}))
        elif step.kind == "thinking":
            assistant_block({"type": "thinking", "thinking": step.text, "signature": "Eq" + clock.token(40)}, None)
        elif step.kind == "assistant":
            assistant_block({"type": "text", "text": step.text}, "end_turn")
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
        lines.append(_dumps({"timestamp": iso(t or clock.t), "type": kind, "payload": payload}))

    line("session_meta", {"id": session_id, "timestamp": iso(clock.t), "cwd": cwd, "originator": "codex_cli_rs",
                          "cli_version": CODEX_VERSION, "source": "cli", "model_provider": "openai",
                          "git": {"commit_hash": clock.hex(40), "branch": branch,
                                  "repository_url": f"git@github.com:acme/{cwd.rstrip('/').rsplit('/', 1)[-1]}.git"}})
    line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": (
        f"<environment_context>\n  <cwd>{cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
        "  <shell>bash</shell>\n</environment_context>")}]})
    tokens = 0

    def call(name: str, arguments: dict[str, Any], output: str) -> None:
        cid = "call_" + clock.token(24)
        line("response_item", {"type": "function_call", "name": name, "arguments": json.dumps(arguments),
                               "call_id": cid}, clock.tick(1.0, 8.0))
        line("response_item", {"type": "function_call_output", "call_id": cid, "output": output},
             clock.tick(0.2, 5.0))

    for step in steps:
        if step.kind == "user":
            t = clock.tick(20.0, 240.0)
            line("turn_context", {"cwd": cwd, "approval_policy": "on-request",
                                  "sandbox_policy": {"type": "workspace-write"}, "model": CODEX_MODEL,
                                  "effort": "medium", "summary": "auto"}, t)
            line("event_msg", {"type": "task_started", "model_context_window": 272000}, t)
            line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": step.text}]}, t)
            line("event_msg", {"type": "user_message", "message": step.text, "images": []}, t)
        elif step.kind == "thinking":
            t = clock.tick(1.0, 6.0)
            line("event_msg", {"type": "agent_reasoning", "text": step.text}, t)
            line("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": step.text}],
                                   "content": None, "encrypted_content": "gAAAAA" + clock.token(60)}, t)
        elif step.kind == "assistant":
            t = clock.tick(2.0, 12.0)
            line("event_msg", {"type": "agent_message", "message": step.text}, t)
            line("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": step.text}]}, t)
            tokens += 900 + 3 * len(step.text)
            line("event_msg", {"type": "token_count", "info": {"total_token_usage": {
                "input_tokens": tokens, "cached_input_tokens": tokens // 2, "output_tokens": tokens // 9,
                "total_tokens": tokens + tokens // 9}}}, t)
        elif step.kind == "shell":
            call("shell", {"command": ["bash", "-lc", step.text], "workdir": cwd}, step.output)
        elif step.kind == "read":
            call("shell", {"command": ["bash", "-lc", f"sed -n '1,200p' {step.text}"], "workdir": cwd},
                 step.output)
        else:  # edit: Codex edits through its freeform apply_patch tool
            body = "\n".join(step.output.splitlines())
            patch = f"*** Begin Patch\n*** Update File: {step.text}\n@@\n{body}\n*** End Patch\n"
            cid = "call_" + clock.token(24)
            line("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": cid,
                                   "name": "apply_patch", "input": patch}, clock.tick(1.0, 8.0))
            line("response_item", {"type": "custom_tool_call_output", "call_id": cid,
                                   "output": f"Success. Updated the following files:\nM {step.text}\n"},
                 clock.tick(0.2, 2.0))
    line("event_msg", {"type": "task_complete", "last_agent_message": None}, clock.tick(0.1, 1.0))
    return lines


def _uuid_from(clock: _Clock) -> str:
    """A version-4 UUID drawn from the clock's generator (so record uuids are reproducible)."""
    h = clock.hex(32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"


def stable_uuid(*parts: str, version: int = 4) -> str:
    """A deterministic UUID (v4 or v7 layout) from the given strings."""
    h = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{version}{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"
