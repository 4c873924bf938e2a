"""Kiro CLI's older SQLite store, ``data.sqlite3`` (docs/formats.md §24), opened read-only.

CLI 1.x and early 2.x (and Amazon Q Developer CLI before them) keep every conversation as one JSON
document in ``conversations_v2(key, conversation_id, value, created_at, updated_at)``, ``key`` being
the folder the chat ran in; the oldest builds had ``conversations(key, value)``, one conversation per
folder with its id inside the document. Each conversation is a ``whole`` unit
``<db>#<conversation id>`` (scanner/parsers/sqlite_units.py): its signature is its rows' newest
``updated_at``, oldest ``created_at`` and count (``conversations``: the key and the document's length),
so only the conversations Kiro saved again are read again.

A document is ``{conversation_id, history: [{user, assistant, request_metadata}], latest_summary?}``
(very old ones hold ``[user, assistant]`` pairs). ``user.content`` is ``{Prompt: {prompt}}``,
``{ToolUseResults: {tool_use_results}}`` (the results of the previous turn's calls) or
``{CancelledToolUses: {prompt, tool_use_results}}``; ``assistant`` is ``{Response: {content}}`` or
``{ToolUse: {content, tool_uses: [{id, name, args}]}}``. Only the user side has a time; the
assistant's is the request's ``stream_end_timestamp_ms``, else the prompt's.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Iterator
from typing import Any, Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.sqlite_units import ListedSession, columns, pick, snapshot
from aivault.scanner.parsers.textutil import first_line_title, nonblank
from aivault.scanner.sources import Found, Unit, signature

AGENT: Final = "kiro"
DB_NAME: Final = "data.sqlite3"
TABLE: Final = "conversations_v2"
LEGACY_TABLE: Final = "conversations"
RESUME: Final = "kiro-cli chat --resume"

# --- SQL (column names chosen among our own constants) --------------------------------------------
STAMPS: Final = """SELECT conversation_id, max({updated}), min({created}), count(*) FROM conversations_v2
{where} GROUP BY conversation_id"""
ONE_ID: Final = "WHERE conversation_id = ?"
NEWEST_ROW: Final = """SELECT key, value, {created}, {updated} FROM conversations_v2 WHERE conversation_id = ?
ORDER BY {updated} DESC, {created} DESC, key DESC LIMIT 1"""
# The oldest table names a conversation only inside its document (invalid JSON must not fail the query).
LEGACY_ID: Final = "CASE WHEN json_valid(value) THEN json_extract(value, '$.conversation_id') END"
LEGACY_STAMPS: Final = f"SELECT {LEGACY_ID} AS cid, key, length(value) FROM conversations"
LEGACY_ROW: Final = f"SELECT key, value, NULL, NULL FROM conversations WHERE {LEGACY_ID} = ? LIMIT 1"


def _v2_columns(con: sqlite3.Connection) -> dict[str, str] | None:
    cols = columns(con, TABLE)
    if not {"key", "conversation_id", "value"} <= cols:
        return None
    return {"updated": pick(cols, "updated_at"), "created": pick(cols, "created_at")}


def _has_legacy(con: sqlite3.Connection) -> bool:
    return {"key", "value"} <= columns(con, LEGACY_TABLE)


def list_conversations(con: sqlite3.Connection) -> Iterator[ListedSession]:
    """Every conversation of the database: its id, change signature and row count (sqlite_units.Lister)."""
    seen: set[str] = set()
    names = _v2_columns(con)
    if names is not None:
        for cid, updated, created, n in con.execute(STAMPS.format(where="", **names)):
            if isinstance(cid, str) and cid:
                seen.add(cid)
                yield cid, signature(updated, created, n), int(n)
    if _has_legacy(con):
        for cid, key, size in con.execute(LEGACY_STAMPS):
            if isinstance(cid, str) and cid and cid not in seen:
                seen.add(cid)
                yield cid, signature(key, size), 1


def _read_row(con: sqlite3.Connection, cid: str) -> tuple[tuple[Any, ...] | None, int]:
    """(key, value, created_at, updated_at) of a conversation's newest row, and its signature."""
    names = _v2_columns(con)
    if names is not None:
        stamp = con.execute(STAMPS.format(where=ONE_ID, **names), (cid,)).fetchone()
        if stamp is not None:
            row = con.execute(NEWEST_ROW.format(**names), (cid,)).fetchone()
            return row, signature(*stamp[1:])
    if _has_legacy(con):
        for _, key, size in con.execute(LEGACY_STAMPS + f" WHERE {LEGACY_ID} = ?", (cid,)):
            row = con.execute(LEGACY_ROW, (cid,)).fetchone()
            return row, signature(key, size)
    return None, 0


def read_conversation(found: Found) -> Unit:
    """One conversation of ``data.sqlite3``, read in one transaction."""
    db, cid = found.locator[:2]
    with snapshot(db, found.path) as con:
        row, sig = _read_row(con, cid)
    if row is None:
        raise UnitChanged(f"conversation {cid} is no longer in {db}")
    key, value, created, updated = row
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    doc = loads_line(raw) if isinstance(raw, bytes) else None
    if not isinstance(doc, dict):
        raise UnitUnreadable(f"conversation {cid}: its document is not a JSON object")
    return conversation_unit(doc, cid, nonblank(key), to_epoch_ms(created), to_epoch_ms(updated), sig)


