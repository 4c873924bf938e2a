"""Codex rollout records (docs/formats.md §2) and a writer of whole rollouts for tests.

Every line is ``line(timestamp, type, payload)``; the other functions build payloads, keys in the
order Codex writes them. They are pure, so ``bench.gen_corpus`` (many records a second), the
quality benchmark's renderer and the tests all write the same shapes. Codex writes user and
assistant text twice (a ``response_item`` and an ``event_msg``); writers emit both.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso

VERSION = "0.120.0"
MODEL = "gpt-5-codex"
CONTEXT_WINDOW = 272_000
_DEFAULT_SANDBOX: dict[str, Any] = {"type": "workspace-write"}
# User response_items starting with these are injected context, not user speech (docs/formats.md §2).
INJECTED_PREFIXES: tuple[str, ...] = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<permissions instructions>",
)


def rollout_name(timestamp: str, session_id: str) -> str:
    """``rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`` from the session's RFC 3339 start."""
    ts = timestamp
    return f"rollout-{ts[:10]}T{ts[11:13]}-{ts[14:16]}-{ts[17:19]}-{session_id}.jsonl"


def rollout_path(sessions: Path, timestamp: str, session_id: str) -> Path:
    """``<sessions>/YYYY/MM/DD/<rollout name>``; ``sessions`` stands for ``$CODEX_HOME/sessions``."""
    ts = timestamp
    return sessions / ts[:4] / ts[5:7] / ts[8:10] / rollout_name(ts, session_id)


def line(timestamp: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": timestamp, "type": kind, "payload": payload}


# --- session and turn ----------------------------------------------------------------------------

def session_meta(session_id: str, timestamp: str, cwd: str, *, branch: str, commit_hash: str,
                 repository_url: str | None = None, originator: str = "codex_cli_rs", cli_version: str = VERSION,
                 source: str = "cli", model_provider: str = "openai",
                 base_instructions: str | None = None) -> dict[str, Any]:
    """The first line's payload. Versions that write ``base_instructions`` leave ``instructions`` null."""
    d: dict[str, Any] = {"id": session_id, "timestamp": timestamp, "cwd": cwd, "originator": originator,
                         "cli_version": cli_version}
    if base_instructions is not None:
        d["instructions"] = None
    d["source"] = source
    d["model_provider"] = model_provider
    if base_instructions is not None:
        d["base_instructions"] = {"text": base_instructions}
    git: dict[str, Any] = {"commit_hash": commit_hash, "branch": branch}
    if repository_url is not None:
        git["repository_url"] = repository_url
    d["git"] = git
    return d


def turn_context(cwd: str, model: str = MODEL, *, turn_id: str | None = None,
                 sandbox_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per turn; its ``cwd`` is the one resume uses."""
    d: dict[str, Any] = {} if turn_id is None else {"turn_id": turn_id}
    d["cwd"] = cwd
    d["approval_policy"] = "on-request"
    d["sandbox_policy"] = sandbox_policy if sandbox_policy is not None else _DEFAULT_SANDBOX
    d["model"] = model
    d["effort"] = "medium"
    d["summary"] = "auto"
    return d


def environment_context(cwd: str, shell: str = "bash") -> str:
    """The injected first "user" text of a rollout (context, not user speech)."""
    return (f"<environment_context>\n  <cwd>{cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
            "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
            f"  <shell>{shell}</shell>\n</environment_context>")


def task_started(turn_id: str | None = None) -> dict[str, Any]:
    if turn_id is None:
        return {"type": "task_started", "model_context_window": CONTEXT_WINDOW}
    return {"type": "task_started", "turn_id": turn_id, "model_context_window": CONTEXT_WINDOW}


def task_complete(last_agent_message: str | None, turn_id: str | None = None) -> dict[str, Any]:
    if turn_id is None:
        return {"type": "task_complete", "last_agent_message": last_agent_message}
    return {"type": "task_complete", "turn_id": turn_id, "last_agent_message": last_agent_message}


def token_count(total: dict[str, Any], *, last: dict[str, Any] | None = None, context_window: int | None = None,
                rate_limits: dict[str, Any] | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"total_token_usage": total}
    if last is not None:
        info["last_token_usage"] = last
    if context_window is not None:
        info["model_context_window"] = context_window
    d: dict[str, Any] = {"type": "token_count", "info": info}
    if rate_limits is not None:
        d["rate_limits"] = rate_limits
    return d


def thread_name_updated(thread_id: str, name: str) -> dict[str, Any]:
    return {"type": "thread_name_updated", "thread_id": thread_id, "thread_name": name}


def session_index_entry(session_id: str, name: str, updated_at: str) -> dict[str, Any]:
    """One line of ``$CODEX_HOME/session_index.jsonl``; the last line for an id wins."""
    return {"id": session_id, "thread_name": name, "updated_at": updated_at}


# --- messages (a response_item and its event_msg twin) -------------------------------------------

def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def user_event(text: str) -> dict[str, Any]:
    return {"type": "user_message", "message": text, "images": []}


def assistant_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def agent_event(text: str) -> dict[str, Any]:
    return {"type": "agent_message", "message": text}


def reasoning_item(text: str, encrypted_content: str) -> dict[str, Any]:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}], "content": None,
            "encrypted_content": encrypted_content}


def reasoning_event(text: str) -> dict[str, Any]:
    return {"type": "agent_reasoning", "text": text}


# --- tools ---------------------------------------------------------------------------------------

def function_call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    """``arguments`` is a JSON *string*, as the model wrote it."""
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id}


def function_call_output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def custom_tool_call(call_id: str, name: str, tool_input: str) -> dict[str, Any]:
    """A freeform tool (``apply_patch``): ``tool_input`` is the raw text."""
    return {"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": name,
            "input": tool_input}


def custom_tool_call_output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def update_patch(path: str, hunk: str) -> str:
    """An ``apply_patch`` input updating ``path``; ``hunk`` is ``-``/``+``/context lines, each ending in "\\n"."""
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{hunk}*** End Patch\n"


def patch_applied(path: str) -> str:
    return f"Success. Updated the following files:\nM {path}\n"


# --- a writer for tests --------------------------------------------------------------------------

class CodexWriter:
    """Appends Codex rollout lines under ``<root>/YYYY/MM/DD/rollout-...-<id>.jsonl``, 5 s apart."""

    def __init__(self, root: Path, session_id: str | None = None, *, cwd: str = "/home/dev/api",
                 branch: str = "main", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.t = start
        self.path = rollout_path(root, iso(start), self.session_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._line("session_meta", session_meta(self.session_id, iso(self.t), cwd, branch=branch,
                                                commit_hash="abc123"))
        self._line("turn_context", turn_context(cwd))
        self._line("response_item", user_item(environment_context(cwd)))

    def _line(self, kind: str, payload: dict[str, Any]) -> None:
        self.t += timedelta(seconds=5)
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(line(iso(self.t), kind, payload)) + b"\n")

    def user(self, text: str) -> CodexWriter:
        self._line("response_item", user_item(text))
        self._line("event_msg", user_event(text))
        return self

    def assistant(self, text: str) -> CodexWriter:
        self._line("response_item", assistant_item(text))
        self._line("event_msg", agent_event(text))
        return self

    def tool(self, command: str, output: str) -> CodexWriter:
        cid = f"call_{self.t.timestamp():.0f}"
        self._line("response_item", function_call("shell", json.dumps({"command": ["bash", "-lc", command]}), cid))
        self._line("response_item", function_call_output(cid, output))
        return self
