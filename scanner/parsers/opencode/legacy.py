"""OpenCode's legacy JSON tree (before 1.2), one ``whole`` unit per session (docs/formats.md §4).

``<data>/storage/session/<projectID>/<sessionID>.json`` is the session; its messages are
``storage/message/<sessionID>/*.json`` and each message's parts ``storage/part/<messageID>/*.json``
(the oldest layout kept them under ``storage/session/message/…`` and ``storage/session/part/<sessionID>/…``,
also read). A session's signature is the size and mtime of all those files; a read takes it before
and after and refuses a tree that changed in between (``UnitChanged``). The 1.2 migration leaves the
tree in place, so a session the database holds is not indexed again from here (Maestro #387).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms
from aivault.scanner.parsers.opencode.parts import Conversation, SessionRecord, add_message, build_unit
from aivault.scanner.sources import Found, Root, RootProblem, Unit, signature, size_mtime

STORAGE: Final = "storage"
SESSION_PREFIX: Final = "ses_"  # session ids and so session file names
# Session, message and part documents are small; anything larger is not what OpenCode writes.
DOCUMENT_MAX_BYTES: Final = 64 * 1024 * 1024
# A document that does not parse is being written if it changed this recently (scanner/scan.py
# gives an unterminated line the same time).
TAIL_SETTLE_S: Final = 30
# A recent pass looks only at sessions whose file or message folder changed within this window (the
# scanner's recent window); a full pass checks every file of every session.
RECENT_WINDOW_S: Final = 48 * 3600


@dataclass(frozen=True, slots=True)
class _Tree:
    """A session's files: its messages in file order, each with its part files."""

    messages: tuple[tuple[str, tuple[str, ...]], ...]
    signature: int


