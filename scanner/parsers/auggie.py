"""Augment's Auggie CLI sessions, read whole (docs/formats.md §35).

``auggie`` writes one JSON document per session, ``~/.augment/sessions/<sessionId>.json``, rewritten
whole as the session goes: the workspace, times and ``chatHistory``, a list of exchanges. An
exchange holds the request and the response twice over: as plain text (``request_message``,
``response_text``) and as typed nodes (``request_nodes``, ``response_nodes``: text, tool uses,
tool results, thinking), either of which may be missing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.copilot import arguments_text
from aivault.scanner.parsers.jsonutil import first_text, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Mode, Root, RootProblem, Unit, read_whole, walk_files
from aivault.scanner.spec import AgentSpec

# A document that does not parse and was written this recently is mid-rewrite: read it next pass.
SETTLE_S = 30
# Sessions hold images and file contents; one larger than this is reported rather than held in memory.
MAX_SESSION_BYTES = 256 << 20
_PARENT_KEYS = ("parentSessionId", "parent_session_id", "parentConversationId", "parent_conversation_id")


def _field(obj: dict[str, Any], snake: str, camel: str) -> Any:
    """A field under its snake_case name (what the CLI writes) or its camelCase one (older builds)."""
    return obj[snake] if snake in obj else obj.get(camel)


def _nodes(exchange: dict[str, Any], snake: str, camel: str) -> list[dict[str, Any]]:
    nodes = _field(exchange, snake, camel)
    return [n for n in nodes if type(n) is dict] if isinstance(nodes, list) else []


def _node_text(node: dict[str, Any]) -> str | None:
    text_node = _field(node, "text_node", "textNode")
    if type(text_node) is dict and isinstance(text_node.get("content"), str):
        return str(text_node["content"])
    return None


def _result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        text = content
    else:
        nodes = _field(result, "content_nodes", "contentNodes")
        texts = [n["text_content"] for n in nodes if type(n) is dict and isinstance(n.get("text_content"), str)] \
            if isinstance(nodes, list) else []
        text = "\n".join(texts)
    if _field(result, "is_error", "isError") is True:
        text = f"[error] {text}".rstrip()
    return text


def exchange_messages(entry: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of one ``chatHistory`` entry: tool results and the prompt, then the reply's thinking,
    text and tool uses in node order. A compaction summary exchange is system text."""
    exchange = entry.get("exchange")
    if type(exchange) is not dict:
        count_skip(skips, "malformed-record")
        return []
    out: list[Message] = []
    request_nodes = _nodes(exchange, "request_nodes", "requestNodes")
    for node in request_nodes:
        result = _field(node, "tool_result_node", "toolResultNode")
        if type(result) is dict:
            text = _result_text(result)
            if text.strip():
                out.append(Message("tool", "tool_result", text, ts))
        elif _node_text(node) is None:
            count_skip(skips, "request_node", str(node.get("type")))  # IDE state, images, edit events...
    prompt = nonblank(_field(exchange, "request_message", "requestMessage"))
    if prompt is None:
        prompt = nonblank("\n".join(t for t in (_node_text(n) for n in request_nodes) if t))
    if prompt is not None:
        out.append(Message("user", "text", prompt, ts))
    reply = nonblank(_field(exchange, "response_text", "responseText"))
    # Where the plain reply goes among the response's nodes: at its first text node, else before its
    # first tool use (an agent says what it does, then calls the tool).
    reply_at: int | None = None
    for node in _nodes(exchange, "response_nodes", "responseNodes"):
        tool_use = _field(node, "tool_use", "toolUse")
        thinking = node.get("thinking")
        node_text = _node_text(node)
        if type(tool_use) is dict:
            if reply is not None and reply_at is None:
                reply_at = len(out)
            name = first_text(tool_use, ("tool_name", "toolName")) or "tool"
            args = arguments_text(_field(tool_use, "input_json", "inputJson"))
            out.append(Message("assistant", "tool_call", f"{name} {args}" if args else name, ts))
        elif type(thinking) is dict:
            body = first_text(thinking, ("content", "summary", "text"))
            if body and body.strip():
                out.append(Message("assistant", "thinking", body, ts))
        elif node_text is not None:
            if reply is None:  # no plain-text reply: the text nodes are the reply
                if out and out[-1].role == "assistant" and out[-1].kind == "text":
                    out[-1].text += node_text  # streamed pieces of one reply
                elif node_text.strip():
                    out.append(Message("assistant", "text", node_text, ts))
            elif reply_at is None:
                reply_at = len(out)
        else:
            count_skip(skips, "response_node", str(node.get("type")))
    if reply is not None:
        out.insert(len(out) if reply_at is None else reply_at, Message("assistant", "text", reply, ts))
    if entry.get("isHistorySummary") is True:  # the summary the conversation continues from
        return [Message("system", "text", m.text, ts) for m in out if m.kind == "text"]
    return [m for m in out if m.text.strip()]


