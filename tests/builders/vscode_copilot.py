"""VS Code Copilot Chat sessions (docs/formats.md §30) in both of VS Code's on-disk forms, for tests.

No permissively licensed real chat file was found, so these builders write the two forms as VS Code's
own code defines them (``chatModel.ts`` ISerializableChatData v3, ``chatSessionOperationLog.ts``
and ``objectMutationLog.ts`` at microsoft/vscode): a ``.json`` snapshot rewritten whole on every
change, and a ``.jsonl`` operation log whose first line is the whole session (kind 0) followed by
set (1), push (2, ``i`` truncating the array first) and delete (3) operations on key paths. The
part builders give the response parts a chat holds: markdown (no ``kind``), ``thinking``,
``inlineReference``, ``toolInvocationSerialized`` (terminal and other tools) and edit bookkeeping.
"""

from __future__ import annotations

import hashlib
import uuid as _uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

MODEL = "copilot/claude-sonnet-4.5"
RESOLVED_MODEL = "claude-sonnet-4-5"
AGENT = {"extensionId": {"value": "GitHub.copilot-chat", "_lower": "github.copilot-chat"},
         "id": "github.copilot.editsAgent", "name": "agent", "fullName": "GitHub Copilot", "isDefault": True}


def user_dir(config_home: Path, editor: str = "Code") -> Path:
    """``<config>/<editor>/User`` (``~/.config/Code/User`` on Linux)."""
    return config_home / editor / "User"


def workspace_hash(folder: str) -> str:
    """A workspaceStorage folder name (VS Code hashes the workspace URI; any stable hex will do)."""
    return hashlib.md5(f"file://{folder}".encode()).hexdigest()


def write_workspace(storage_dir: Path, folder: str) -> None:
    storage_dir.mkdir(parents=True, exist_ok=True)
    (storage_dir / "workspace.json").write_bytes(orjson.dumps({"folder": f"file://{folder}"}))


# --- response parts ----------------------------------------------------------------------------------
def markdown(value: str) -> dict[str, Any]:
    """A markdown part: a serialized MarkdownString, with no ``kind``."""
    return {"value": value, "supportThemeIcons": False, "supportHtml": False}


def thinking(value: str, thought_id: str = "thinking_0") -> dict[str, Any]:
    return {"kind": "thinking", "value": value, "id": thought_id}


def inline_reference(path: str) -> dict[str, Any]:
    return {"kind": "inlineReference", "inlineReference": {"$mid": 1, "fsPath": path, "external": f"file://{path}",
                                                           "path": path, "scheme": "file"}}


def undo_stop() -> dict[str, Any]:
    return {"kind": "undoStop", "id": str(_uuid.uuid4())}


def codeblock_uri(path: str) -> dict[str, Any]:
    return {"kind": "codeblockUri", "uri": {"$mid": 1, "path": path, "scheme": "file"}, "isEdit": True}


def text_edit_group(path: str) -> dict[str, Any]:
    return {"kind": "textEditGroup", "uri": {"$mid": 1, "path": path, "scheme": "file"}, "edits": [[]], "done": True}


def terminal_tool(call_id: str, command: str, output: str | None = None, *,
                  confirmed: bool | dict[str, Any] = True) -> dict[str, Any]:
    """A ``copilot_runInTerminal`` invocation; newer builds keep the command's output beside it."""
    data: dict[str, Any] = {"kind": "terminal", "commandLine": {"original": command}, "language": "sh"}
    if output is not None:
        data["terminalCommandOutput"] = {"text": output}
        data["terminalCommandState"] = {"exitCode": 0}
    return {"kind": "toolInvocationSerialized", "presentation": None, "toolSpecificData": data,
            "invocationMessage": {"value": f"Running `{command}`"}, "pastTenseMessage": {"value": f"Ran `{command}`"},
            "isConfirmed": confirmed, "isComplete": True, "source": {"type": "internal", "label": "Built-In"},
            "toolCallId": call_id, "toolId": "copilot_runInTerminal"}


def tool(tool_id: str, call_id: str, invocation: str, past_tense: str, *, tool_input: Any = None,
         output: str | None = None) -> dict[str, Any]:
    """Any other tool: what the chat said while (``invocation``) and after (``past_tense``) running it,
    and for tools that report them (MCP tools) the input and text output in ``resultDetails``."""
    d: dict[str, Any] = {"kind": "toolInvocationSerialized", "invocationMessage": {"value": invocation},
                         "pastTenseMessage": {"value": past_tense}, "isConfirmed": {"type": 1}, "isComplete": True,
                         "source": {"type": "internal", "label": "Built-In"}, "toolCallId": call_id, "toolId": tool_id}
    if tool_input is not None or output is not None:
        d["resultDetails"] = {"input": orjson.dumps(tool_input).decode(),
                              "output": [{"type": "embed", "isText": True, "value": output or ""}]}
    return d


