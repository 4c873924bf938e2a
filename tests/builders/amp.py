"""Amp thread documents (docs/formats.md §9) and a writer that rewrites a thread whole, as Amp does.

``thread`` builds the top-level object, ``user``/``assistant`` one message each, and the block
functions the Anthropic-style content blocks Amp stores (``tool_result`` carries ``toolUseID`` and
``run``). ``ThreadWriter`` appends messages and rewrites ``T-<uuid>.json`` after each one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders.common import BASE_TIME, epoch_ms, iso_ms

MODEL = "claude-sonnet-4-5"


def thread(thread_id: str, created: int, messages: list[dict[str, Any]], *, title: str | None = None,
           cwd: str | None = "/home/dev/app", ref: str | None = "refs/heads/main",
           relationships: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"v": 42, "id": thread_id, "created": created}
    if title is not None:
        d["title"] = title
    d["agentMode"] = "smart"
    d["nextMessageId"] = len(messages)
    if cwd is not None:
        repo = {"type": "git", "url": "https://github.com/o/app", "ref": ref, "sha": "0" * 40}
        d["env"] = {"initial": {"trees": [{"displayName": Path(cwd).name, "uri": "file://" + cwd.replace(" ", "%20"),
                                           "repository": repo}], "platform": {"os": "linux"}, "tags": []}}
    d["messages"] = messages
    if relationships is not None:
        d["relationships"] = relationships
    return d


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result(tool_id: str, result: Any, status: str = "done") -> dict[str, Any]:
    return {"type": "tool_result", "toolUseID": tool_id, "run": {"status": status, "result": result}}


def user(message_id: int, blocks: list[dict[str, Any]], sent_at: int | None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "user", "messageId": message_id, "content": blocks}
    if sent_at is not None:
        d["meta"] = {"sentAt": sent_at}
    return d


def assistant(message_id: int, blocks: list[dict[str, Any]], at_ms: int | None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "assistant", "messageId": message_id, "content": blocks,
                         "state": {"type": "complete", "stopReason": "end_turn"}}
    if at_ms is not None:
        d["usage"] = {"model": MODEL, "inputTokens": 500, "outputTokens": 40, "cacheCreationInputTokens": 0,
                      "cacheReadInputTokens": 0, "timestamp": iso_ms(at_ms)}
    return d


class ThreadWriter:
    """One thread file under ``threads``; every call appends a message and rewrites the document."""

    def __init__(self, threads: Path, thread_id: str, *, title: str | None = None, cwd: str = "/home/dev/app") -> None:
        self.t = epoch_ms(BASE_TIME)
        self.created = self.t
        self.id = thread_id
        self.title = title
        self.cwd = cwd
        self.path = threads / f"{thread_id}.json"
        self.messages: list[dict[str, Any]] = []
        threads.mkdir(parents=True, exist_ok=True)

    def _save(self) -> ThreadWriter:
        doc = thread(self.id, self.created, self.messages, title=self.title, cwd=self.cwd)
        self.path.write_text(json.dumps(doc, indent=2))
        return self

    def user(self, value: str) -> ThreadWriter:
        self.t += 1000
        self.messages.append(user(len(self.messages), [text(value)], self.t))
        return self._save()

    def assistant(self, *blocks: dict[str, Any]) -> ThreadWriter:
        self.t += 1000
        self.messages.append(assistant(len(self.messages), list(blocks), self.t))
        return self._save()

    def result(self, tool_id: str, output: Any, status: str = "done") -> ThreadWriter:
        self.t += 1000
        self.messages.append(user(len(self.messages), [tool_result(tool_id, output, status)], None))
        return self._save()
