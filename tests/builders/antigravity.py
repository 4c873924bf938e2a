"""Antigravity conversations (docs/formats.md §16): transcript steps, the SQLite store, the side files.

The record functions return the step objects ``agy`` writes to ``brain/<id>/.system_generated/logs/
transcript.jsonl``, keys in its order (tool arguments double-encoded, as the CLI writes them);
``AntigravityWriter`` appends a conversation there, under a root laid out like
``~/.gemini/antigravity-cli``. ``write_database`` writes ``conversations/<id>.db`` with the real
schema and protobuf step payloads, from ``DbStep`` values built by the ``db_*`` functions (the field
numbers are those scanner/parsers/antigravity/store.py reads).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

USER_EXPLICIT = "USER_EXPLICIT"
MODEL = "MODEL"
SYSTEM = "SYSTEM"
EPHEMERAL_TEXT = ("The following is an <EPHEMERAL_MESSAGE> not actually sent by the user. It is provided by the "
                  "system as a set of reminders and general important information to pay attention to. Do NOT "
                  "respond to this message, just act accordingly.\n\n<EPHEMERAL_MESSAGE>\n<bash_command_reminder>\n"
                  "Prefer the most specific tool.\n</bash_command_reminder>\n</EPHEMERAL_MESSAGE>")


def rfc3339(t: datetime) -> str:
    """``2026-06-20T11:11:54Z``: whole seconds, as the transcript writes ``created_at``."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def step(index: int, source: str, kind: str, t: datetime, **fields: Any) -> dict[str, Any]:
    return {"step_index": index, "source": source, "type": kind, "status": fields.pop("status", "DONE"),
            "created_at": rfc3339(t), **fields}


def user_content(text: str, local_time: str, model_change: str | None = None) -> str:
    """The USER_INPUT content: the request, then the metadata and settings blocks the CLI adds."""
    out = (f"<USER_REQUEST>\n{text}\n</USER_REQUEST>\n<ADDITIONAL_METADATA>\nThe current local time is: "
           f"{local_time}.\n</ADDITIONAL_METADATA>")
    if model_change:
        out += (f"\n<USER_SETTINGS_CHANGE>\nThe user changed setting `Model Selection` from None to {model_change}. "
                "No need to comment on this change if the user doesn't ask about it.\n</USER_SETTINGS_CHANGE>")
    return out


def encoded_args(args: dict[str, Any]) -> dict[str, str]:
    """Tool arguments as the transcript holds them: every value JSON-encoded once more."""
    return {k: orjson.dumps(v).decode() for k, v in args.items()}


def checkpoint_content(n: int, objective: str, requests: list[str], transcript: str) -> str:
    listed = "\n".join(f"{i}. {r}" for i, r in enumerate(requests, 1))
    return (f"{{{{ CHECKPOINT {n} }}}}\n **The earlier parts of this conversation have been truncated due to its "
            "long length. The following content summarizes the truncated context so that you may continue your "
            f"work. **\n\n\n# USER Objective:\n{objective}\n\n# User Requests\nThe following were user requests from "
            f"the truncated conversation in chronological order:\n{listed}\n\n# Conversation Logs\n\nReference the "
            f"following log files for the full, untruncated conversation:\n\n- {transcript}\n")


def subagent_content(child_id: str, root: str, workspace: str) -> str:
    """An INVOKE_SUBAGENT result: prose around the spawned conversation's JSON."""
    return ("Created At: 2026-07-31T15:55:17-06:00\nCreated the following subagents:\n"
            + orjson.dumps({"conversationId": child_id,
                            "logAbsoluteUri": f"file://{root}/brain/{child_id}/.system_generated/logs/transcript.jsonl",
                            "workspaceUris": [f"file://{workspace}"]}, option=orjson.OPT_INDENT_2).decode()
            + "\nThe subagents will send you a message when they have completed their task.")


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


