"""VS Code Copilot Chat sessions (docs/formats.md §30), each chat file read whole.

VS Code itself (its chat workbench, not the Copilot extension) keeps every chat of a workspace in
``<User>/workspaceStorage/<hash>/chatSessions/<sessionId>``: a ``.json`` snapshot of the whole
session, rewritten on every change (older builds), or a ``.jsonl`` operation log (current builds):
its first line the whole session, then one set / push / delete operation per line on a path into
it, and after enough of them the file is replaced by one snapshot line again. Both are replayed to
the session object and read alike: each request is the user's message and the response parts that
answered it. The workspace the chat belongs to is named by ``<hash>/workspace.json``; chats of a
window with no folder open are in ``<User>/globalStorage/emptyWindowChatSessions``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import FileBytes, jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Mode, Root, RootProblem, Unit, check_root, walk_files
from aivault.scanner.spec import AgentSpec

CHAT_DIRS = frozenset({"chatSessions", "emptyWindowChatSessions", "transferredChatSessions"})
WORKSPACE_FILE = "workspace.json"
WORKSPACE_MAX_BYTES = 1 << 20
# VS Code builds that keep their chats under a ``User`` folder, on Linux under $XDG_CONFIG_HOME
# (~/.config) and on macOS under ~/Library/Application Support.
EDITORS = ("Code", "Code - Insiders", "VSCodium")
# The operations of the log (VS Code's objectMutationLog.ts EntryKind).
OP_INITIAL, OP_SET, OP_PUSH, OP_DELETE = 0, 1, 2, 3
_SESSION_FILE = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]*\.jsonl?")
_UUID_FILE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl?")
# Response parts that are edits, links, progress and UI state, not conversation.
BOOKKEEPING_PARTS = frozenset({
    "undoStop", "codeblockUri", "textEditGroup", "notebookEditGroup", "prepareToolInvocation",
    "progressMessage", "progressTaskSerialized", "confirmation", "elicitationSerialized", "command",
    "extensions", "hook", "mcpServersStarting", "multiDiffData", "clearToPreviousToolInvocation",
    "pullRequest", "questionCarousel", "treeData", "workspaceEdit", "disabledClaudeHooks", "warning",
})


# --- the operation log -------------------------------------------------------------------------------
def _child(node: object, key: object) -> object:
    if type(node) is dict and isinstance(key, str):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(node):
        return node[key]
    return None


def _apply(state: dict[str, Any], op: dict[str, Any], skips: dict[str, int]) -> None:
    """One set / push / delete on ``state``, as VS Code's ``ObjectMutationLog.read`` applies it; an
    operation whose path does not lead anywhere is counted and skipped."""
    path = op.get("k")
    if not isinstance(path, list) or not path or not all(isinstance(p, str | int) for p in path):
        count_skip(skips, "malformed-op")
        return
    parent: object = state
    for key in path[:-1]:
        parent = _child(parent, key)
    last = path[-1]
    kind = op["kind"]
    if kind == OP_PUSH:
        # Truncate the array to `i` when given, then append `v`.
        arr = _child(parent, last)
        arr = arr if isinstance(arr, list) else []
        start = op.get("i")
        if isinstance(start, int) and not isinstance(start, bool):
            del arr[max(start, 0):]
        values = op.get("v")
        if isinstance(values, list):
            arr.extend(values)
        value: object = arr
    else:
        value = op.get("v") if kind == OP_SET else None
    if type(parent) is dict and isinstance(last, str):
        if kind == OP_DELETE:
            parent.pop(last, None)
        else:
            parent[last] = value
    elif isinstance(parent, list) and isinstance(last, int) and 0 <= last <= len(parent):
        if last == len(parent):
            parent.append(value)
        else:
            parent[last] = value
    else:
        count_skip(skips, "op-path-missing")


def replay_log(objs: list[dict[str, Any]], skips: dict[str, int]) -> dict[str, Any] | None:
    """The session an operation log's lines replay to (None when it holds no snapshot)."""
    state: dict[str, Any] | None = None
    for op in objs:
        kind = op.get("kind")
        if kind == OP_INITIAL:
            snapshot = op.get("v")
            if type(snapshot) is dict:
                state = snapshot
            else:
                count_skip(skips, "malformed-op")
        elif kind in (OP_SET, OP_PUSH, OP_DELETE):
            if state is None:
                count_skip(skips, "op-before-snapshot")
            else:
                _apply(state, op, skips)
        else:
            count_skip(skips, "unknown_op", str(kind))
    return state