def session_unit(doc: dict[str, Any], path: str, sig: int, skips: dict[str, int]) -> Unit:
    """The Unit of one session document (docs/formats.md §35 field map)."""
    created = to_epoch_ms(doc.get("created"))
    modified = to_epoch_ms(doc.get("modified"))
    times = [t for t in (created, modified) if t is not None]
    history = _field(doc, "chatHistory", "chat_history")
    messages: list[Message] = []
    first_user: str | None = None
    for entry in history if isinstance(history, list) else []:
        if type(entry) is not dict:
            count_skip(skips, "malformed-record")
            continue
        # Exchanges carry no start time: when each finished, else the session's last write.
        ts = to_epoch_ms(_field(entry, "finishedAt", "finished_at")) or modified or created
        if ts is not None:
            times.append(ts)
        out = exchange_messages(entry, ts, skips)
        if first_user is None:
            first_user = next((first_line_title(m.text) for m in out if m.role == "user"), None)
        messages += out
    session_id = first_text(doc, ("sessionId", "session_id")) or Path(path).stem
    session = SessionInfo(
        agent="auggie", session_id=session_id, title=first_user,
        cwd=first_text(doc, ("workspaceRoot", "workspace_root")),
        started_at=min(times) if times else None, updated_at=max(times) if times else None,
        message_count=len(messages), resume_command=None, parent_session_id=first_text(doc, _PARENT_KEYS))
    return Unit(session, messages, sig, skips)


def read_unit(found: Found) -> Unit:
    """One Auggie session document, read whole (sources.Unit)."""
    data, sig, st = read_whole(found.path, MAX_SESSION_BYTES,
                               lambda size: f"the session is {size} bytes, over the {MAX_SESSION_BYTES}-byte limit")
    doc = loads_line(data) if data.strip() else None
    if type(doc) is not dict:
        if time.time_ns() - st.st_mtime_ns < SETTLE_S * 1_000_000_000:
            raise UnitChanged("the session is not complete JSON yet")
        raise UnitUnreadable("not an Auggie session (a JSON object with chatHistory)")
    return session_unit(doc, found.path, sig, {})


# --- where Auggie keeps its sessions (docs/formats.md §35) ------------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.augment/sessions`` on Linux and macOS (only a per-run ``--augment-cache-dir`` moves it)."""
    return [Root("auggie", str(home / ".augment" / "sessions"))]


def _wanted(directory: str, name: str) -> Mode | None:
    return "whole" if name.endswith(".json") and not name.startswith(".") else None


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The session documents directly in the root, listed on every pass: Auggie rewrites a document in
    place, which changes the file but not its folder's mtime."""
    yield from walk_files(root, problems, dirs, _wanted, max_depth=0)


SPEC = AgentSpec(
    name="auggie", label="Augment Auggie CLI", default_roots=default_roots, discover=discover,
    read_unit=read_unit, expects="<sessionId>.json (one JSON document per session, with chatHistory)",
    shaped=lambda name: name.endswith(".json"))
