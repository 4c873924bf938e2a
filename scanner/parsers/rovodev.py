"""Rovo Dev CLI sessions, read whole (docs/formats.md §34).

Atlassian's Rovo Dev (``acli rovodev``) keeps one folder per session,
``~/.rovodev/sessions/<session id>/``, holding ``session_context.json`` (the agent's message history,
rewritten as the session goes) and ``metadata.json`` (title, workspace, times, fork parent). The
folder moves with ``sessions.persistenceDir`` in ``~/.rovodev/config.yml``.

Rovo Dev is closed source and no licence-clean sample exists: this reader follows the two public
readers other session-search tools ship. The history is read as pydantic-ai messages (``kind:
request|response`` with ``parts[].part_kind``), and the generic ``{role, parts:[{kind|type:
text|tool_use|tool_result}]}`` spelling is accepted too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.copilot import arguments_text
from aivault.scanner.parsers.gemini import chats_discovery, read_settled
from aivault.scanner.parsers.jsonutil import compact_json, first_text, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Mode, Root, RootProblem, Unit, signature, size_mtime
from aivault.scanner.spec import AgentSpec, Discover

CONTEXT_NAME = "session_context.json"
METADATA_NAME = "metadata.json"
# metadata.json and config.yml are a few hundred bytes; anything much larger is not Rovo Dev's.
SIDE_MAX_BYTES = 4 * 1024 * 1024
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
# pydantic-ai part kinds (and the generic reader's spellings) by what they are.
_USER = frozenset({"user-prompt"})
_TEXT = frozenset({"text"})
_THINKING = frozenset({"thinking", "reasoning"})
_CALL = frozenset({"tool-call", "builtin-tool-call", "tool_use", "tool-use"})
_RESULT = frozenset({"tool-return", "builtin-tool-return", "tool_result", "tool-result"})
_SYSTEM = frozenset({"system-prompt"})
_PARENT_KEYS = ("parent_session_id", "parentSessionId", "forked_from_session_id", "forkedFromSessionId")


# --- config and roots ---------------------------------------------------------------------------------
def persistence_dir(config_path: Path) -> Path | None:
    """``sessions.persistenceDir`` of ``config.yml`` when it names an absolute (or ``~``) path; relative or
    invalid values are ignored, as the public readers do. A two-level YAML mapping is all this reads."""
    try:
        with open(config_path, "rb") as f:
            text = f.read(SIDE_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    in_sessions = False
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            in_sessions = line.strip() == "sessions:"
            continue
        key, sep, value = line.strip().partition(":")
        if in_sessions and sep and key == "persistenceDir":
            value = value.strip().strip("'\"")
            if value.startswith("~") or os.path.isabs(value):
                return Path(value).expanduser()
    return None


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.rovodev/sessions`` (Linux and macOS alike), and the folder ``sessions.persistenceDir`` names
    in ``~/.rovodev/config.yml``."""
    roots = [Root("rovodev", str(home / ".rovodev" / "sessions"))]
    moved = persistence_dir(home / ".rovodev" / "config.yml")
    if moved is not None and str(moved) != roots[0].path:
        roots.append(Root("rovodev", str(moved)))
    return roots


def context_mode(directory: str, name: str) -> Mode | None:
    return "whole" if name == CONTEXT_NAME else None


def _session_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, CONTEXT_NAME))


def unit_signature(context_sig: int, path: str) -> int:
    """A session's change signature: its history file's and its metadata file's (a rename changes only
    the metadata)."""
    return signature(context_sig, size_mtime(os.path.join(os.path.dirname(path), METADATA_NAME)))


def _discovery() -> Discover:
    base = chats_discovery(context_mode, _session_dir)

    def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
        for f in base(root, problems, dirs, full):
            yield dataclasses.replace(f, mtime_ns=unit_signature(f.mtime_ns, f.path))

    return discover


