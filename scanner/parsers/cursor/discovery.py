"""Where Cursor keeps its chats (docs/formats.md §5.1): the roots, the transcript layouts, discovery.

A root is a data folder (``~/.cursor``: ``projects/`` and, on macOS, ``chats/``), a CLI config
folder (``~/.config/cursor``: ``chats/``), or one of those two folders itself. Only the
``agent-transcripts`` folders of a project are walked (a project folder also holds tool outputs,
terminal captures and MCP caches); a chat that has a store but no transcript is a whole unit read
from its blobs (scanner.parsers.cursor.store).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aivault.scanner.parsers.cursor.store as store
from aivault.scanner.parsers.cursor.store import INDEX, chat_meta
from aivault.scanner.sources import (
    Found,
    Mode,
    Root,
    RootProblem,
    check_root,
    db_change_stamp,
    signature,
    size_mtime,
    walk_changed,
    walk_files,
)

TRANSCRIPTS = "agent-transcripts"
SUBAGENTS = "subagents"
PROJECTS = "projects"
CHATS = "chats"
NESTED_NAME = "transcript.jsonl"  # <id>/transcript.jsonl, seen beside <id>/<id>.jsonl (cli-continues)
# Depth of a transcript below agent-transcripts: <id>/subagents/<child>.jsonl.
TRANSCRIPT_DEPTH = 2


@dataclass(frozen=True, slots=True)
class Location:
    """What a transcript's path says: its chat id, its parent's (a subagent's), its project folder."""

    chat_id: str
    parent_id: str | None
    project_dir: str | None  # projects/<slug>
    chats_guess: str | None  # <data>/chats beside <data>/projects (macOS keeps both in ~/.cursor)


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name


def locate(path: str) -> Location:
    parts = Path(path).parts
    at = max((i for i, p in enumerate(parts) if p == TRANSCRIPTS), default=-1)
    rel = parts[at + 1 :] if at >= 0 else parts[-3:]
    parent = None
    if len(rel) >= 3 and rel[-2] == SUBAGENTS:
        chat_id, parent = _stem(rel[-1]), rel[-3]  # <id>/subagents/<child>.jsonl
    elif len(rel) == 2 and at >= 0:
        chat_id = rel[0]  # <id>/<id>.jsonl or <id>/transcript.jsonl
    else:
        chat_id = _stem(rel[-1])
    project = str(Path(*parts[:at])) if at > 0 else None
    guess = None
    if at >= 2 and parts[at - 2] == PROJECTS:
        guess = str(Path(*parts[: at - 2], CHATS))
    return Location(chat_id, parent, project, guess)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """The data folder (``$CURSOR_DATA_DIR``, else ``~/.cursor``: projects/ and, on macOS, chats/),
    the CLI config folder holding chats/ on Linux (``$CURSOR_CONFIG_DIR``, else
    ``$XDG_CONFIG_HOME/cursor``, else ``~/.config/cursor``) and ``~/.config/Cursor`` (cc-connect #1232)."""

    def given(name: str) -> Path | None:
        value = env.get(name)
        return Path(value).expanduser().absolute() if value else None

    data = given("CURSOR_DATA_DIR") or home / ".cursor"
    xdg = given("XDG_CONFIG_HOME")
    config = given("CURSOR_CONFIG_DIR") or (xdg / "cursor" if xdg else home / ".config" / "cursor")
    paths = dict.fromkeys(str(p) for p in (data, config, home / ".config" / "cursor", home / ".config" / "Cursor"))
    return [Root("cursor", p) for p in paths]


def _layout(root: Root) -> tuple[str | None, str | None]:
    """(projects folder, chats folder) of a root: a data/config folder holding them, or one of them."""
    path = root.path
    name = os.path.basename(path)
    if name == PROJECTS:
        sibling = os.path.join(os.path.dirname(path), CHATS)
        return path, sibling if os.path.isdir(sibling) else None
    if name == CHATS:
        return None, path
    projects = os.path.join(path, PROJECTS)
    chats = os.path.join(path, CHATS)
    found = (projects if os.path.isdir(projects) else None, chats if os.path.isdir(chats) else None)
    if found == (None, None) and root.explicit:
        return path, None  # a folder of project slugs given by hand
    return found


def _shadowed(root: Root) -> bool:
    """``~/.config/Cursor`` is ``~/.config/cursor`` on a case-insensitive disk: list it once."""
    if root.explicit or os.path.basename(root.path) != "Cursor":
        return False
    try:
        return os.path.samefile(root.path, os.path.join(os.path.dirname(root.path), "cursor"))
    except OSError:
        return False


def _wanted(directory: str, name: str) -> Mode | None:
    stem, _, ext = name.rpartition(".")
    if ext not in ("jsonl", "txt") or not stem:
        return None
    base = os.path.basename(directory)
    up = os.path.dirname(directory)
    if base == TRANSCRIPTS:  # flat <id>.jsonl / <id>.txt: the nested copy of a newer build wins
        if os.path.exists(os.path.join(directory, stem, stem + ".jsonl")):
            return None
        if ext == "txt":
            return None if os.path.exists(os.path.join(directory, stem + ".jsonl")) else "whole"
        return "lines"
    if os.path.basename(up) == TRANSCRIPTS:  # nested <id>/<id>.jsonl (or transcript.jsonl)
        if ext == "jsonl" and stem == base:
            return "lines"
        if name == NESTED_NAME:
            return None if os.path.exists(os.path.join(directory, base + ".jsonl")) else "lines"
        if ext == "txt" and stem == base and not os.path.exists(os.path.join(directory, base + ".jsonl")):
            return "whole"
        return None
    if base == SUBAGENTS and os.path.basename(os.path.dirname(up)) == TRANSCRIPTS:
        if ext == "txt":
            return None if os.path.exists(os.path.join(directory, stem + ".jsonl")) else "whole"
        return "lines"
    return None


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    if check_root(root, problems) is None or _shadowed(root):
        return
    projects, chats = _layout(root)
    found: list[Found] = []
    inner: list[RootProblem] = []
    if chats is not None:
        INDEX.refresh(chats)  # before any transcript of this pass is parsed
    if projects is not None:
        _PROJECTS.add(projects)
        found += _transcripts(root, projects, inner, dirs, full)
    if chats is not None:
        found += _store_only(root, chats, dirs, full)
    # Problems are the root's (a full pass does not mark a root's files gone when it had one).
    problems += [RootProblem(root.path, p.reason) for p in inner]
    yield from found


_PROJECTS: set[str] = set()  # every projects folder seen: a chat with a transcript there is read from it


def _transcripts(root: Root, projects: str, problems: list[RootProblem], dirs: dict[str, int] | None,
                 full: bool) -> list[Found]:
    # Only the agent-transcripts folders are walked: a project folder also holds tool outputs,
    # terminal captures and MCP caches.
    found: list[Found] = []
    for slug in _listdir(projects, problems):
        folder = os.path.join(projects, slug, TRANSCRIPTS)
        if (full or dirs is None or folder not in dirs) and os.path.isdir(folder):
            found += walk_files(Root(root.agent, folder), problems, dirs, _wanted, max_depth=TRANSCRIPT_DEPTH)
    if not full and dirs is not None:
        found += walk_changed(Root(root.agent, projects), problems, dirs, _wanted, max_depth=TRANSCRIPT_DEPTH + 2)
    return found


def _listdir(path: str, problems: list[RootProblem]) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=True))
    except OSError as exc:
        problems.append(RootProblem(path, f"cannot list {path}: {exc.strerror or exc}"))
        return []


