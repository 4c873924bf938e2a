"""What an agent is to the scanner: where its transcripts are and how to read them (see agents.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault.scanner.model import Parser
from aivault.scanner.sources import Found, Root, RootProblem, Unit, Wanted, walk_changed, walk_files

Discover = Callable[[Root, list[RootProblem], "dict[str, int] | None", bool], Iterator[Found]]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str  # the wire name
    label: str  # what people call it
    default_roots: Callable[[Mapping[str, str], Path], list[Root]]  # (environment, home) -> roots
    discover: Discover  # (root, problems, directory mtimes, full pass?) -> the units under the root
    line_parser: Callable[[str, dict[str, Any] | None], Parser] | None = None  # lines / zst units
    read_unit: Callable[[Found], Unit] | None = None  # whole units
    # For `aivault doctor`: what its transcripts look like, and whether a file name is one (a root
    # holding such files that yields no session is a loud warning, not a quiet zero).
    expects: str = ""
    shaped: Callable[[str], bool] = lambda name: False
    # A unit that replaces another with the same content (Codex's plain rollout -> .jsonl.zst):
    # (new key) -> the key it continues, if any.
    predecessor: Callable[[str], str | None] = lambda path: None
    # Titles kept beside the transcripts that change without them (Codex thread names, Copilot's
    # workspace.yaml, Cursor's chat meta.json): (root, signatures it may remember between calls,
    # keyed by path) -> the (session id, title) pairs whose source changed since. One scanner calls
    # it after every pass; what it returns wins over the transcript's own title.
    side_titles: Callable[[Root, MutableMapping[str, Any]], Iterable[tuple[str, str]]] | None = None


def file_discovery(wanted: Wanted, *, max_depth: int = 7, hidden: bool = False) -> Discover:
    """Discovery for agents whose units are files under the root: a full pass walks the tree, a
    recent pass re-lists only directories whose mtime changed."""

    def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
        if full or dirs is None or root.path not in dirs:
            return walk_files(root, problems, dirs, wanted, max_depth=max_depth, hidden=hidden)
        return walk_changed(root, problems, dirs, wanted, max_depth=max_depth, hidden=hidden)

    return discover


def relisting_discovery(wanted: Wanted, *, max_depth: int = 7,
                        relist: Callable[[str], bool] = lambda path: True) -> Discover:
    """File discovery for session files that change in place (read whole, or rewritten).

    A recent pass of ``file_discovery`` re-lists only directories whose mtime changed, and the scanner
    re-stats only known *line* files; a file rewritten or appended in place changes neither its folder's
    mtime nor its mode, so the folders under the root known from the last full pass that ``relist``
    accepts are listed again too (one stat per session file; an unchanged one is not read)."""
    base = file_discovery(wanted, max_depth=max_depth)

    def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
        if full or dirs is None or root.path not in dirs:
            yield from base(root, problems, dirs, full)
            return
        listed: set[str] = set()
        for f in base(root, problems, dirs, full):
            listed.add(os.path.dirname(f.path))
            yield f
        for path in list(dirs):
            if (path == root.path or path.startswith(root.path + os.sep)) and path not in listed and relist(path):
                yield from walk_files(Root(root.agent, path), problems, None, wanted, max_depth=0)

    return discover
