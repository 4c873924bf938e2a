"""Claude Code transcript records (docs/formats.md §1) and a writer of whole sessions for tests.

The record functions are pure: they take the values a record carries and return the dict Claude
Code writes, keys in its order, so ``bench.gen_corpus`` (many records a second), the quality
benchmark's renderer and the tests all write the same shapes. Every ``user``/``assistant``/
``system``/``progress`` record starts from ``envelope``.
"""

from __future__ import annotations

import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso, munge

VERSION = "2.1.40"
MODEL = "claude-sonnet-4-5"


def session_path(projects: Path, cwd: str, session_id: str) -> Path:
    """``<projects>/<munged cwd>/<session id>.jsonl``; ``projects`` stands for ``~/.claude/projects``."""
    return projects / munge(cwd) / f"{session_id}.jsonl"


def subagent_dir(projects: Path, cwd: str, session_id: str) -> Path:
    """Where Claude Code 2.1+ keeps a session's ``agent-<id>.jsonl`` and ``agent-<id>.meta.json``."""
    return projects / munge(cwd) / session_id / "subagents"


def session_fields(session_id: str, cwd: str, branch: str, *, version: str = VERSION,
                   agent_id: str | None = None, slug: str | None = None) -> dict[str, Any]:
    """The envelope fields that stay the same over a session; a subagent's records carry its ``agent_id``.

    ``parentUuid`` leads with a placeholder so that ``envelope`` can copy this dict and fill it in
    place, keeping it first as Claude Code writes it.
    """
    d: dict[str, Any] = {"parentUuid": None, "isSidechain": agent_id is not None, "userType": "external",
                         "cwd": cwd, "sessionId": session_id, "version": version, "gitBranch": branch}
    if agent_id is not None:
        d["agentId"] = agent_id
    if slug is not None:
        d["slug"] = slug
    return d


def envelope(fields: dict[str, Any], kind: str, uuid: str, parent: str | None, timestamp: str) -> dict[str, Any]:
    """What every conversation record starts with: the tree link, the session's fields, type and time."""
    # A copy and four stores: bench.gen_corpus builds one of these per record.
    d = fields.copy()
    d["parentUuid"] = parent
    d["type"] = kind
    d["uuid"] = uuid
    d["timestamp"] = timestamp
    return d


# --- content blocks ------------------------------------------------------------------------------

