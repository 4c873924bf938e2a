"""Mistral Vibe sessions (docs/formats.md §31), each session folder read whole.

Vibe 2.x keeps one folder per session under ``$VIBE_HOME/logs/session`` (``<prefix>_<UTC time>_<first
8 characters of the id>``): ``messages.jsonl``, the conversation the model saw, one ``LLMMessage`` a
line, appended after every turn, and ``meta.json``, rewritten atomically after every turn (id, times,
folder, branch, title, parent). The messages carry no time, and the metadata that names them changes
without them, so a session is read whole whenever either file changes. A ``/rewind`` (and a new
session started in the app) forks into a new folder whose meta names the parent and whose messages
begin with a copy of the parent's up to the rewind point: that copy is the parent's, indexed there,
and left out here. Sub-agents (the task tool) write ``<session>/agents/<child>/`` folders of the same
shape. Sessions of Vibe before 2.0 are single ``<prefix>_*.json`` documents (``{metadata, messages}``)
that 2.0 migrates into folders of the same name on start.
"""

from __future__ import annotations

import os
import shlex
import time
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.gemini import FileBytes, jsonl_records, read_settled
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, listed, signature
from aivault.scanner.spec import AgentSpec

MESSAGES_FILE = "messages.jsonl"
META_FILE = "meta.json"
SESSION_FILES = (META_FILE, MESSAGES_FILE)
AGENTS_DIR = "agents"  # <session>/agents/<child>/: a sub-agent's own session folder
RESUME = "vibe --resume"
# meta.json is a few KB of settings and stats; a bigger one is not what Vibe writes.
META_MAX_BYTES = 16 << 20
CONFIG_MAX_BYTES = 1 << 20
# A meta.json that does not parse is being replaced if it changed this recently (Vibe writes it to
# a temporary file and renames it, so this is a writer on another file system or a crash).
SETTLE_S = 30
SHORT_ID_CHARS = 8  # the folder name ends with the session id's first 8 characters
# What Vibe writes as the auto title of a session without a user message.
UNTITLED = "Untitled session"
# The fields that tell a message copied into a fork from the parent's original.
_IDENTITY_KEYS = ("role", "content", "message_id", "tool_call_id", "reasoning_content", "tool_calls")


