"""The pi session tree (docs/formats.md §17, §18), shared by pi, Oh My Pi, Prime Agent and OpenClaw.

pi writes one JSONL file per session: a ``session`` header (Oh My Pi may put a fixed-width ``title``
slot line before it), then entries that form a tree through ``id``/``parentId``. Re-prompting from an
earlier entry (``/tree``) appends a sibling instead of truncating, so the conversation is the path
from the *leaf* back to the root, the leaf being the last entry appended, as pi's own
``SessionManager`` rebuilds it on load. Entries off that path are abandoned branches: not indexed,
counted ``dead-branch`` (the ``branch_summary`` pi writes onto the live path when the user leaves a
branch keeps what it said searchable). A file whose links do not form a tree (a ``parentId`` naming
no entry, a cycle) is read in file order instead, everything kept (``broken-tree``): pi itself would
lose the entries before the gap. Files without ids (header version 1) are a list, read in order.

Every reader of this family reads a transcript whole (``read_tree`` over its decoded entries, from a
file or from OpenClaw's ``transcript_events`` rows) and builds its session from the returned
:class:`PiTree`; what differs between them is where files live, the title sources, the resume
command and how a parent is named.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aivault.scanner.model import KindName, Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import FileBytes, jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import MAX_DEPTH, Found, Mode, Unit, Wanted
from aivault.scanner.spec import Discover, relisting_discovery

HEADER: Final = "session"
TITLE_SLOT: Final = "title"  # Oh My Pi's rewritable first line
SUFFIX: Final = ".jsonl"
# Entries that are not conversation: settings, extension state, names, labels, usage, Oh My Pi's
# bookkeeping (session_init opens a sub-agent's file; reset_boundary is /clear, which keeps the
# history on disk), Prime Agent's usage attribution.
BOOKKEEPING: Final = frozenset({
    "model_change", "thinking_level_change", "custom", "label", "session_info", "title_change", "model_usage",
    "service_tier_change", "reset_boundary", "archive", "session_init", "mode_change", "credential_pin",
    "ttsr_injection", "child_usage_attributed",
})
# Entries whose summary the conversation continues from (compaction) or that stand for an abandoned
# branch on the live path (branch_summary); OpenClaw also writes "compact".
SUMMARIES: Final = frozenset({"compaction", "compact", "branch_summary"})
# Message roles that carry text the agent or an extension put into the model's context.
CUSTOM_ROLES: Final = frozenset({"custom", "hookMessage"})  # hookMessage: header version 2's name
SUMMARY_ROLES: Final = frozenset({"branchSummary", "compactionSummary"})
# A header names its parent session as a file path (pi, Prime Agent) or as an id (Oh My Pi).
PARENT_KEYS: Final = ("parentSession", "branchedFrom")
HEAD_MAX_BYTES: Final = 64 * 1024  # a parent file is read up to its header, never further


@dataclass(slots=True)
class PiTree:
    """One transcript of the pi family as its reader needs it: the live path's messages and what the
    header and the title-bearing entries say."""

    messages: list[Message] = field(default_factory=list)
    session_id: str | None = None  # the header's id (none in a version-1 file)
    cwd: str | None = None
    header_title: str | None = None  # Oh My Pi writes an automatic title into the header
    slot_title: str | None = None  # Oh My Pi's title slot, which outranks every other name
    named: str | None = None  # the latest session_info.name or title_change.title in the file
    first_user: str | None = None  # the first user prompt on the live path
    task: str | None = None  # an Oh My Pi sub-agent's session_init task
    parent_ref: str | None = None  # the header's parentSession / branchedFrom, as written
    started: int | None = None
    updated: int | None = None

    def title(self, first_line: str | None = None) -> str | None:
        """The family's title precedence: the title slot, then the latest name set in the session, then
        the header's title, then the first prompt (``first_line`` when the reader cleaned it), then an
        Oh My Pi sub-agent's task."""
        prompt = first_line if first_line is not None else self.first_user
        fallback = first_line_title(prompt) if prompt else None
        task = first_line_title(self.task) if self.task else None
        return self.slot_title or self.named or self.header_title or fallback or task


@dataclass(slots=True)
class _Entry:
    obj: dict[str, Any]
    id: str
    parent: str | None  # None: a root