# --- a request and a session -------------------------------------------------------------------------
def request(text: str, ts_ms: int, response: list[dict[str, Any]], *, request_id: str | None = None) -> dict[str, Any]:
    """One user turn and its response (``modelState`` 1 = complete)."""
    return {"requestId": request_id or f"request_{_uuid.uuid4()}", "timestamp": ts_ms,
            "message": {"text": text, "parts": [{"range": {"start": 0, "endExclusive": len(text)},
                                                  "editorRange": {"startLineNumber": 1, "startColumn": 1,
                                                                  "endLineNumber": 1, "endColumn": len(text) + 1},
                                                  "text": text, "kind": "text"}]},
            "variableData": {"variables": []}, "agent": AGENT, "modelId": MODEL, "response": response,
            "responseId": f"response_{_uuid.uuid4()}",
            "result": {"timings": {"firstProgress": 900, "totalElapsed": 5200},
                       "metadata": {"promptTokens": 5400, "outputTokens": 120, "resolvedModel": RESOLVED_MODEL}},
            "followups": [], "modelState": {"value": 1, "completedAt": ts_ms + 5200}, "contentReferences": [],
            "codeCitations": [], "timeSpentWaiting": ts_ms}


def snapshot(session_id: str, created_ms: int, requests: list[dict[str, Any]] | None = None, *,
             custom_title: str | None = None, last_ms: int | None = None) -> dict[str, Any]:
    """The session object (``.json`` snapshots also carry ``lastMessageDate``; the log does not)."""
    d: dict[str, Any] = {"version": 3, "requesterUsername": "dev", "responderUsername": "GitHub Copilot",
                         "initialLocation": "panel", "sessionId": session_id, "creationDate": created_ms}
    if last_ms is not None:
        d["lastMessageDate"] = last_ms
    if custom_title is not None:
        d["customTitle"] = custom_title
    d["requests"] = requests or []
    d["pendingRequests"] = []
    return d


class ChatWriter:
    """Writes one chat the way VS Code does, in either form: ``jsonl`` appends operations (a request
    pushed empty, its response streamed in, the last markdown part replaced as it grows, then its
    result), ``json`` rewrites the snapshot after every change."""

    def __init__(self, storage: Path, folder: str | None = "/home/dev/app", session_id: str | None = None, *,
                 form: Literal["jsonl", "json"] = "jsonl", start: datetime = BASE_TIME) -> None:
        self.session_id = session_id or str(_uuid.uuid4())
        self.form = form
        self.t = start
        if folder is None:  # a window with no folder open: <User>/globalStorage/emptyWindowChatSessions
            chats = storage / "emptyWindowChatSessions"
        else:
            write_workspace(storage / workspace_hash(folder), folder)
            chats = storage / workspace_hash(folder) / "chatSessions"
        chats.mkdir(parents=True, exist_ok=True)
        self.path = chats / f"{self.session_id}.{form}"
        self.doc = snapshot(self.session_id, epoch_ms(start))
        if form == "jsonl":
            self.op({"kind": 0, "v": self.doc})
        else:
            self._rewrite()

    def op(self, entry: dict[str, Any]) -> None:
        with self.path.open("ab") as fh:
            fh.write(orjson.dumps(entry) + b"\n")

    def _rewrite(self) -> None:
        self.path.write_bytes(orjson.dumps(self.doc, option=orjson.OPT_INDENT_2))

    def ask(self, text: str, response: list[dict[str, Any]]) -> ChatWriter:
        """One request, answered with ``response``."""
        self.t += timedelta(seconds=30)
        ts = epoch_ms(self.t)
        req = request(text, ts, [])
        index = len(self.doc["requests"])
        self.doc["requests"].append(req)
        if self.form == "json":
            req["response"] = list(response)
            self.doc["lastMessageDate"] = ts
            self._rewrite()
            return self
        pending = {**req, "result": None, "modelState": {"value": 0}}
        self.op({"kind": 2, "k": ["requests"], "v": [pending]})
        streamed: list[dict[str, Any]] = []
        for part in response:
            if "kind" not in part and len(part["value"]) > 8:
                # The markdown arrives in two pieces; the grown part replaces the first (push with i).
                first = markdown(part["value"][: len(part["value"]) // 2])
                self.op({"kind": 2, "k": ["requests", index, "response"], "v": [first]})
                self.op({"kind": 2, "k": ["requests", index, "response"], "v": [part], "i": len(streamed)})
            else:
                self.op({"kind": 2, "k": ["requests", index, "response"], "v": [part]})
            streamed.append(part)
        req["response"] = streamed
        self.op({"kind": 1, "k": ["requests", index, "result"], "v": req["result"]})
        self.op({"kind": 1, "k": ["requests", index, "modelState"], "v": req["modelState"]})
        return self

    def title(self, title: str) -> ChatWriter:
        """Rename the chat (a custom title)."""
        self.doc["customTitle"] = title
        if self.form == "json":
            self._rewrite()
        else:
            self.op({"kind": 1, "k": ["customTitle"], "v": title})
        return self

    def remove_last(self) -> ChatWriter:
        """Undo the last request (the chat's "remove request"): a push truncating the requests."""
        self.doc["requests"].pop()
        if self.form == "json":
            self._rewrite()
        else:
            self.op({"kind": 2, "k": ["requests"], "i": len(self.doc["requests"])})
        return self
