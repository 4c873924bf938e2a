"""Oh My Pi (``omp``) sessions (docs/formats.md §17): pi's tree format in Oh My Pi's own folders.

Oh My Pi keeps ``~/.omp/agent/sessions/<cwd>/<timestamp>_<id>.jsonl`` (``PI_CONFIG_DIR`` renames
``.omp``), named profiles under ``~/.omp/profiles/<profile>/agent/sessions/``, and, once its data was
migrated to XDG folders, ``$XDG_DATA_HOME/omp/sessions/`` and ``…/omp/profiles/<profile>/sessions/``.
A sub-agent's transcript is ``<parent file stem>/<agent>.jsonl`` beside the parent's file (nested to
any depth): a session of its own linked to its parent, with no resume command (Oh My Pi cannot resume
one). Oh My Pi adds a rewritable title slot before the header, a ``title`` in the header and
``title_change`` entries; pitree reads all of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from aivault.scanner.parsers.pitree import SUFFIX, file_unit, header_id, read_header, stem_id, tree_discovery
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from aivault.scanner.spec import AgentSpec

AGENT: Final = "omp"
RESUME: Final = "omp --resume"
PROFILES: Final = "profiles"
_files = tree_discovery()


def _parent_file(path: str) -> str | None:
    """The file a sub-agent's transcript hangs under: ``<dir>.jsonl`` beside its folder, when it exists."""
    candidate = os.path.dirname(path) + SUFFIX
    return candidate if os.path.isfile(candidate) else None


def read_unit(found: Found) -> Unit:
    """One Oh My Pi session file, read whole; a sub-agent's is linked to its parent and not resumable."""
    parent_file = _parent_file(found.path)
    if parent_file is not None:
        return file_unit(found, AGENT, None, parent=header_id(parent_file) or stem_id(parent_file))
    return file_unit(found, AGENT, RESUME)


def _predecessor(path: str) -> str | None:
    """A session Oh My Pi moved (to another folder or project) names where it was in its header's
    ``previousSessionFiles``; the newest of those is the file whose rows it replaces."""
    found = read_header(path)
    earlier = found.get("previousSessionFiles") if found is not None else None
    if isinstance(earlier, list) and earlier and isinstance(earlier[-1], str) and earlier[-1] != path:
        return earlier[-1]
    return None


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """The session files under ``root``; a ``profiles`` root holds one sessions folder per profile
    (``<profile>/agent/sessions``, or ``<profile>/sessions`` under XDG), listed again each pass."""
    if os.path.basename(root.path) != PROFILES:
        yield from _files(root, problems, dirs, full)
        return
    try:
        with os.scandir(root.path) as it:
            profiles = sorted(e.path for e in it if e.is_dir())
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list root: {exc.strerror or exc}"))
        return
    for profile in profiles:
        for sessions in (os.path.join(profile, "agent", "sessions"), os.path.join(profile, "sessions")):
            yield from _files(Root(root.agent, sessions), problems, dirs, full)


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``~/.omp/agent/sessions`` and ``~/.omp/profiles`` (``PI_CONFIG_DIR`` names the folder under the
    home instead of ``.omp``), and ``$XDG_DATA_HOME/omp/sessions`` and ``…/omp/profiles`` when
    ``XDG_DATA_HOME`` is set (Oh My Pi moves there after ``omp config migrate``), on Linux and macOS."""
    name = (env.get("PI_CONFIG_DIR") or ".omp").lstrip("/\\") or ".omp"
    config = home / name
    paths = [config / "agent" / "sessions", config / PROFILES]
    xdg = env.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):
        paths += [Path(xdg) / "omp" / "sessions", Path(xdg) / "omp" / PROFILES]
    return [Root(AGENT, str(p)) for p in dict.fromkeys(paths)]


SPEC = AgentSpec(
    name=AGENT, label="Oh My Pi", default_roots=default_roots, discover=discover, read_unit=read_unit,
    predecessor=_predecessor,
    expects="<cwd>/<timestamp>_<session id>.jsonl (pi's JSONL tree; sub-agents <parent stem>/<agent>.jsonl)",
    shaped=lambda name: name.endswith(SUFFIX))