def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(thinking: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def tool_use_block(tool_use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


def token_usage(input_tokens: int, output_tokens: int, cache_creation: int = 0, cache_read: int = 0,
                service_tier: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"input_tokens": input_tokens, "cache_creation_input_tokens": cache_creation,
                         "cache_read_input_tokens": cache_read, "output_tokens": output_tokens}
    if service_tier is not None:
        d["service_tier"] = service_tier
    return d


# --- conversation records ------------------------------------------------------------------------
# Each takes the session's fields, the record's uuid, its parent's uuid and its timestamp first.

def user_prompt(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str,
                content: str | list[dict[str, Any]], *, prompt_id: str | None = None,
                permission_mode: str = "default") -> dict[str, Any]:
    """What the user typed: ``content`` is a string or a list of text blocks (both occur)."""
    d = envelope(fields, "user", uuid, parent, timestamp)
    d["message"] = {"role": "user", "content": content}
    d["permissionMode"] = permission_mode
    if prompt_id is not None:
        d["promptId"] = prompt_id
    return d


def meta_user(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str, text: str) -> dict[str, Any]:
    """Context Claude Code injects as a user line (caveats, reminders); not user speech."""
    d = envelope(fields, "user", uuid, parent, timestamp)
    d["message"] = {"role": "user", "content": text}
    d["isMeta"] = True
    return d


def assistant(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str, block: dict[str, Any], *,
              message_id: str, request_id: str, model: str = MODEL, stop_reason: str | None = None,
              usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """One content block of an API response; the blocks of one response share ``message_id``/``request_id``."""
    d = envelope(fields, "assistant", uuid, parent, timestamp)
    d["message"] = {"model": model, "id": message_id, "type": "message", "role": "assistant", "content": [block],
                    "stop_reason": stop_reason, "stop_sequence": None,
                    "usage": usage if usage is not None else token_usage(0, 0)}
    d["requestId"] = request_id
    return d


def tool_result(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str, tool_use_id: str,
                content: Any, *, is_error: bool = False, result: Any = None,
                source: str | None = None) -> dict[str, Any]:
    """A tool's output on a user line; ``result`` is the structured ``toolUseResult``, ``source`` the
    uuid of the assistant line that made the call."""
    d = envelope(fields, "user", uuid, parent, timestamp)
    d["message"] = {"role": "user", "content": [
        {"tool_use_id": tool_use_id, "type": "tool_result", "content": content, "is_error": is_error}]}
    if result is not None:
        d["toolUseResult"] = result
    if source is not None:
        d["sourceToolAssistantUUID"] = source
    return d


def bash_progress(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str, tool_use_id: str,
                  elapsed_s: int) -> dict[str, Any]:
    d = envelope(fields, "progress", uuid, parent, timestamp)
    d["data"] = {"type": "bash_progress", "output": "", "fullOutput": "", "elapsedTimeSeconds": elapsed_s,
                 "totalLines": 0}
    d["toolUseID"] = tool_use_id
    d["parentToolUseID"] = tool_use_id
    return d


def turn_duration(fields: dict[str, Any], uuid: str, parent: str | None, timestamp: str,
                  duration_ms: int) -> dict[str, Any]:
    d = envelope(fields, "system", uuid, parent, timestamp)
    d["subtype"] = "turn_duration"
    d["durationMs"] = duration_ms
    d["isMeta"] = False
    return d


# --- bookkeeping records (no envelope) -----------------------------------------------------------

def file_history_snapshot(message_id: str, timestamp: str, *, snapshot_message_id: str = "") -> dict[str, Any]:
    """The undo checkpoint written before a prompt."""
    return {"type": "file-history-snapshot", "messageId": message_id,
            "snapshot": {"messageId": snapshot_message_id, "trackedFileBackups": {}, "timestamp": timestamp},
            "isSnapshotUpdate": False}


def summary(text: str, leaf_uuid: str) -> dict[str, Any]:
    """The title line of versions up to 2.0; ``leaf_uuid`` may point into another session."""
    return {"type": "summary", "summary": text, "leafUuid": leaf_uuid}


def permission_mode(mode: str, session_id: str) -> dict[str, Any]:
    return {"type": "permission-mode", "permissionMode": mode, "sessionId": session_id}


def custom_title(title: str, session_id: str) -> dict[str, Any]:
    """A title the user set (``/rename``); it wins over every other title."""
    return {"type": "custom-title", "customTitle": title, "sessionId": session_id}


def ai_title(title: str, session_id: str) -> dict[str, Any]:
    return {"type": "ai-title", "aiTitle": title, "sessionId": session_id}


def last_prompt(prompt: str, leaf_uuid: str | None, session_id: str) -> dict[str, Any]:
    return {"type": "last-prompt", "lastPrompt": prompt, "leafUuid": leaf_uuid, "sessionId": session_id}


def subagent_meta(agent_type: str) -> dict[str, Any]:
    """The content of ``agent-<id>.meta.json``."""
    return {"agentType": agent_type}


# --- a writer for tests --------------------------------------------------------------------------

class ClaudeWriter:
    """Appends Claude Code lines to ``<root>/<munged cwd>/<session>.jsonl``, 7 s apart."""

    def __init__(self, root: Path, session_id: str | None = None, *, cwd: str = "/home/dev/app",
                 branch: str = "main", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.branch = branch
        self.fields = session_fields(self.session_id, cwd, branch)
        self.t = start
        self.path = session_path(root, cwd, self.session_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.parent: str | None = None
        self.n = 0

    def _next(self) -> tuple[str, str | None, str]:
        """The next record's uuid, its parent and its timestamp."""
        self.n += 1
        self.t += timedelta(seconds=7)
        u, parent = f"{self.session_id[:8]}-{self.n}", self.parent
        self.parent = u
        return u, parent, iso(self.t)

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(obj) + b"\n")

    def user(self, text: str) -> ClaudeWriter:
        self.write(user_prompt(self.fields, *self._next(), text))
        return self

    def assistant(self, text: str) -> ClaudeWriter:
        link = self._next()
        self.write(assistant(self.fields, *link, text_block(text), message_id=f"msg_{self.n}",
                             request_id=f"req_{self.n}", stop_reason="end_turn"))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> ClaudeWriter:
        link = self._next()
        tid = f"toolu_{self.n}"
        self.write(assistant(self.fields, *link, tool_use_block(tid, name, args), message_id=f"msg_{self.n}",
                             request_id=f"req_{self.n}", stop_reason="tool_use"))
        self.write(tool_result(self.fields, *self._next(), tid, output))
        return self

    def title(self, title: str) -> ClaudeWriter:
        self.write(custom_title(title, self.session_id))
        return self
