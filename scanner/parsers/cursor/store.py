"""cursor-agent's chat store (docs/formats.md §5.3): ``<chats>/<md5(workspace)>/<chatId>/``.

Each chat folder holds ``store.db`` (SQLite: ``meta`` key "0" is JSON, often hex-encoded, with
``agentId, name, createdAt, workspacePath?``; ``blobs`` holds the messages as JSON blobs beside the
protobuf turn graph) and ``meta.json`` (``title, createdAtMs, updatedAtMs, cwd?``). The transcript
JSONL under ``projects/`` is the readable copy of a chat; this store gives it a title, a folder and
times, and is read for the messages only when a chat has no transcript.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.cursor.text import blocks_text, tool_call_text, user_messages
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from aivault.scanner.sources import Found, db_change_stamp, open_sqlite, signature, size_mtime

STORE_DB = "store.db"
META_JSON = "meta.json"
# Most chats keep the name a new one gets (cc-connect #1232): it says nothing about the chat.
DEFAULT_CHAT_NAME = "New Agent"
META_JSON_MAX_BYTES = 1 << 20
# A JSON message blob beyond this is a pasted image or file, not text worth indexing whole.
BLOB_MAX_BYTES = 16 << 20
# A chat store read whole stays in memory for the pass: refuse a runaway one instead.
STORE_MAX_BYTES = 512 << 20

SQL_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('blobs', 'meta')"
SQL_META = "SELECT value FROM meta WHERE key = '0'"
SQL_BLOB_EXTENT = "SELECT count(*), coalesce(max(rowid), 0) FROM blobs"
SQL_BLOBS = "SELECT rowid, data FROM blobs ORDER BY rowid"


@dataclass(frozen=True, slots=True)
class ChatMeta:
    """What a chat folder says about its chat (all optional: either file may be missing)."""

    chat_id: str
    chat_dir: str
    title: str | None  # meta.json title, else the store's name unless it is the default one
    cwd: str | None
    created_ms: int | None
    updated_ms: int | None
    has_store: bool  # store.db exists: cursor-agent can resume the chat (agf #45)
    has_conversation: bool | None  # meta.json's flag; False for a chat opened and left empty


def decode_meta_value(value: object) -> dict[str, Any] | None:
    """The JSON of ``meta`` key "0": stored as text or bytes, plain or hex-encoded."""
    if isinstance(value, memoryview):
        value = value.tobytes()
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[:1] != "{":
        try:
            text = bytes.fromhex(text).decode("utf-8", errors="replace")
        except ValueError:
            return None
    obj = loads_line(text.encode())
    return obj if type(obj) is dict else None


def read_meta_json(chat_dir: str) -> dict[str, Any]:
    try:
        with open(os.path.join(chat_dir, META_JSON), "rb") as fh:
            obj = loads_line(fh.read(META_JSON_MAX_BYTES))
    except OSError:
        return {}
    return obj if type(obj) is dict else {}


def _clean(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _abs(value: object) -> str | None:
    return value if isinstance(value, str) and (value.startswith("/") or value[1:3] in (":\\", ":/")) else None


def meta_from(chat_dir: str, meta_json: dict[str, Any], store: dict[str, Any] | None) -> ChatMeta:
    """Join meta.json and the store's meta row: title meta.json.title → meta.name (not "New Agent")."""
    store = store or {}
    name = _clean(store.get("name"))
    title = _clean(meta_json.get("title")) or (name if name != DEFAULT_CHAT_NAME else None)
    cwd = _abs(store.get("workspacePath")) or _abs(meta_json.get("cwd"))
    created = [t for t in (to_epoch_ms(meta_json.get("createdAtMs")), to_epoch_ms(store.get("createdAt")))
               if t is not None]
    has_conversation = meta_json.get("hasConversation")
    return ChatMeta(
        chat_id=os.path.basename(chat_dir), chat_dir=chat_dir, title=title, cwd=cwd,
        created_ms=min(created) if created else None, updated_ms=to_epoch_ms(meta_json.get("updatedAtMs")),
        has_store=os.path.exists(os.path.join(chat_dir, STORE_DB)),
        has_conversation=has_conversation if isinstance(has_conversation, bool) else None)


def read_store_meta(db_path: str) -> dict[str, Any] | None:
    """The store's meta row (read-only, WAL tolerated); None when it cannot be read now."""
    try:
        with closing(open_sqlite(db_path)) as con:
            row = con.execute(SQL_META).fetchone()
    except sqlite3.Error:
        return None
    return decode_meta_value(row[0]) if row else None


