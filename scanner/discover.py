"""Where transcripts live, and walking those places without letting one bad folder stop a pass.

Default roots (docs/formats.md §1, §2):
* Claude Code: ``$CLAUDE_CONFIG_DIR/projects``; else ``~/.claude/projects`` and
  ``~/.config/claude/projects``. Files: ``<project>/<session>.jsonl``, subagents at
  ``<project>/<session>/subagents/agent-<id>.jsonl`` (2.1+) or ``<project>/agent-<id>.jsonl``.
* Codex: ``$CODEX_HOME/sessions`` (``YYYY/MM/DD/rollout-*.jsonl``) and
  ``$CODEX_HOME/archived_sessions``, else the same under ``~/.codex``; thread names come from
  ``$CODEX_HOME/session_index.jsonl``.
Extra roots come from the command line or ``config.json`` as ``AGENT=PATH``.

A default root that does not exist is simply an agent the user does not run; an extra root
that does not exist, or any root or sub-folder that cannot be listed, is reported.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aivault.errors import InvalidRoot

AGENTS = ("claude", "codex")


@dataclass(frozen=True, slots=True)
class Root:
    agent: str  # "claude" | "codex"
    path: str  # absolute
    explicit: bool = False  # named by the user: its absence is an error, not a fact
    session_index: str | None = None  # Codex: the session_index.jsonl naming threads


@dataclass(frozen=True, slots=True)
class Found:
    path: str
    agent: str
    dev: int
    ino: int
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class RootProblem:
    root: str
    reason: str


def parse_root_spec(spec: str) -> Root:
    """``claude=/path`` or ``codex=/path`` (the agent decides the parser)."""
    agent, sep, path = spec.partition("=")
    if not sep or agent not in AGENTS or not path:
        raise InvalidRoot(f"root {spec!r} must look like AGENT=PATH with AGENT one of {', '.join(AGENTS)}")
    p = os.path.abspath(os.path.expanduser(path))
    index = None
    if agent == "codex":
        parent_index = os.path.join(os.path.dirname(p), "session_index.jsonl")
        index = parent_index
    return Root(agent=agent, path=p, explicit=True, session_index=index)


def default_roots(env: dict[str, str] | None = None) -> list[Root]:
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or str(Path.home()))
    roots: list[Root] = []
    claude_dir = env.get("CLAUDE_CONFIG_DIR")
    if claude_dir:
        roots.append(Root("claude", str(Path(claude_dir).expanduser().absolute() / "projects")))
    else:
        roots.append(Root("claude", str(home / ".claude" / "projects")))
        roots.append(Root("claude", str(home / ".config" / "claude" / "projects")))
    codex_home = Path(env["CODEX_HOME"]).expanduser().absolute() if env.get("CODEX_HOME") else home / ".codex"
    index = str(codex_home / "session_index.jsonl")
    roots.append(Root("codex", str(codex_home / "sessions"), session_index=index))
    roots.append(Root("codex", str(codex_home / "archived_sessions"), session_index=index))
    return roots


def walk(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None = None) -> Iterator[Found]:
    """Every transcript file under ``root``; listing failures are appended to ``problems``.

    ``dirs`` (when given) receives every listed directory's mtime, so a later bounded pass can
    re-list only the directories that changed (see ``walk_changed``).
    """
    try:
        st = os.stat(root.path)
    except FileNotFoundError:
        if root.explicit:
            problems.append(RootProblem(root.path, "root does not exist"))
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot stat root: {exc.strerror or exc}"))
        return
    if not stat.S_ISDIR(st.st_mode):
        problems.append(RootProblem(root.path, "root is not a directory"))
        return
    yield from _walk_dir(root, root.path, problems, 0, dirs, recurse_known=True, seen={(st.st_dev, st.st_ino)})


def walk_changed(root: Root, problems: list[RootProblem], dirs: dict[str, int]) -> Iterator[Found]:
    """Files in directories of ``root`` whose mtime changed since ``dirs`` recorded it.

    Creating or renaming an entry changes its directory's mtime, so new transcripts are found
    by a stat per known directory instead of a walk of the whole tree. Known sub-directories
    are not descended into: they are checked on their own.
    """
    for path, mtime in list(dirs.items()):
        if path != root.path and not path.startswith(root.path + os.sep):
            continue
        try:
            now = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            dirs.pop(path, None)
            continue
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {path}: {exc.strerror or exc}"))
            continue
        if now != mtime:
            depth = 0 if path == root.path else path[len(root.path) + 1 :].count(os.sep) + 1
            yield from _walk_dir(root, path, problems, depth, dirs, recurse_known=False, seen=set())


# Deep enough for Codex's YYYY/MM/DD and Claude's project/session/subagents; bounded so a
# symlink loop or a huge unrelated tree cannot keep a pass busy.
_MAX_DEPTH = 6


def _walk_dir(root: Root, path: str, problems: list[RootProblem], depth: int,
              dirs: dict[str, int] | None, *, recurse_known: bool, seen: set[tuple[int, int]]) -> Iterator[Found]:
    try:
        mtime = os.stat(path).st_mtime_ns
        with os.scandir(path) as it:
            entries = list(it)
    except OSError as exc:
        where = "root" if path == root.path else path
        problems.append(RootProblem(root.path, f"cannot list {where}: {exc.strerror or exc}"))
        return
    if dirs is not None:
        dirs[path] = mtime
    entries.sort(key=lambda e: e.name)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=True):
                # A symlinked project folder is followed like a real one; a directory already
                # walked in this pass (a link back up the tree) is not walked again.
                ident = _dir_identity(entry)
                if ident is not None and ident not in seen and depth < _MAX_DEPTH \
                        and not entry.name.startswith(".") \
                        and (recurse_known or dirs is None or entry.path not in dirs):
                    seen.add(ident)
                    yield from _walk_dir(root, entry.path, problems, depth + 1, dirs, recurse_known=recurse_known,
                                         seen=seen)
                continue
            if not entry.name.endswith(".jsonl") or not _wanted(root.agent, entry.name):
                continue
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(st.st_mode):
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _dir_identity(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    st = entry.stat(follow_symlinks=True)
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _wanted(agent: str, name: str) -> bool:
    if agent == "codex":
        # session_index.jsonl and history.jsonl are indexes, not transcripts.
        return name.startswith("rollout-") or name not in ("session_index.jsonl", "history.jsonl")
    return name != "history.jsonl"
