"""Antigravity's ``conversations/<id>.db``: SQLite rows of protobuf steps (docs/formats.md §16).

Each conversation is one small database. ``steps`` holds one row per trajectory step (``idx`` is
the transcript's ``step_index``) with the whole step serialized as a ``gemini_coder.Step`` protobuf
in ``step_payload``; ``trajectory_meta`` names the conversation (``cascade_id``) and the ``main``
row of ``trajectory_metadata_blob`` its workspace and branch. No schema is published: the field
numbers below were recovered by other readers from the descriptors inside the ``agy`` binary and
checked against a real database (the fixture in tests/fixtures/corpus/antigravity). The protobuf is
walked by hand (:func:`fields`): nothing beyond the wire format is needed, and a blob that does not
parse yields what could be read before the damage, never an exception.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers.antigravity.steps import CHECKPOINT, PLANNER_RESPONSE, USER_INPUT, Step, file_uri_path
from aivault.scanner.parsers.jsonutil import loads_line
from aivault.scanner.parsers.sqlite_units import columns, snapshot
from aivault.scanner.sources import signature

# --- the wire format ------------------------------------------------------------------------------
_VARINT: Final = 0
_FIXED64: Final = 1
_BYTES: Final = 2
_FIXED32: Final = 5
_MAX_VARINT_BYTES: Final = 10

Field = tuple[int, int | bytes]  # (field number, varint value or the bytes of a length-delimited field)


def _varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    value = 0
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        if pos >= len(buf):
            return None
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    return None


def fields(buf: bytes) -> list[Field]:
    """The top-level fields of one protobuf message, in order; parsing stops at the first damage
    (what came before it is kept). Fixed-width values are skipped: no field read here has one."""
    out: list[Field] = []
    pos = 0
    while pos < len(buf):
        tag = _varint(buf, pos)
        if tag is None or tag[0] >> 3 == 0:
            break
        number, wire = tag[0] >> 3, tag[0] & 7
        pos = tag[1]
        if wire == _VARINT:
            got = _varint(buf, pos)
            if got is None:
                break
            out.append((number, got[0]))
            pos = got[1]
        elif wire == _BYTES:
            size = _varint(buf, pos)
            if size is None or size[1] + size[0] > len(buf):
                break
            out.append((number, buf[size[1] : size[1] + size[0]]))
            pos = size[1] + size[0]
        elif wire in (_FIXED64, _FIXED32):
            pos += 8 if wire == _FIXED64 else 4
        else:
            break  # groups are not used by these messages: anything else is damage
    return out


def sub(fs: list[Field], number: int) -> bytes | None:
    """The first length-delimited field ``number``."""
    return next((v for n, v in fs if n == number and isinstance(v, bytes)), None)


def subs(fs: list[Field], number: int) -> list[bytes]:
    """Every length-delimited field ``number`` (a repeated field), in order."""
    return [v for n, v in fs if n == number and isinstance(v, bytes)]


def text(fs: list[Field], number: int) -> str:
    """Field ``number`` as text ("" when absent); invalid UTF-8 is replaced, never fatal."""
    value = sub(fs, number)
    return value.decode("utf-8", "replace") if value is not None else ""


def uint(fs: list[Field], number: int) -> int | None:
    return next((v for n, v in fs if n == number and isinstance(v, int)), None)


def timestamp_ms(buf: bytes | None) -> int | None:
    """A ``google.protobuf.Timestamp`` {1: seconds, 2: nanos} in epoch milliseconds."""
    if buf is None:
        return None
    fs = fields(buf)
    seconds = uint(fs, 1)
    if seconds is None or seconds <= 0:
        return None
    return seconds * 1000 + (uint(fs, 2) or 0) // 1_000_000


# --- gemini_coder.Step -----------------------------------------------------------------------------
# CortexStepType values (the transcript's ``type`` names); others are named STEP_TYPE_<n>.
STEP_TYPES: Final = {
    5: "CODE_ACTION", 7: "GREP_SEARCH", 8: "VIEW_FILE", 9: "LIST_DIRECTORY", 14: USER_INPUT,
    15: PLANNER_RESPONSE, 17: "ERROR_MESSAGE", 21: "RUN_COMMAND", 23: CHECKPOINT, 38: "MCP_TOOL",
    90: "EPHEMERAL_MESSAGE", 98: "CONVERSATION_HISTORY", 101: "SYSTEM_MESSAGE", 132: "GENERIC",
}
# CortexStepSource (CortexStepMetadata field 3).
SOURCES: Final = {2: "MODEL", 3: "USER_IMPLICIT", 4: "USER_EXPLICIT", 5: "SYSTEM", 6: "SYSTEM_SDK"}
# CortexStepStatus; a step in any other status is still being produced.
STATUSES: Final = {3: "DONE", 4: "INVALID", 5: "CLEARED", 6: "CANCELED", 7: "ERROR", 12: "INTERRUPTED"}
_UNFINISHED: Final = {1: "PENDING", 2: "RUNNING", 8: "GENERATING", 9: "WAITING", 11: "QUEUED"}
# Step fields: 1 type, 4 status, 5 metadata, then one payload field per step kind.
_STEP_METADATA: Final = 5
_PAYLOAD: Final = {
    USER_INPUT: 19, PLANNER_RESPONSE: 20, CHECKPOINT: 30, "CODE_ACTION": 10, "GREP_SEARCH": 13,
    "VIEW_FILE": 14, "LIST_DIRECTORY": 15, "ERROR_MESSAGE": 24, "RUN_COMMAND": 28, "MCP_TOOL": 47,
    "SYSTEM_MESSAGE": 114, "GENERIC": 140,
}
# CortexStepMetadata: 1 created_at, 3 source, 4 the tool call a tool step executes.
_META_CREATED: Final = 1
_META_SOURCE: Final = 3
_META_TOOL_CALL: Final = 4


def _user_input(body: list[Field]) -> str:
    """CortexStepUserInput: ``user_response`` (2), else the first item's text (3.1), else ``query`` (1)."""
    typed = text(body, 2)
    if typed.strip():
        return typed
    for item in subs(body, 3):
        value = text(fields(item), 1)
        if value.strip():
            return value
    return text(body, 1)