def _json_files(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as it:
            return sorted(e.path for e in it if e.name.endswith(".json") and e.is_file())
    except OSError:
        return []


def _load(path: str) -> object | None:
    """A document's JSON value, or None when it cannot be read or parsed."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(DOCUMENT_MAX_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > DOCUMENT_MAX_BYTES else loads_line(data)


def _message_dirs(storage: str, session_id: str) -> list[str]:
    return [os.path.join(storage, "message", session_id), os.path.join(storage, "session", "message", session_id)]


def _existing_part_dir(storage: str, session_id: str, message_id: str) -> str | None:
    for folder in (os.path.join(storage, "part", message_id),
                   os.path.join(storage, "session", "part", session_id, message_id)):
        if os.path.isdir(folder):
            return folder
    return None


def _part_dir(storage: str, session_id: str, message_file: str) -> str:
    """The part folder of a message: named by the message id, which is the file's stem in what
    OpenCode writes (the document's ``id`` is read only when no folder has the stem's name)."""
    stem = os.path.basename(message_file)[: -len(".json")]
    folder = _existing_part_dir(storage, session_id, stem)
    if folder is not None:
        return folder
    doc = _load(message_file)
    mid = doc.get("id") if isinstance(doc, dict) else None
    if isinstance(mid, str) and mid and mid != stem:
        folder = _existing_part_dir(storage, session_id, mid)
        if folder is not None:
            return folder
    return os.path.join(storage, "part", stem)


def _tree(storage: str, session_file: str, session_id: str) -> _Tree:
    messages: list[tuple[str, tuple[str, ...]]] = []
    stats: list[object] = [size_mtime(session_file)]
    for folder in _message_dirs(storage, session_id):
        for mf in _json_files(folder):
            parts = tuple(_json_files(_part_dir(storage, session_id, mf)))
            messages.append((mf, parts))
            stats.append((mf, size_mtime(mf)))
            stats.extend((pf, size_mtime(pf)) for pf in parts)
    return _Tree(tuple(messages), signature(*stats))


def _session_id(session_file: str, doc: object) -> str:
    sid = doc.get("id") if isinstance(doc, dict) else None
    return sid if isinstance(sid, str) and sid else os.path.basename(session_file)[: -len(".json")]


def _recent(path: str, horizon_ns: int) -> bool:
    try:
        return os.stat(path).st_mtime_ns >= horizon_ns
    except OSError:
        return False


def discover(root: Root, problems: list[RootProblem], full: bool, skip: frozenset[str] | set[str]) -> Iterator[Found]:
    """The legacy sessions under ``root`` that no database holds (all in a full pass; in a recent
    pass only those touched within RECENT_WINDOW_S)."""
    storage = os.path.join(root.path, STORAGE)
    sessions = os.path.join(storage, "session")
    try:
        with os.scandir(sessions) as it:
            projects = sorted(e.path for e in it if e.is_dir() and e.name not in ("message", "part"))
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {sessions}: {exc.strerror or exc}"))
        return
    horizon = time.time_ns() - RECENT_WINDOW_S * 1_000_000_000
    for project in projects:
        for session_file in _json_files(project):
            stem = os.path.basename(session_file)[: -len(".json")]
            # A recent pass opens only sessions touched lately (the stem is the id in what OpenCode writes).
            if not full and not (_recent(session_file, horizon)
                                 or any(_recent(d, horizon) for d in _message_dirs(storage, stem))):
                continue
            sid = _session_id(session_file, _load(session_file))
            if sid in skip:
                continue
            try:
                st = os.stat(session_file)
            except OSError:
                continue
            tree = _tree(storage, session_file, sid)
            size = sum(1 + len(parts) for _, parts in tree.messages)
            yield Found(session_file, root.agent, st.st_dev, st.st_ino, size, tree.signature, "whole", (session_file,))


def _document(path: str, skips: dict[str, int], recent_ns: int) -> object | None:
    """A message or part document; one that does not parse is being written (UnitChanged) if it
    changed recently, else counted malformed and left out."""
    doc = _load(path)
    if isinstance(doc, dict):
        return doc
    if _recent(path, recent_ns):
        raise UnitChanged(f"{path} is still being written")
    count_skip(skips, "malformed-record")
    return None


def read(found: Found) -> Unit:
    """One legacy session: its documents read between two identical signatures."""
    session_file = found.locator[0]
    storage = os.path.dirname(os.path.dirname(os.path.dirname(session_file)))
    doc = _load(session_file)
    settle = time.time_ns() - TAIL_SETTLE_S * 1_000_000_000
    if not isinstance(doc, dict):
        if not os.path.exists(session_file):
            raise UnitChanged(f"{session_file} disappeared")
        if _recent(session_file, settle):
            raise UnitChanged(f"{session_file} is still being written")
        raise UnitUnreadable("not an OpenCode session document (a JSON object)")
    sid = _session_id(session_file, doc)
    before = _tree(storage, session_file, sid)
    conv = Conversation()
    loaded: list[tuple[object, int | None, list[object]]] = []
    for mf, part_files in before.messages:
        info = _document(mf, conv.skips, settle)
        if info is None:
            continue
        parts = [p for p in (_document(pf, conv.skips, settle) for pf in part_files) if p is not None]
        parts.sort(key=lambda p: str(p.get("id", "")) if isinstance(p, dict) else "")
        times = info.get("time") if isinstance(info, dict) else None
        created = to_epoch_ms(times.get("created")) if isinstance(times, dict) else None
        loaded.append((info, created, parts))
    if _tree(storage, session_file, sid).signature != before.signature or _load(session_file) != doc:
        raise UnitChanged(f"{session_file}: the session changed while it was read")
    # Messages in time order (their ids are time-sortable too), parts in id order.
    loaded.sort(key=lambda m: (m[1] if m[1] is not None else 0,
                               str(m[0].get("id", "")) if isinstance(m[0], dict) else ""))
    for info, created, parts in loaded:
        add_message(conv, info, parts, created)
    times = doc.get("time")
    times = times if isinstance(times, dict) else {}
    rec = SessionRecord(session_id=sid, title=doc.get("title") if isinstance(doc.get("title"), str) else None,
                        directory=doc.get("directory") if isinstance(doc.get("directory"), str) else None,
                        parent_id=doc.get("parentID") if isinstance(doc.get("parentID"), str) else None,
                        created=to_epoch_ms(times.get("created")), updated=to_epoch_ms(times.get("updated")))
    return build_unit(rec, conv, before.signature)
