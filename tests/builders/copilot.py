"""GitHub Copilot CLI session records (docs/formats.md §8) and a writer of whole sessions for tests.

Every line of ``session-state/<id>/events.jsonl`` is ``event(type, data, id, timestamp, parent)``;
the other functions build the ``data`` of one event type, keys in the order Copilot writes them.
``workspace_yaml`` renders the folder's ``workspace.yaml`` (``name:`` is what ``/rename`` writes).
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, iso

VERSION = "1.0.40"
MODEL = "claude-sonnet-4.5"


def session_dir(session_state: Path, session_id: str) -> Path:
    """``<session-state>/<id>``; ``session_state`` stands for ``$COPILOT_HOME/session-state``."""
    return session_state / session_id


def event(kind: str, data: dict[str, Any], event_id: str, timestamp: str, parent: str | None) -> dict[str, Any]:
    return {"type": kind, "data": data, "id": event_id, "timestamp": timestamp, "parentId": parent}


# --- data of each event type ---------------------------------------------------------------------

def context(cwd: str, branch: str, *, repository: str = "dev/app") -> dict[str, Any]:
    return {"cwd": cwd, "gitRoot": cwd, "branch": branch, "headCommit": "0" * 40, "repository": repository,
            "hostType": "github"}


def session_start(session_id: str, start_time: str, cwd: str, branch: str, *, version: str = VERSION,
                  model: str = MODEL) -> dict[str, Any]:
    return {"sessionId": session_id, "version": 1, "producer": "copilot-agent", "copilotVersion": version,
            "startTime": start_time, "selectedModel": model, "context": context(cwd, branch)}


def session_resume(resume_time: str, event_count: int, cwd: str, branch: str) -> dict[str, Any]:
    return {"resumeTime": resume_time, "eventCount": event_count, "context": context(cwd, branch)}


def user_message(content: str, interaction_id: str, *, source: str | None = None) -> dict[str, Any]:
    """What the user typed; a skill's injected definition carries ``source: "skill-<name>"``."""
    d: dict[str, Any] = {"content": content, "transformedContent": content, "attachments": [],
                         "interactionId": interaction_id}
    if source is not None:
        d["source"] = source
    return d


def tool_request(call_id: str, name: str, arguments: dict[str, Any] | str, *,
                 key: str = "arguments") -> dict[str, Any]:
    """One entry of ``toolRequests``; ``arguments`` is an object or a JSON string, under ``key``."""
    return {"toolCallId": call_id, "name": name, key: arguments, "type": "function"}


def assistant_message(message_id: str, content: str, requests: list[dict[str, Any]] | None = None, *,
                      reasoning_text: str | None = None, model: str = MODEL) -> dict[str, Any]:
    return {"messageId": message_id, "content": content, "toolRequests": requests or [], "model": model,
            "reasoningText": reasoning_text, "outputTokens": 12}


def reasoning(reasoning_id: str, content: str) -> dict[str, Any]:
    return {"reasoningId": reasoning_id, "content": content}


def tool_start(call_id: str, name: str, arguments: dict[str, Any], *, key: str = "arguments") -> dict[str, Any]:
    return {"toolCallId": call_id, "toolName": name, key: arguments}


def tool_complete(call_id: str, output: str, *, success: bool = True) -> dict[str, Any]:
    return {"toolCallId": call_id, "success": success, "result": {"content": output, "detailedContent": None}}


def turn(turn_id: str) -> dict[str, Any]:
    return {"turnId": turn_id, "model": MODEL}


def shutdown(files_modified: list[str]) -> dict[str, Any]:
    return {"shutdownType": "routine", "totalPremiumRequests": 1, "totalApiDurationMs": 5000,
            "codeChanges": {"linesAdded": 3, "linesRemoved": 1, "filesModified": files_modified},
            "modelMetrics": {MODEL: {"requests": {"count": 2, "cost": 1}}}, "currentModel": MODEL}


def workspace_yaml(session_id: str, cwd: str, *, name: str | None = None, summary: str | None = None,
                   created_at: str = "2026-03-01T10:00:00.000Z") -> str:
    """The folder's workspace.yaml; ``name`` (a /rename) and ``summary`` are written JSON-quoted."""
    lines = [f"id: {session_id}", f"cwd: {cwd}"]
    if summary is not None:
        lines.append(f"summary: {json.dumps(summary, ensure_ascii=False)}")
    if name is not None:
        lines.append(f"name: {json.dumps(name, ensure_ascii=False)}")
    lines.append(f"created_at: {created_at}")
    return "\n".join(lines) + "\n"


# --- a writer for tests --------------------------------------------------------------------------

class CopilotWriter:
    """Appends Copilot CLI events to ``<session-state>/<id>/events.jsonl``, 5 s apart."""

    def __init__(self, session_state: Path, session_id: str | None = None, *, cwd: str = "/home/dev/app",
                 branch: str = "main", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.cwd = cwd
        self.t = start
        self.dir = session_dir(session_state, self.session_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "events.jsonl"
        self.parent: str | None = None
        self.n = 0
        self.write("session.start", session_start(self.session_id, iso(start), cwd, branch))

    def write(self, kind: str, data: dict[str, Any]) -> None:
        self.n += 1
        self.t += timedelta(seconds=5)
        event_id = f"e{self.n}"
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(event(kind, data, event_id, iso(self.t), self.parent)) + b"\n")
        self.parent = event_id

    def user(self, text: str) -> CopilotWriter:
        self.write("user.message", user_message(text, f"i{self.n}"))
        return self

    def assistant(self, text: str) -> CopilotWriter:
        self.write("assistant.message", assistant_message(f"m{self.n}", text))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str) -> CopilotWriter:
        call_id = f"call_{self.n}"
        self.write("assistant.message", assistant_message(f"m{self.n}", "", [tool_request(call_id, name, args)]))
        self.write("tool.execution_start", tool_start(call_id, name, args))
        self.write("tool.execution_complete", tool_complete(call_id, output))
        return self

    def rename(self, name: str) -> CopilotWriter:
        """What ``/rename`` does: rewrite workspace.yaml with a ``name:`` (the log does not change)."""
        (self.dir / "workspace.yaml").write_text(workspace_yaml(self.session_id, self.cwd, name=name))
        return self