def _tool_call(buf: bytes) -> tuple[str, object]:
    """ChatToolCall {1 id, 2 name, 3 arguments_json}: the name and the decoded arguments."""
    fs = fields(buf)
    raw = text(fs, 3)
    args = loads_line(raw.encode("utf-8", "surrogatepass")) if raw else None
    return text(fs, 2) or "tool", args if args is not None else (raw or None)


def _result_text(kind: str, body: list[Field]) -> str:
    """What a tool step returned, per step kind (the other kinds are left empty: counted)."""
    if kind == "VIEW_FILE":
        return text(body, 4) or text(body, 9)
    if kind == "RUN_COMMAND":
        output = sub(body, 21)
        return (text(fields(output), 1) if output is not None else "") or text(body, 4)
    if kind == "GREP_SEARCH":
        return text(body, 3) or text(body, 5)
    if kind == "LIST_DIRECTORY":
        names = []
        for entry in subs(body, 3):
            fs = fields(entry)
            name = text(fs, 1)
            if name:
                names.append(name + ("/" if uint(fs, 2) == 1 else ""))
        return "\n".join(names)
    if kind == "CODE_ACTION":
        result = sub(body, 2)
        edit = sub(fields(result), 1) if result is not None else None
        target = file_uri_path(text(fields(edit), 8)) if edit is not None else None
        return f"edited {target}" if target else ""
    if kind == "MCP_TOOL":
        return text(body, 3)
    if kind == "GENERIC":
        result = sub(body, 2)
        return text(fields(result), 1) if result is not None else ""
    return ""


def _error_text(details: bytes | None) -> str:
    """CortexErrorDetails: the model-facing message (9), else the short (1) or long (2) one."""
    if not details:
        return ""
    fs = fields(details)
    return text(fs, 9) or text(fs, 1) or text(fs, 2)


def decode_step(step_type: int, status: int, payload: bytes, metadata: bytes | None,
                error_details: bytes | None) -> tuple[Step, int | None]:
    """One ``steps`` row as a Step and its time (epoch ms)."""
    top = fields(payload)
    meta = fields(metadata if metadata else (sub(top, _STEP_METADATA) or b""))
    kind = STEP_TYPES.get(step_type, f"STEP_TYPE_{step_type}")
    step = Step(type=kind, source=SOURCES.get(uint(meta, _META_SOURCE) or 0, ""),
                status=STATUSES.get(status, _UNFINISHED.get(status, f"STATUS_{status}")))
    number = _PAYLOAD.get(kind)
    body = fields(sub(top, number) or b"") if number is not None else []
    if kind == USER_INPUT:
        step.content = _user_input(body)
    elif kind == PLANNER_RESPONSE:
        step.content = text(body, 1) or text(body, 8)
        step.thinking = text(body, 3)
        step.tool_calls = [_tool_call(call) for call in subs(body, 7)]
    elif kind == CHECKPOINT:
        # The summary the transcript shows is rendered from these: the objective and the user requests.
        step.objective = text(body, 4).strip() or None
        step.content = "\n\n".join(p for p in (text(body, 4).strip(), text(body, 19).strip()) if p)
    elif kind in ("ERROR_MESSAGE", "SYSTEM_MESSAGE"):
        step.content = text(body, 1)
    else:
        if sub(meta, _META_TOOL_CALL) is not None and not step.source:
            step.source = "MODEL"  # a tool step executes the call its metadata carries
        error = _error_text(error_details)
        step.content = error or _result_text(kind, body)
        if error and step.status not in ("ERROR", "CANCELED"):
            step.status = "ERROR"
    return step, timestamp_ms(sub(meta, _META_CREATED))


