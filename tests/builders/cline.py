"""Cline / Roo Code / Kilo Code task folders (docs/formats.md §7) and a writer of whole tasks for tests.

The record functions are pure: ``say``/``ask`` build ``ClineMessage`` dicts (ui_messages.json),
``api_user``/``api_assistant`` build the model view's ``MessageParam`` dicts
(api_conversation_history.json), ``xml_result`` the XML tool protocol's result blocks, and
``history_item`` one ``HistoryItem`` of ``state/taskHistory.json``. ``TaskWriter`` lays a task out
the way the extension does and rewrites its documents whole, as the extension does on every message.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME, epoch_ms

CLINE_EXT = "saoudrizwan.claude-dev"
ROO_EXT = "rooveterinaryinc.roo-cline"
KILO_EXT = "kilocode.kilo-code"


def tasks_root(home: Path, ext: str = CLINE_EXT, editor: str = "Code") -> Path:
    """``~/.config/<editor>/User/globalStorage/<ext>/tasks`` under ``home``."""
    return home / ".config" / editor / "User" / "globalStorage" / ext / "tasks"


def say(ts: int, kind: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"ts": ts, "type": "say", "say": kind}
    if text is not None:
        d["text"] = text
    d.update(extra)
    return d


def ask(ts: int, kind: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"ts": ts, "type": "ask", "ask": kind}
    if text is not None:
        d["text"] = text
    d.update(extra)
    return d


def tool_json(tool: str, **fields: Any) -> str:
    """The text of a ``tool`` message: ClineSayTool as JSON."""
    return json.dumps({"tool": tool, **fields})


def api_req(ts: int, request: str, tokens_in: int = 900, tokens_out: int = 60, cost: float = 0.004) -> dict[str, Any]:
    return say(ts, "api_req_started", json.dumps({"request": request, "tokensIn": tokens_in,
                                                  "tokensOut": tokens_out, "cost": cost}))


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(tool_use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


def tool_result_block(tool_use_id: str, content: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def xml_result(name: str, target: str | None, output: str) -> list[dict[str, Any]]:
    """The XML tool protocol's result: a ``[name for 'target'] Result:`` block, then the output."""
    head = f"[{name} for '{target}'] Result:" if target is not None else f"[{name}] Result:"
    return [text_block(head), text_block(output)]


def environment_details(cwd: str) -> dict[str, Any]:
    return text_block(f"<environment_details>\n# Current Working Directory ({cwd}) Files\nsrc/\n"
                      "</environment_details>")


def api_user(content: list[dict[str, Any]] | str, ts: int | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "user", "content": content}
    if ts is not None:
        d["ts"] = ts
    return d


def api_assistant(content: list[dict[str, Any]] | str, ts: int | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "assistant", "content": content}
    if ts is not None:
        d["ts"] = ts
    return d


def history_item(task_id: str, task: str, ts: int, cwd: str | None = None, *, roo: bool = False,
                 parent: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"id": task_id, "ts": ts, "task": task, "tokensIn": 1200, "tokensOut": 300,
                         "cacheWrites": 0, "cacheReads": 0, "totalCost": 0.01, "size": 4096}
    if cwd is not None:
        d["workspace" if roo else "cwdOnTaskInitialization"] = cwd
    if parent is not None:
        d["parentTaskId"] = parent
    return d


def task_metadata(files: list[str]) -> dict[str, Any]:
    return {"files_in_context": [{"path": f, "record_state": "active", "record_source": "read_tool"}
                                 for f in files], "model_usage": [], "environment_history": []}


def write_json(path: Path, value: Any) -> None:
    """Write a document whole, in place (Cline's fs.writeFile: same inode, new size and mtime)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh)


def index_path(tasks: Path) -> Path:
    """Where newer Cline keeps the task index: ``<ext>/state/taskHistory.json``."""
    return tasks.parent / "state" / "taskHistory.json"


class TaskWriter:
    """One task folder: ``ui``/``api`` grow message by message and every ``save`` rewrites both."""

    def __init__(self, tasks: Path, task_id: str | None = None, *, start_ms: int | None = None) -> None:
        self.t = start_ms if start_ms is not None else epoch_ms(BASE_TIME)
        self.task_id = task_id or str(self.t)
        self.folder = tasks / self.task_id
        self.ui: list[dict[str, Any]] = []
        self.api: list[dict[str, Any]] = []

    def tick(self) -> int:
        self.t += 1000
        return self.t

    def task(self, prompt: str, cwd: str = "/home/dev/app") -> TaskWriter:
        self.ui.append(say(self.tick(), "task", prompt))
        self.ui.append(api_req(self.tick(), f"<task>\n{prompt}\n</task>"))
        self.api.append(api_user([text_block(f"<task>\n{prompt}\n</task>"), environment_details(cwd)]))
        return self

    def reply(self, text: str) -> TaskWriter:
        self.ui.append(say(self.tick(), "text", text))
        self.api.append(api_assistant([text_block(text)]))
        return self

    def read_file(self, path: str, contents: str) -> TaskWriter:
        self.ui.append(say(self.tick(), "tool", tool_json("readFile", path=path, content=f"/home/dev/app/{path}")))
        self.api.append(api_assistant([text_block(f"<read_file>\n<path>{path}</path>\n</read_file>")]))
        self.api.append(api_user(xml_result("read_file", path, contents)))
        self.ui.append(api_req(self.tick(), f"[read_file for '{path}'] Result:"))
        return self

    def command(self, cmd: str, output: str) -> TaskWriter:
        self.ui.append(ask(self.tick(), "command", cmd + REQ_APP_SUFFIX))
        self.ui.append(ask(self.tick(), "command_output", output))
        self.api.append(api_assistant([text_block(f"<execute_command>\n<command>{cmd}</command>\n"
                                                  "</execute_command>")]))
        self.api.append(api_user(xml_result("execute_command", cmd, output)))
        return self

    def feedback(self, text: str) -> TaskWriter:
        self.ui.append(say(self.tick(), "user_feedback", text))
        self.api.append(api_user([text_block(f"<feedback>\n{text}\n</feedback>")]))
        return self

    def complete(self, text: str) -> TaskWriter:
        self.ui.append(say(self.tick(), "completion_result", text))
        self.ui.append(ask(self.tick(), "completion_result", ""))
        return self

    def save(self) -> TaskWriter:
        write_json(self.folder / "api_conversation_history.json", self.api)
        write_json(self.folder / "ui_messages.json", self.ui)
        return self

    def touch(self, seconds_ago: float) -> None:
        """Move every document's mtime back (a task left alone that long)."""
        for p in self.folder.iterdir():
            st = p.stat()
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds_ago * 1e9)))


REQ_APP_SUFFIX = "REQ_APP"
