"""Antigravity conversations: Google's ``agy`` CLI and the Antigravity IDE (docs/formats.md §16).

Both keep their data under ``~/.gemini/``: the CLI in ``antigravity-cli/`` (moved by
``ANTIGRAVITY_APP_DATA_DIR``), the IDE in ``antigravity/`` (some builds ``antigravity-ide/``). A
conversation is a UUID, and may be stored three ways; each conversation is indexed from the best
one it has:

* ``brain/<id>/.system_generated/logs/transcript.jsonl``: one JSON step per line, appended as the
  conversation goes: a ``lines`` unit read by :class:`AntigravityParser` (``transcript_full.jsonl``,
  the same records, when only it exists);
* ``conversations/<id>.db``: the same steps as protobuf rows in SQLite (scanner/parsers/antigravity/
  store.py), read whole by its change stamp when no transcript exists (IDE conversations, and
  CLI releases that stop writing the transcript);
* ``conversations/<id>.pb`` and ``implicit/<id>.pb``: the legacy store, encrypted with a key only
  Antigravity holds. Such a conversation (one with neither of the others) is a unit with no message
  and the skip ``encrypted-store``, so ``aivault doctor`` shows it as present and unreadable.

The folder, the branch and a sub-agent's parent are not in the transcript: they come from the
database and the files beside it (scanner/parsers/antigravity/side.py).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from aivault.errors import UnitChanged
from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.antigravity import side, store
from aivault.scanner.parsers.antigravity.side import BRAIN, TRANSCRIPTS, transcript_of
from aivault.scanner.parsers.antigravity.steps import USER_INPUT, Step, from_json, step_messages
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, stored_as
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Found, Root, RootProblem, Unit, check_root, listed, signature
from aivault.scanner.spec import AgentSpec

AGENT: Final = "antigravity"
ENV_APP_DATA: Final = "ANTIGRAVITY_APP_DATA_DIR"
CLI_DIR: Final = "antigravity-cli"
# The IDE's roots: its conversations are opened from the IDE, not by ``agy --conversation``.
IDE_DIRS: Final = ("antigravity", "antigravity-ide")
CONVERSATIONS: Final = "conversations"
IMPLICIT: Final = "implicit"
RESUME: Final = "agy --conversation"
# A database without a transcript that changed this recently may belong to a CLI conversation whose
# transcript appears after its first reply: it is read once it has been left alone this long (the
# transcript, if one comes, is then the conversation's unit and the database is never indexed).
DB_SETTLE_S: Final = 30
# A sub-agent is linked to its parent when the parent's INVOKE_SUBAGENT step is found; a conversation
# younger than this is looked up again on its next change (the parent writes that step a moment
# after it created the sub-agent), an older one once.
LINEAGE_RETRY_MS: Final = 10 * 60_000
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


# --- where a unit sits ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Where:
    root: str  # the agent's data folder (~/.gemini/antigravity-cli, ...)
    conversation_id: str

    @classmethod
    def of_transcript(cls, path: str) -> Where:
        """``<root>/brain/<id>/.system_generated/logs/<transcript>``."""
        conversation_dir = os.path.dirname(os.path.dirname(os.path.dirname(path)))
        return cls(os.path.dirname(os.path.dirname(conversation_dir)), os.path.basename(conversation_dir))

    @classmethod
    def of_store(cls, path: str) -> Where:
        """``<root>/conversations/<id>.db`` (or ``.pb``, or ``implicit/<id>.pb``)."""
        return cls(os.path.dirname(os.path.dirname(path)), os.path.splitext(os.path.basename(path))[0])

    @property
    def resumable(self) -> bool:
        return os.path.basename(self.root) not in IDE_DIRS


def resume_command(where: Where, session_id: str, cwd: str | None) -> str | None:
    """``cd <cwd> && agy --conversation <id>`` for the CLI's conversations; None for the IDE's."""
    if not where.resumable:
        return None
    command = f"{RESUME} {shlex.quote(session_id)}"
    return f"cd {shlex.quote(cwd)} && {command}" if cwd else command


def place(where: Where, recorded: tuple[str | None, str | None] | None = None) -> tuple[str | None, str | None]:
    """(folder, branch): the conversation database's workspace (``recorded`` when it was just read),
    else the folder the root's side files name."""
    if recorded is None:
        recorded = store.workspace(os.path.join(where.root, CONVERSATIONS, where.conversation_id + ".db"))
    cwd, branch = recorded
    return cwd or side.workspace(where.root, where.conversation_id), branch


