"""Where a Kimi wire log sits and what the JSON files beside it say (docs/formats.md §20).

Three layouts share one ``wire.jsonl`` name:

* Kimi Code: ``<sessions>/wd_<name>_<hash>/session_<uuid>/agents/<agent id>/wire.jsonl``, the main
  agent in ``agents/main``, with ``state.json`` (title, work dir, the agents and their parents)
  in the session folder. Kimi Work (the desktop app) runs the same kernel under its own home and
  names its conversations ``conv-*`` (and once kept ``conv-*/wire.jsonl`` directly).
* Kimi CLI (Python, ``~/.kimi``): ``<sessions>/<md5 of the work dir>/<session id>/wire.jsonl``, a
  ``state.json`` with the user's ``custom_title``, and sub-agent instances in
  ``subagents/<agent id>/{wire.jsonl, meta.json}``. The work dir itself is only in ``kimi.json``
  beside ``sessions/``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from aivault.scanner.parsers.base import folder_titles
from aivault.scanner.parsers.jsonutil import as_object, loads_line
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Root

WIRE_FILE = "wire.jsonl"
STATE_FILE = "state.json"
MAIN_AGENT = "main"
# Kimi Work's own sessions beside the conversations: title generation, skill summaries, dev loops.
INTERNAL_PREFIXES = ("ctitle-", "sklsum-", "dvlt-")
DESKTOP_PREFIX = "conv-"
# state.json, meta.json and kimi.json are a few KB; anything far larger is not one.
SIDE_FILE_MAX_BYTES = 1024 * 1024
TITLE_MAX_CHARS = 120


@dataclass(frozen=True, slots=True)
class Layout:
    """What a wire log's path says about its session."""

    session_dir: str
    session_id: str  # the session folder's name (Kimi Code's is ``session_<uuid>``, what ``--session`` takes)
    agent_id: str | None  # None for the main agent
    legacy: bool  # the Python Kimi CLI's layout
    desktop: bool  # a Kimi Work conversation (no CLI resumes it)

    @property
    def unit_id(self) -> str:
        """The id the session is indexed under: a sub-agent's is ``<session id>:<agent id>``."""
        return self.session_id if self.agent_id is None else f"{self.session_id}:{self.agent_id}"


def layout(path: str) -> Layout:
    """The session a ``wire.jsonl`` belongs to, from its path (any other name is taken as the
    main agent's log of the folder it sits in)."""
    directory = os.path.dirname(path)
    above = os.path.dirname(directory)
    kind = os.path.basename(above)
    if kind in ("agents", "subagents"):
        session_dir = os.path.dirname(above)
        agent_id: str | None = os.path.basename(directory)
        if kind == "agents" and agent_id == MAIN_AGENT:
            agent_id = None
    else:
        session_dir, agent_id = directory, None
    session_id = os.path.basename(session_dir)
    legacy = kind != "agents" and not session_id.startswith(DESKTOP_PREFIX)
    return Layout(session_dir, session_id, agent_id, legacy, session_id.startswith(DESKTOP_PREFIX))


def is_internal(session_dir_name: str) -> bool:
    return session_dir_name.startswith(INTERNAL_PREFIXES)


def read_json(path: str) -> dict[str, Any]:
    """A small JSON object file, or an empty object when it is missing, too large or not one."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(SIDE_FILE_MAX_BYTES + 1)
    except OSError:
        return {}
    if len(data) > SIDE_FILE_MAX_BYTES:
        return {}
    return as_object(loads_line(data))


@dataclass(frozen=True, slots=True)
class SideInfo:
    """What the files beside a wire log say about its session."""

    title: str | None = None
    cwd: str | None = None
    agent_type: str | None = None  # a sub-agent's type or profile
    parent_agent: str | None = None  # a sub-agent's parent agent id (None: the main agent)
    description: str | None = None  # a Kimi CLI sub-agent's task description


def _abs(value: object) -> str | None:
    return value if isinstance(value, str) and os.path.isabs(value) else None


def state_title(state: dict[str, Any]) -> str | None:
    """Kimi Code's ``title`` (set by the user or generated), else Kimi CLI's ``custom_title``."""
    for key in ("title", "custom_title"):
        value = state.get(key)
        title = first_line_title(value, TITLE_MAX_CHARS) if isinstance(value, str) else None
        if title:
            return title
    return None


def side_info(where: Layout) -> SideInfo:
    """The title, work dir and (for a sub-agent) type and parent recorded beside the log."""
    state = read_json(os.path.join(where.session_dir, STATE_FILE))
    cwd = _abs(state.get("workDir")) or (legacy_cwd(where) if where.legacy else None)
    if where.agent_id is None:
        return SideInfo(title=state_title(state), cwd=cwd)
    if where.legacy:
        meta = read_json(os.path.join(where.session_dir, "subagents", where.agent_id, "meta.json"))
        return SideInfo(cwd=cwd, agent_type=nonblank(meta.get("subagent_type")),
                        description=first_line_title(nonblank(meta.get("description")) or "", TITLE_MAX_CHARS))
    agent = as_object(as_object(state.get("agents")).get(where.agent_id))
    return SideInfo(cwd=cwd, agent_type=nonblank(agent.get("type")), parent_agent=nonblank(agent.get("parentAgentId")))


# --- Kimi CLI: the work dir of a session folder, from kimi.json ----------------------------------------
_WORKDIRS: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}


def _workdirs(share_dir: str) -> dict[str, str]:
    """``kimi.json``'s work dirs by the folder name their sessions live in (``<md5>``, or
    ``<kaos>_<md5>`` for a non-local KAOS) and by session id; read again only when it changed."""
    path = os.path.join(share_dir, "kimi.json")
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_size, st.st_mtime_ns)
    cached = _WORKDIRS.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    meta = read_json(path)
    found: dict[str, str] = {}
    work_dirs = meta.get("work_dirs")
    for entry in work_dirs if isinstance(work_dirs, list) else []:
        entry = as_object(entry)
        work_dir = _abs(entry.get("path"))
        if work_dir is None:
            continue
        digest = hashlib.md5(work_dir.encode("utf-8"), usedforsecurity=False).hexdigest()
        kaos = entry.get("kaos")
        found[digest] = work_dir
        if isinstance(kaos, str) and kaos and kaos != "local":
            found[f"{kaos}_{digest}"] = work_dir
    for sid, work_dir in as_object(meta.get("session_to_workdir")).items():
        if _abs(work_dir):
            found["session:" + sid] = work_dir
    _WORKDIRS[path] = (stamp, found)
    return found


def legacy_cwd(where: Layout) -> str | None:
    """A Kimi CLI session's work dir: the ``kimi.json`` entry whose md5 names its folder."""
    group = os.path.dirname(where.session_dir)
    share_dir = os.path.dirname(os.path.dirname(group))
    known = _workdirs(share_dir)
    return known.get(os.path.basename(group)) or known.get("session:" + where.session_id)


# --- titles that change without the log ----------------------------------------------------------------
def _session_dirs(root: str) -> Iterator[str]:
    try:
        groups = sorted(e.path for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return
    for group in groups:
        try:
            entries = sorted(os.scandir(group), key=lambda e: e.name)
        except OSError:
            continue
        yield from (e.path for e in entries if e.is_dir() and not is_internal(e.name))


def side_titles(root: Root, sigs: MutableMapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The ``state.json`` titles (a rename, or the one Kimi generated) of the sessions under ``root``
    whose file changed since ``sigs`` last saw it: one stat per session folder a pass."""
    return folder_titles(_session_dirs(root.path), STATE_FILE, sigs, lambda _dir, path: state_title(read_json(path)))