# --- the session object -------------------------------------------------------------------------------
def markdown_text(value: object) -> str:
    """A string, or the ``value`` of a serialized MarkdownString."""
    if isinstance(value, str):
        return value
    if type(value) is dict and isinstance(value.get("value"), str):
        return str(value["value"])
    return ""


def _reference_text(item: dict[str, Any]) -> str:
    """An inline file or symbol link in a reply: its name, as the chat shows it."""
    ref = item.get("inlineReference")
    name = nonblank(item.get("name"))
    if name:
        return name
    if type(ref) is dict:
        # A file link is a URI; a symbol link a {name, location: {uri, range}}.
        location: dict[str, Any] = ref["location"] if type(ref.get("location")) is dict else ref
        uri: dict[str, Any] = location["uri"] if type(location.get("uri")) is dict else location
        for key in ("fsPath", "path", "external"):
            value = nonblank(uri.get(key))
            if value:
                return os.path.basename(value.rstrip("/")) or value
        name = nonblank(ref.get("name"))
        if name:
            return name
    return ""


def _tool_messages(item: dict[str, Any], ts: int | None) -> list[Message]:
    """A ``toolInvocationSerialized`` part: the call (its command or input, else what the chat said
    it was doing) and its result (the output VS Code kept, else the past-tense summary)."""
    tool = nonblank(item.get("toolId")) or nonblank(item.get("toolName")) or "tool"
    data = item.get("toolSpecificData")
    data = data if type(data) is dict else {}
    details = item.get("resultDetails")
    args: dict[str, Any] = {}
    if data.get("kind") == "terminal":
        line = data.get("commandLine")
        command = markdown_text(line.get("toolEdited") or line.get("original")) if type(line) is dict else ""
        command = command or markdown_text(data.get("command"))
        if command:
            args["command"] = command
    if not args and type(details) is dict and isinstance(details.get("input"), str) and details["input"].strip():
        try:
            decoded = orjson.loads(details["input"])
        except orjson.JSONDecodeError:
            decoded = details["input"]
        args = decoded if type(decoded) is dict else {"input": decoded}
    if not args:
        said = markdown_text(item.get("invocationMessage"))
        if said.strip():
            args["message"] = said
    out = [Message("assistant", "tool_call", f"{tool} {compact_json(args)}" if args else tool, ts)]
    parts: list[str] = []
    output = data.get("terminalCommandOutput")
    if type(output) is dict and isinstance(output.get("text"), str) and output["text"].strip():
        parts.append(output["text"])
    if type(details) is dict and isinstance(details.get("output"), list):
        parts += [o["value"] for o in details["output"] if type(o) is dict and isinstance(o.get("value"), str)
                  and o.get("isText") is not False and o["value"].strip()]
    elif isinstance(details, list):  # the files a search or read touched
        parts += [p for p in (_reference_text({"inlineReference": d}) for d in details if type(d) is dict) if p]
    if not parts:
        summary = markdown_text(item.get("pastTenseMessage"))
        if summary.strip():
            parts.append(summary)
    if parts:
        out.append(Message("tool", "tool_result", "\n".join(parts), ts))
    return out


