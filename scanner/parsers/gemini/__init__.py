"""Gemini CLI sessions, read whole (docs/formats.md §3).

Gemini CLI keeps one file per session under ``~/.gemini/tmp/<project>/chats/``: a legacy
``session-*.json`` document, or (v0.40+) a ``session-*.jsonl`` log that is rewritten and rewound
in place (``$set`` checkpoints, ``$rewindTo``), so every file is a ``whole`` unit: read at once
whenever its signature changes, replayed, and sent complete. Subagents write
``chats/<parentSessionId>/<sessionId>.jsonl``. The project folder is a slug (or, before the
registry, the SHA-256 of the project root) that is resolved back to the project directory.

The file reading helpers here (``read_settled``, ``jsonl_records``) are shared with Qwen Code,
whose JSONL files are read whole too (scanner/parsers/qwen.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini.records import ASSISTANT_TYPES, Replay, conversation
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms
from aivault.scanner.sources import Found, Mode, Root, Unit, Wanted, read_whole
from aivault.scanner.spec import AgentSpec, Discover, relisting_discovery

# A session file is held in memory while it is replayed; beyond this it is refused, not read.
MAX_UNIT_BYTES = 256 * 1024 * 1024
# A file whose last record is cut off is being written if it changed this recently (the same
# window the scanner gives a line file's unterminated tail, scanner/scan.py).
TAIL_SETTLE_S = 30
# projects.json and .project_root are small; anything larger is not what Gemini CLI writes.
REGISTRY_MAX_BYTES = 4 * 1024 * 1024
PROJECT_ROOT_MAX_BYTES = 4096
# The deepest session file: <root>/<project>/chats/<parentSessionId>/<sessionId>.jsonl (Qwen: chats/archive/).
DISCOVERY_DEPTH = 3

SESSION_PREFIX = "session-"
RESUME = "gemini --resume"
# Written by the atomic-rename helpers and by Gemini's quarantine of a file it could not parse.
_TEMP_MARKERS = (".tmp-", ".unreadable-")
_WORKSPACE_DIRS = re.compile(r"\*\*Workspace Directories:\*\*[ \t]*\n[ \t]*-[ \t]*([^\n]+)")
_WORKING_DIR = re.compile(r"I'm currently working in the directory: ([^\n]+)")


# --- reading a file whole --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FileBytes:
    data: bytes
    signature: int  # file_signature before the read (equal after it)
    recent: bool  # modified within TAIL_SETTLE_S: a cut-off end means "being written"


def read_settled(path: str) -> FileBytes:
    """The bytes of a file that did not change while it was read (else UnitChanged)."""
    data, before, st = read_whole(
        path, MAX_UNIT_BYTES, lambda size: f"larger than {MAX_UNIT_BYTES // (1024 * 1024)} MiB ({size} bytes)")
    return FileBytes(data, before, time.time_ns() - st.st_mtime_ns < TAIL_SETTLE_S * 1_000_000_000)


def jsonl_records(fb: FileBytes, skips: dict[str, int]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; bad lines are counted, a cut-off last line of a file being
    written raises UnitChanged (a settled one is counted ``truncated-record``)."""
    lines = fb.data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with its newline
    out: list[dict[str, Any]] = []
    for line in lines:
        _decode_line(line, out, skips)
    if tail.strip():
        obj = loads_line(tail)
        if type(obj) is dict:
            out.append(obj)
        elif fb.recent:
            raise UnitChanged("the last record is still being written")
        else:
            count_skip(skips, "truncated-record")
    return out


def _decode_line(line: bytes, out: list[dict[str, Any]], skips: dict[str, int]) -> None:
    if not line.strip():
        return
    obj = loads_line(line)
    if type(obj) is dict:
        out.append(obj)
        return
    glued = _glued(line) if obj is None else None
    if glued is None:
        count_skip(skips, "malformed-record")
        return
    count_skip(skips, "glued-records")
    out += glued


def _glued(line: bytes) -> list[dict[str, Any]] | None:
    """Two or more complete objects written onto one line (``}{``, a lost newline between two
    appends), which Qwen Code's own reader recovers; anything else between them refuses the line."""
    text = line.decode("utf-8", errors="replace").strip()
    if not text.startswith("{"):
        return None
    decoder = json.JSONDecoder()
    objs: list[dict[str, Any]] = []
    pos = 0
    while pos < len(text):
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if type(obj) is not dict:
            return None
        objs.append(obj)
        while pos < len(text) and text[pos] in " \t\r":
            pos += 1
    return objs if len(objs) > 1 else None