def _first_user(out: list[Message]) -> str | None:
    return next((first_line_title(m.text) for m in out if m.role == "user" and m.kind == "text"), None)


# --- transcript.jsonl --------------------------------------------------------------------------------
@dataclass(slots=True)
class AntigravityState(ParserState):
    """What a transcript's parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = AGENT

    title: str | None = stored_as("title")  # the latest checkpoint's objective
    first_user: str | None = stored_as("first_user")
    # Last known from the files beside the transcript: kept when a later read finds them gone.
    cwd: str | None = stored_as("cwd")
    branch: str | None = stored_as("branch")
    parent: str | None = stored_as("parent")
    lineage: bool = stored_as("lineage", False)  # looked for a parent for the last time
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class AntigravityParser(LineParser[AntigravityState]):
    """``transcript.jsonl``: one step per line, appended (lines are not strictly in step order: they
    are indexed in file order); the conversation id is the ``brain/<id>`` folder."""

    agent = AGENT
    fallback_time_key = "created_at"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.where = Where.of_transcript(path)
        self.st = AntigravityState.load(state)
        self._placed = False  # the side files were read by this parser (once per read of the file)
        self._lineage_tried = False

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        step = from_json(obj)
        if step is None:
            return None
        out = step_messages(step, ms, self.stats.extra)
        if step.objective:
            self.st.title = step.objective
        if self.st.first_user is None and step.type == USER_INPUT:
            self.st.first_user = _first_user(out)
        return out

    def _look_around(self) -> None:
        """Folder and branch from the database and side files; the parent once the first step's time
        is known (a read asks for the session before its first line)."""
        st = self.st
        if not self._placed:
            self._placed = True
            cwd, branch = place(self.where)
            st.cwd, st.branch = cwd or st.cwd, branch or st.branch
        if self._lineage_tried or st.lineage or st.parent is not None or st.started is None:
            return
        self._lineage_tried = True
        found = side.parent(self.where.root, self.where.conversation_id, st.started)
        if found is not None:
            st.parent, st.cwd = found[0], st.cwd or found[1]
        if found is not None or _age_ms(st.started) > LINEAGE_RETRY_MS:
            st.lineage = True

    @property
    def session(self) -> SessionInfo:
        self._look_around()
        st = self.st
        sid = self.where.conversation_id
        return self._session(sid, st.title or st.first_user, st.cwd, st.branch,
                             resume_command(self.where, sid, st.cwd), st.parent)


def _age_ms(started: int | None) -> int:
    return 0 if started is None else time.time_ns() // 1_000_000 - started


# --- conversations/<id>.db and the legacy .pb -------------------------------------------------------
def read_unit(found: Found) -> Unit:
    """A conversation without a transcript: its database read whole, or its encrypted legacy file."""
    if found.path.endswith(".pb"):
        return _encrypted(found)
    return _database(found.path)


def _newest_mtime_ns(db: str) -> int:
    newest = 0
    for path in (db, db + "-wal"):
        try:
            newest = max(newest, os.stat(path).st_mtime_ns)
        except OSError:
            continue
    return newest


def _database(db: str) -> Unit:
    stamp = store.change_stamp(db)
    if time.time_ns() - _newest_mtime_ns(db) < DB_SETTLE_S * 1_000_000_000:
        raise UnitChanged("a conversation being written: read once its transcript appears or it settles")
    conv = store.read_conversation(db)
    if store.change_stamp(db) != stamp:
        raise UnitChanged(f"{os.path.basename(db)} changed while it was read")
    where = Where.of_store(db)
    sid = conv.cascade_id or where.conversation_id
    skips: dict[str, int] = {}
    if conv.unfinished:
        count_skip(skips, "unfinished-step", n=conv.unfinished)
    messages: list[Message] = []
    title: str | None = None
    first_user: str | None = None
    times = [t for t in (conv.created,) if t is not None]
    for step, ts in conv.steps:
        out = _step(step, ts, skips)
        if step.objective:
            title = step.objective
        if first_user is None and step.type == USER_INPUT:
            first_user = _first_user(out)
        if ts is not None:
            times.append(ts)
        messages += out
    started = min(times, default=None)
    cwd, branch = place(Where(where.root, sid), (conv.cwd, conv.branch))
    spawned = side.parent(where.root, sid, started)
    if spawned is not None:
        cwd = cwd or spawned[1]
    info = SessionInfo(agent=AGENT, session_id=sid, title=title or first_user, cwd=cwd, branch=branch,
                       started_at=started, updated_at=max(times, default=None), message_count=len(messages),
                       resume_command=resume_command(where, sid, cwd),
                       parent_session_id=spawned[0] if spawned is not None else None)
    return Unit(info, messages, stamp, skips)


def _step(step: Step, ts: int | None, skips: dict[str, int]) -> list[Message]:
    """A database step's messages; one that gives none and was not counted is bookkeeping (a
    transcript's parser counts those as skipped records)."""
    before = sum(skips.values())
    out = step_messages(step, ts, skips)
    if not out and sum(skips.values()) == before:
        count_skip(skips, "bookkeeping", step.type)
    return out