def response_messages(items: object, ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The assistant's side of one request: markdown (joined across inline references, as the chat
    renders it), thinking, and tool calls with their results."""
    out: list[Message] = []
    text: list[str] = []

    def flush() -> None:
        joined = "".join(text)
        if joined.strip():
            out.append(Message("assistant", "text", joined.strip(), ts))
        text.clear()

    thinking_id: object = None
    for item in items if isinstance(items, list) else ():
        if type(item) is not dict:
            count_skip(skips, "malformed-part")
            continue
        kind = item.get("kind")
        if kind is None or kind in ("markdownContent", "markdownVuln"):
            text.append(markdown_text(item if kind is None else item.get("content")))
        elif kind == "inlineReference":
            text.append(_reference_text(item))
        elif kind == "thinking":
            value = item.get("value")
            thought = "".join(v for v in value if isinstance(v, str)) if isinstance(value, list) else \
                markdown_text(value)
            if not thought.strip():
                continue
            flush()
            # Streamed pieces of one thought share its id.
            if out and out[-1].kind == "thinking" and item.get("id") is not None and item.get("id") == thinking_id:
                out[-1].text += thought
            else:
                out.append(Message("assistant", "thinking", thought, ts))
            thinking_id = item.get("id")
        elif kind == "toolInvocationSerialized":
            flush()
            out += _tool_messages(item, ts)
        elif kind not in BOOKKEEPING_PARTS:
            count_skip(skips, "unknown_item", kind if isinstance(kind, str) else "(none)")
    flush()
    return out


def conversation(doc: dict[str, Any], skips: dict[str, int]) -> tuple[list[Message], str | None, list[int]]:
    """(messages, first prompt, request times) of a session object."""
    messages: list[Message] = []
    first_prompt: str | None = None
    times: list[int] = []
    requests = doc.get("requests")
    for req in requests if isinstance(requests, list) else ():
        if type(req) is not dict:
            count_skip(skips, "malformed-request")
            continue
        ts = to_epoch_ms(req.get("timestamp"))
        if ts is not None:
            times.append(ts)
        message = req.get("message")
        prompt = markdown_text(message.get("text") if type(message) is dict else message)
        if prompt.strip():
            messages.append(Message("user", "text", prompt, ts))
            first_prompt = first_prompt or first_line_title(prompt)
        messages += response_messages(req.get("response"), ts, skips)
    return messages, first_prompt, times


def workspace_folder(chat_dir: str) -> str | None:
    """The folder (or the folder of the ``.code-workspace`` file) ``<hash>/workspace.json`` names."""
    if os.path.basename(chat_dir) != "chatSessions":
        return None  # an empty window, or a transferred chat: no workspace
    try:
        with open(os.path.join(os.path.dirname(chat_dir), WORKSPACE_FILE), "rb") as fh:
            doc = loads_line(fh.read(WORKSPACE_MAX_BYTES))
    except OSError:
        return None
    if type(doc) is not dict:
        return None
    folder, workspace = nonblank(doc.get("folder")), nonblank(doc.get("workspace"))
    uri = folder or workspace
    if uri is None:
        return None
    parts = urlsplit(uri)
    path = unquote(parts.path) if parts.scheme else uri
    if not path:
        return None
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///c:/... on Windows
        path = path[1:]
    return path if folder else os.path.dirname(path)


def session_unit(path: str, fb: FileBytes, doc: dict[str, Any] | None, skips: dict[str, int]) -> Unit:
    """The Unit of one chat session (docs/formats.md §30 field map)."""
    doc = doc or {}
    messages, first_prompt, times = conversation(doc, skips)
    created = to_epoch_ms(doc.get("creationDate"))
    last = to_epoch_ms(doc.get("lastMessageDate"))
    stamps = [t for t in (created, last, *times) if t is not None]
    sid = nonblank(doc.get("sessionId")) or os.path.basename(path).rsplit(".", 1)[0]
    session = SessionInfo(
        agent="vscode-copilot", session_id=sid, title=nonblank(doc.get("customTitle")) or first_prompt,
        cwd=workspace_folder(os.path.dirname(path)),
        started_at=created if created is not None else min(stamps, default=None),
        updated_at=max(stamps, default=None), message_count=len(messages), resume_command=None)
    return Unit(session, messages, fb.signature, skips)


def read_unit(found: Found) -> Unit:
    """One chat file: a ``.json`` snapshot or a ``.jsonl`` operation log, replayed."""
    fb = read_settled(found.path)
    skips: dict[str, int] = {}
    if not fb.data.strip():
        count_skip(skips, "empty-file")
        return session_unit(found.path, fb, None, skips)
    if found.path.endswith(".jsonl"):
        doc = replay_log(jsonl_records(fb, skips), skips)
        if doc is None:
            count_skip(skips, "no-snapshot")
        return session_unit(found.path, fb, doc, skips)
    value = loads_line(fb.data)
    if type(value) is not dict:
        if fb.recent:
            raise UnitChanged("the chat snapshot is being written")
        raise UnitUnreadable("not a VS Code chat session (a JSON object with requests)")
    return session_unit(found.path, fb, value, skips)


# --- where VS Code keeps its chats (docs/formats.md §30, §13) -----------------------------------------
def user_dirs(env: Mapping[str, str], home: Path) -> list[Path]:
    """Every VS Code ``User`` folder: each build's under $XDG_CONFIG_HOME (~/.config) and under
    ~/Library/Application Support, and a portable install's ($VSCODE_PORTABLE/user-data/User)."""
    config = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else home / ".config"
    mac = home / "Library" / "Application Support"
    out = [base / editor / "User" for editor in EDITORS for base in (config, mac)]
    if env.get("VSCODE_PORTABLE"):
        out.append(Path(env["VSCODE_PORTABLE"]).expanduser() / "user-data" / "User")
    return out