# --- where a file sits ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Layout:
    project_dir: str  # <root>/<project>
    home: str  # ~/.gemini (the root's parent)
    parent_id: str | None  # the parent session of a subagent file


def layout(path: str) -> Layout:
    """``<root>/<project>/chats/<file>`` or ``<root>/<project>/chats/<parent>/<file>``."""
    directory = os.path.dirname(path)
    parent_id: str | None = None
    chats = directory
    if os.path.basename(directory) != "chats" and os.path.basename(os.path.dirname(directory)) == "chats":
        chats, parent_id = os.path.dirname(directory), os.path.basename(directory)
    project_dir = os.path.dirname(chats)
    return Layout(project_dir, os.path.dirname(os.path.dirname(project_dir)), parent_id)


# projects.json per path: (size, mtime_ns) it was read at, and project id -> project root.
_REGISTRY_CACHE: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}


def _registry(home: str) -> dict[str, str]:
    """``projects.json`` (``{"projects": {root: slug}}``) as slug -> root and sha256(root) -> root."""
    path = os.path.join(home, "projects.json")
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_size, st.st_mtime_ns)
    cached = _REGISTRY_CACHE.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    ids: dict[str, str] = {}
    if st.st_size <= REGISTRY_MAX_BYTES:
        try:
            with open(path, "rb") as f:
                doc = loads_line(f.read(REGISTRY_MAX_BYTES))
        except OSError:
            doc = None
        projects = doc.get("projects") if type(doc) is dict else None
        if type(projects) is dict:
            for root, slug in projects.items():
                if isinstance(root, str) and os.path.isabs(root) and isinstance(slug, str) and slug:
                    ids[slug] = root
                    # Legacy project folders are named by the SHA-256 of the project root.
                    ids[hashlib.sha256(root.encode("utf-8", "surrogatepass")).hexdigest()] = root
    _REGISTRY_CACHE[path] = (stamp, ids)
    return ids


def _project_root_file(project_dir: str) -> str | None:
    try:
        with open(os.path.join(project_dir, ".project_root"), "rb") as f:
            text = f.read(PROJECT_ROOT_MAX_BYTES).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    return text if os.path.isabs(text) else None


def resolve_cwd(where: Layout, project_hash: object, context: str | None, directories: object = None) -> str | None:
    """The project directory of a session: the folder's ``.project_root`` marker, else the registry
    (by slug, or by the hash a legacy folder or ``projectHash`` carries), else the workspace the
    injected environment context names, else the first absolute path of the metadata's
    ``directories`` (the workspace directories, Tabnine CLI's only record of its project); None when
    nothing says."""
    marked = _project_root_file(where.project_dir)
    if marked:
        return marked
    ids = _registry(where.home)
    found = ids.get(os.path.basename(where.project_dir))
    if found is None and isinstance(project_hash, str):
        found = ids.get(project_hash)
    if found is None and context:
        match = _WORKSPACE_DIRS.search(context) or _WORKING_DIR.search(context)
        candidate = match.group(1).strip() if match else ""
        found = candidate if os.path.isabs(candidate) else None
    if found is None and isinstance(directories, list):
        found = next((d for d in directories if isinstance(d, str) and os.path.isabs(d)), None)
    return found


# --- one session -------------------------------------------------------------------------------------
def replay_file(path: str, fb: FileBytes, skips: dict[str, int]) -> Replay:
    """The replayed state of a Gemini session file (a legacy document or a v0.40+ log)."""
    replay = Replay(skips=skips)
    if not fb.data.strip():
        count_skip(skips, "empty-file")
        return replay
    if path.endswith(".json"):
        doc = loads_line(fb.data)
        if type(doc) is not dict:
            if doc is None and fb.recent:
                raise UnitChanged("the document is still being written")
            raise UnitUnreadable("not a Gemini session document (a JSON object with messages)")
        if "messages" not in doc and "sessionId" not in doc:
            raise UnitUnreadable("not a Gemini session document (no sessionId or messages)")
        replay.load_document(doc)
        return replay
    records = jsonl_records(fb, skips)
    if not records and skips.get("malformed-record"):
        # Gemini's loader falls back to reading a .jsonl holding one pretty-printed document.
        doc = loads_line(fb.data)
        if type(doc) is dict and "messages" in doc:
            skips.pop("malformed-record")
            records = [doc]
    for obj in records:
        replay.record(obj)
    return replay