class AntigravityWriter:
    """Appends one conversation's steps to its transcript; step indexes and times advance per step.

    ``root`` is the agent's data folder (``~/.gemini/antigravity-cli``); with ``cwd`` the conversation is
    registered in ``cache/last_conversations.json`` as the CLI does.
    """

    def __init__(self, root: Path, conversation_id: str, *, cwd: str | None = None, start: datetime = BASE_TIME,
                 full_name: bool = False) -> None:
        self.root = root
        self.conversation_id = conversation_id
        self.t = start
        self.index = 0
        self.requests: list[str] = []
        logs = root / "brain" / conversation_id / ".system_generated" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.path = logs / ("transcript_full.jsonl" if full_name else "transcript.jsonl")
        if cwd is not None:
            cache = root / "cache" / "last_conversations.json"
            cache.parent.mkdir(parents=True, exist_ok=True)
            known = orjson.loads(cache.read_bytes()) if cache.exists() else {}
            cache.write_bytes(orjson.dumps({**known, cwd: conversation_id}))

    def _next(self, seconds: int = 2) -> tuple[int, datetime]:
        self.t += timedelta(seconds=seconds)
        self.index += 1
        return self.index - 1, self.t

    def write(self, obj: dict[str, Any]) -> AntigravityWriter:
        with self.path.open("ab") as f:
            f.write(orjson.dumps(obj) + b"\n")
        return self

    def user(self, text: str, *, model_change: str | None = None) -> AntigravityWriter:
        """A typed request, with the CONVERSATION_HISTORY marker and EPHEMERAL reminder that follow it."""
        i, t = self._next()
        self.requests.append(text)
        self.write(step(i, USER_EXPLICIT, "USER_INPUT", t,
                        content=user_content(text, rfc3339(t).replace("Z", "+00:00"), model_change)))
        i, t = self._next(0)
        self.write(step(i, SYSTEM, "CONVERSATION_HISTORY", t))
        i, t = self._next(0)
        return self.write(step(i, SYSTEM, "EPHEMERAL_MESSAGE", t, content=EPHEMERAL_TEXT))

    def assistant(self, text: str | None, *, thinking: str | None = None,
                  calls: list[tuple[str, dict[str, Any]]] | None = None) -> AntigravityWriter:
        i, t = self._next()
        fields: dict[str, Any] = {}
        if text is not None:
            fields["content"] = text
        if thinking is not None:
            fields["thinking"] = thinking
        if calls:
            fields["tool_calls"] = [{"name": n, "args": encoded_args(a)} for n, a in calls]
        return self.write(step(i, MODEL, "PLANNER_RESPONSE", t, **fields))

    def tool(self, kind: str, output: str, *, status: str = "DONE") -> AntigravityWriter:
        """A tool step (RUN_COMMAND, VIEW_FILE, ...): its output, after the planner step that called it."""
        i, t = self._next()
        return self.write(step(i, MODEL, kind, t, status=status, content=output))

    def checkpoint(self, objective: str) -> AntigravityWriter:
        i, t = self._next()
        return self.write(step(i, SYSTEM, "CHECKPOINT", t,
                               content=checkpoint_content(0, objective, self.requests, str(self.path))))

    def subagent(self, child_id: str, workspace: str) -> AntigravityWriter:
        """The planner's invoke_subagent call and the INVOKE_SUBAGENT step naming the child."""
        self.assistant(None, calls=[("invoke_subagent", {"Subagents": [{"name": "helper", "TypeName": "General"}]})])
        return self.tool("INVOKE_SUBAGENT", subagent_content(child_id, str(self.root), workspace))


# --- conversations/<id>.db ----------------------------------------------------------------------------
DDL = (
    "CREATE TABLE `trajectory_meta` (`trajectory_id` text,`cascade_id` text,`trajectory_type` integer,"
    "`source` integer,PRIMARY KEY (`trajectory_id`))",
    "CREATE TABLE `steps` (`idx` integer,`step_type` integer NOT NULL DEFAULT 0,`status` integer NOT NULL DEFAULT 0,"
    "`has_subtrajectory` numeric NOT NULL DEFAULT false,`metadata` blob,`error_details` blob,`permissions` blob,"
    "`task_details` blob,`render_info` blob,`step_payload` blob,`step_format` integer NOT NULL DEFAULT 0,"
    "PRIMARY KEY (`idx`))",
    "CREATE TABLE `gen_metadata` (`idx` integer,`data` blob,`size` integer NOT NULL DEFAULT 0,PRIMARY KEY (`idx`))",
    "CREATE TABLE `executor_metadata` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
    "CREATE TABLE `parent_references` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
    "CREATE TABLE `trajectory_metadata_blob` (`id` text DEFAULT \"main\",`data` blob,PRIMARY KEY (`id`))",
    "CREATE TABLE `battle_mode_infos` (`idx` integer,`data` blob,PRIMARY KEY (`idx`))",
)
STEP_CODES = {"USER_INPUT": 14, "PLANNER_RESPONSE": 15, "CHECKPOINT": 23, "EPHEMERAL_MESSAGE": 90,
              "CONVERSATION_HISTORY": 98, "RUN_COMMAND": 21, "VIEW_FILE": 8, "GENERIC": 132}
