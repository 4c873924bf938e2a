"""Cline, Roo Code and Kilo Code task folders (docs/formats.md §7), each task folder read whole.

A task is ``tasks/<taskId>/`` under the extension's global storage: ``ui_messages.json`` (what the
user saw, with a time on every message), ``api_conversation_history.json`` (what the model saw) and
``task_metadata.json``; Roo ≥ 3.4x adds ``history_item.json``. The UI view is the timeline; the model
view contributes only the tool results the UI never shows (file reads, listings, searches), joined
to the UI tool message they answer (see ``_ToolResults``). A folder with no UI view is read from
the model view alone. The task index (``state/taskHistory.json``, or the editor's ``state.vscdb``
for versions that kept it in globalState) supplies cwd and Roo's parent task.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.cline import view
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, open_sqlite, signature
from aivault.scanner.spec import AgentSpec

UI_FILE = "ui_messages.json"
API_FILE = "api_conversation_history.json"
META_FILE = "task_metadata.json"
ITEM_FILE = "history_item.json"
TASK_FILES = (UI_FILE, API_FILE, META_FILE, ITEM_FILE)
# A document that does not parse and was written this recently is taken to be mid-write (the
# extensions rewrite the whole file on every message) and read again next pass.
SETTLE_S = 30
# Larger task documents exist (base64 screenshots), but past this one is not a transcript we can
# hold in memory while the scanner streams other units.
MAX_DOCUMENT_BYTES = 512 << 20
# Editor builds that keep a VS Code-style ``User`` folder, on Linux under $XDG_CONFIG_HOME
# (~/.config) and on macOS under ~/Library/Application Support.
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
EXTENSION_IDS = {"cline": "saoudrizwan.claude-dev", "roo": "rooveterinaryinc.roo-cline",
                 "kilo": "kilocode.kilo-code"}


# --- the task index: HistoryItem fields per task id -------------------------------------------------
@dataclass(frozen=True, slots=True)
class HistoryMeta:
    task: str | None = None
    cwd: str | None = None
    parent: str | None = None
    ts: int | None = None

    def fingerprint(self) -> tuple[object, ...]:
        return (self.task, self.cwd, self.parent, self.ts)


def history_meta(item: object) -> HistoryMeta | None:
    if not isinstance(item, dict):
        return None
    task = item.get("task")
    cwd = item.get("cwdOnTaskInitialization") or item.get("workspace")
    parent = item.get("parentTaskId")
    return HistoryMeta(task if isinstance(task, str) else None, cwd if isinstance(cwd, str) and cwd else None,
                       str(parent) if isinstance(parent, str | int) and parent != "" else None,
                       to_epoch_ms(item.get("ts")))


# (source path) -> (its size/mtime stamp, the entries read from it); one scanner process reads an
# index again only when it changed, and both discovery and reading share what it read.
_INDEX_CACHE: dict[str, tuple[object, dict[str, HistoryMeta]]] = {}


def _cached(path: str, stamp: object, load: Callable[[], dict[str, HistoryMeta]]) -> dict[str, HistoryMeta]:
    hit = _INDEX_CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        entries = load()
    except (OSError, sqlite3.Error):
        entries = {}  # an index is a help, never a reason to skip the tasks themselves
    _INDEX_CACHE[path] = (stamp, entries)
    return entries


def _entries(items: object) -> dict[str, HistoryMeta]:
    out: dict[str, HistoryMeta] = {}
    if isinstance(items, dict):
        items = items.get("taskHistory") or items.get("entries")
    if isinstance(items, list):
        for item in items:
            meta = history_meta(item)
            if meta is not None and isinstance(item.get("id"), str | int):
                out[str(item["id"])] = meta
    return out


def task_index(tasks_dir: str) -> dict[str, HistoryMeta]:
    """The HistoryItems the extension keeps beside ``tasks/``: the editor's globalState (older
    versions), then ``state/taskHistory.json`` (newer Cline), the later winning."""
    ext_dir = os.path.dirname(tasks_dir)
    merged: dict[str, HistoryMeta] = {}
    storage = os.path.dirname(ext_dir)
    if os.path.basename(storage) == "globalStorage":
        db = os.path.join(storage, "state.vscdb")
        stamp = _stat_stamp(db)
        if stamp is not None:
            merged.update(_cached(db + "#" + os.path.basename(ext_dir), stamp,
                                  lambda: _vscdb_entries(db, os.path.basename(ext_dir))))
    index = os.path.join(ext_dir, "state", "taskHistory.json")
    stamp = _stat_stamp(index)
    if stamp is not None:
        merged.update(_cached(index, stamp, lambda: _entries(loads_line(Path(index).read_bytes()))))
    return merged


def _vscdb_entries(db: str, ext_id: str) -> dict[str, HistoryMeta]:
    con = open_sqlite(db)
    try:
        row = con.execute("SELECT value FROM ItemTable WHERE lower(key) = ?", (ext_id.lower(),)).fetchone()
    finally:
        con.close()
    if row is None or row[0] is None:
        return {}
    raw = row[0] if isinstance(row[0], bytes) else str(row[0]).encode("utf-8", "surrogatepass")
    return _entries(loads_line(raw))


def _stat_stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


# --- discovery --------------------------------------------------------------------------------------
def tasks_dir(root: str) -> str:
    """A root names the ``tasks`` folder; the extension's storage folder holding it is accepted too."""
    sub = os.path.join(root, "tasks")
    return sub if os.path.isdir(sub) else root