_TRANSCRIPT_IDS: dict[str, tuple[int, frozenset[str]]] = {}
_STORE_SIGS: dict[str, tuple[int, int]] = {}  # store.db -> (its change stamp, its content signature)


def _transcript_ids() -> set[str]:
    """The chat ids that have a transcript in a projects folder seen so far (cached per folder mtime)."""
    ids: set[str] = set()
    for projects in sorted(_PROJECTS):
        for slug in _listdir(projects, []):
            folder = os.path.join(projects, slug, TRANSCRIPTS)
            mtime = size_mtime(folder)[1]
            cached = _TRANSCRIPT_IDS.get(folder)
            if cached is None or cached[0] != mtime:
                try:
                    names = frozenset(_stem(n) for n in os.listdir(folder))
                except OSError:
                    names = frozenset()
                cached = _TRANSCRIPT_IDS[folder] = (mtime, names)
            ids |= cached[1]
    return ids


def _store_only(root: Root, chats: str, dirs: dict[str, int] | None, full: bool) -> list[Found]:
    """Whole units for the chats that have a store.db but no transcript (read from the JSON blobs)."""
    have = _transcript_ids()
    found: list[Found] = []
    for chat_id, chat_dir in INDEX.chats(chats):
        db = os.path.join(chat_dir, store.STORE_DB)
        if chat_id in have or not os.path.isfile(db):
            continue
        stamp = _store_stamp(db, chat_dir)
        if not full and dirs is not None and dirs.get(db) == stamp:
            continue  # no commit and no meta.json change since the last pass listed it
        cached = _STORE_SIGS.get(db)
        settled: int | None = stamp
        if cached is not None and cached[0] == stamp:
            content: int | None = cached[1]
        else:
            settled, content = _settled_signature(db, chat_dir, stamp)
        if content is None:
            continue  # busy or unreadable now: the next pass tries again
        if settled is not None:
            _STORE_SIGS[db] = (settled, content)
            if dirs is not None:
                dirs[db] = settled
        if chat_meta(chat_dir).has_conversation is False:
            continue  # a chat opened and left: nothing to index
        try:
            st = os.stat(db)
        except OSError:
            continue
        found.append(Found(f"{db}#{chat_id}", root.agent, st.st_dev, st.st_ino, st.st_size,
                           store.unit_signature(content, chat_dir), "whole", (db, chat_id)))
    return found


def _store_stamp(db: str, chat_dir: str) -> int:
    return signature(db_change_stamp(db), size_mtime(os.path.join(chat_dir, store.META_JSON)))


def _settled_signature(db: str, chat_dir: str, before: int) -> tuple[int | None, int | None]:
    """(change stamp, content signature) read together. A first read-only open creates the WAL
    files, which moves the stamp without a commit: read once more; a stamp still moving is not kept."""
    content = None
    for _ in range(2):
        content = store.store_signature(db)
        after = _store_stamp(db, chat_dir)
        if after == before:
            return after, content
        before = after
    return None, content


def side_titles(root: Root, sigs: MutableMapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Chat titles (meta.json title, else the store's name) that changed since ``sigs`` saw them:
    a title is often set after the transcript's last line was written."""
    if _shadowed(root):
        return
    _, chats = _layout(root)
    if chats is None:
        return
    for chat_id, chat_dir in INDEX.chats(chats):
        stamp = (size_mtime(os.path.join(chat_dir, store.META_JSON)),
                 db_change_stamp(os.path.join(chat_dir, store.STORE_DB)))
        if sigs.get(chat_dir) == stamp:
            continue
        sigs[chat_dir] = stamp
        title = chat_meta(chat_dir).title
        if title:
            yield chat_id, title
