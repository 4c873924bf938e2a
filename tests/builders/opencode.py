"""OpenCode rows and documents (docs/formats.md §4): the SQLite database of 1.2+ and the legacy tree.

``SCHEMA`` is the database as OpenCode's Drizzle migrations leave it (the tables aivault reads,
columns in their order). The record functions are pure and return ``message.data`` / ``part.data``
objects in the key order OpenCode writes; ``OpenCodeDb`` writes whole sessions for tests, one
commit per message like the agent, and ``legacy_session`` lays the same objects out as the
pre-1.2 ``storage/`` tree.
"""

from __future__ import annotations

import itertools
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.builders.common import BASE_TIME, epoch_ms

VERSION = "1.17.9"
PROVIDER = "anthropic"
MODEL = "claude-sonnet-4-5"

SCHEMA = """
CREATE TABLE `project` (
    `id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text, `icon_url` text,
    `icon_color` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
    `time_initialized` integer, `sandboxes` text NOT NULL
);
CREATE TABLE `session` (
    `id` text PRIMARY KEY, `project_id` text NOT NULL, `parent_id` text, `slug` text NOT NULL,
    `directory` text NOT NULL, `title` text NOT NULL, `version` text NOT NULL, `share_url` text,
    `summary_additions` integer, `summary_deletions` integer, `summary_files` integer, `summary_diffs` text,
    `revert` text, `permission` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
    `time_compacting` integer, `time_archived` integer, `workspace_id` text, `path` text, `agent` text,
    `model` text,
    FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON UPDATE no action ON DELETE cascade
);
CREATE TABLE `message` (
    `id` text PRIMARY KEY, `session_id` text NOT NULL, `time_created` integer NOT NULL,
    `time_updated` integer NOT NULL, `data` text NOT NULL,
    FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON UPDATE no action ON DELETE cascade
);
CREATE TABLE `part` (
    `id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
    `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL,
    FOREIGN KEY (`message_id`) REFERENCES `message`(`id`) ON UPDATE no action ON DELETE cascade
);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
CREATE INDEX `session_project_idx` ON `session` (`project_id`);
CREATE INDEX `session_parent_idx` ON `session` (`parent_id`);
"""

_counter = itertools.count()


def new_id(prefix: str, ms: int) -> str:
    """A time-sortable id like OpenCode's (``ses_``, ``msg_``, ``prt_`` + time + counter)."""
    return f"{prefix}_{ms:012x}{next(_counter) % 0x10000:04x}aivaulttest"


def placeholder_title(ms: int, child: bool = False) -> str:
    """The title a session holds until the model names it (upstream isDefaultTitle)."""
    stamp = datetime.fromtimestamp(ms / 1000, tz=BASE_TIME.tzinfo).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return f"{'Child' if child else 'New'} session - {stamp}"


# --- message.data ----------------------------------------------------------------------------------
def user_info(created: int, *, agent: str = "build") -> dict[str, Any]:
    return {"role": "user", "time": {"created": created}, "agent": agent,
            "model": {"providerID": PROVIDER, "modelID": MODEL}}


def assistant_info(created: int, parent_id: str, cwd: str, *, completed: int | None = None,
                   finish: str = "stop", error: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "assistant", "parentID": parent_id, "modelID": MODEL, "providerID": PROVIDER,
                         "mode": "build", "agent": "build", "path": {"cwd": cwd, "root": cwd},
                         "time": {"created": created, **({"completed": completed} if completed else {})},
                         "cost": 0.004, "tokens": {"input": 1200, "output": 300, "reasoning": 0,
                                                   "cache": {"read": 0, "write": 0}}, "finish": finish}
    if error is not None:
        d["error"] = error
    return d


# --- part.data -------------------------------------------------------------------------------------
def text_part(text: str, start: int, *, synthetic: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "text", "text": text, "time": {"start": start, "end": start}}
    if synthetic:
        d["synthetic"] = True
    return d


def reasoning_part(text: str, start: int) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "time": {"start": start, "end": start}}


