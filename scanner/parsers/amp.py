"""Amp threads (docs/formats.md §9): one ``T-<uuid>.json`` document per thread, rewritten whole.

Only threads on disk are indexed: the legacy local-first CLI wrote ``~/.local/share/amp/threads``,
and ``amp threads export <id>`` writes the same shape; current Amp keeps threads server-side.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import (
    Found,
    Mode,
    Root,
    RootProblem,
    Unit,
    read_whole,
    signature,
    walk_changed,
    walk_files,
)
from aivault.scanner.spec import AgentSpec

# A thread that does not parse and was written this recently is mid-rewrite: read it next pass.
SETTLE_S = 30
# Threads hold base64 images; one larger than this is reported rather than held in memory.
MAX_THREAD_BYTES = 512 << 20
# ``<data dir>/threads/T-*.json``, or the threads folder itself named as the root.
MAX_DEPTH = 2
_REDUNDANT = frozenset({"redacted_thinking", "image"})


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$AMP_DATA_DIR`` (Amp's data folder, ``threads/`` inside it; comma-separated for several),
    else ``${XDG_DATA_HOME:-~/.local/share}/amp/threads``."""
    value = env.get("AMP_DATA_DIR", "").strip()
    if value:
        return [Root("amp", str(Path(p.strip()).expanduser().absolute())) for p in value.split(",") if p.strip()]
    data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    return [Root("amp", str(data / "amp" / "threads"))]


def _wanted(directory: str, name: str) -> Mode | None:
    return "whole" if name.startswith("T-") and name.endswith(".json") else None


# (root) -> the thread files a pass found under it, so a recent pass can stat them: Amp rewrites a
# thread in place, which changes the file but not its folder's mtime.
_KNOWN: dict[str, dict[str, Found]] = {}


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """A full pass walks the root; a recent pass lists folders whose mtime changed (new threads) and
    stats every thread file already known (rewritten threads)."""
    known = _KNOWN.get(root.path)
    if full or dirs is None or known is None or root.path not in dirs:
        known = {f.path: f for f in walk_files(root, problems, dirs, _wanted, max_depth=MAX_DEPTH)}
    else:
        known.update((f.path, f) for f in walk_changed(root, problems, dirs, _wanted, max_depth=MAX_DEPTH))
        for path in list(known):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                del known[path]
                continue
            except OSError:
                continue
            known[path] = Found(path, root.agent, st.st_dev, st.st_ino, st.st_size,
                                signature(st.st_size, st.st_mtime_ns, st.st_ino), "whole")
    _KNOWN[root.path] = known
    yield from known.values()


def read_thread(found: Found) -> Unit:
    data, before, st = read_whole(found.path, MAX_THREAD_BYTES,
                                  lambda size: f"the thread is {size} bytes, over the {MAX_THREAD_BYTES}-byte limit")
    doc = loads_line(data) if data.strip() else None
    if not isinstance(doc, dict):
        if time.time_ns() - st.st_mtime_ns < SETTLE_S * 1_000_000_000:
            raise UnitChanged("the thread is not complete JSON yet")
        raise UnitUnreadable("the thread is not a JSON object" if doc is not None or not data.strip()
                             else "the thread is not valid JSON")
    return thread_unit(doc, found, before)


def thread_unit(doc: dict[str, Any], found: Found, sig: int) -> Unit:
    skips: dict[str, int] = {}
    messages: list[Message] = []
    first_user: str | None = None
    times: list[int] = []
    created = to_epoch_ms(doc.get("created"))
    if created is not None:
        times.append(created)
    raw = doc.get("messages")
    for msg in raw if isinstance(raw, list) else []:
        if not isinstance(msg, dict):
            count_skip(skips, "malformed-record")
            continue
        if msg.get("role") not in ("user", "assistant"):
            count_skip(skips, f"unknown_role:{str(msg.get('role'))[:40]}")
            continue
        ts = _message_time(msg)
        if ts is not None:
            times.append(ts)
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else []:
            out = _block(msg["role"], block, ts, skips)
            if out is not None:
                messages.append(out)
                if first_user is None and out.role == "user" and out.kind == "text":
                    first_user = out.text
    title = doc.get("title") if isinstance(doc.get("title"), str) and doc["title"].strip() else None
    raw_id = doc.get("id")
    thread_id = raw_id if isinstance(raw_id, str) and raw_id else Path(found.path).stem
    cwd, branch = _tree(doc)
    session = SessionInfo(
        agent=found.agent, session_id=thread_id,
        title=first_line_title(title) if title else (first_line_title(first_user) if first_user else None),
        cwd=cwd, branch=branch, started_at=min(times) if times else None,
        updated_at=max(times) if times else None, message_count=len(messages),
        resume_command=f"amp threads continue {shlex.quote(thread_id)}", parent_session_id=_parent(doc))
    return Unit(session, messages, sig, skips)