# --- reading one database ----------------------------------------------------------------------------
STEPS_SQL: Final = "SELECT idx, step_type, status, {metadata}, {errors}, step_payload FROM steps ORDER BY idx"
META_SQL: Final = "SELECT cascade_id FROM trajectory_meta LIMIT 1"
TRAJECTORY_SQL: Final = "SELECT data FROM trajectory_metadata_blob WHERE id = 'main'"


@dataclass(slots=True)
class Conversation:
    """What one database holds: its id and workspace, and its steps in order with their times."""

    cascade_id: str | None = None
    cwd: str | None = None
    branch: str | None = None
    created: int | None = None
    steps: list[tuple[Step, int | None]] = field(default_factory=list)
    unfinished: int = 0  # steps still being produced (their text is not final): read again later


def _trajectory(con: sqlite3.Connection, conv: Conversation) -> None:
    """CortexTrajectoryMetadata (the ``main`` row): 1 workspace {1 uri, 4 branch}, 2 created, 7 uri."""
    if not columns(con, "trajectory_metadata_blob"):
        return
    row = con.execute(TRAJECTORY_SQL).fetchone()
    if row is None or not isinstance(row[0], bytes):
        return
    fs = fields(row[0])
    workspace = fields(sub(fs, 1) or b"")
    conv.cwd = file_uri_path(text(workspace, 1) or text(workspace, 2) or text(fs, 7))
    conv.branch = text(workspace, 4).strip() or None
    conv.created = timestamp_ms(sub(fs, 2))


def _rows(con: sqlite3.Connection) -> Iterator[tuple[int, int, int, bytes | None, bytes | None, bytes]]:
    cols = columns(con, "steps", ("idx", "step_type", "status", "step_payload"))
    sql = STEPS_SQL.format(metadata="metadata" if "metadata" in cols else "NULL",
                           errors="error_details" if "error_details" in cols else "NULL")
    for idx, step_type, status, metadata, errors, payload in con.execute(sql):
        yield (int(idx or 0), int(step_type or 0), int(status or 0), metadata if isinstance(metadata, bytes) else None,
               errors if isinstance(errors, bytes) else None, payload if isinstance(payload, bytes) else b"")


def change_stamp(db: str) -> int:
    """The database's and its WAL's size and mtime, a unit's signature: unchanged means no new commit.

    An empty or missing WAL counts the same: opening a WAL database read-only creates the empty file
    (SQLite does it for any reader), which must not look like a change of the conversation.
    """
    parts: list[int] = []
    for path in (db, db + "-wal"):
        try:
            st = os.stat(path)
            parts += [st.st_size, st.st_mtime_ns] if st.st_size else [0, 0]
        except OSError:
            parts += [0, 0] if path != db else [-1, -1]
    return signature(*parts)


def read_conversation(db: str) -> Conversation:
    """Every step of a conversation database, read in one read transaction (UnitChanged when it is
    locked or busy: the next pass reads it; UnitUnreadable when it is not a conversation database)."""
    conv = Conversation()
    with snapshot(db) as con:
        if not columns(con, "steps"):
            raise UnitUnreadable("no steps table: not an Antigravity conversation database")
        if columns(con, "trajectory_meta"):
            row = con.execute(META_SQL).fetchone()
            conv.cascade_id = row[0] if row is not None and isinstance(row[0], str) and row[0] else None
        _trajectory(con, conv)
        for _, step_type, status, metadata, errors, payload in _rows(con):
            if status in _UNFINISHED:
                conv.unfinished += 1
                continue
            conv.steps.append(decode_step(step_type, status, payload, metadata, errors))
    return conv


def workspace(db: str) -> tuple[str | None, str | None]:
    """(workspace folder, git branch) a conversation database records, or (None, None) when it cannot
    be read now (the transcript beside it is read all the same)."""
    if not os.path.isfile(db):
        return None, None
    conv = Conversation()
    try:
        with snapshot(db) as con:
            _trajectory(con, conv)
    except (UnitChanged, UnitUnreadable, sqlite3.Error):
        return None, None
    return conv.cwd, conv.branch