# --- one conversation document -----------------------------------------------------------------------
def _tool_results(results: object, ts: int | None) -> list[Message]:
    out: list[Message] = []
    for raw in results if isinstance(results, list) else []:
        result = as_object(raw)
        blocks = result.get("content")
        parts: list[str] = []
        for block in map(as_object, blocks if isinstance(blocks, list) else []):
            if isinstance(block.get("Text"), str):
                parts.append(block["Text"])
            elif "Json" in block:
                parts.append(compact_json(block["Json"]))
        text = "\n".join(p for p in parts if p)
        status = result.get("status")
        if isinstance(status, str) and status.lower() not in ("", "success"):
            text = f"[{status.lower()}] {text}".rstrip()
        if text.strip():
            out.append(Message("tool", "tool_result", text, ts))
    return out


def _entry(entry: object) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """(user, assistant, request metadata) of a history entry, in either of its shapes."""
    if isinstance(entry, dict):
        return as_object(entry.get("user")), as_object(entry.get("assistant")), as_object(entry.get("request_metadata"))
    if isinstance(entry, list) and len(entry) >= 2:
        return as_object(entry[0]), as_object(entry[1]), {}
    return None


def _summary(doc: dict[str, Any]) -> str | None:
    summary = doc.get("latest_summary")
    if isinstance(summary, list) and summary:
        summary = summary[0]
    return nonblank(summary)


def conversation_unit(doc: dict[str, Any], cid: str, key: str | None, created: int | None, updated: int | None,
                      sig: int) -> Unit:
    """The Unit of one conversation document (docs/formats.md §24, SQLite value JSON)."""
    skips: dict[str, int] = {}
    messages: list[Message] = []
    times = [t for t in (created, updated) if t is not None]
    first_user: str | None = None
    cwd: str | None = None
    last: int | None = created
    summary = _summary(doc)
    if summary:
        messages.append(Message("system", "text", summary, created))
    history = doc.get("history")
    for raw in history if isinstance(history, list) else []:
        entry = _entry(raw)
        if entry is None:
            count_skip(skips, "malformed-record")
            continue
        user, assistant, meta = entry
        ts = to_epoch_ms(user.get("timestamp"))
        if ts is not None:
            last = ts
            times.append(ts)
        env = as_object(as_object(user.get("env_context")).get("env_state"))
        cwd = cwd or nonblank(env.get("current_working_directory"))
        prompt, results = _user_content(user.get("content"), skips)
        messages += _tool_results(results, last)
        if prompt:
            first_user = first_user or first_line_title(prompt)
            messages.append(Message("user", "text", prompt, last))
        end = to_epoch_ms(meta.get("stream_end_timestamp_ms"))
        if end is not None:
            times.append(end)
        messages += _assistant(assistant, end if end is not None else last, skips)
    session_id = nonblank(doc.get("conversation_id")) or cid
    where = key or cwd
    command = RESUME if not where else f"cd {shlex.quote(where)} && {RESUME}"
    session = SessionInfo(agent=AGENT, session_id=session_id, title=first_user, cwd=where,
                          started_at=min(times, default=None), updated_at=max(times, default=None),
                          message_count=len(messages), resume_command=command)
    return Unit(session, messages, sig, skips)


def _user_content(content: object, skips: dict[str, int]) -> tuple[str | None, object]:
    """(what the user typed, the tool results the message carries) of ``user.content``."""
    if isinstance(content, str):
        return nonblank(content) and content, None
    content = as_object(content)
    if isinstance(content.get("Prompt"), dict):
        prompt = content["Prompt"].get("prompt")
        return (prompt if nonblank(prompt) else None), None
    if isinstance(content.get("ToolUseResults"), dict):
        return None, content["ToolUseResults"].get("tool_use_results")
    if isinstance(content.get("CancelledToolUses"), dict):
        cancelled = content["CancelledToolUses"]
        prompt = cancelled.get("prompt")
        return (prompt if nonblank(prompt) else None), cancelled.get("tool_use_results")
    count_skip(skips, "unknown_content", next(iter(content), "(none)"))
    return None, None


def _assistant(assistant: dict[str, Any], ts: int | None, skips: dict[str, int]) -> list[Message]:
    if not assistant:
        return []
    out: list[Message] = []
    body = assistant.get("Response") or assistant.get("ToolUse")
    if not isinstance(body, dict):
        count_skip(skips, "unknown_content", next(iter(assistant), "(none)"))
        return []
    text = body.get("content")
    if isinstance(text, str) and text.strip():
        out.append(Message("assistant", "text", text, ts))
    uses = body.get("tool_uses")
    for use in map(as_object, uses if isinstance(uses, list) else []):
        name = nonblank(use.get("name")) or "tool"
        args = use.get("args")
        out.append(Message("assistant", "tool_call", f"{name} {compact_json(args)}" if args is not None else name, ts))
    return out