def _encrypted(found: Found) -> Unit:
    """A legacy ``.pb``: AES-GCM encrypted with a key Antigravity does not publish. Indexed as an
    empty session, so it is counted as present and unreadable rather than missing."""
    try:
        st = os.stat(found.path)
    except FileNotFoundError as exc:
        raise UnitChanged(f"{found.path} disappeared") from exc
    where = Where.of_store(found.path)
    implicit = os.path.basename(os.path.dirname(found.path)) == IMPLICIT
    sid = f"implicit-{where.conversation_id}" if implicit else where.conversation_id
    mtime_ms = st.st_mtime_ns // 1_000_000
    info = SessionInfo(agent=AGENT, session_id=sid, started_at=mtime_ms, updated_at=mtime_ms,
                       resume_command=None if implicit else resume_command(where, sid, None))
    return Unit(info, [], signature(st.st_size, st.st_mtime_ns, st.st_ino), {"encrypted-store": 1})


# --- discovery and roots -------------------------------------------------------------------------------
def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """Per conversation its best store: the transcript, else the database, else the legacy file.

    Every pass lists the three folders (a stat per conversation): a database changes in place, and a
    transcript appears inside a conversation folder that already existed.
    """
    if check_root(root, problems) is None:
        return
    with_transcript: set[str] = set()
    for entry in listed(root, os.path.join(root.path, BRAIN), problems):
        try:
            path = transcript_of(entry.path) if entry.is_dir() else None
            st = os.stat(path) if path is not None else None
        except OSError:
            continue
        if path is not None and st is not None:
            with_transcript.add(entry.name)
            yield Found(path, root.agent, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, "lines")
    with_db: set[str] = set()
    legacy: list[os.DirEntry[str]] = []
    for entry in listed(root, os.path.join(root.path, CONVERSATIONS), problems):
        stem, ext = os.path.splitext(entry.name)
        if ext == ".pb":
            legacy.append(entry)
        if ext != ".db" or not _is_file(entry):
            continue
        with_db.add(stem)
        if stem not in with_transcript:
            st = entry.stat()
            yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size, store.change_stamp(entry.path),
                        "whole")
    legacy += [e for e in listed(root, os.path.join(root.path, IMPLICIT), problems) if e.name.endswith(".pb")]
    for entry in legacy:
        stem = os.path.splitext(entry.name)[0]
        superseded = stem in with_transcript or (stem in with_db and os.path.basename(os.path.dirname(entry.path))
                                                 == CONVERSATIONS)
        if superseded or not _is_file(entry):
            continue
        st = entry.stat()
        yield Found(entry.path, root.agent, st.st_dev, st.st_ino, st.st_size,
                    signature(st.st_size, st.st_mtime_ns, st.st_ino), "whole")


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """The CLI's ``~/.gemini/antigravity-cli`` (``ANTIGRAVITY_APP_DATA_DIR`` replaces it), the IDE's
    ``~/.gemini/antigravity`` and ``~/.gemini/antigravity-ide``; the same on Linux and macOS."""
    gemini = home / ".gemini"
    override = env.get(ENV_APP_DATA)
    cli = Path(override).expanduser().absolute() if override else gemini / CLI_DIR
    paths = [cli, *(gemini / name for name in IDE_DIRS)]
    return [Root(AGENT, str(p)) for p in dict.fromkeys(paths)]


def shaped(name: str) -> bool:
    """A transcript, or a conversation database (a UUID-named ``.db``)."""
    return name in TRANSCRIPTS or (name.endswith(".db") and _UUID.match(name[:-3]) is not None)


SPEC = AgentSpec(
    name=AGENT, label="Antigravity", default_roots=default_roots, discover=discover,
    line_parser=AntigravityParser, read_unit=read_unit,
    expects="brain/<id>/.system_generated/logs/transcript.jsonl or conversations/<id>.db",
    shaped=shaped)