# --- one message ---------------------------------------------------------------------------------------
def content_text(content: object) -> str:
    """``content`` as text: a string, or the text parts of a list (images carry none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if type(p) is dict and isinstance(p.get("text"), str) and p["text"])
    return ""


def arguments_text(arguments: object) -> str:
    """Tool arguments as compact JSON: a JSON string (what Vibe writes) is decoded first, an object
    (agentsview's fixture) taken as it is, a string that is not JSON kept as written."""
    if isinstance(arguments, str):
        try:
            return compact_json(orjson.loads(arguments)) if arguments.strip() else ""
        except orjson.JSONDecodeError:
            return arguments
    return compact_json(arguments) if arguments is not None else ""


def _tool_call(call: object) -> str | None:
    if type(call) is not dict:
        return None
    function = call.get("function")
    fn = function if type(function) is dict else {}
    name = nonblank(fn.get("name")) or nonblank(call.get("name")) or "tool"
    args = arguments_text(fn.get("arguments") if "arguments" in fn else call.get("arguments"))
    return f"{name} {args}" if args else name


def message_of(obj: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    """The messages of one ``LLMMessage`` line (docs/formats.md §31)."""
    role = obj.get("role")
    text = content_text(obj.get("content"))
    if role == "user":
        if obj.get("injected") is True:
            # Harness-inserted context, not typed by the user; a compaction summary is what the
            # conversation continues from, so it stays, as system text.
            if obj.get("context_boundary") == "compaction" and text.strip():
                return [Message("system", "text", text, ts)]
            count_skip(skips, "injected-context")
            return []
        return [Message("user", "text", text, ts)] if text.strip() else []
    if role == "assistant":
        out: list[Message] = []
        reasoning = obj.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning.strip():
            out.append(Message("assistant", "thinking", reasoning, ts))
        if text.strip():
            out.append(Message("assistant", "text", text, ts))
        calls = obj.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            call_text = _tool_call(call)
            if call_text is None:
                count_skip(skips, "malformed-tool-call")
            else:
                out.append(Message("assistant", "tool_call", call_text, ts))
        return out
    if role == "tool":
        return [Message("tool", "tool_result", text, ts)] if text.strip() else []
    if role == "system":
        count_skip(skips, "system-prompt")  # Vibe keeps it in meta.json; an older build may not
        return []
    count_skip(skips, "unknown_record", role if isinstance(role, str) else "(none)")
    return []


# --- forks ---------------------------------------------------------------------------------------------
def _identity(obj: dict[str, Any]) -> bytes:
    return orjson.dumps([obj.get(k) for k in _IDENTITY_KEYS], option=orjson.OPT_NON_STR_KEYS)


def _parent_folder(folder: str, parent_id: str) -> str | None:
    """The session folder of ``parent_id`` beside ``folder`` (named ``…_<first 8 of the id>``, its
    meta confirming the id when it has one)."""
    save_dir = os.path.dirname(folder)
    suffix = "_" + parent_id[:SHORT_ID_CHARS]
    try:
        names = sorted(e.name for e in os.scandir(save_dir) if e.name.endswith(suffix) and e.is_dir())
    except OSError:
        return None
    for name in names:
        candidate = os.path.join(save_dir, name)
        meta = _read_meta(candidate, {})
        if meta.get("session_id") in (parent_id, None) and candidate != folder:
            return candidate
    return None


def copied_prefix(folder: str, parent_id: str, objs: list[dict[str, Any]]) -> int:
    """How many leading records of a forked session repeat its parent's (a rewind copies the
    conversation up to the rewind point into the new session); 0 when the parent is not found."""
    parent = _parent_folder(folder, parent_id)
    if parent is None:
        return 0
    try:
        data = Path(parent, MESSAGES_FILE).read_bytes()
    except OSError:
        return 0
    n = 0
    for line in data.split(b"\n"):
        if n >= len(objs):
            break
        obj = loads_line(line) if line.strip() else None
        if type(obj) is not dict:
            if line.strip():
                break
            continue
        if _identity(obj) != _identity(objs[n]):
            break
        n += 1
    return n


# --- one session ---------------------------------------------------------------------------------------
def _read_meta(folder: str, skips: dict[str, int]) -> dict[str, Any]:
    path = os.path.join(folder, META_FILE)
    try:
        st = os.stat(path)
        if st.st_size > META_MAX_BYTES:
            count_skip(skips, "oversized-meta")
            return {}
        with open(path, "rb") as fh:
            data = fh.read(META_MAX_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UnitUnreadable(f"cannot read {META_FILE}: {exc.strerror or exc}") from exc
    meta = loads_line(data)
    if type(meta) is dict:
        return meta
    if time.time_ns() - st.st_mtime_ns < SETTLE_S * 1_000_000_000:
        raise UnitChanged(f"{META_FILE} is being written")
    count_skip(skips, "malformed-meta")
    return {}


def _title(meta: dict[str, Any], objs: list[dict[str, Any]], first_prompt: str | None) -> str | None:
    """A title set by hand, else Vibe's own (generated, or the first user message cut to 50 characters)
    unless that was cut from injected context, else the first real prompt."""
    title = nonblank(meta.get("title"))
    if title is None:
        return first_prompt
    if meta.get("title_source") == "manual":
        return title
    first = next((o for o in objs if o.get("role") == "user"), None)
    stem = title.removesuffix("…")
    if title == UNTITLED or (first is not None and first.get("injected") is True
                             and content_text(first.get("content")).startswith(stem)):
        return first_prompt
    return title


def build_unit(path: str, meta: dict[str, Any], objs: list[dict[str, Any]], skips: dict[str, int],
               sig: int, mtime_ms: int | None) -> Unit:
    """The Unit of one session: its messages (a fork's copied prefix left out) and session record."""
    subagent = os.path.basename(os.path.dirname(path)) == AGENTS_DIR
    parent = nonblank(meta.get("parent_session_id"))
    if parent is not None and not subagent and not path.endswith(".json"):
        copied = copied_prefix(path, parent, objs)
        if copied:
            count_skip(skips, "replayed_parent", n=copied)
        own = objs[copied:]
    else:
        own = objs
    # No message carries a time: each inherits the session's start (the file's time without a meta).
    started = to_epoch_ms(meta.get("start_time"))
    updated = to_epoch_ms(meta.get("end_time")) or mtime_ms or started
    started = started if started is not None else updated
    messages: list[Message] = []
    first_prompt: str | None = None
    for obj in own:
        out = message_of(obj, started, skips)
        if first_prompt is None and out and out[0].role == "user":
            first_prompt = first_line_title(out[0].text)
        messages += out
    if first_prompt is None:  # a fork that changed nothing yet: the prompt it continues from
        first_prompt = next((first_line_title(m.text) for o in objs for m in message_of(o, None, {})
                             if m.role == "user"), None)
    sid = nonblank(meta.get("session_id"))
    session_id = sid or os.path.basename(path).removesuffix(".json")
    environment = meta.get("environment")
    cwd = nonblank(environment.get("working_directory")) if type(environment) is dict else None
    resume = None
    if sid is not None and not subagent:  # a sub-agent's run is not a session Vibe resumes
        resume = f"{RESUME} {shlex.quote(sid)}"
        if cwd:
            resume = f"cd {shlex.quote(cwd)} && {resume}"
    session = SessionInfo(
        agent="vibe", session_id=session_id, title=_title(meta, objs, first_prompt), cwd=cwd,
        branch=nonblank(meta.get("git_branch")), started_at=started,
        updated_at=max(updated, started) if updated is not None and started is not None else started,
        message_count=len(messages), resume_command=resume, parent_session_id=parent)
    return Unit(session, messages, sig, skips)


def folder_stamps(folder: str) -> tuple[tuple[str, int, int, int], ...] | None:
    """(file, size, mtime, inode) of the session's two files; None when it holds neither."""
    out = []
    for name in SESSION_FILES:
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out) or None


def read_folder(found: Found) -> Unit:
    """One session folder, read whole (meta.json, then messages.jsonl, unchanged in between)."""
    folder = found.path
    before = folder_stamps(folder)
    if before is None:
        if not os.path.isdir(folder):
            raise UnitChanged("the session folder is gone")
        raise UnitUnreadable(f"the session folder holds neither {META_FILE} nor {MESSAGES_FILE}")
    skips: dict[str, int] = {}
    meta = _read_meta(folder, skips)
    objs: list[dict[str, Any]] = []
    mtime_ms: int | None = None
    if any(name == MESSAGES_FILE for name, *_ in before):
        fb = read_settled(os.path.join(folder, MESSAGES_FILE))
        objs = jsonl_records(fb, skips)
        mtime_ms = next(m for name, _, m, _ in before if name == MESSAGES_FILE) // 1_000_000
    if folder_stamps(folder) != before:
        raise UnitChanged("the session was written while being read")
    return build_unit(folder, meta, objs, skips, signature(before), mtime_ms)


def read_legacy(found: Found) -> Unit:
    """A Vibe 1.x session document, ``{metadata, messages}``."""
    fb: FileBytes = read_settled(found.path)
    doc = loads_line(fb.data)
    if type(doc) is not dict:
        if fb.recent:
            raise UnitChanged("the session document is being written")
        raise UnitUnreadable("not a Vibe session document (a JSON object with metadata and messages)")
    skips: dict[str, int] = {}
    meta = doc.get("metadata")
    messages = doc.get("messages")
    objs = [m for m in messages if type(m) is dict] if isinstance(messages, list) else []
    if isinstance(messages, list) and len(objs) != len(messages):
        count_skip(skips, "malformed-record", n=len(messages) - len(objs))
    return build_unit(found.path, meta if type(meta) is dict else {}, objs, skips, fb.signature, None)


def read_unit(found: Found) -> Unit:
    """A session folder, or a pre-2.0 session document."""
    return read_legacy(found) if found.path.endswith(".json") else read_folder(found)


# --- where Vibe keeps its sessions (docs/formats.md §31, §13) ------------------------------------------
def vibe_home(env: Mapping[str, str], home: Path) -> Path:
    """``$VIBE_HOME``, else ``~/.vibe`` (Linux and macOS alike)."""
    return Path(env["VIBE_HOME"]).expanduser().absolute() if env.get("VIBE_HOME") else home / ".vibe"


def configured_save_dir(vibe: Path, home: Path) -> Path | None:
    """``[session_logging] save_dir`` of ``<vibe home>/config.toml``, when set."""
    try:
        with open(vibe / "config.toml", "rb") as fh:
            config = tomllib.loads(fh.read(CONFIG_MAX_BYTES).decode("utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    section = config.get("session_logging")
    save_dir = section.get("save_dir") if isinstance(section, dict) else None
    if not isinstance(save_dir, str) or not save_dir.strip():
        return None
    path = Path(save_dir.replace("~", str(home), 1) if save_dir.startswith("~") else save_dir)
    return path if path.is_absolute() else vibe / path


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``<vibe home>/logs/session``, and the ``save_dir`` of Vibe's config when it names another."""
    vibe = vibe_home(env, home)
    roots = [Root("vibe", str(vibe / "logs" / "session"))]
    configured = configured_save_dir(vibe, home)
    if configured is not None and str(configured) != roots[0].path:
        roots.append(Root("vibe", str(configured)))
    return roots


def _folder_unit(root: Root, path: str, problems: list[RootProblem]) -> Found | None:
    stamps = folder_stamps(path)
    if stamps is None:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot stat {path}: {exc.strerror or exc}"))
        return None
    return Found(path, root.agent, st.st_dev, st.st_ino, sum(s[1] for s in stamps), signature(stamps), "whole")


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every session folder (and its sub-agents' folders) and pre-2.0 document under the root, or the
    root itself when it is a session folder. Both files change in place, so every pass stats them
    (two stats a session, no reading)."""
    if check_root(root, problems) is None:
        return
    own = _folder_unit(root, root.path, problems)
    if own is not None:
        yield own
        return
    for entry in listed(root, root.path, problems):
        if entry.name.startswith("."):
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=True)
            if not is_dir:
                if not entry.name.endswith(".json") or not entry.is_file(follow_symlinks=True):
                    continue
                st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))
            continue
        if not is_dir:
            if os.path.isdir(entry.path.removesuffix(".json")):
                continue  # migrated into the folder of the same name; Vibe deletes it next
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size,
                        signature(st.st_size, st.st_mtime_ns, st.st_ino), "whole")
            continue
        found = _folder_unit(root, entry.path, problems)
        if found is not None:
            yield found
        for child in listed(root, os.path.join(entry.path, AGENTS_DIR), problems):
            if not child.name.startswith(".") and child.is_dir(follow_symlinks=True):
                sub = _folder_unit(root, child.path, problems)
                if sub is not None:
                    yield sub


def _predecessor(path: str) -> str | None:
    """A session folder continues the pre-2.0 document of the same name that Vibe migrated into it."""
    if path.endswith(".json") or os.path.basename(os.path.dirname(path)) == AGENTS_DIR:
        return None
    return path + ".json"


SPEC = AgentSpec(
    name="vibe", label="Mistral Vibe", default_roots=default_roots, discover=discover, read_unit=read_unit,
    predecessor=_predecessor,
    expects="<prefix>_<time>_<id>/meta.json + messages.jsonl (sub-agents <session>/agents/<child>/; pre-2.0 *.json)",
    shaped=lambda name: name == MESSAGES_FILE)
