"""Cursor agent transcripts (cursor-agent CLI and the IDE agent, docs/formats.md §5).

The readable copy of a chat is ``<data>/projects/<slug>/agent-transcripts/``: ``<id>/<id>.jsonl``
(cursor-agent 2026.04.29 and later), ``<id>.jsonl`` or the plain-text ``<id>.txt`` directly in the
folder (older builds), and ``<id>/subagents/<child>.jsonl`` for the chats a subagent ran (sessions of
their own, whose parent is ``<id>``). Lines are ``{role, message:{content:[blocks]}}`` plus roleless
``{"type":"turn_ended"}`` bookkeeping, with no times and no ids: the chat store
(``<chats>/<md5>/<id>/``, scanner.parsers.cursor.store) gives the title, the folder and the times, and its
blobs are read for chats that have no transcript. The Cursor IDE's own ``state.vscdb`` is not read.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, stored_as
from aivault.scanner.parsers.cursor import store
from aivault.scanner.parsers.cursor.discovery import Location, default_roots, discover, locate, side_titles
from aivault.scanner.parsers.cursor.store import INDEX, ChatMeta, chat_meta
from aivault.scanner.parsers.cursor.text import blocks_text, parse_txt, tool_call_text, user_messages
from aivault.scanner.parsers.jsonutil import loads_line
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Found, Unit, read_whole, size_mtime
from aivault.scanner.spec import AgentSpec

__all__ = ["SPEC", "CursorParser", "default_roots", "locate", "read_unit", "side_titles"]

BOOKKEEPING_TYPES = frozenset({"turn_ended"})
SUBAGENT_TITLE_PREFIX = "subagent: "
# Old .txt transcripts are read whole; they are not written any more, so a large one stays large.
TXT_MAX_BYTES = 64 << 20
PROJECT_FILE_MAX_BYTES = 64 << 10


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
    stamp = tuple(x for f in files for x in size_mtime(f))
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


@dataclass(slots=True)
class CursorState(ParserState):
    """What a Cursor parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = "cursor"

    started: int | None = stored_as("t0")  # from <timestamp> tags only: lines carry no time
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    first_user: str | None = stored_as("first_user")
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class CursorParser(LineParser[CursorState]):
    """Turns the lines of one agent-transcripts JSONL into Messages (see scanner.model.Parser)."""

    agent = "cursor"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._ctx = ChatContext(path)  # once per read of the file: the store lookups are cached
        self.st = CursorState.load(state)


    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        return self._ctx.session(self.st.count, self.st.started, self.st.updated, self.st.first_user)

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        role = obj.get("role")
        if role is None:
            rtype = obj.get("type")
            if not isinstance(rtype, str):
                return None
            if rtype not in BOOKKEEPING_TYPES:
                count_skip(self.stats.extra, "unknown_record", rtype)
            return []
        message = obj.get("message")
        content = message.get("content") if type(message) is dict else obj.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(role, str) or not isinstance(content, list):
            return None
        if role not in ("user", "assistant", "system", "tool"):
            count_skip(self.stats.extra, "unknown_role", role)
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
                if speech is not None and self.st.first_user is None:
                    self.st.first_user = first_line_title(speech)
                if ts is not None:
                    self.st.started = ts if self.st.started is None else min(self.st.started, ts)
                    self.st.updated = ts if self.st.updated is None else max(self.st.updated, ts)
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
            count_skip(self.stats.extra, "unknown_block", str(btype))


# --- units read whole: old .txt transcripts, and chats that only have a store -------------------------
def read_unit(found: Found) -> Unit:
    if found.locator:
        return _read_store(found)
    return _read_txt(found)


def _read_txt(found: Found) -> Unit:
    path = found.path
    data, before, _ = read_whole(path, TXT_MAX_BYTES, lambda size: f"larger than {TXT_MAX_BYTES} bytes")
    messages, first_user, t0, t1 = parse_txt(data.decode("utf-8", errors="replace"))
    first = first_line_title(first_user) if first_user else None
    return Unit(ChatContext(path).session(len(messages), t0, t1, first), messages, before)


def _read_store(found: Found) -> Unit:
    session, messages, sig, skips, _ = store.read_store_unit(found)
    session.resume_command = resume_command(session.session_id, session.cwd)
    return Unit(session, messages, sig, skips)


SPEC = AgentSpec(
    name="cursor", label="Cursor", default_roots=default_roots, discover=discover, line_parser=CursorParser,
    read_unit=read_unit, side_titles=side_titles,
    expects="projects/<slug>/agent-transcripts/<id>/<id>.jsonl (JSONL), or chats/<md5>/<id>/store.db",
    shaped=lambda name: name.endswith(".jsonl") or name == store.STORE_DB)