SOURCE_CODES = {MODEL: 2, USER_EXPLICIT: 4, SYSTEM: 5}
STATUS_CODES = {"DONE": 3, "CLEARED": 5, "ERROR": 7, "GENERATING": 8}


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb(*items: tuple[int, int | str | bytes]) -> bytes:
    """A protobuf message from (field number, value): ints as varints, text and bytes length-delimited."""
    out = bytearray()
    for number, value in items:
        if isinstance(value, int):
            out += varint(number << 3) + varint(value)
        else:
            data = value.encode() if isinstance(value, str) else value
            out += varint(number << 3 | 2) + varint(len(data)) + data
    return bytes(out)


def timestamp(t: datetime) -> bytes:
    ms = epoch_ms(t)
    return pb((1, ms // 1000), (2, ms % 1000 * 1_000_000))


@dataclass(frozen=True, slots=True)
class DbStep:
    kind: str
    source: str
    payload_field: int
    payload: bytes
    status: str = "DONE"
    tool_call: bytes | None = None  # the ChatToolCall a tool step executes (in its metadata)


def tool_call_pb(call_id: str, name: str, args: dict[str, Any]) -> bytes:
    return pb((1, call_id), (2, name), (3, orjson.dumps(args).decode()))


def db_user(text: str) -> DbStep:
    return DbStep("USER_INPUT", USER_EXPLICIT, 19, pb((2, text), (3, pb((1, text)))))


def db_planner(text: str | None, *, thinking: str | None = None,
               calls: list[tuple[str, str, dict[str, Any]]] | None = None, status: str = "DONE") -> DbStep:
    items: list[tuple[int, int | str | bytes]] = []
    if text is not None:
        items.append((1, text))
    if thinking is not None:
        items.append((3, thinking))
    items += [(7, tool_call_pb(cid, name, args)) for cid, name, args in calls or []]
    if text is not None:
        items.append((8, text))
    return DbStep("PLANNER_RESPONSE", MODEL, 20, pb(*items), status)


def db_run_command(call_id: str, command: str, output: str) -> DbStep:
    return DbStep("RUN_COMMAND", MODEL, 28, pb((21, pb((1, output))), (23, command)),
                  tool_call=tool_call_pb(call_id, "run_command", {"CommandLine": command}))


def db_checkpoint(objective: str, requests: str) -> DbStep:
    return DbStep("CHECKPOINT", SYSTEM, 30, pb((4, objective), (19, requests)))


def db_ephemeral(text: str = EPHEMERAL_TEXT) -> DbStep:
    return DbStep("EPHEMERAL_MESSAGE", SYSTEM, 103, pb((1, text)))


def db_history() -> DbStep:
    return DbStep("CONVERSATION_HISTORY", SYSTEM, 111, b"")


def write_database(path: Path, cascade_id: str, steps: list[DbStep], *, start: datetime = BASE_TIME,
                   workspace: str | None = None, branch: str | None = None) -> Path:
    """``conversations/<id>.db`` holding ``steps`` (two seconds apart) and the ``main`` metadata row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    try:
        for ddl in DDL:
            con.execute(ddl)
        con.execute("INSERT INTO trajectory_meta VALUES (?, ?, 4, 17)", (f"traj-{cascade_id}", cascade_id))
        main: list[tuple[int, int | str | bytes]] = []
        if workspace is not None:
            ws: list[tuple[int, int | str | bytes]] = [(1, f"file://{workspace}"), (2, f"file://{workspace}")]
            if branch is not None:
                ws.append((4, branch))
            main.append((1, pb(*ws)))
        main += [(2, timestamp(start)), (6, cascade_id), (18, "default-cli-project")]
        con.execute("INSERT INTO trajectory_metadata_blob VALUES ('main', ?)", (pb(*main),))
        for idx, s in enumerate(steps):
            t = start + timedelta(seconds=2 * (idx + 1))
            meta_items: list[tuple[int, int | str | bytes]] = [(1, timestamp(t)), (3, SOURCE_CODES[s.source])]
            if s.tool_call is not None:
                meta_items.append((4, s.tool_call))
            meta = pb(*meta_items)
            code = STEP_CODES[s.kind]
            status = STATUS_CODES[s.status]
            payload = pb((1, code), (4, status), (5, meta), (s.payload_field, s.payload))
            con.execute("INSERT INTO steps (idx, step_type, status, metadata, step_payload) VALUES (?, ?, ?, ?, ?)",
                        (idx, code, status, meta, payload))
        con.commit()
    finally:
        con.close()
    return path