def folder_stamps(folder: str) -> tuple[tuple[str, int, int, int], ...] | None:
    """(file, size, mtime, inode) of the task's documents; None when it holds no message file."""
    out = []
    for name in TASK_FILES:
        stamp = _stat_stamp(os.path.join(folder, name))
        if stamp is not None:
            out.append((name, *stamp))
    if not any(name in (UI_FILE, API_FILE) for name, *_ in out):
        return None
    return tuple(out)


def task_signature(stamps: tuple[tuple[str, int, int, int], ...], meta: HistoryMeta | None) -> int:
    # The index entry is part of it, so a cwd or parent recorded after the task's last write is
    # picked up once, without re-reading every task whenever the shared index is rewritten.
    return signature(stamps, meta.fingerprint() if meta else None)


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Every task folder under the root. A task's files are rewritten in place (the folder's mtime
    does not move), so every pass stats them: a few stats per task, no reading."""
    if check_root(root, problems) is None:
        return
    base = tasks_dir(root.path)
    index = task_index(base)
    try:
        with os.scandir(base) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {base}: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name.startswith(("_", ".")):  # Roo's tasks/_index.json, editor temp files
            continue
        try:
            if not entry.is_dir(follow_symlinks=True):
                continue
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))
            continue
        stamps = folder_stamps(entry.path)
        if stamps is None:
            continue
        yield Found(entry.path, root.agent, st.st_dev, st.st_ino, sum(s[1] for s in stamps),
                    task_signature(stamps, index.get(entry.name)), "whole")


# --- reading a task ----------------------------------------------------------------------------------
def _recent(mtime_ns: int) -> bool:
    return time.time_ns() - mtime_ns < SETTLE_S * 1_000_000_000


def load_document(folder: str, name: str, stamps: Mapping[str, tuple[int, int, int]],
                  skips: dict[str, int]) -> object:
    """One task document parsed; None when absent. A document that does not parse is mid-write
    (UnitChanged) while recent; once settled, the complete records of a cut-off array are kept."""
    stamp = stamps.get(name)
    if stamp is None:
        return None
    size, mtime_ns, _ = stamp
    if size > MAX_DOCUMENT_BYTES:
        raise UnitUnreadable(f"{name} is {size} bytes, over the {MAX_DOCUMENT_BYTES}-byte limit")
    try:
        data = Path(folder, name).read_bytes()
    except FileNotFoundError as exc:
        raise UnitChanged(f"{name} disappeared while reading") from exc
    except OSError as exc:
        raise UnitUnreadable(f"cannot read {name}: {exc.strerror or exc}") from exc
    if not data.strip():
        if _recent(mtime_ns):
            raise UnitChanged(f"{name} is empty: being written")
        return None
    value = loads_line(data)
    if value is not None:
        return value
    if _recent(mtime_ns):
        raise UnitChanged(f"{name} is not complete JSON yet")
    salvaged = view.salvage_array(data)
    if salvaged is None:
        raise UnitUnreadable(f"{name} is not valid JSON")
    count_skip(skips, "truncated-document")
    return salvaged


def read_task(found: Found) -> Unit:
    folder = found.path
    task_id = os.path.basename(folder)
    indexed = task_index(os.path.dirname(folder)).get(task_id)
    meta = indexed
    before = folder_stamps(folder)
    if before is None:
        if not os.path.isdir(folder):
            raise UnitChanged("the task folder is gone")
        raise UnitUnreadable("the task folder holds neither ui_messages.json nor api_conversation_history.json")
    stamps = {name: (size, mtime, ino) for name, size, mtime, ino in before}
    skips: dict[str, int] = {}
    ui = load_document(folder, UI_FILE, stamps, skips)
    api = load_document(folder, API_FILE, stamps, skips)
    item = load_document(folder, ITEM_FILE, stamps, skips)
    if folder_stamps(folder) != before:
        raise UnitChanged("the task was written while being read")
    own = history_meta(item)  # history_item.json is the task's own record: it wins over the index
    if own is not None:
        meta = HistoryMeta(own.task or (meta.task if meta else None), own.cwd or (meta.cwd if meta else None),
                           own.parent or (meta.parent if meta else None), own.ts or (meta.ts if meta else None))
    api_list = _as_list(api, API_FILE, skips)
    ui_list = _as_list(ui, UI_FILE, skips)
    family = "cline" if found.agent == "cline" else "roo"
    if ui_list:
        results = view.ToolResults(view.api_tool_results(api_list), family)
        conv = view.from_ui(ui_list, results, skips)
        results.count_unmatched(skips)
    else:
        conv = view.from_api(api_list, skips)
    messages = conv.messages
    times = [m.ts for m in messages if m.ts is not None] + conv.times
    if meta is not None and meta.ts is not None:
        times.append(meta.ts)
    title_source = (meta.task if meta and meta.task else None) or conv.first_prompt
    cwd = (meta.cwd if meta else None) or view.cwd_from_environment(api_list, ui_list)
    session = SessionInfo(
        agent=found.agent, session_id=task_id, title=first_line_title(title_source) if title_source else None,
        cwd=cwd, started_at=min(times) if times else None, updated_at=max(times) if times else None,
        message_count=len(messages), resume_command=None, parent_session_id=meta.parent if meta else None)
    return Unit(session, messages, task_signature(before, indexed), skips)


def _as_list(value: object, name: str, skips: dict[str, int]) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    count_skip(skips, f"unexpected-shape:{name}")
    return []


# --- roots --------------------------------------------------------------------------------------------
def user_dirs(env: Mapping[str, str], home: Path) -> list[Path]:
    """Every editor ``User`` folder an extension's global storage can live in."""
    config = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else home / ".config"
    mac = home / "Library" / "Application Support"
    out = [base / editor / "User" for editor in EDITORS for base in (config, mac)]
    # Remote-SSH / WSL / Codespaces servers keep their own User folder; a portable VS Code its own.
    out.append(home / ".vscode-server" / "data" / "User")
    if env.get("VSCODE_PORTABLE"):
        out.append(Path(env["VSCODE_PORTABLE"]).expanduser() / "user-data" / "User")
    return out


def roots_for(agent: str) -> Any:
    ext = EXTENSION_IDS[agent]

    def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
        roots = [Root(agent, str(u / "globalStorage" / ext / "tasks")) for u in user_dirs(env, home)]
        if agent == "cline":
            # The standalone CLI: CLINE_DATA_DIR, else $CLINE_DIR/data, else ~/.cline/data.
            if env.get("CLINE_DATA_DIR"):
                data = Path(env["CLINE_DATA_DIR"]).expanduser()
            else:
                data = (Path(env["CLINE_DIR"]).expanduser() if env.get("CLINE_DIR") else home / ".cline") / "data"
            roots.append(Root(agent, str(data.absolute() / "tasks")))
        return roots

    return default_roots


def _spec(agent: str, label: str) -> AgentSpec:
    return AgentSpec(
        name=agent, label=label, default_roots=roots_for(agent), discover=discover, read_unit=read_task,
        expects="tasks/<taskId>/ui_messages.json and api_conversation_history.json (JSON documents)",
        shaped=lambda name: name in (UI_FILE, API_FILE))


SPECS = [_spec("cline", "Cline"), _spec("roo", "Roo Code"), _spec("kilo", "Kilo Code")]