def read_file(path: str, skips: dict[str, int]) -> tuple[FileBytes, list[dict[str, Any]]]:
    """The bytes of a session file that did not change while read, and its JSON objects (a cut-off
    last line of a file being written is UnitChanged, as for every file read whole)."""
    fb = read_settled(path)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
    return fb, jsonl_records(fb, skips)


def read_tree(objs: list[dict[str, Any]], skips: dict[str, int], *, leaf: str | None = None) -> PiTree:
    """The live path of one transcript's objects (file or event order) and its session fields.

    ``leaf`` names the entry the path ends at when the store records it (OpenClaw's index state);
    otherwise, and when it names no entry, the last entry is the leaf, as pi's loader takes it.
    """
    tree = PiTree()
    entries = _entries(objs, tree, skips)
    chain = _live_path(entries, leaf, skips)
    on_chain = {id(e) for e in chain}
    dead = sum(1 for e in entries if id(e) not in on_chain)
    if dead:
        count_skip(skips, "dead-branch", n=dead)
    for e in entries:  # names are the session's whatever branch set them, as pi's session list reads them
        kind = e.obj["type"]
        if kind == "session_info":
            tree.named = nonblank(e.obj.get("name")) or tree.named
        elif kind == "title_change":
            tree.named = nonblank(e.obj.get("title")) or tree.named
        elif kind == "session_init" and tree.task is None:
            tree.task = nonblank(e.obj.get("task"))
    last = tree.started  # an entry without a time has the time of the one before it (or the header's)
    for e in chain:
        ts = _time(e.obj)
        if ts is not None:
            tree.started = ts if tree.started is None else min(tree.started, ts)
            tree.updated = ts if tree.updated is None else max(tree.updated, ts)
            last = ts
        out = entry_messages(e.obj, last, skips)
        if tree.first_user is None:
            tree.first_user = next((m.text for m in out if m.role == "user"), None)
        tree.messages += out
    return tree


def _entries(objs: list[dict[str, Any]], tree: PiTree, skips: dict[str, int]) -> list[_Entry]:
    """The tree entries of ``objs`` with their links resolved; the header and title slot fill ``tree``.

    An entry without an id (a version-1 file) gets one and hangs under the entry before it, as pi's
    migration to version 2 links them; so does an entry whose ``parentId`` is missing or not a string.
    """
    entries: list[_Entry] = []
    header_seen = False
    for n, obj in enumerate(objs):
        kind = obj.get("type")
        if not isinstance(kind, str):
            count_skip(skips, "malformed-record")
            continue
        if kind == TITLE_SLOT and not header_seen and not entries:
            tree.slot_title = nonblank(obj.get("title"))
            continue
        if kind == HEADER:
            if header_seen:
                count_skip(skips, "extra-header")
                continue
            header_seen = True
            _header(obj, tree)
            continue
        prev = entries[-1].id if entries else None
        ident = obj.get("id")
        ident = ident if isinstance(ident, str) and ident else f"#{n}"
        parent = obj.get("parentId", prev) if "id" in obj else prev
        if parent is not None and not isinstance(parent, str):
            parent = prev
        entries.append(_Entry(obj, ident, parent or None))
    return entries


def _header(obj: dict[str, Any], tree: PiTree) -> None:
    tree.session_id = nonblank(obj.get("id"))
    tree.cwd = nonblank(obj.get("cwd"))
    tree.header_title = nonblank(obj.get("title"))
    tree.parent_ref = next((v for v in (nonblank(obj.get(k)) for k in PARENT_KEYS) if v), None)
    ts = to_epoch_ms(obj.get("timestamp"))
    tree.started = tree.updated = ts


def _live_path(entries: list[_Entry], leaf: str | None, skips: dict[str, int]) -> list[_Entry]:
    """The entries from the root to the leaf; every entry in file order when the links are broken."""
    if not entries:
        return []
    by_id = {e.id: e for e in entries}  # a repeated id: the later entry, as pi's index keeps it
    if any(e.parent is not None and e.parent not in by_id for e in entries):
        count_skip(skips, "broken-tree")
        return entries
    current: _Entry | None = by_id.get(leaf) if leaf else None
    if current is None:
        current = entries[-1]
    path: list[_Entry] = []
    seen: set[str] = set()
    while current is not None:
        if current.id in seen:
            count_skip(skips, "broken-tree")
            return entries
        seen.add(current.id)
        path.append(current)
        current = by_id[current.parent] if current.parent is not None else None
    path.reverse()
    return path


