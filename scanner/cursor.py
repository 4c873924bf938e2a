"""Cursor agent transcripts (cursor-agent CLI and the IDE agent, docs/formats.md §5).

The readable copy of a chat is ``<data>/projects/<slug>/agent-transcripts/``: ``<id>/<id>.jsonl``
(cursor-agent 2026.04.29 and later), ``<id>.jsonl`` or the plain-text ``<id>.txt`` directly in the
folder (older builds), and ``<id>/subagents/<child>.jsonl`` for the chats a subagent ran (sessions of
their own, whose parent is ``<id>``). Lines are ``{role, message:{content:[blocks]}}`` plus roleless
``{"type":"turn_ended"}`` bookkeeping, with no times and no ids: the chat store
(``<chats>/<md5>/<id>/``, scanner.cursor_store) gives the title, the folder and the times, and its
blobs are read for chats that have no transcript. The Cursor IDE's own ``state.vscdb`` is not read.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault.errors import ParserStateError, UnitChanged, UnitUnreadable
from aivault.scanner import cursor_store as store
from aivault.scanner.cursor_store import INDEX, ChatMeta, chat_meta
from aivault.scanner.cursor_text import blocks_text, parse_txt, tool_call_text, user_messages
from aivault.scanner.jsonutil import (
    LineParser,
    count_reason,
    first_line_title,
    loads_line,
    state_int,
    state_str,
    stats_from_state,
    stats_to_state,
)
from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.sources import (
    Found,
    Mode,
    Root,
    RootProblem,
    Unit,
    check_root,
    db_change_stamp,
    file_signature,
    signature,
    walk_changed,
    walk_files,
)
from aivault.scanner.spec import AgentSpec

STATE_VERSION = 1
TRANSCRIPTS = "agent-transcripts"
SUBAGENTS = "subagents"
PROJECTS = "projects"
CHATS = "chats"
NESTED_NAME = "transcript.jsonl"  # <id>/transcript.jsonl, seen beside <id>/<id>.jsonl (cli-continues)
BOOKKEEPING_TYPES = frozenset({"turn_ended"})
SUBAGENT_TITLE_PREFIX = "subagent: "
# Old .txt transcripts are read whole; they are not written any more, so a large one stays large.
TXT_MAX_BYTES = 64 << 20
PROJECT_FILE_MAX_BYTES = 64 << 10
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


def find_chat(chat_id: str, loc: Location) -> ChatMeta | None:
    """The chat folder's metadata of ``chat_id``, from every chats root discovery registered (and the
    one beside the transcript's projects folder)."""
    chat_dir = INDEX.find(chat_id)
    if chat_dir is None and loc.chats_guess and os.path.isdir(loc.chats_guess):
        INDEX.refresh(loc.chats_guess)
        chat_dir = INDEX.find(chat_id)
    return chat_meta(chat_dir) if chat_dir else None


_PROJECT_CWD: dict[str, tuple[tuple[int, ...], str | None]] = {}


def project_cwd(project_dir: str) -> str | None:
    """The workspace a project folder stands for: ``.workspace-trusted``'s workspacePath (written
    when the folder is trusted), else ``repo.json``'s workspace/rootPath/path."""
    files = [os.path.join(project_dir, n) for n in (".workspace-trusted", "repo.json")]
    stamp = tuple(x for f in files for x in _sig(f))
    cached = _PROJECT_CWD.get(project_dir)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    found: str | None = None
    for path, keys in zip(files, (("workspacePath",), ("workspace", "rootPath", "path")), strict=True):
        try:
            with open(path, "rb") as fh:
                obj = loads_line(fh.read(PROJECT_FILE_MAX_BYTES))
        except OSError:
            continue
        if type(obj) is dict:
            found = next((v for k in keys if isinstance(v := obj.get(k), str) and v.startswith("/")), None)
        if found:
            break
    _PROJECT_CWD[project_dir] = (stamp, found)
    return found


