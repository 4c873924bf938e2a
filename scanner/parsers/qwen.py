"""Qwen Code sessions, read whole (docs/formats.md §10).

Qwen Code writes ``~/.qwen/projects/<sanitized cwd>/chats/<sessionId>.jsonl``: ``ChatRecord``s
that form a tree through ``uuid``/``parentUuid``. A rewind does not truncate the file, it starts a
new branch from an earlier record, so the conversation is the chain from the *active leaf* (the
last conversation record) back to the root, as Qwen's own loader builds it
(``utils/transcript-records.ts``): records sharing a uuid are fragments of one message, side
records (artifact snapshots, …) are never the leaf, and everything off the chain is a dead
branch. That needs the whole file, so every file is a ``whole`` unit. Files from the Gemini-fork
era (``~/.qwen/tmp/<sha256>/chats/session-*.json``) are Gemini's format (scanner/parsers/gemini/).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aivault.scanner.model import KindName, Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import (
    FileBytes,
    chats_discovery,
    gemini_unit,
    jsonl_records,
    read_settled,
    replay_file,
)
from aivault.scanner.parsers.gemini.records import as_parts, response_text, tool_call_text
from aivault.scanner.parsers.jsonutil import compact_json, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Found, Mode, Root, Unit
from aivault.scanner.spec import AgentSpec

RESUME = "qwen --resume"
RECORD_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
# Side records Qwen's loader keeps out of the conversation: never the leaf, never a parent.
SIDE_SUBTYPES = frozenset({
    "session_artifact_event", "session_artifact_snapshot", "session_sources_snapshot",
    "managed_session_header_v1", "managed_session_event_v1", "managed_session_commit_v1",
})
# "user" records the runtime writes (a background notification, a cron or goal prompt): shown to
# the model as user turns, but nobody typed them.
RUNTIME_USER_SUBTYPES = frozenset({"notification", "cron", "goal_runtime", "background_task_completed"})
# System subtypes Qwen Code 0.21 knows (KNOWN_RECORD_SUBTYPES): bookkeeping, not messages; any
# other is counted by name so that format drift shows up.
KNOWN_SUBTYPES = frozenset({
    "chat_compression", "slash_command", "ui_telemetry", "at_command", "attribution_snapshot",
    "notification", "background_task_completed", "cron", "mid_turn_user_message", "realtime_message",
    "custom_title", "parent_session", "rewind", "agent_bootstrap", "agent_launch_prompt", "agent_retry",
    "agent_session_ready", "file_history_snapshot", "session_source", "session_model", "omni_recall",
    "session_execution_engine", "session_approval_mode", "branch_checkpoint", "goal_state", "goal_runtime",
    "goal_turn_end", "code_mode_tool_result", "turn_result", "turn_attempt", "user_text_elements",
    "agent_mention", "agent_message", *SIDE_SUBTYPES,
})
HOOK_OPEN = "<qwen:user-prompt-submit-context>"
HOOK_CLOSE = "</qwen:user-prompt-submit-context>"


def is_hook_context(text: str) -> bool:
    """A complete ``<qwen:user-prompt-submit-context>`` block (what a UserPromptSubmit hook added)."""
    trimmed = text.strip()
    prefix, suffix = HOOK_OPEN + "\n", "\n" + HOOK_CLOSE
    if not (trimmed.startswith(prefix) and trimmed.endswith(suffix)):
        return False
    body = trimmed[len(prefix): -len(suffix)] if len(trimmed) > len(prefix) + len(suffix) else ""
    return HOOK_OPEN not in body and HOOK_CLOSE not in body


def _text_parts(parts: list[Any]) -> list[tuple[bool, str]]:
    return [(p.get("thought") is True, p["text"]) for p in parts
            if type(p) is dict and isinstance(p.get("text"), str) and p["text"]]


def _parts(rec: dict[str, Any]) -> list[Any]:
    message = rec.get("message")
    return as_parts(message.get("parts")) if type(message) is dict else []


def user_text(rec: dict[str, Any]) -> str:
    """What the user typed: ``systemPayload.displayText`` (authoritative even when empty), else the
    text parts without a trailing hook-context part."""
    payload = rec.get("systemPayload")
    if type(payload) is dict and isinstance(payload.get("displayText"), str):
        return str(payload["displayText"])
    texts = [t for thought, t in _text_parts(_parts(rec)) if not thought]
    if len(texts) > 1 and is_hook_context(texts[-1]):
        texts.pop()
    return "\n".join(texts)


def _result_text(rec: dict[str, Any]) -> str:
    texts = [response_text(p["functionResponse"].get("response")) for p in _parts(rec)
             if type(p) is dict and type(p.get("functionResponse")) is dict]
    text = "\n".join(t for t in texts if t)
    result = rec.get("toolCallResult")
    if not text and type(result) is dict:
        shown = result.get("resultDisplay")
        if isinstance(shown, str):
            text = shown
        elif type(shown) is dict and shown:
            diff = shown.get("fileDiff")
            text = diff if isinstance(diff, str) and diff else compact_json(shown)
    return text


def record_messages(rec: dict[str, Any], skips: dict[str, int]) -> list[Message]:
    """The messages of one ChatRecord (a fragment, when several records share its uuid)."""
    kind, subtype = rec["type"], rec.get("subtype")
    ts = to_epoch_ms(rec.get("timestamp"))
    if kind == "user":
        text = user_text(rec)
        if not text.strip():
            return []
        if is_hook_context(text):
            count_skip(skips, "injected-context")
            return []
        role: RoleName = "system" if subtype in RUNTIME_USER_SUBTYPES else "user"
        return [Message(role, "text", text, ts)]
    if kind == "assistant":
        out: list[Message] = []
        for part in _parts(rec):
            if type(part) is not dict:
                continue
            call = part.get("functionCall")
            if type(call) is dict:
                out.append(Message("assistant", "tool_call", tool_call_text(call.get("name"), call.get("args")), ts))
            elif isinstance(part.get("text"), str) and part["text"]:
                msg_kind: KindName = "thinking" if part.get("thought") is True else "text"
                if out and out[-1].kind == msg_kind and out[-1].role == "assistant":
                    out[-1].text += part["text"]  # streamed chunks of one block
                else:
                    out.append(Message("assistant", msg_kind, part["text"], ts))
        return [m for m in out if m.text.strip()]
    if kind == "tool_result":
        text = _result_text(rec)
        return [Message("tool", "tool_result", text, ts)] if text.strip() else []
    # system records are bookkeeping (their metadata is read in SessionState.note)
    if isinstance(subtype, str) and subtype not in KNOWN_SUBTYPES:
        count_skip(skips, "unknown_subtype", subtype)
    return []


@dataclass(slots=True)
class Tree:
    """The records of one file and the active chain through them."""

    records: list[dict[str, Any]] = field(default_factory=list)  # valid records, file order
    chain: list[str] = field(default_factory=list)  # uuids, root first
    fragments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _valid(obj: dict[str, Any], skips: dict[str, int]) -> bool:
    uuid, parent, kind = obj.get("uuid"), obj.get("parentUuid"), obj.get("type")
    if not isinstance(uuid, str) or not uuid or not (parent is None or isinstance(parent, str)):
        count_skip(skips, "malformed-record")
        return False
    if kind not in RECORD_TYPES:
        count_skip(skips, "unknown_record", kind if isinstance(kind, str) else "(none)")
        return False
    return True


def _is_side(rec: dict[str, Any]) -> bool:
    return rec["type"] == "system" and rec.get("subtype") in SIDE_SUBTYPES


def build_tree(objs: list[dict[str, Any]], skips: dict[str, int]) -> Tree:
    """Qwen's active chain: from the last conversation record up through ``parentUuid``, the
    first record of each uuid giving its parent; a missing parent or a cycle ends the walk."""
    tree = Tree(records=[o for o in objs if _valid(o, skips)])
    first: dict[str, dict[str, Any]] = {}
    for rec in tree.records:
        if _is_side(rec):
            continue
        tree.fragments.setdefault(rec["uuid"], []).append(rec)
        first.setdefault(rec["uuid"], rec)
    leaf = next((r["uuid"] for r in reversed(tree.records) if not _is_side(r)), None)
    seen: set[str] = set()
    current = leaf
    while current is not None and current not in seen and current in first:
        seen.add(current)
        tree.chain.append(current)
        parent = first[current].get("parentUuid")
        if parent and parent not in first:
            count_skip(skips, "history-gap")
        current = parent or None
    tree.chain.reverse()
    return tree


def _custom_title(rec: dict[str, Any]) -> str | None:
    payload = rec.get("systemPayload")
    if rec["type"] != "system" or rec.get("subtype") != "custom_title" or type(payload) is not dict:
        return None
    title = payload.get("customTitle")
    return title.strip() if isinstance(title, str) and title.strip() else None


def qwen_unit(path: str, fb: FileBytes, objs: list[dict[str, Any]], skips: dict[str, int]) -> Unit:
    """The Unit of one Qwen Code JSONL session (docs/formats.md §10 field map)."""
    tree = build_tree(objs, skips)
    on_chain = set(tree.chain)
    messages: list[Message] = []
    first_user: str | None = None
    cwd = branch = None
    t0: int | None = None
    t1: int | None = None
    for uuid in tree.chain:
        for rec in tree.fragments[uuid]:
            out = record_messages(rec, skips)
            if not out:
                if rec["type"] != "system":
                    count_skip(skips, "empty-record")
                elif rec.get("subtype") in KNOWN_SUBTYPES or rec.get("subtype") is None:
                    count_skip(skips, "bookkeeping")  # an unknown subtype is counted by name instead
            messages += out
            if first_user is None and rec["type"] == "user" and rec.get("subtype") not in RUNTIME_USER_SUBTYPES \
                    and any(m.role == "user" for m in out):
                first_user = first_line_title(out[0].text)
            cwd = rec["cwd"] if isinstance(rec.get("cwd"), str) and rec["cwd"].strip() else cwd
            branch = rec["gitBranch"] if isinstance(rec.get("gitBranch"), str) and rec["gitBranch"] else branch
            ts = to_epoch_ms(rec.get("timestamp"))
            if ts is not None:
                t0 = ts if t0 is None else min(t0, ts)
                t1 = ts if t1 is None else max(t1, ts)
    # Title and lineage come from the whole file, as Qwen's session list reads them: the latest
    # custom_title record names the session (manual or auto: auto-titling only runs on an untitled
    # session, so a later record is a later rename), even on a branch later rewound.
    title: str | None = None
    parent: str | None = None
    for rec in tree.records:
        if _is_side(rec):
            count_skip(skips, "bookkeeping")
        elif rec["uuid"] not in on_chain:
            count_skip(skips, "dead-branch")
        title = _custom_title(rec) or title
        payload = rec.get("systemPayload")
        if rec.get("subtype") == "parent_session" and type(payload) is dict \
                and isinstance(payload.get("parentSessionId"), str) and payload["parentSessionId"]:
            parent = payload["parentSessionId"]
    # The file is named by the session id; its records repeat it (the last one is the live writer's).
    sid = next((r["sessionId"] for r in reversed(tree.records) if isinstance(r.get("sessionId"), str)
                and r["sessionId"]), None)
    session_id = sid or os.path.basename(path).rsplit(".", 1)[0]
    archived = os.path.basename(os.path.dirname(path)) == "archive"
    resume = None
    if not archived:  # Qwen cannot resume an archived chat
        resume = f"{RESUME} {shlex.quote(session_id)}"
        if cwd:
            resume = f"cd {shlex.quote(cwd)} && {resume}"
    session = SessionInfo(agent="qwen", session_id=session_id, title=title or first_user,
                          cwd=cwd, branch=branch, started_at=t0, updated_at=t1, message_count=len(messages),
                          resume_command=resume, parent_session_id=parent)
    return Unit(session, messages, fb.signature, skips)


def read_unit(found: Found) -> Unit:
    """One Qwen Code session file, read whole (sources.Unit)."""
    path = found.path
    fb = read_settled(path)
    skips: dict[str, int] = {}
    if path.endswith(".json"):
        # Gemini-fork era: Gemini's format, and today's qwen cannot resume it.
        return gemini_unit(path, "qwen", fb, replay_file(path, fb, skips), resumable=False)
    objs = jsonl_records(fb, skips)
    if objs and not any("uuid" in o for o in objs):
        # A .jsonl in Gemini's shape (a fork-era log): replay it like Gemini's.
        skips = {}
        return gemini_unit(path, "qwen", fb, replay_file(path, fb, skips), resumable=False)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
    return qwen_unit(path, fb, objs, skips)


# --- where Qwen Code keeps its sessions (docs/formats.md §10, §13) -----------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$QWEN_HOME/projects`` (``QWEN_HOME`` defaults to ``~/.qwen``), ``$QWEN_RUNTIME_DIR/projects``
    when set, and the Gemini-fork era ``$QWEN_HOME/tmp``."""
    qwen_home = Path(env["QWEN_HOME"]).expanduser().absolute() if env.get("QWEN_HOME") else home / ".qwen"
    roots = [Root("qwen", str(qwen_home / "projects"))]
    runtime = env.get("QWEN_RUNTIME_DIR")
    if runtime:
        projects = Path(runtime).expanduser().absolute() / "projects"
        if str(projects) != roots[0].path:
            roots.append(Root("qwen", str(projects)))
    roots.append(Root("qwen", str(qwen_home / "tmp")))
    return roots


def session_file_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for ``chats/<id>.jsonl``, ``chats/archive/<id>.jsonl`` and fork-era
    ``chats/session-*.json``."""
    if ".tmp" in name or not name.endswith((".jsonl", ".json")):
        return None
    folder = os.path.basename(directory)
    in_chats = folder == "chats" or (folder == "archive" and os.path.basename(os.path.dirname(directory)) == "chats")
    if not in_chats:
        return None
    if name.endswith(".json"):
        return "whole" if folder == "chats" and name.startswith("session-") else None
    return "whole"


SPEC = AgentSpec(
    name="qwen", label="Qwen Code", default_roots=default_roots,
    discover=chats_discovery(session_file_mode), read_unit=read_unit,
    expects="<sanitized cwd>/chats/<session-id>.jsonl (JSONL ChatRecords; archive/ too; fork-era session-*.json)",
    shaped=lambda name: name.endswith(".jsonl") or (name.startswith("session-") and name.endswith(".json")))