# Under each User folder: every workspace's chats, and the two chat folders of globalStorage (named
# themselves, so that the census of a root never counts other extensions' files there).
USER_SUBDIRS = ("workspaceStorage", "globalStorage/emptyWindowChatSessions", "globalStorage/transferredChatSessions")


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``<User>/workspaceStorage`` and the chat folders of ``<User>/globalStorage`` of every VS Code build."""
    return [Root("vscode-copilot", str(user.absolute() / sub)) for user in user_dirs(env, home) for sub in USER_SUBDIRS]


def session_file_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for ``<id>.jsonl``, and for ``<id>.json`` unless the log of the same id exists
    (VS Code moved it to the log format; the log wins)."""
    if not _SESSION_FILE.fullmatch(name):
        return None
    if name.endswith(".json") and os.path.exists(os.path.join(directory, name + "l")):
        return None
    return "whole"


def chat_folders(root: Root, problems: list[RootProblem]) -> Iterator[str]:
    """The chat folders a root holds: itself (a chat folder), ``<root>/chatSessions`` (one workspace's
    folder), or ``<root>/<hash>/chatSessions`` and ``<root>/<chat folder>`` (workspaceStorage,
    globalStorage)."""
    if os.path.basename(root.path) in CHAT_DIRS:
        yield root.path
        return
    own = os.path.join(root.path, "chatSessions")
    if os.path.isdir(own):
        yield own
        return
    try:
        with os.scandir(root.path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list root: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name in CHAT_DIRS:
            yield entry.path
        elif not entry.name.startswith("."):
            chats = os.path.join(entry.path, "chatSessions")
            if os.path.isdir(chats):
                yield chats


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every chat file under the root. Snapshots are rewritten and logs appended in place (their
    folder's mtime does not move), so every pass lists the chat folders: a stat per workspace and
    per chat file, no reading."""
    if check_root(root, problems) is None:
        return
    for folder in chat_folders(root, problems):
        yield from walk_files(Root(root.agent, folder), problems, None, session_file_mode, max_depth=0)


def _predecessor(path: str) -> str | None:
    """A chat's ``.jsonl`` log continues the ``.json`` snapshot VS Code converted."""
    return path[:-1] if path.endswith(".jsonl") else None


SPEC = AgentSpec(
    name="vscode-copilot", label="VS Code Copilot Chat", default_roots=default_roots, discover=discover,
    read_unit=read_unit, predecessor=_predecessor,
    expects="workspaceStorage/<hash>/chatSessions/<session-id>.jsonl (operation log) or .json (snapshot)",
    shaped=lambda name: _UUID_FILE.fullmatch(name) is not None)
