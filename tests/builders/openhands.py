"""OpenHands conversation folders (docs/formats.md §26) written as the SDK writes them, for tests.

``OpenHandsWriter`` makes ``<conversations>/<hex id>/base_state.json`` and appends one
``events/event-<index:05d>-<event id>.json`` per event (with the SDK's hidden lock and count-marker files
beside them), each event ``{id, timestamp, source, kind, ...}`` as the SDK's ``Event`` models dump
themselves: naive ISO times, tool call arguments as a JSON string.
"""

from __future__ import annotations

import json
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME

MODEL = "litellm_proxy/anthropic/claude-sonnet-4-5-20250929"


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


class OpenHandsWriter:
    """One conversation folder; each method appends one event file (or rewrites base_state.json)."""

    def __init__(self, conversations: Path, hex_id: str | None = None, *, working_dir: str | None = "/home/dev/app",
                 start: datetime = BASE_TIME, system_prompt: bool = True) -> None:
        self.hex_id = hex_id or _uuid.uuid4().hex
        self.dir = conversations / self.hex_id
        self.events_dir = self.dir / "events"
        self.events_dir.mkdir(parents=True, exist_ok=True)
        (self.events_dir / ".eventlog.lock").write_text("")
        self.t = start
        self.count = 0
        self.last_id: str | None = None
        self.working_dir = working_dir
        self.save_state()
        if system_prompt:
            self.add("SystemPromptEvent", "agent", system_prompt={"type": "text", "text": "You are OpenHands agent."},
                     tools=[{"name": "terminal"}, {"name": "file_editor"}])

    @property
    def session_id(self) -> str:
        return str(_uuid.UUID(self.hex_id))

    def save_state(self, **extra: Any) -> OpenHandsWriter:
        workspace = {"kind": "LocalWorkspace"} | ({"working_dir": self.working_dir} if self.working_dir else {})
        doc = {"id": self.session_id, "agent": {"kind": "Agent", "llm": {"model": MODEL, "usage_id": "agent"},
                                               "tools": [{"name": "terminal"}, {"name": "file_editor"}]},
               "workspace": workspace, "persistence_dir": f"/home/dev/.openhands/conversations/{self.hex_id}",
               "max_iterations": 500,
               "stuck_detection": True, "execution_status": "idle", "confirmation_policy": {"kind": "NeverConfirm"},
               "activated_knowledge_skills": [], "stats": {"usage_to_metrics": {"agent": {
                   "model_name": MODEL, "accumulated_cost": 0.02,
                   "accumulated_token_usage": {"prompt_tokens": 1500, "completion_tokens": 200}}}}, **extra}
        (self.dir / "base_state.json").write_text(json.dumps(doc))
        return self

    def add(self, kind: str, source: str, *, event_id: str | None = None, **fields: Any) -> str:
        """Append one event file; returns its id."""
        self.t += timedelta(seconds=1, milliseconds=120)
        eid = event_id or str(_uuid.uuid4())
        event = {"id": eid, "timestamp": self.t.replace(tzinfo=None).isoformat(), "source": source, "kind": kind,
                 **fields}
        (self.events_dir / f"event-{self.count:05d}-{eid}.json").write_text(json.dumps(event))
        marker = self.events_dir / f".eventlog-count-{self.count}.marker"
        if marker.exists():
            marker.unlink()
        self.count += 1
        (self.events_dir / f".eventlog-count-{self.count}.marker").write_text("")
        self.last_id = eid
        return eid

    def user(self, value: str) -> OpenHandsWriter:
        self.add("MessageEvent", "user", llm_message={"role": "user", "content": text(value)}, activated_skills=[],
                 extended_content=[])
        return self

    def assistant(self, value: str, *, reasoning: str | None = None) -> OpenHandsWriter:
        message: dict[str, Any] = {"role": "assistant", "content": text(value)}
        if reasoning is not None:
            message["thinking_blocks"] = [{"type": "thinking", "thinking": reasoning, "signature": "sig"}]
        self.add("MessageEvent", "agent", llm_message=message, llm_response_id=f"resp-{self.count}")
        return self

    def action(self, tool: str, args: dict[str, Any], *, thought: str = "", reasoning: str | None = None,
               action_kind: str = "TerminalAction") -> str:
        """An ActionEvent calling ``tool``; returns its tool call id."""
        call_id = f"toolu_{self.count:03d}"
        fields: dict[str, Any] = {"thought": text(thought) if thought else [], "thinking_blocks": [],
                                  "action": {"kind": action_kind, **args}, "tool_name": tool, "tool_call_id": call_id,
                                  "tool_call": {"id": call_id, "name": tool, "arguments": json.dumps(args),
                                                "origin": "completion"},
                                  "llm_response_id": f"resp-{self.count}", "security_risk": "LOW"}
        if reasoning is not None:
            fields["reasoning_content"] = reasoning
        self.add("ActionEvent", "agent", **fields)
        return call_id

    def observe(self, tool: str, call_id: str, output: str, **observation: Any) -> OpenHandsWriter:
        self.add("ObservationEvent", "environment", tool_name=tool, tool_call_id=call_id, action_id=self.last_id,
                 observation={"kind": "TerminalObservation", "content": text(output), **observation})
        return self

    def terminal(self, command: str, output: str, *, thought: str = "", exit_code: int = 0) -> OpenHandsWriter:
        call = self.action("terminal", {"command": command}, thought=thought)
        return self.observe("terminal", call, output, command=command, exit_code=exit_code,
                            metadata={"exit_code": exit_code, "working_dir": self.working_dir or "/"})