_META_CACHE: dict[str, tuple[tuple[object, ...], ChatMeta]] = {}


def chat_meta(chat_dir: str) -> ChatMeta:
    """A chat folder's metadata, read again only when meta.json or store.db (with its WAL) changed."""
    db = os.path.join(chat_dir, STORE_DB)
    stamp = (size_mtime(os.path.join(chat_dir, META_JSON)), db_change_stamp(db))
    cached = _META_CACHE.get(chat_dir)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    meta = meta_from(chat_dir, read_meta_json(chat_dir), read_store_meta(db) if os.path.exists(db) else None)
    _META_CACHE[chat_dir] = (stamp, meta)
    return meta


class ChatIndex:
    """chat id → chat folder over every chats root registered; each folder is listed again only when
    its mtime changed, so a pass costs one stat per workspace folder."""

    def __init__(self) -> None:
        self._roots: dict[str, tuple[int, dict[str, tuple[int, tuple[str, ...]]]]] = {}
        self._by_id: dict[str, str] = {}

    def add(self, chats_dir: str) -> None:
        if chats_dir not in self._roots:
            self._roots[chats_dir] = (-1, {})

    def refresh(self, chats_dir: str) -> None:
        """List ``chats_dir`` again where it changed (registering it if new)."""
        self.add(chats_dir)
        mtime, folders = self._roots[chats_dir]
        now = size_mtime(chats_dir)[1]
        if now != mtime:
            names = _subdirs(chats_dir)
            folders = {p: folders.get(p, (-1, ())) for p in (os.path.join(chats_dir, n) for n in names)}
        changed = False
        for folder, (seen, _) in list(folders.items()):
            current = size_mtime(folder)[1]
            if current != seen:
                folders[folder] = (current, tuple(_subdirs(folder)))
                changed = True
        if changed or now != mtime:
            self._roots[chats_dir] = (now, folders)
            self._rebuild()

    def refresh_all(self) -> None:
        for chats_dir in list(self._roots):
            self.refresh(chats_dir)

    def _rebuild(self) -> None:
        by_id: dict[str, str] = {}
        for _, folders in self._roots.values():
            for folder, (_, ids) in folders.items():
                for chat_id in ids:
                    by_id.setdefault(chat_id, os.path.join(folder, chat_id))
        self._by_id = by_id

    def chats(self, chats_dir: str) -> Iterator[tuple[str, str]]:
        """(chat id, chat folder) of one chats root, as last listed."""
        for folder, (_, ids) in sorted(self._roots.get(chats_dir, (0, {}))[1].items()):
            for chat_id in ids:
                yield chat_id, os.path.join(folder, chat_id)

    def find(self, chat_id: str) -> str | None:
        return self._by_id.get(chat_id)


def _subdirs(path: str) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=True))
    except OSError:
        return []


INDEX = ChatIndex()  # one per scanner process: every pass refreshes it during discovery


# --- a chat without a transcript: its messages from the JSON blobs ----------------------------------
def store_signature(db_path: str) -> int | None:
    """A signature of the store's content (blob count, last rowid, meta row); None if unreadable now."""
    try:
        with closing(open_sqlite(db_path)) as con:
            con.execute("BEGIN")
            extent = con.execute(SQL_BLOB_EXTENT).fetchone()
            meta = con.execute(SQL_META).fetchone()
            con.rollback()
    except sqlite3.Error:
        return None
    return signature(tuple(extent), meta[0] if meta else None)


def unit_signature(store_sig: int, chat_dir: str) -> int:
    """What discovery and the reader both compute for a store-only chat (meta.json holds its title)."""
    return signature(store_sig, size_mtime(os.path.join(chat_dir, META_JSON)))


