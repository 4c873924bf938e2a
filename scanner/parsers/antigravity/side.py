"""What Antigravity keeps beside its transcripts: workspaces and sub-agent links (docs/formats.md §16).

Neither store of a conversation names its folder reliably, so the folder comes from the files the
agent keeps at its root, in this order: the conversation database's own workspace
(scanner/parsers/antigravity/store.py), ``cache/last_conversations.json`` (the CLI: workspace ->
its latest conversation), ``cache/conversation_metadata.json`` (the IDE: ``WorkspaceURIs`` per
conversation), then the prompt log ``history.jsonl`` (``conversationId`` and ``workspace`` per
prompt). A sub-agent runs as a conversation of its own; its parent is the conversation whose
INVOKE_SUBAGENT step names it, which also gives the sub-agent's workspace.

Every file is read once per change (size and mtime) and kept as a small map; a file that is missing,
unreadable or of an unexpected shape says nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final

from aivault.scanner.parsers.antigravity.steps import INVOKE_SUBAGENT, file_uri_path, spawned
from aivault.scanner.parsers.jsonutil import loads_line

# The side files are small (a prompt log grows by a line per prompt); past this they are not read.
SIDE_MAX_BYTES: Final = 64 * 1024 * 1024
# A parent's INVOKE_SUBAGENT step is written when it creates the sub-agent, so the parent's
# transcript changed after the sub-agent started (less this slack, for clocks and write order).
LINEAGE_SLACK_MS: Final = 60_000
BRAIN: Final = "brain"
LOGS: Final = (".system_generated", "logs")
TRANSCRIPTS: Final = ("transcript.jsonl", "transcript_full.jsonl")

Stamp = tuple[int, int]
_CACHE: dict[tuple[str, str], tuple[Stamp, Any]] = {}


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _cached(path: str, kind: str, parse: Callable[[bytes], Any], empty: Any) -> Any:
    """``parse`` of the file's bytes, computed again only when its size or mtime moved."""
    stamp = _stamp(path)
    if stamp is None or stamp[0] > SIDE_MAX_BYTES:
        _CACHE.pop((path, kind), None)
        return empty
    hit = _CACHE.get((path, kind))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        with open(path, "rb") as f:
            data = f.read(SIDE_MAX_BYTES)
    except OSError:
        return empty
    value = parse(data)
    _CACHE[(path, kind)] = (stamp, value)
    return value


def _last_conversations(data: bytes) -> dict[str, str]:
    doc = loads_line(data)
    out: dict[str, str] = {}
    for where, cid in doc.items() if isinstance(doc, dict) else ():
        path = file_uri_path(where) if isinstance(where, str) else None
        if path and isinstance(cid, str):
            out[cid] = path
    return out


def _conversation_metadata(data: bytes) -> dict[str, str]:
    doc = loads_line(data)
    conversations = doc.get("conversations") if isinstance(doc, dict) else None
    out: dict[str, str] = {}
    for cid, entry in conversations.items() if isinstance(conversations, dict) else ():
        summary = entry.get("summary") if isinstance(entry, dict) else None
        uris = summary.get("WorkspaceURIs") if isinstance(summary, dict) else None
        path = next((p for p in (file_uri_path(u) for u in uris if isinstance(u, str)) if p), None) \
            if isinstance(uris, list) else None
        if path:
            out[str(cid)] = path
    return out


def _history(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in data.split(b"\n"):
        if b"conversationId" not in line:
            continue
        row = loads_line(line)
        if not isinstance(row, dict):
            continue
        cid, where = row.get("conversationId"), row.get("workspace")
        path = file_uri_path(where) if isinstance(where, str) else None
        if isinstance(cid, str) and path:
            out[cid] = path  # the latest prompt's workspace wins
    return out


def workspace(root: str, conversation_id: str) -> str | None:
    """The folder a conversation ran in, from the side files at the agent's root; None when none says."""
    for name, parse in (("cache/last_conversations.json", _last_conversations),
                        ("cache/conversation_metadata.json", _conversation_metadata),
                        ("history.jsonl", _history)):
        found = _cached(os.path.join(root, *name.split("/")), name, parse, {}).get(conversation_id)
        if found:
            return str(found)
    return None


# --- sub-agents --------------------------------------------------------------------------------------
def _children(data: bytes) -> dict[str, str | None]:
    """The sub-agents the INVOKE_SUBAGENT steps of a transcript name: conversation id -> workspace."""
    out: dict[str, str | None] = {}
    for line in data.split(b"\n"):
        if INVOKE_SUBAGENT.encode() not in line:
            continue
        row = loads_line(line)
        if isinstance(row, dict) and row.get("type") == INVOKE_SUBAGENT and isinstance(row.get("content"), str):
            out.update(spawned(row["content"]))
    return out


def transcript_of(conversation_dir: str) -> str | None:
    """The transcript file of ``brain/<id>``: ``transcript.jsonl``, else ``transcript_full.jsonl``."""
    for name in TRANSCRIPTS:
        path = os.path.join(conversation_dir, *LOGS, name)
        if os.path.isfile(path):
            return path
    return None


def parent(root: str, conversation_id: str, started_ms: int | None) -> tuple[str, str | None] | None:
    """(the parent conversation, the workspace it gave the sub-agent) when a transcript under ``root``
    names ``conversation_id`` in an INVOKE_SUBAGENT step; only transcripts written since the
    sub-agent started are looked at, each read once per change."""
    if started_ms is None:
        return None
    brain = os.path.join(root, BRAIN)
    try:
        with os.scandir(brain) as it:
            dirs = [e.path for e in it if e.name != conversation_id and e.is_dir()]
    except OSError:
        return None
    horizon_ns = (started_ms - LINEAGE_SLACK_MS) * 1_000_000
    for folder in sorted(dirs):
        path = transcript_of(folder)
        stamp = _stamp(path) if path else None
        if path is None or stamp is None or stamp[1] < horizon_ns:
            continue
        children: dict[str, str | None] = _cached(path, "children", _children, {})
        if conversation_id in children:
            return os.path.basename(folder), children[conversation_id]
    return None
