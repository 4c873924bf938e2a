"""Kimi's wire logs (docs/formats.md §20) and writers of whole sessions for tests.

``KimiCodeWriter`` writes a Kimi Code session (``<home>/sessions/wd_<name>_<hash>/session_<uuid>/``
with ``state.json`` and ``agents/<agent>/wire.jsonl``) the way Kimi Code 0.29 does: a turn.prompt
repeated by context.append_message, then steps of loop events. ``KimiCliWriter`` writes the Python
Kimi CLI's ``<share>/sessions/<md5>/<id>/wire.jsonl`` envelopes and registers the work dir in
``kimi.json``.
"""

from __future__ import annotations

import hashlib
import json
import uuid as _uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

MODEL = "moonshot-ai/kimi-k2.7-code"


# --- Kimi Code records ----------------------------------------------------------------------------
def metadata(created_ms: int, version: str = "1.4") -> dict[str, Any]:
    return {"type": "metadata", "protocol_version": version, "created_at": created_ms}


def config_update(ms: int, **fields: Any) -> dict[str, Any]:
    return {"type": "config.update", **fields, "time": ms}


def text_input(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def turn_prompt(text: str, ms: int, origin: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "turn.prompt", "input": text_input(text), "origin": origin or {"kind": "user"}, "time": ms}


def append_message(role: str, text: str, ms: int, origin: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": text_input(text), "toolCalls": []}
    if origin is not None:
        message["origin"] = origin
    return {"type": "context.append_message", "message": message, "time": ms}


def loop(event: dict[str, Any], ms: int) -> dict[str, Any]:
    return {"type": "context.append_loop_event", "event": event, "time": ms}


def part(step: str, kind: str, text: str) -> dict[str, Any]:
    body = {"type": "think", "think": text} if kind == "think" else {"type": "text", "text": text}
    return {"type": "content.part", "uuid": str(_uuid.uuid4()), "stepUuid": step, "part": body}


def tool_call(step: str, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool.call", "uuid": call_id, "stepUuid": step, "toolCallId": call_id, "name": name,
            "args": args, "description": f"Running {name}"}


def tool_result(call_id: str, output: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"output": output}
    if error:
        result["isError"] = True
    return {"type": "tool.result", "parentUuid": call_id, "toolCallId": call_id, "result": result}


def workdir_key(cwd: str) -> str:
    """Kimi Code's folder of a work dir: ``wd_<last path part>_<12 hex>``."""
    digest = hashlib.sha256(cwd.encode()).hexdigest()[:12]
    return f"wd_{Path(cwd).name}_{digest}"


class KimiCodeWriter:
    """Appends one Kimi Code agent's wire log; times advance 2 s per record."""

    def __init__(self, kimi_home: Path, cwd: str = "/home/dev/app", session_uuid: str | None = None, *,
                 title: str | None = None, start: datetime = BASE_TIME, agent: str = "main",
                 parent: KimiCodeWriter | None = None, profile: str | None = None) -> None:
        self.cwd = cwd
        self.ms = epoch_ms(start)
        self.agent = agent
        if parent is None:
            self.session_id = f"session_{session_uuid or _uuid.uuid4()}"
            self.session_dir = kimi_home / "sessions" / workdir_key(cwd) / self.session_id
            self.agents: dict[str, dict[str, Any]] = {}
            self.state: dict[str, Any] = {"createdAt": "", "title": title or "", "isCustomTitle": title is not None,
                                          "agents": self.agents, "custom": {}, "workDir": cwd}
        else:
            self.session_id, self.session_dir = parent.session_id, parent.session_dir
            self.agents, self.state = parent.agents, parent.state
        self.agents[agent] = {"homedir": str(self.session_dir / "agents" / agent),
                              "type": "main" if parent is None else "sub",
                              "parentAgentId": None if parent is None else parent.agent}
        self.path = self.session_dir / "agents" / agent / "wire.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.save_state()
        self.step = ""
        self.calls = 0
        self.write(metadata(self.ms))
        self.write(config_update(self.tick(), modelAlias=MODEL, **({"profileName": profile} if profile else {})))

    def tick(self) -> int:
        self.ms += 2000
        return self.ms

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(obj) + b"\n")

    def save_state(self) -> None:
        (self.session_dir / "state.json").write_text(json.dumps(self.state, indent=2) + "\n")

    def rename(self, title: str) -> KimiCodeWriter:
        """What renaming a session does: rewrite state.json (the wire log does not change)."""
        self.state.update(title=title, isCustomTitle=True)
        self.save_state()
        return self

    def user(self, text: str, origin: dict[str, Any] | None = None) -> KimiCodeWriter:
        """A prompt: turn.prompt, its copy in the context, and the first step's begin."""
        self.write(turn_prompt(text, self.tick(), origin))
        self.write(append_message("user", text, self.tick(), origin or {"kind": "user"}))
        return self.begin()

    def inject(self, text: str, variant: str = "plan_mode") -> KimiCodeWriter:
        """A reminder Kimi appends to the context on its own."""
        self.write(append_message("user", text, self.tick(), {"kind": "injection", "variant": variant}))
        return self

    def begin(self) -> KimiCodeWriter:
        self.step = str(_uuid.uuid4())
        self.write(loop({"type": "step.begin", "uuid": self.step, "step": 1}, self.tick()))
        return self

    def end(self, reason: str = "end_turn") -> KimiCodeWriter:
        self.write(loop({"type": "step.end", "uuid": self.step, "finishReason": reason,
                         "usage": {"inputOther": 900, "output": 40, "inputCacheRead": 0, "inputCacheCreation": 0}},
                        self.tick()))
        self.write({"type": "usage.record", "model": MODEL, "usage": {"output": 40}, "usageScope": "turn",
                    "time": self.ms})
        return self

    def think(self, text: str) -> KimiCodeWriter:
        self.write(loop(part(self.step, "think", text), self.tick()))
        return self

    def say(self, text: str) -> KimiCodeWriter:
        self.write(loop(part(self.step, "text", text), self.tick()))
        return self.end()

    def tool(self, name: str, args: dict[str, Any], output: str, *, error: bool = False) -> KimiCodeWriter:
        """A call and its result, closing the step and opening the next one."""
        call_id = f"{name}_{self.calls}"
        self.calls += 1
        self.write(loop(tool_call(self.step, call_id, name, args), self.tick()))
        self.write(loop(tool_result(call_id, output, error=error), self.tick()))
        return self.end("tool_use").begin()

    def subagent(self, profile: str = "explore") -> KimiCodeWriter:
        """A sub-agent of this agent (``agents/agent-<n>``), registered in state.json."""
        n = sum(1 for a in self.agents if a.startswith("agent-"))
        return KimiCodeWriter(self.session_dir.parents[1], self.cwd, agent=f"agent-{n}", parent=self,
                              profile=profile, start=datetime.fromtimestamp(self.ms / 1000, UTC))


# --- the Python Kimi CLI ----------------------------------------------------------------------------
def envelope(mtype: str, payload: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {"timestamp": seconds, "message": {"type": mtype, "payload": payload}}


def register_workdir(share_dir: Path, cwd: str, session_id: str) -> None:
    """Add ``cwd`` to ``kimi.json`` (as the CLI does when it first runs there)."""
    path = share_dir / "kimi.json"
    meta: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"work_dirs": [], "thinking": False}
    work_dirs: list[dict[str, Any]] = meta["work_dirs"]
    if all(w["path"] != cwd for w in work_dirs):
        work_dirs.append({"path": cwd, "kaos": "local", "last_session_id": session_id})
    path.write_text(json.dumps(meta, indent=2) + "\n")


class KimiCliWriter:
    """Appends one Kimi CLI session's wire log (``<share>/sessions/<md5(cwd)>/<id>/wire.jsonl``)."""

    def __init__(self, share_dir: Path, cwd: str = "/home/dev/app", session_id: str | None = None, *,
                 start: datetime = BASE_TIME, register: bool = True, custom_title: str | None = None) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.seconds = epoch_ms(start) / 1000
        digest = hashlib.md5(cwd.encode(), usedforsecurity=False).hexdigest()
        self.session_dir = share_dir / "sessions" / digest / self.session_id
        self.session_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.session_dir / "wire.jsonl"
        (self.session_dir / "context.jsonl").touch()
        (self.session_dir / "state.json").write_text(json.dumps(
            {"version": 1, "custom_title": custom_title, "title_generated": False, "archived": False}))
        if register:
            register_workdir(share_dir, cwd, self.session_id)
        self.calls = 0
        self.write({"type": "metadata", "protocol_version": "1.10"})

    def write(self, obj: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(obj) + b"\n")

    def event(self, mtype: str, payload: dict[str, Any]) -> KimiCliWriter:
        self.seconds += 1.5
        self.write(envelope(mtype, payload, self.seconds))
        return self

    def user(self, text: str) -> KimiCliWriter:
        return self.event("TurnBegin", {"user_input": text_input(text)}).event("StepBegin", {"n": 1})

    def think(self, text: str) -> KimiCliWriter:
        return self.event("ContentPart", {"type": "think", "think": text})

    def say(self, text: str) -> KimiCliWriter:
        self.event("ContentPart", {"type": "text", "text": text})
        return self.event("StatusUpdate", {"context_tokens": 1200}).event("TurnEnd", {})

    def tool(self, name: str, args: dict[str, Any], output: str) -> KimiCliWriter:
        call_id = f"tool_{self.calls}"
        self.calls += 1
        self.event("ToolCall", {"type": "function", "id": call_id,
                                "function": {"name": name, "arguments": json.dumps(args)}})
        return self.event("ToolResult", {"tool_call_id": call_id,
                                         "return_value": {"is_error": False, "output": output, "message": "",
                                                          "display": []}})

    def subagent(self, agent_id: str, subagent_type: str, description: str) -> KimiCliWriter:
        """A sub-agent instance (``subagents/<id>/wire.jsonl`` + ``meta.json``) writing its own log."""
        child = KimiCliWriter.__new__(KimiCliWriter)
        child.session_id, child.seconds, child.calls = self.session_id, self.seconds, 0
        child.session_dir = self.session_dir
        folder = self.session_dir / "subagents" / agent_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps({
            "agent_id": agent_id, "subagent_type": subagent_type, "status": "completed", "description": description,
            "created_at": self.seconds, "updated_at": self.seconds, "launch_spec": {}}))
        child.path = folder / "wire.jsonl"
        child.write({"type": "metadata", "protocol_version": "1.10"})
        return child