def read_store_unit(found: Found) -> tuple[SessionInfo, list[Message], int, dict[str, int], ChatMeta]:
    """A store-only chat: its JSON blobs in rowid order (the protobuf turn graph is skipped).

    Blobs are content-addressed, so a message repeated word for word is stored, and read, once;
    and with the turn graph undecoded, an edited or rewound branch is read too.
    """
    db_path, chat_id = found.locator
    chat_dir = os.path.dirname(db_path)
    skips: dict[str, int] = {}
    messages: list[Message] = []
    try:
        with closing(open_sqlite(db_path)) as con:
            tables = {r[0] for r in con.execute(SQL_TABLES)}
            if "blobs" not in tables:
                raise UnitUnreadable("store.db has no blobs table")
            con.execute("BEGIN")  # one read transaction: what is read is one consistent state
            extent = con.execute(SQL_BLOB_EXTENT).fetchone()
            meta_row = con.execute(SQL_META).fetchone() if "meta" in tables else None
            total = 0
            for _, data in con.execute(SQL_BLOBS):
                size = len(data) if isinstance(data, bytes | str | memoryview) else 0
                total += size
                if total > STORE_MAX_BYTES:
                    raise UnitUnreadable(f"store.db blobs exceed {STORE_MAX_BYTES} bytes")
                _blob(data, size, messages, skips)
            con.rollback()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise UnitChanged(f"{db_path} is busy") from exc
        raise UnitUnreadable(f"cannot read store.db: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise UnitUnreadable(f"cannot read store.db: {exc}") from exc
    sig = unit_signature(signature(tuple(extent), meta_row[0] if meta_row else None), chat_dir)
    meta = meta_from(chat_dir, read_meta_json(chat_dir), decode_meta_value(meta_row[0]) if meta_row else None)
    times = [m.ts for m in messages if m.ts is not None]
    first_user = next((m.text for m in messages if m.role == "user"), None)
    try:
        db_mtime: int | None = os.stat(db_path).st_mtime_ns // 1_000_000
    except OSError:
        db_mtime = None
    started = min([t for t in (meta.created_ms, *times) if t is not None], default=db_mtime)
    updated = max([t for t in (meta.updated_ms, *times) if t is not None], default=db_mtime)
    session = SessionInfo(
        agent="cursor", session_id=chat_id, title=meta.title or (first_line_title(first_user) if first_user else None),
        cwd=meta.cwd, started_at=started, updated_at=updated, message_count=len(messages))
    return session, messages, sig, skips, meta


def _blob(data: object, size: int, out: list[Message], skips: dict[str, int]) -> None:
    raw = data.tobytes() if isinstance(data, memoryview) else data
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if not isinstance(raw, bytes) or raw.lstrip()[:1] != b"{":
        count_skip(skips, "turn_graph_blob")  # the protobuf tree that orders the turns
        return
    if size > BLOB_MAX_BYTES:
        count_skip(skips, "oversized_blob")
        return
    obj = loads_line(raw)
    if type(obj) is not dict or not isinstance(obj.get("role"), str):
        count_skip(skips, "malformed-record")
        return
    blob_messages(obj, out, skips)


def blob_messages(obj: dict[str, Any], out: list[Message], skips: dict[str, int]) -> None:
    """The messages of one JSON blob (an AI SDK message: ``{role, content: str | blocks}``)."""
    role = obj["role"]
    ms = to_epoch_ms(obj.get("createdAt"))
    content = obj.get("content")
    if role == "system":
        count_skip(skips, "system_prompt")  # the agent's prompt, the same in every chat
        return
    if role not in ("user", "assistant", "tool"):
        count_skip(skips, f"unknown_role:{role[:40]}")
        return
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else (
        content if isinstance(content, list) else [])
    for block in blocks:
        if type(block) is not dict:
            continue
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str):
            if role == "user":
                out += user_messages(block["text"], ms)[0]
            elif block["text"].strip():
                out.append(Message("assistant" if role == "assistant" else "tool",
                                   "text" if role == "assistant" else "tool_result", block["text"], ms))
        elif btype in ("reasoning", "thinking"):
            text = block.get("text") if isinstance(block.get("text"), str) else block.get("thinking")
            if isinstance(text, str) and text.strip():
                out.append(Message("assistant", "thinking", text, ms))
        elif btype == "tool-call":
            args = block["input"] if "input" in block else block.get("args")
            out.append(Message("assistant", "tool_call", tool_call_text(block.get("toolName"), args), ms))
        elif btype == "tool-result":
            result = block["output"] if "output" in block else block.get("result")
            text = _result_text(result)
            if text.strip():
                out.append(Message("tool", "tool_result", text, ms))
        elif btype in ("redacted-reasoning", "image", "file"):
            continue  # nothing searchable
        else:
            count_skip(skips, f"unknown_block:{str(btype)[:40]}")


def _result_text(result: object) -> str:
    # AI SDK v5 wraps outputs as {type: "text" | "json" | "error-text", value}.
    if type(result) is dict and "value" in result and result.get("type") in ("text", "json", "error-text",
                                                                              "error-json", "content"):
        result = result["value"]
    return blocks_text(result)
