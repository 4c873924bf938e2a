"""Auggie CLI session documents (docs/formats.md §35) and a writer that rewrites one whole.

An exchange is written in either of Auggie's forms: plain (``request_message``/``response_text``) or
as nodes (text nodes, ``tool_use`` response nodes, ``tool_result_node`` request nodes).
``AuggieWriter`` appends exchanges and rewrites ``<sessions>/<sessionId>.json`` after each.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME, iso

TEXT, TOOL_RESULT = 0, 1  # request node types
RAW_RESPONSE, TOOL_USE, THINKING = 0, 5, 8  # response node types


def text_node(node_id: int, content: str) -> dict[str, Any]:
    return {"id": node_id, "type": TEXT, "text_node": {"content": content}}


def tool_use_node(node_id: int, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": node_id, "type": TOOL_USE, "tool_use": {"tool_use_id": call_id, "tool_name": name,
                                                           "input_json": json.dumps(args)}}


def tool_result_node(node_id: int, call_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"id": node_id, "type": TOOL_RESULT,
            "tool_result_node": {"tool_use_id": call_id, "content": content, "is_error": is_error}}


def thinking_node(node_id: int, summary: str) -> dict[str, Any]:
    return {"id": node_id, "type": THINKING, "thinking": {"summary": summary}}


def history_entry(exchange: dict[str, Any], seq: int, finished: str, *, summary: bool = False) -> dict[str, Any]:
    return {"exchange": exchange, "completed": True, "sequenceId": seq, "finishedAt": finished, "changedFiles": [],
            "changedFilesSkipped": [], "changedFilesSkippedCount": 0, "isHistorySummary": summary,
            "historySummaryVersion": 1 if summary else 0, "source": "remote"}


class AuggieWriter:
    """One session document."""

    def __init__(self, sessions: Path, session_id: str = "01K0TESTSESSION00000000001", *,
                 workspace: str | None = "/home/dev/app", start: datetime = BASE_TIME, **extra: Any) -> None:
        sessions.mkdir(parents=True, exist_ok=True)
        self.path = sessions / f"{session_id}.json"
        self.t = start
        self.doc: dict[str, Any] = {"sessionId": session_id, "created": iso(start), "modified": iso(start)}
        if workspace is not None:
            self.doc.update(workspaceId=f"ws-{session_id[-4:]}", workspaceRoot=workspace)
        self.doc.update(agentState={"userGuidelines": "Prefer small diffs.", "workspaceGuidelines": ""},
                        chatHistory=[], **extra)
        self.calls = 0
        self.save()

    def save(self) -> None:
        self.doc["modified"] = iso(self.t)
        self.path.write_text(json.dumps(self.doc, indent=2))

    def add(self, exchange: dict[str, Any], *, summary: bool = False) -> AuggieWriter:
        self.t += timedelta(seconds=5)
        history = self.doc["chatHistory"]
        exchange.setdefault("request_id", f"req-{len(history) + 1}")
        history.append(history_entry(exchange, len(history) + 1, iso(self.t), summary=summary))
        self.save()
        return self

    def ask(self, prompt: str, reply: str) -> AuggieWriter:
        """A plain exchange: the prompt and the reply as text."""
        return self.add({"request_message": prompt, "response_text": reply})

    def tool(self, prompt: str, name: str, args: dict[str, Any], output: str, reply: str, *,
             thought: str | None = None) -> AuggieWriter:
        """The agent loop: the prompt answered by a tool use, then its result answered by the reply."""
        self.calls += 1
        call_id = f"toolu_{self.calls:04d}"
        nodes = ([thinking_node(1, thought)] if thought else []) + [tool_use_node(2, call_id, name, args)]
        self.add({"request_message": prompt, "request_nodes": [text_node(1, prompt)], "response_text": "",
                  "response_nodes": nodes})
        return self.add({"request_message": "", "request_nodes": [tool_result_node(1, call_id, output)],
                         "response_text": reply, "response_nodes": [text_node(1, reply)]})
