"""Agent stores aivault knows of but cannot read: encrypted at rest (docs/formats.md §36).

Windsurf's Cascade conversations and the Trae IDE's agent database hold real transcripts, encrypted
with keys nobody outside their vendors has. They are not agents aivault indexes (no wire name, no
spec); ``aivault doctor`` looks for them at their default places so that a user who runs one sees
"present, cannot be read, and why" instead of wondering why its sessions never show up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# A store's folder is counted, never read; a huge one stops counting here.
COUNT_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class EncryptedStore:
    label: str
    reason: str  # why aivault cannot read it
    places: Callable[[Mapping[str, str], Path], list[Path]]  # (environment, home) -> where it may be
    # What, in a place that is a folder, shows the store holds conversations (a file name test).
    shaped: Callable[[str], bool] = lambda name: True


def _windsurf(env: Mapping[str, str], home: Path) -> list[Path]:
    """``~/.codeium/windsurf/cascade`` (and the Windsurf Next channel's), the same on Linux and macOS."""
    return [home / ".codeium" / channel / "cascade" for channel in ("windsurf", "windsurf-next")]


def _trae(env: Mapping[str, str], home: Path) -> list[Path]:
    """``ModularData/ai-agent/database.db`` in each Trae edition's data folder: ``$XDG_CONFIG_HOME``
    (``~/.config``) on Linux, ``~/Library/Application Support`` on macOS."""
    config = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else home / ".config"
    mac = home / "Library" / "Application Support"
    editions = ("Trae", "Trae CN", "TRAE SOLO", "TRAE SOLO CN")
    return [base / e / "ModularData" / "ai-agent" / "database.db" for base in (config, mac) for e in editions]


STORES: tuple[EncryptedStore, ...] = (
    EncryptedStore("Windsurf Cascade", "encrypted protobuf (.pb) with no public key or schema", _windsurf,
                   lambda name: name.endswith(".pb")),
    EncryptedStore("Trae IDE", "SQLCipher-encrypted database; the key is not public", _trae),
)


def _count(folder: Path, shaped: Callable[[str], bool]) -> int:
    n = seen = 0
    try:
        with os.scandir(folder) as it:
            for entry in it:
                seen += 1
                if seen > COUNT_MAX_ENTRIES:
                    break
                n += shaped(entry.name)
    except OSError:
        return 0
    return n


def present(env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """Each encrypted store found on this machine: its label, path, how many files it holds, and why
    aivault leaves it out. A folder counts only when it holds files of the store's shape."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or str(Path.home()))
    found: list[dict[str, object]] = []
    for store in STORES:
        for place in store.places(env, home):
            if place.is_file():
                files = 1
            elif place.is_dir():
                files = _count(place, store.shaped)
            else:
                continue
            if files:
                found.append({"label": store.label, "path": str(place), "files": files, "reason": store.reason})
    return found