def _message_time(msg: dict[str, Any]) -> int | None:
    meta, usage = msg.get("meta"), msg.get("usage")
    for value in (meta.get("sentAt") if isinstance(meta, dict) else None,
                  usage.get("timestamp") if isinstance(usage, dict) else None, msg.get("timestamp")):
        ms = to_epoch_ms(value) if value is not None else None
        if ms is not None:
            return ms
    return None


def _block(role: str, block: object, ts: int | None, skips: dict[str, int]) -> Message | None:
    if not isinstance(block, dict):
        count_skip(skips, "malformed-record")
        return None
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        text = block["text"].strip()
        return Message("user" if role == "user" else "assistant", "text", text, ts) if text else None
    if kind == "thinking" and role == "assistant":
        text = str(block.get("thinking") or "").strip()
        return Message("assistant", "thinking", text, ts) if text else None
    if kind == "tool_use" and role == "assistant":
        return Message("assistant", "tool_call", f"{block.get('name') or 'tool'} {compact_json(block.get('input'))}",
                       ts)
    if kind == "tool_result":
        return Message("tool", "tool_result", _result_text(block), ts)
    if kind in _REDUNDANT:
        count_skip(skips, str(kind))
        return None
    count_skip(skips, f"unknown_block:{str(kind)[:40]}")
    return None


def _result_text(block: dict[str, Any]) -> str:
    """A tool's output: ``run.result`` (text, or JSON such as a shell's {output, exitCode}), with the
    run's status in front when it did not simply finish; older threads have ``content``."""
    run = block.get("run")
    if isinstance(run, dict):
        result = run.get("result")
        if result is None:
            result = run.get("error")
        text = result if isinstance(result, str) else compact_json(result) if result is not None else ""
        status = run.get("status")
        if isinstance(status, str) and status != "done":
            text = f"[{status}] {text}".strip()
        return text
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text")) for c in content if isinstance(c, dict) and c.get("text"))
    return compact_json(content) if content is not None else ""


def _tree(doc: dict[str, Any]) -> tuple[str | None, str | None]:
    env = doc.get("env")
    initial = env.get("initial") if isinstance(env, dict) else None
    trees = initial.get("trees") if isinstance(initial, dict) else None
    tree = trees[0] if isinstance(trees, list) and trees and isinstance(trees[0], dict) else None
    if tree is None:
        return None, None
    cwd = None
    uri = tree.get("uri")
    if isinstance(uri, str) and uri:
        parsed = urlparse(uri)
        cwd = unquote(parsed.path) if parsed.scheme == "file" else uri
    repo = tree.get("repository")
    ref = repo.get("ref") if isinstance(repo, dict) else None
    branch = ref.removeprefix("refs/heads/") if isinstance(ref, str) and ref else None
    return cwd or None, branch


def _parent(doc: dict[str, Any]) -> str | None:
    """A handoff or fork names the thread it came from as a relationship with role "parent"."""
    rels = doc.get("relationships")
    for rel in rels if isinstance(rels, list) else []:
        if isinstance(rel, dict) and rel.get("role") == "parent":
            other = rel.get("threadID") or rel.get("threadId")
            if isinstance(other, str) and other:
                return other
    return None


SPEC = AgentSpec(
    name="amp", label="Amp", default_roots=default_roots, discover=discover,
    read_unit=read_thread, expects="threads/T-<uuid>.json (one JSON document per thread)",
    shaped=lambda name: name.startswith("T-") and name.endswith(".json"))