def _sig(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def slug_cwd(project_dir: str, chat_dir: str) -> str | None:
    """The project slug read back as a path, trusted only when its md5 names the chat's workspace
    folder (a slug is lossy: ``a-b`` and ``a/b`` look the same)."""
    slug = os.path.basename(project_dir)
    candidate = "/" + slug.replace("-", "/")
    digest = hashlib.md5(candidate.encode(), usedforsecurity=False).hexdigest()
    return candidate if digest == os.path.basename(os.path.dirname(chat_dir)) else None


def resume_command(chat_id: str, cwd: str | None) -> str:
    command = "cursor-agent --resume " + shlex.quote(chat_id)
    # The chat store is keyed by the workspace: cursor-agent resumes from that directory.
    return f"cd {shlex.quote(cwd)} && {command}" if cwd else command


class ChatContext:
    """What a transcript's session gets from outside its lines: the chat store and the file."""

    def __init__(self, path: str) -> None:
        loc = locate(path)
        self.chat_id = loc.chat_id
        self.parent_id = loc.parent_id
        own = find_chat(loc.chat_id, loc)
        parent = find_chat(loc.parent_id, loc) if loc.parent_id else None
        self.title = own.title if own else None
        cwd = (own.cwd if own else None) or (parent.cwd if parent else None)
        if cwd is None and loc.project_dir:
            cwd = project_cwd(loc.project_dir)
            known = own or parent
            if cwd is None and known is not None:
                cwd = slug_cwd(loc.project_dir, known.chat_dir)
        self.cwd = cwd
        self.created = own.created_ms if own else None
        self.updated = own.updated_ms if own else None
        try:
            self.mtime: int | None = os.stat(path).st_mtime_ns // 1_000_000
        except OSError:
            self.mtime = None
        # A subagent is resumed through its parent; a transcript whose chat folder is gone (or an
        # IDE chat, which has none) cannot be resumed by cursor-agent (agf #45).
        target, target_meta = (loc.parent_id, parent) if loc.parent_id else (loc.chat_id, own)
        self.resume = resume_command(target, cwd) if target and target_meta and target_meta.has_store else None

    def session(self, count: int, t0: int | None, t1: int | None, first_user: str | None) -> SessionInfo:
        title = self.title
        if title is None and first_user is not None:
            title = SUBAGENT_TITLE_PREFIX + first_user if self.parent_id else first_user
        started = min([t for t in (t0, self.created) if t is not None], default=self.mtime)
        updated = max([t for t in (t1, self.updated, self.mtime) if t is not None], default=None)
        if started is not None and updated is not None and started > updated:
            started = updated
        return SessionInfo(agent="cursor", session_id=self.chat_id, title=title, cwd=self.cwd, started_at=started,
                           updated_at=updated, message_count=count, resume_command=self.resume,
                           parent_session_id=self.parent_id)


class CursorParser(LineParser):
    """Turns the lines of one agent-transcripts JSONL into Messages (see scanner.model.Parser)."""

    agent = "cursor"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._ctx = ChatContext(path)  # once per read of the file: the store lookups are cached
        self.stats = ParseStats()
        self._started: int | None = None  # from <timestamp> tags only: lines carry no time
        self._updated: int | None = None
        self._count = 0
        self._first_user: str | None = None
        if state is not None:
            self._restore(state)

    def state(self) -> dict[str, Any]:
        """Everything needed to continue after the last fed line (msgpack-serializable, bounded)."""
        return {"v": STATE_VERSION, "t0": self._started, "t1": self._updated, "n": self._count,
                "first_user": self._first_user, "stats": stats_to_state(self.stats)}

    def _restore(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
            raise ParserStateError("not a cursor parser state of this version")
        self._started = state_int(state, "t0")
        self._updated = state_int(state, "t1")
        self._count = state_int(state, "n") or 0
        self._first_user = state_str(state, "first_user")
        self.stats = stats_from_state(state.get("stats"))

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        return self._ctx.session(self._count, self._started, self._updated, self._first_user)

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        role = obj.get("role")
        if role is None:
            rtype = obj.get("type")
            if not isinstance(rtype, str):
                return None
            if rtype not in BOOKKEEPING_TYPES:
                count_reason(self.stats, "unknown_record", rtype)
            return []
        message = obj.get("message")
        content = message.get("content") if type(message) is dict else obj.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(role, str) or not isinstance(content, list):
            return None
        if role not in ("user", "assistant", "system", "tool"):
            count_reason(self.stats, "unknown_role", role)
            return []
        out: list[Message] = []
        for block in content:
            if type(block) is dict:
                self._block(role, block, out)
        return out

    def _block(self, role: str, block: dict[str, Any], out: list[Message]) -> None:
        btype = block.get("type")
        if btype == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return
            if role == "user":
                messages, speech, ts = user_messages(text, None)
                out += messages
                if speech is not None and self._first_user is None:
                    self._first_user = first_line_title(speech)
                if ts is not None:
                    self._started = ts if self._started is None else min(self._started, ts)
                    self._updated = ts if self._updated is None else max(self._updated, ts)
            elif text.strip() and role == "tool":
                out.append(Message("tool", "tool_result", text, None))
            elif text.strip():
                out.append(Message("assistant" if role == "assistant" else "system", "text", text, None))
        elif btype == "thinking" or btype == "reasoning":
            text = block.get("thinking") if "thinking" in block else block.get("text")
            if isinstance(text, str) and text.strip():
                out.append(Message("assistant", "thinking", text, None))
        elif btype == "tool_use":
            out.append(Message("assistant", "tool_call", tool_call_text(block.get("name"), block.get("input")), None))
        elif btype == "tool_result":
            text = blocks_text(block.get("content"))
            if text.strip():
                out.append(Message("tool", "tool_result", text, None))
        elif btype not in ("image", "redacted_thinking"):
            count_reason(self.stats, "unknown_block", str(btype))


# --- units read whole: old .txt transcripts, and chats that only have a store -------------------------
def read_unit(found: Found) -> Unit:
    if found.locator:
        return _read_store(found)
    return _read_txt(found)


def _read_txt(found: Found) -> Unit:
    path = found.path
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            data = fh.read(TXT_MAX_BYTES + 1)
    except FileNotFoundError as exc:
        raise UnitChanged(f"{path} vanished") from exc
    except OSError as exc:
        raise UnitUnreadable(f"cannot read: {exc.strerror or exc}") from exc
    before = signature(st.st_size, st.st_mtime_ns, st.st_ino)  # what discovery saw (walk_files)
    if len(data) > TXT_MAX_BYTES:
        raise UnitUnreadable(f"larger than {TXT_MAX_BYTES} bytes")
    if file_signature(path) != before:
        raise UnitChanged(f"{path} changed while read")
    messages, first_user, t0, t1 = parse_txt(data.decode("utf-8", errors="replace"))
    first = first_line_title(first_user) if first_user else None
    return Unit(ChatContext(path).session(len(messages), t0, t1, first), messages, before)


def _read_store(found: Found) -> Unit:
    session, messages, sig, skips, _ = store.read_store_unit(found)
    session.resume_command = resume_command(session.session_id, session.cwd)
    return Unit(session, messages, sig, skips)


# --- where Cursor keeps its chats (docs/formats.md §5.1, §5.5) ----------------------------------------
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


def _discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
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
            mtime = _sig(folder)[1]
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
    return signature(db_change_stamp(db), _sig(os.path.join(chat_dir, store.META_JSON)))


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
        stamp = (_sig(os.path.join(chat_dir, store.META_JSON)), db_change_stamp(os.path.join(chat_dir, store.STORE_DB)))
        if sigs.get(chat_dir) == stamp:
            continue
        sigs[chat_dir] = stamp
        title = chat_meta(chat_dir).title
        if title:
            yield chat_id, title


SPEC = AgentSpec(
    name="cursor", label="Cursor", default_roots=default_roots, discover=_discover, line_parser=CursorParser,
    read_unit=read_unit, side_titles=side_titles,
    expects="projects/<slug>/agent-transcripts/<id>/<id>.jsonl (JSONL), or chats/<md5>/<id>/store.db",
    shaped=lambda name: name.endswith(".jsonl") or name == store.STORE_DB)