# --- one session --------------------------------------------------------------------------------------------
def _side_json(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read(SIDE_MAX_BYTES)
    except OSError:
        return {}
    doc = loads_line(data) if data.strip() else None
    return doc if type(doc) is dict else {}


def _content_text(content: object) -> str:
    """A part's content as text: a string, a list of strings and text items (multimodal prompts), or JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_item_text(c) for c in content) if t)
    return "" if content is None else compact_json(content)


def _item_text(item: object) -> str:
    if isinstance(item, str):
        return item
    return (first_text(item, ("text", "content")) or "") if type(item) is dict else ""


def _part_kind(part: dict[str, Any]) -> str:
    kind = part.get("part_kind") or part.get("kind") or part.get("type")
    return kind.lower() if isinstance(kind, str) else ""


def _message_role(msg: dict[str, Any]) -> RoleName | None:
    kind, role = msg.get("kind"), msg.get("role")
    if kind == "request" or role == "user":
        return "user"
    if kind == "response" or role == "assistant":
        return "assistant"
    return None


def part_messages(part: dict[str, Any], role: RoleName, ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of one part of a request (user side) or response (assistant side)."""
    kind = _part_kind(part)
    if kind in _USER or (kind in _TEXT and role == "user"):
        text = _REMINDER.sub("", _content_text(part.get("content", part.get("text")))).strip()
        if not text:
            count_skip(skips, "injected-context")  # only <system-reminder> blocks: Rovo's own context
            return []
        return [Message("user", "text", text, ts)]
    if kind in _TEXT:
        text = _content_text(part.get("content", part.get("text")))
        return [Message("assistant", "text", text, ts)] if text.strip() else []
    if kind in _THINKING:
        text = _content_text(part.get("content", part.get("text")))
        return [Message("assistant", "thinking", text, ts)] if text.strip() else []
    if kind in _CALL:
        name = first_text(part, ("tool_name", "name")) or "tool"
        args = arguments_text(next((part[k] for k in ("args", "input", "arguments") if k in part), None))
        return [Message("assistant", "tool_call", f"{name} {args}" if args else name, ts)]
    if kind in _RESULT or kind == "retry-prompt":
        value = next((part[k] for k in ("content", "output", "result") if k in part), None)
        text = _content_text(value)
        if kind == "retry-prompt":  # pydantic-ai asking the model to try again (a tool's validation error)
            text = f"[retry] {text}".rstrip()
        return [Message("tool", "tool_result", text, ts)] if text.strip() else []
    if kind in _SYSTEM:
        count_skip(skips, "system-prompt")
        return []
    count_skip(skips, "unknown_part", kind or "(none)")
    return []


def context_unit(path: str, sig: int, doc: dict[str, Any], meta: dict[str, Any], skips: dict[str, int]) -> Unit:
    """The Unit of one session folder (docs/formats.md §34 field map)."""
    raw = doc.get("message_history")
    if not isinstance(raw, list):
        raw = doc.get("messages")
    history: list[Any] = raw if isinstance(raw, list) else []
    created = to_epoch_ms(meta.get("created_at") or meta.get("createdAt"))
    updated = to_epoch_ms(meta.get("updated_at") or meta.get("updatedAt"))
    messages: list[Message] = []
    first_user: str | None = None
    times = [t for t in (created, updated) if t is not None]
    last_ts = created
    for msg in history:
        if type(msg) is not dict:
            count_skip(skips, "malformed-record")
            continue
        role = _message_role(msg)
        if role is None:
            count_skip(skips, "unknown_message", str(msg.get("kind") or msg.get("role")))
            continue
        msg_ts = to_epoch_ms(msg.get("timestamp") or msg.get("created_at"))
        parts = msg.get("parts")
        if not isinstance(parts, list):
            parts = [{"kind": "text", "content": msg.get("content")}] if "content" in msg else []
        for part in parts:
            if type(part) is not dict:
                count_skip(skips, "malformed-record")
                continue
            # A part's own time, else its message's, else the last one seen (responses carry one time).
            ts = to_epoch_ms(part.get("timestamp")) or msg_ts or last_ts
            if ts is not None:
                times.append(ts)
                last_ts = ts
            out = part_messages(part, role, ts, skips)
            if first_user is None:
                first_user = next((first_line_title(m.text) for m in out if m.role == "user"), None)
            messages += out
    dir_id = os.path.basename(os.path.dirname(path))
    session_id = first_text(meta, ("session_id", "sessionId")) or first_text(doc, ("session_id", "sessionId")) \
        or dir_id
    title = nonblank(meta.get("title"))
    session = SessionInfo(
        agent="rovodev", session_id=session_id, title=first_line_title(title) if title else first_user,
        cwd=first_text(meta, ("workspace_path", "workspacePath")),
        branch=first_text(meta, ("git_branch", "gitBranch")) or first_text(doc, ("git_branch", "gitBranch")),
        started_at=min(times) if times else None, updated_at=max(times) if times else None,
        message_count=len(messages), resume_command=None,
        parent_session_id=first_text(meta, _PARENT_KEYS) or first_text(doc, _PARENT_KEYS))
    return Unit(session, messages, sig, skips)


def read_unit(found: Found) -> Unit:
    """One Rovo Dev session folder, read whole (sources.Unit)."""
    fb = read_settled(found.path)
    doc = loads_line(fb.data) if fb.data.strip() else None
    if type(doc) is not dict:
        if fb.recent:
            raise UnitChanged("the session context is not complete JSON yet")
        raise UnitUnreadable("not a Rovo Dev session context (a JSON object with message_history)")
    meta = _side_json(os.path.join(os.path.dirname(found.path), METADATA_NAME))
    return context_unit(found.path, unit_signature(fb.signature, found.path), doc, meta, {})


SPEC = AgentSpec(
    name="rovodev", label="Rovo Dev", default_roots=default_roots, discover=_discovery(), read_unit=read_unit,
    expects="<session id>/session_context.json (+ metadata.json; whole-file JSON, pydantic-ai messages)",
    shaped=lambda name: name == CONTEXT_NAME)