def tool_part(call_id: str, tool: str, tool_input: dict[str, Any], output: str | None, start: int, *,
              status: str = "completed", exit_code: int | None = None, error: str | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": tool_input}
    if status == "completed":
        metadata: dict[str, Any] = {"exit": exit_code} if exit_code is not None else {}
        state.update({"output": output or "", "title": tool, "metadata": metadata,
                      "time": {"start": start, "end": start + 500}})
    elif status == "error":
        state.update({"error": error or "failed", "time": {"start": start, "end": start + 500}})
    else:
        state["time"] = {"start": start}
    return {"type": "tool", "callID": call_id, "tool": tool, "state": state}


def step_start_part() -> dict[str, Any]:
    return {"type": "step-start", "snapshot": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}


def step_finish_part(reason: str = "stop") -> dict[str, Any]:
    return {"type": "step-finish", "reason": reason, "cost": 0.004,
            "tokens": {"input": 1200, "output": 300, "reasoning": 0, "cache": {"read": 0, "write": 0}}}


def patch_part(files: list[str]) -> dict[str, Any]:
    return {"type": "patch", "hash": "3f2a1c9e8b7d6540a1b2c3d4e5f60718293a4b5c", "files": files}


# --- the database ----------------------------------------------------------------------------------
def create_db(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    """An empty OpenCode database (WAL, as OpenCode opens it); the caller closes the connection."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SCHEMA)
    return con


class OpenCodeDb:
    """Writes sessions into an OpenCode database the way OpenCode commits them."""

    def __init__(self, path: Path, *, worktree: str = "/home/dev/cli", wal: bool = True) -> None:
        self.path = path
        fresh = not path.exists()
        self.con = create_db(path, wal=wal) if fresh else sqlite3.connect(path, isolation_level=None)
        self.project_id = "prj_" + worktree.strip("/").replace("/", "_")
        now = epoch_ms(BASE_TIME)
        self.con.execute("INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                         "VALUES (?, ?, 'git', ?, ?, '[]')", (self.project_id, worktree, now, now))

    def close(self) -> None:
        self.con.close()

    def session(self, directory: str = "/home/dev/cli", title: str | None = None, *, parent_id: str | None = None,
                start: datetime = BASE_TIME, session_id: str | None = None) -> OpenCodeSession:
        return OpenCodeSession(self, directory, title, parent_id, start, session_id)


class OpenCodeSession:
    """One session: each call commits a message with its parts, 5 s after the previous one."""

    def __init__(self, db: OpenCodeDb, directory: str, title: str | None, parent_id: str | None, start: datetime,
                 session_id: str | None) -> None:
        self.db = db
        self.directory = directory
        self.t = start
        ms = epoch_ms(start)
        self.session_id = session_id or new_id("ses", ms)
        self.title = title if title is not None else placeholder_title(ms, child=parent_id is not None)
        self.last_user: str | None = None
        db.con.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
            "time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self.session_id, db.project_id, parent_id, "brave-otter", directory, self.title, VERSION, ms, ms))

    def _tick(self) -> int:
        self.t += timedelta(seconds=5)
        return epoch_ms(self.t)

    def message(self, info: dict[str, Any], parts: list[dict[str, Any]], *, touch_session: bool = True) -> str:
        """Insert a message and its parts in one transaction; returns the message id."""
        ms = epoch_ms(self.t)
        mid = new_id("msg", ms)
        con = self.db.con
        con.execute("BEGIN")
        con.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                    (mid, self.session_id, ms, ms, orjson.dumps(info).decode()))
        for i, part in enumerate(parts):
            con.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (new_id("prt", ms + i), mid, self.session_id, ms, ms + i, orjson.dumps(part).decode()))
        if touch_session:
            con.execute("UPDATE session SET time_updated = ? WHERE id = ?", (ms + len(parts), self.session_id))
        con.execute("COMMIT")
        return mid

    def user(self, text: str, *, synthetic: list[str] | None = None) -> OpenCodeSession:
        ms = self._tick()
        parts = [text_part(text, ms)] + [text_part(s, ms, synthetic=True) for s in synthetic or []]
        self.last_user = self.message(user_info(ms), parts)
        return self

    def assistant(self, text: str | None = None, *, reasoning: str | None = None,
                  tools: list[dict[str, Any]] | None = None, error: dict[str, Any] | None = None,
                  touch_session: bool = True) -> OpenCodeSession:
        ms = self._tick()
        parts = [step_start_part()]
        if reasoning:
            parts.append(reasoning_part(reasoning, ms))
        parts += tools or []
        if text:
            parts.append(text_part(text, ms))
        parts.append(step_finish_part())
        self.message(assistant_info(ms, self.last_user or "", self.directory, completed=ms + 3000, error=error),
                     parts, touch_session=touch_session)
        return self

    def rename(self, title: str) -> OpenCodeSession:
        self.db.con.execute("UPDATE session SET title = ?, time_updated = ? WHERE id = ?",
                            (title, self._tick(), self.session_id))
        return self


# --- the legacy tree -------------------------------------------------------------------------------
def legacy_session(data_dir: Path, session_id: str, directory: str, title: str,
                   messages: list[tuple[dict[str, Any], list[dict[str, Any]]]], *, project_id: str = "proj_test",
                   parent_id: str | None = None) -> Path:
    """``storage/session/<project>/<id>.json`` plus its message and part documents; returns the session file."""
    storage = data_dir / "storage"
    created = min((m[0]["time"]["created"] for m in messages), default=epoch_ms(BASE_TIME))
    updated = max((m[0]["time"]["created"] for m in messages), default=created)
    session = {"id": session_id, "version": "1.1.20", "projectID": project_id, "directory": directory,
               "parentID": parent_id, "slug": "quiet-heron", "title": title,
               "time": {"created": created, "updated": updated}}
    path = storage / "session" / project_id / f"{session_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(session))
    for info, parts in messages:
        mid = info.get("id") or new_id("msg", info["time"]["created"])
        mfile = storage / "message" / session_id / f"{mid}.json"
        mfile.parent.mkdir(parents=True, exist_ok=True)
        mfile.write_bytes(orjson.dumps({"id": mid, "sessionID": session_id, **info}))
        for part in parts:
            pid = part.get("id") or new_id("prt", info["time"]["created"])
            pfile = storage / "part" / mid / f"{pid}.json"
            pfile.parent.mkdir(parents=True, exist_ok=True)
            pfile.write_bytes(orjson.dumps({"id": pid, "sessionID": session_id, "messageID": mid, **part}))
    return path


# --- a large database, in one transaction (tests of the kill -9 guarantee, benchmarks) ---------------
_WORDS = ("lexer", "borrow checker", "flaky retry", "connection pool", "cache key", "migration", "tokenizer",
          "deadlock", "websocket", "rate limiter", "schema drift", "memory leak")


def bulk_database(path: Path, sessions: int, turns: int, *, big_turns: int = 0) -> int:
    """Fill a new database with one session of ``big_turns`` turns (larger than a scanner batch) when
    given, then ``sessions`` sessions of ``turns`` turns; returns the number of normalized messages.

    Every turn is a user prompt, then an assistant message with a bash call (a call and a result) and a
    reply: four normalized messages.
    """
    con = create_db(path)
    con.execute("PRAGMA synchronous=OFF")
    con.execute("BEGIN")
    base = epoch_ms(BASE_TIME)
    con.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                "VALUES ('prj_bulk', '/home/dev/bulk', 'git', ?, ?, '[]')", (base, base))
    # The large session comes first, so that a pass interrupted early is interrupted inside it.
    plan = ([(sessions, big_turns)] if big_turns else []) + [(i, turns) for i in range(sessions)]
    total = 0
    for i, n in plan:
        t0 = base + i * 3_600_000
        sid = f"ses_{t0:012x}{i:06d}bulk"
        con.execute("INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
                    "time_updated) VALUES (?, 'prj_bulk', 'bulk', ?, ?, ?, ?, ?)",
                    (sid, f"/home/dev/bulk{i % 7}", f"Bulk session {i}", VERSION, t0, t0 + n * 10_000))
        for j in range(n):
            word = _WORDS[(i * 7 + j) % len(_WORDS)]
            ms = t0 + j * 10_000
            uid, aid = f"msg_{ms:012x}{i:06d}{j:06d}u", f"msg_{ms + 5000:012x}{i:06d}{j:06d}a"
            rows = [(uid, user_info(ms), [text_part(f"turn {j} of session {i}: why does the {word} fail", ms)]),
                    (aid, assistant_info(ms + 5000, uid, f"/home/dev/bulk{i % 7}", completed=ms + 8000),
                     [step_start_part(), tool_part(f"call_{i}_{j}", "bash", {"command": f"grep -rn {word} src"},
                                                   f"src/{word.replace(' ', '_')}.rs:{j}: match", ms + 5000),
                      text_part(f"The {word} in session {i} breaks on turn {j}.", ms + 6000), step_finish_part()])]
            for mid, info, parts in rows:
                mms = info["time"]["created"]
                con.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                            "VALUES (?, ?, ?, ?, ?)", (mid, sid, mms, mms, orjson.dumps(info).decode()))
                for k, part in enumerate(parts):
                    con.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                                "VALUES (?, ?, ?, ?, ?, ?)",
                                (f"prt_{mid[4:]}{k:02d}", mid, sid, mms, mms + k, orjson.dumps(part).decode()))
            total += 4
    con.execute("COMMIT")
    con.close()
    return total