def _time(obj: dict[str, Any]) -> int | None:
    ts = to_epoch_ms(obj.get("timestamp"))
    if ts is None and isinstance(obj.get("message"), dict):
        ts = to_epoch_ms(obj["message"].get("timestamp"))
    return ts


# --- one entry's messages ------------------------------------------------------------------------
def entry_messages(obj: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of one tree entry (docs/formats.md §17 field map); bookkeeping gives none."""
    kind = obj["type"]
    if kind == "message":
        message = obj.get("message")
        if not isinstance(message, dict):
            count_skip(skips, "malformed-record")
            return []
        return message_messages(message, ts, skips)
    if kind in SUMMARIES:
        return _system(obj.get("summary"), ts, skips)
    if kind == "custom_message":
        return _custom(obj, ts, skips)
    if kind in BOOKKEEPING:
        count_skip(skips, "bookkeeping")
    else:
        count_skip(skips, "unknown_record", kind)
    return []


def message_messages(message: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of an AgentMessage: one per content block (a user prompt's text blocks are one)."""
    role = message.get("role")
    if role == "user":
        text = "\n".join(_texts(message.get("content"), skips))
        if not text.strip():
            count_skip(skips, "empty-record")
            return []
        return [Message("user", "text", text, ts)]
    if role == "assistant":
        return _assistant(message, ts, skips)
    if role == "toolResult":
        return _tool_result(message, ts, skips)
    if role == "bashExecution":  # a command the user ran with !cmd, and its output
        command = message.get("command") if isinstance(message.get("command"), str) else ""
        output = message.get("output") if isinstance(message.get("output"), str) else ""
        text = f"$ {command}\n{output}".rstrip()
        return [Message("tool", "tool_result", text, ts)] if command or output else []
    if role in CUSTOM_ROLES:
        return _custom(message, ts, skips)
    if role in SUMMARY_ROLES:
        return _system(message.get("summary"), ts, skips)
    if role == "system":
        return _system("\n".join(_texts(message.get("content"), skips)), ts, skips)
    if role == "developer":  # Oh My Pi's instructions to the model
        count_skip(skips, "injected-context")
        return []
    count_skip(skips, "unknown_role", role if isinstance(role, str) else "(none)")
    return []


def _system(text: object, ts: int | None, skips: dict[str, int]) -> list[Message]:
    if isinstance(text, str) and text.strip():
        return [Message("system", "text", text, ts)]
    count_skip(skips, "empty-record")
    return []


def _custom(obj: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """Text an extension (or OpenClaw's runtime) put into the model's context: never the user speaking;
    hidden (``display: false``) it is injected context and dropped, shown it is system text."""
    if obj.get("display") is False:
        count_skip(skips, "injected-context")
        return []
    return _system("\n".join(_texts(obj.get("content"), skips)), ts, skips)


def _texts(content: object, skips: dict[str, int]) -> list[str]:
    """The text of a content field: a string, or blocks of which text (and OpenClaw's typed
    ``toolResult`` result blocks) are read; images are counted."""
    if isinstance(content, str):
        return [content] if content else []
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        btype = block.get("type") if isinstance(block, dict) else None
        if btype in ("text", "toolResult"):
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and text:
                out.append(text)
        elif btype == "image":
            count_skip(skips, "attachment", "image")
        else:
            count_skip(skips, "unknown_block", btype if isinstance(btype, str) else "(none)")
    return out


def _assistant(message: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    content = message.get("content")
    out: list[Message] = []
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    for block in content if isinstance(content, list) else []:
        btype = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(btype, str):
            count_skip(skips, "unknown_block", "(none)")
        elif btype in ("text", "thinking"):
            text = block.get(btype)
            kind: KindName = "text" if btype == "text" else "thinking"
            if isinstance(text, str) and text.strip():
                out.append(Message("assistant", kind, text, ts))
            else:
                count_skip(skips, "redacted-thinking" if btype == "thinking" else "empty-record")
        elif btype == "toolCall":
            name = block.get("name") if isinstance(block.get("name"), str) and block.get("name") else "tool"
            args = block.get("arguments")
            out.append(Message("assistant", "tool_call", f"{name} {compact_json(args if args is not None else {})}",
                               ts))
        elif btype == "image":
            count_skip(skips, "attachment", "image")
        else:
            count_skip(skips, "unknown_block", btype)
    error = nonblank(message.get("errorMessage"))
    if not out and error:  # a failed turn: what went wrong is worth finding
        out.append(Message("system", "text", f"[error] {error}", ts))
    return out


def _tool_result(message: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    text = "\n".join(_texts(message.get("content"), skips))
    if message.get("isError") is True:
        text = f"[error] {text}".rstrip()
    if not text.strip():
        count_skip(skips, "empty-record")
        return []
    return [Message("tool", "tool_result", text, ts)]


# --- one session file ---------------------------------------------------------------------------------
def file_unit(found: Found, agent: str, resume: str | None, *, parent: str | None = None) -> Unit:
    """The Unit of one session file of pi's format: id the header's (the file name's for a version-1
    file), title by :meth:`PiTree.title`, parent ``parent`` or the one the header names, and the
    resume command ``cd <cwd> && <resume> <id>`` (none when ``resume`` is None)."""
    skips: dict[str, int] = {}
    fb, objs = read_file(found.path, skips)
    tree = read_tree(objs, skips)
    sid = tree.session_id or stem_id(found.path)
    command = None
    if resume is not None:
        command = f"{resume} {shlex.quote(sid)}"
        if tree.cwd:
            command = f"cd {shlex.quote(tree.cwd)} && {command}"
    session = SessionInfo(agent=agent, session_id=sid, title=tree.title(), cwd=tree.cwd, branch=None,
                          started_at=tree.started, updated_at=tree.updated, message_count=len(tree.messages),
                          resume_command=command, parent_session_id=parent or parent_id(tree.parent_ref))
    return Unit(session, tree.messages, fb.signature, skips)


def expand(value: str, home: Path) -> Path:
    """An environment variable's path: a leading ``~`` is the (given) home, as pi expands it."""
    if value == "~" or value.startswith("~/"):
        return home / value[2:]
    return Path(value).absolute()


# --- parents, files and discovery ----------------------------------------------------------------
def read_header(path: str) -> dict[str, Any] | None:
    """The header of the session file at ``path`` (past a title slot), read no further than
    HEAD_MAX_BYTES; None when it cannot be read or has no header."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_MAX_BYTES)
    except OSError:
        return None
    for line in head.split(b"\n")[:2]:
        obj = loads_line(line)
        if isinstance(obj, dict) and obj.get("type") == HEADER:
            return obj
    return None


def header_id(path: str) -> str | None:
    """The session id in the header of the session file at ``path``."""
    found = read_header(path)
    return nonblank(found.get("id")) if found is not None else None


def stem_id(path: str) -> str:
    """The session id a pi file name carries: ``<timestamp>_<id>.jsonl`` -> ``<id>``."""
    stem = os.path.basename(path)
    stem = stem[: -len(SUFFIX)] if stem.endswith(SUFFIX) else stem
    return stem.rsplit("_", 1)[-1]


def parent_id(ref: str | None) -> str | None:
    """The parent session a header names: a file path (pi, Prime Agent; the parent's header id when the
    file is still there, else the id in its name) or already an id (Oh My Pi)."""
    if not ref:
        return None
    if ref.endswith(SUFFIX) or "/" in ref or "\\" in ref:
        return header_id(ref) or stem_id(ref.replace("\\", "/"))
    return ref


def session_file_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for a ``.jsonl`` file (every file of a pi sessions folder is a session)."""
    return "whole" if name.endswith(SUFFIX) and not name.startswith(".") else None


def tree_discovery(wanted: Wanted = session_file_mode, *, max_depth: int = MAX_DEPTH) -> Discover:
    """File discovery for session files that grow in place: every folder known from the last full pass
    is listed again on a recent pass (scanner/spec.relisting_discovery)."""
    return relisting_discovery(wanted, max_depth=max_depth)


# OpenClaw's gateway puts the local time in front of prompts that arrive from a chat channel
# ("[Wed 2026-02-18 11:21 GMT+1] ..."); a title starts after it.
_GATEWAY_STAMP = re.compile(r"^\s*\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]\n]{0,24}\]\s+")


def without_gateway_stamp(text: str) -> str:
    """``text`` without a leading gateway time stamp (only the title is cleaned; the message keeps it)."""
    return _GATEWAY_STAMP.sub("", text, count=1)
