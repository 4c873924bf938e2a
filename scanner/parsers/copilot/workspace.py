"""Copilot CLI's ``workspace.yaml``: the title beside each session's event log (docs/formats.md §8).

``/rename`` writes a top-level ``name:``; Copilot also writes a generated ``summary:``, the
session's ``cwd`` and git context. The file is rewritten without the event log changing, so its
title also travels on its own (``side_titles``, read by one scanner after every pass).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import orjson

from aivault.scanner.parsers.base import folder_titles
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Root

WORKSPACE_YAML = "workspace.yaml"
SESSION_STATE = "session-state"
HISTORY_STATE = "history-session-state"
# workspace.yaml is a few hundred bytes; anything far larger is not one.
WORKSPACE_YAML_MAX_BYTES = 256 * 1024

_TOP_KEY = re.compile(r"([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")


def workspace_fields(text: str) -> dict[str, str]:
    """The top-level scalar keys of a workspace.yaml (``name:``, ``summary:``, ``cwd:`` ...).

    Only what Copilot writes is understood: plain, single- or double-quoted scalars (a plain one
    may continue on more-indented lines) and ``|``/``>`` block scalars. Nested mappings and lists
    are skipped, so no YAML library is needed for a handful of keys.
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line or line[0] in " \t#-" or line.startswith("---"):
            continue
        match = _TOP_KEY.match(line)
        if match is None:
            continue
        key, raw = match.group(1), match.group(2) or ""
        more: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i][0] in " \t"):
            more.append(lines[i])
            i += 1
        value = _scalar(raw, more)
        if value is not None:
            out[key] = value
    return out


def _scalar(raw: str, more: list[str]) -> str | None:
    if raw[:1] in ("|", ">"):
        body = [m.strip() for m in more]
        while body and not body[-1]:
            body.pop()
        return ("\n" if raw[0] == "|" else " ").join(body)
    if raw.startswith('"'):
        end = _closing_quote(raw)
        try:
            value = orjson.loads(raw[: end + 1]) if end > 0 else raw[1:]
        except orjson.JSONDecodeError:
            value = raw[1:end] if end > 0 else raw[1:]
        return value if isinstance(value, str) else None
    if raw.startswith("'"):
        quoted = raw[1:]
        chars: list[str] = []
        j = 0
        while j < len(quoted):
            if quoted[j] == "'":
                if quoted[j + 1 : j + 2] != "'":
                    break
                j += 1  # '' is an escaped quote
            chars.append(quoted[j])
            j += 1
        return "".join(chars)
    if not raw:
        if any(m.strip() for m in more):
            return None  # a nested mapping or list, not a scalar
        return ""
    value = raw.split(" #", 1)[0].rstrip()
    if value in ("~", "null", "Null", "NULL"):
        return None
    continuation = [m.strip() for m in more if m.strip()]
    return " ".join([value, *continuation]) if continuation else value


def _closing_quote(raw: str) -> int:
    j = 1
    while j < len(raw):
        if raw[j] == "\\":
            j += 2
            continue
        if raw[j] == '"':
            return j
        j += 1
    return -1


def read_workspace(session_dir: str) -> dict[str, str]:
    """``workspace.yaml``'s top-level scalars, or nothing when it is missing or unreadable."""
    try:
        with open(os.path.join(session_dir, WORKSPACE_YAML), "rb") as fh:
            data = fh.read(WORKSPACE_YAML_MAX_BYTES)
    except OSError:
        return {}
    return workspace_fields(data.decode("utf-8", errors="replace"))


def workspace_title(fields: Mapping[str, str]) -> str | None:
    """The user's ``/rename`` name, else the title Copilot generated (``summary``)."""
    for key in ("name", "summary"):
        title = first_line_title(fields.get(key) or "", 120)
        if title:
            return title
    return None


def side_titles(root: Root, sigs: MutableMapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The workspace.yaml titles (``/rename``, or generated) of the session folders under ``root``
    whose file changed since ``sigs`` last saw it: one stat per session folder a pass."""
    return folder_titles(_session_dirs(root.path), WORKSPACE_YAML, sigs,
                         lambda session_dir, _path: workspace_title(read_workspace(session_dir)))


def _session_dirs(path: str) -> Iterator[str]:
    """Session folders: those of a session-state folder, or of the one inside a Copilot home."""
    base = path if os.path.basename(path) == SESSION_STATE else os.path.join(path, SESSION_STATE)
    if os.path.basename(path) == HISTORY_STATE:
        return
    try:
        with os.scandir(base) as it:
            entries = [e.path for e in it if e.is_dir(follow_symlinks=True) and not e.name.startswith(".")]
    except OSError:
        return
    yield from sorted(entries)