def gemini_unit(path: str, agent: str, fb: FileBytes, replay: Replay, *, resumable: bool, command: str = RESUME,
                assistant_types: frozenset[str] = ASSISTANT_TYPES) -> Unit:
    """The Unit of a replayed Gemini-format session (also Qwen Code's Gemini-fork era files, and the
    Gemini CLI forks that write it under their own folder and command: Tabnine CLI)."""
    skips = replay.skips
    conv = conversation(list(replay.messages.values()), skips, assistant_types)
    meta = replay.meta
    where = layout(path)
    stem = os.path.basename(path).rsplit(".", 1)[0]
    raw_id = meta.get("sessionId")
    sid = raw_id if isinstance(raw_id, str) and raw_id else stem
    subagent = where.parent_id is not None or meta.get("kind") == "subagent"
    cwd = resolve_cwd(where, meta.get("projectHash"), conv.context, meta.get("directories"))
    summary = meta.get("summary")
    title = summary.strip() if isinstance(summary, str) and summary.strip() else conv.first_user
    started = _earliest(to_epoch_ms(meta.get("startTime")), conv.min_ts)
    updated = _latest(to_epoch_ms(meta.get("lastUpdated")), conv.max_ts)
    resume: str | None = None
    if resumable and not subagent:
        resume = f"{command} {shlex.quote(sid)}"
        if cwd:
            resume = f"cd {shlex.quote(cwd)} && {resume}"
    session = SessionInfo(agent=agent, session_id=sid, title=title, cwd=cwd, branch=None,
                          started_at=started, updated_at=updated, message_count=len(conv.messages),
                          resume_command=resume, parent_session_id=where.parent_id)
    return Unit(session, conv.messages, fb.signature, skips)


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def read_unit(found: Found) -> Unit:
    """One Gemini CLI session file, read whole (sources.Unit)."""
    fb = read_settled(found.path)
    skips: dict[str, int] = {}
    return gemini_unit(found.path, "gemini", fb, replay_file(found.path, fb, skips), resumable=True)


# --- where Gemini CLI keeps its sessions (docs/formats.md §3, §13) ----------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.gemini/tmp``; ``GEMINI_CLI_HOME`` replaces ``$HOME`` (``$GEMINI_CLI_HOME/.gemini/tmp``)."""
    base = Path(env["GEMINI_CLI_HOME"]).expanduser().absolute() if env.get("GEMINI_CLI_HOME") else home
    return [Root("gemini", str(base / ".gemini" / "tmp"))]


def session_file_mode(directory: str, name: str) -> Mode | None:
    """``whole`` for a session file of the Gemini layout: ``chats/session-*.json(l)`` and
    ``chats/<parent>/<id>.jsonl``; never temp/quarantined copies, ``logs.json``, checkpoints."""
    if any(marker in name for marker in _TEMP_MARKERS):
        return None
    if os.path.basename(directory) == "chats":
        if not name.startswith(SESSION_PREFIX):
            return None
        if name.endswith(".jsonl"):
            return "whole"
        # Resuming a legacy session migrates it to <name>l; that copy is the session from then on.
        if name.endswith(".json") and not os.path.exists(os.path.join(directory, name + "l")):
            return "whole"
        return None
    if os.path.basename(os.path.dirname(directory)) == "chats" and name.endswith(".jsonl"):
        return "whole"  # a subagent: no session- prefix
    return None


def is_chats_dir(path: str) -> bool:
    """``…/chats`` or a folder right below it (a parent's subagents, Qwen's archive)."""
    return os.path.basename(path) == "chats" or os.path.basename(os.path.dirname(path)) == "chats"


def chats_discovery(wanted: Wanted, chats_dir: Callable[[str], bool] = is_chats_dir) -> Discover:
    """File discovery for session files that change in place: the chat folders known from the last
    full pass are listed again on a recent pass (scanner/spec.relisting_discovery)."""
    return relisting_discovery(wanted, max_depth=DISCOVERY_DEPTH,
                               relist=lambda path: chats_dir(path))


def legacy_predecessor(path: str) -> str | None:
    """A ``session-*.jsonl`` continues the legacy ``session-*.json`` Gemini migrated it from."""
    name = os.path.basename(path)
    return path[:-1] if name.startswith(SESSION_PREFIX) and name.endswith(".jsonl") else None


SPEC = AgentSpec(
    name="gemini", label="Gemini CLI", default_roots=default_roots,
    discover=chats_discovery(session_file_mode), read_unit=read_unit, predecessor=legacy_predecessor,
    expects="<project>/chats/session-<time>-<id>.jsonl (or legacy .json; subagents chats/<parent>/<id>.jsonl)",
    shaped=lambda name: name.startswith(SESSION_PREFIX) and name.endswith((".json", ".jsonl")))
