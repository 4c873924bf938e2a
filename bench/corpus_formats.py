"""Gemini CLI, OpenCode and GitHub Copilot CLI sessions for ``bench.gen_corpus``'s agent mix.

``bench.gen_corpus`` draws the content of these sessions with the same text machinery as its
Claude Code sessions (prompts, prose, thinking, and Claude's tool calls with their outputs), into
the agent-neutral ``Session`` below; the functions here only lay a ``Session`` out in each agent's
format, with the record functions of ``tests.builders.gemini`` / ``opencode`` / ``copilot``
(docs/formats.md §3, §4, §8). Every counted piece of a ``Session`` becomes exactly one normalized
message (docs/formats.md §0), so the generator's manifest counts hold:

* a prompt → user/text; a step's ``thinking`` → assistant/thinking and ``text`` → assistant/text;
* a ``Tool`` → a tool call, plus a tool result once its ``output`` is set (``None``: the message
  budget ran out between the two, and the call is written as still running).

``LAYOUT`` says where each agent's tree sits inside a corpus, which ``--root`` folders a scanner
reads and which environment variable points the agent's default roots there.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from tests.builders import copilot, gemini, opencode
from tests.builders.common import iso_ms, uuid4

__all__ = ["AGENTS", "LAYOUT", "MODELS", "AgentLayout", "OpenCodeStore", "Session", "Step", "Tool", "Turn",
           "copilot_files", "gemini_file", "gemini_registry"]


# --- the agent-neutral session -----------------------------------------------------------------------
@dataclass(slots=True)
class Tool:
    """One of Claude's tool calls (name and input as ``_Gen._c_tool`` makes them) and its output."""

    call_id: str
    name: str  # Read, Bash, Edit, Grep, Glob, Write, TodoWrite: each format maps it to its own tool
    args: dict[str, Any]
    t: int  # epoch ms of the call
    output: str | None = None  # None: no result was written (the budget ran out after the call)
    failed: bool = False
    t_end: int = 0


@dataclass(slots=True)
class Step:
    """One model response: optional thinking and text, then its tool calls."""

    t: int
    thinking: str | None = None
    text: str | None = None
    tools: list[Tool] = field(default_factory=list)


@dataclass(slots=True)
class Turn:
    t: int
    prompt: str
    steps: list[Step] = field(default_factory=list)


@dataclass(slots=True)
class Session:
    agent: str
    sid: str
    cwd: str
    branch: str
    model: str
    start: int  # epoch ms
    repo_url: str
    turns: list[Turn] = field(default_factory=list)
    end: int = 0
    title: str | None = None
    complete: bool = True  # False: cut by the message budget (no closing records)


# --- where each agent's tree goes ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AgentLayout:
    roots: tuple[str, ...]  # relative to the corpus: what ``--root <agent>=<corpus>/<root>`` names
    env: tuple[str, str]  # (variable, folder relative to the corpus) that moves the default roots there


# The order is the one a session's agent is drawn in: Codex before Claude, so that a mix of only
# those two draws exactly what ``--codex-share`` does (the default corpus).
AGENTS: Final = ("codex", "claude", "gemini", "opencode", "copilot")
LAYOUT: Final[dict[str, AgentLayout]] = {
    "claude": AgentLayout(("claude/projects",), ("CLAUDE_CONFIG_DIR", "claude")),
    "codex": AgentLayout(("codex/sessions", "codex/archived_sessions"), ("CODEX_HOME", "codex")),
    "gemini": AgentLayout(("gemini/.gemini/tmp",), ("GEMINI_CLI_HOME", "gemini")),
    "opencode": AgentLayout(("opencode/share/opencode",), ("XDG_DATA_HOME", "opencode/share")),
    "copilot": AgentLayout(("copilot/session-state",), ("COPILOT_HOME", "copilot")),
}
MODELS: Final[dict[str, list[str]]] = {
    "gemini": ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview"],
    "opencode": ["claude-sonnet-4-5", "gpt-5.1-codex", "qwen3-coder"],
    "copilot": ["claude-sonnet-4.5", "gpt-5", "claude-haiku-4.5"],
}

_ArgMap = dict[str, str | None]  # Claude's argument name -> the agent's (None: the agent has no such argument)
_GREP: Final[_ArgMap] = {"output_mode": None, "-n": None}
_GEMINI_TOOLS: Final[dict[str, tuple[str, _ArgMap]]] = {
    "Read": ("read_file", {"file_path": "absolute_path"}), "Bash": ("run_shell_command", {"timeout": None}),
    "Edit": ("replace", {}), "Grep": ("search_file_content", _GREP), "Glob": ("glob", {}),
    "Write": ("write_file", {}), "TodoWrite": ("write_todos", {}),
}
_OPENCODE_TOOLS: Final[dict[str, tuple[str, _ArgMap]]] = {
    "Read": ("read", {"file_path": "filePath"}), "Bash": ("bash", {}),
    "Edit": ("edit", {"file_path": "filePath", "old_string": "oldString", "new_string": "newString"}),
    "Grep": ("grep", _GREP), "Glob": ("glob", {}), "Write": ("write", {"file_path": "filePath"}),
    "TodoWrite": ("todowrite", {}),
}
_COPILOT_TOOLS: Final[dict[str, tuple[str, _ArgMap]]] = {
    "Read": ("view", {"file_path": "path"}), "Bash": ("bash", {"timeout": None}),
    "Edit": ("edit", {"file_path": "path", "old_string": "old_str", "new_string": "new_str"}),
    "Grep": ("grep", _GREP), "Glob": ("glob", {}), "Write": ("create", {"file_path": "path", "content": "file_text"}),
    "TodoWrite": ("update_todo", {}),
}
# Claude Code's own reminder after a file read; the other agents do not append it.
_CLAUDE_READ_REMINDER: Final = "\n\n<system-reminder>"
_FAILED_PREFIX: Final = "Exit code 1\n"


def _tool(table: dict[str, tuple[str, _ArgMap]], tool: Tool) -> tuple[str, dict[str, Any]]:
    name, renames = table[tool.name]
    args: dict[str, Any] = {}
    for key, value in tool.args.items():
        new = renames.get(key, key)
        if new is not None:
            args[new] = value
    return name, args


def _output(tool: Tool) -> str:
    out = tool.output or ""
    cut = out.find(_CLAUDE_READ_REMINDER) if tool.name == "Read" else -1
    return out[:cut] if cut > 0 else out


# --- Gemini CLI (docs/formats.md §3) ---------------------------------------------------------------------
def gemini_registry(slugs: dict[str, str]) -> bytes:
    """``~/.gemini/projects.json`` for the given project root -> slug map."""
    return orjson.dumps(gemini.registry(slugs), option=orjson.OPT_INDENT_2)


def gemini_file(s: Session, r: random.Random, tmp_dir: str, *, legacy: bool) -> tuple[str, bytes]:
    """(file name, bytes) of one session in ``chats/``: a v0.40+ log, or a legacy ``.json`` document."""
    start = iso_ms(s.start)
    meta = gemini.metadata(s.sid, s.cwd, start, kind="main")
    name = gemini.session_file_name(datetime.fromtimestamp(s.start / 1000, UTC), s.sid)
    final: list[dict[str, Any]] = []  # the message records as they end up (the legacy document's list)
    log: list[dict[str, Any]] = [meta]
    if r.random() < 0.3:
        # The injected environment turn and its canned reply: dropped by the reader, never counted.
        ctx = [gemini.user_message(uuid4(r), start, gemini.session_context(s.cwd, tmp_dir)),
               gemini.gemini_message(uuid4(r), start, gemini.CONTEXT_ACK, model=s.model)]
        final += ctx
        log += ctx
    for turn in s.turns:
        user = gemini.user_message(uuid4(r), iso_ms(turn.t), turn.prompt)
        final.append(user)
        log.append(user)
        for step in turn.steps:
            ts = iso_ms(step.t)
            thoughts = [gemini.thought(r.choice(_GEMINI_SUBJECTS), step.thinking, ts)] if step.thinking else []
            tokens = {"input": 2000 + int(r.random() * 30000), "output": 20 + int(r.random() * 2000),
                      "cached": int(r.random() * 20000), "thoughts": int(r.random() * 900), "tool": 0}
            tokens["total"] = tokens["input"] + tokens["output"]
            mid = uuid4(r)
            calls = [(f"{n}-{t.t}-{t.call_id[-8:]}", n, a, t) for t in step.tools for n, a in [_tool(_GEMINI_TOOLS, t)]]
            if calls:
                # The CLI writes the model's turn when the stream ends and rewrites it, same id, as
                # the calls complete: the reader keeps the last one in place.
                pending = [gemini.tool_call(cid, n, a, None, iso_ms(t.t), status="executing") for cid, n, a, t in calls]
                log.append(gemini.gemini_message(mid, ts, step.text or "", thoughts=thoughts, tool_calls=pending,
                                                 model=s.model, tokens=tokens))
            done = [_gemini_call(cid, n, a, t) for cid, n, a, t in calls]
            rec = gemini.gemini_message(mid, ts, step.text or "", thoughts=thoughts, tool_calls=done, model=s.model,
                                        tokens=tokens)
            final.append(rec)
            log.append(rec)
        log.append(gemini.set_metadata(lastUpdated=iso_ms(turn.steps[-1].t if turn.steps else turn.t)))
    end = iso_ms(s.end)
    if s.title is not None and s.complete:
        log.append(gemini.set_metadata(summary=s.title, lastUpdated=end))
    if legacy:
        doc_meta = {**meta, "lastUpdated": end, **({"summary": s.title} if s.title and s.complete else {})}
        return name[: -len("l")], orjson.dumps(gemini.legacy_document(doc_meta, final), option=orjson.OPT_INDENT_2)
    return name, gemini.jsonl(log)


_GEMINI_SUBJECTS: Final = ["Analyzing the failure", "Planning the change", "Checking the tests", "Reading the code",
                           "Tracing the error", "Considering the approach", "Verifying the fix", "Locating the bug"]


def _gemini_call(call_id: str, name: str, args: dict[str, Any], t: Tool) -> dict[str, Any]:
    if t.output is None:
        return gemini.tool_call(call_id, name, args, None, iso_ms(t.t), status="executing")
    out = _output(t)
    status = "error" if t.failed else "success"
    # resultDisplay is what the terminal showed: a shell's output again, a summary for the others.
    display = out if t.name == "Bash" else f"{name}: {out.count(chr(10)) + 1} lines"
    call = gemini.tool_call(call_id, name, args, out, iso_ms(t.t_end), status=status, display=display)
    if t.failed:
        call["result"][0]["functionResponse"]["response"] = {"error": out}
    return call


# --- OpenCode (docs/formats.md §4) -------------------------------------------------------------------------
_INSERT_PROJECT: Final = ("INSERT INTO project (id, worktree, vcs, name, time_created, time_updated, sandboxes) "
                          "VALUES (?, ?, 'git', ?, ?, ?, '[]')")
_INSERT_SESSION: Final = ("INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
                          "time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_MESSAGE: Final = "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)"
_INSERT_PART: Final = ("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                       "VALUES (?, ?, ?, ?, ?, ?)")
# Sessions per transaction: large enough that writing the database is a small part of the corpus time.
_OPENCODE_COMMIT_SESSIONS: Final = 500


def opencode_session_id(start: int, r: random.Random) -> str:
    """A time-sortable id like OpenCode's ``ses_…``."""
    return f"ses_{start:012x}{r.getrandbits(56):014x}"


class OpenCodeStore:
    """All OpenCode sessions of a corpus in one ``opencode.db``, written in large transactions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = opencode.create_db(path)
        self.con.execute("PRAGMA synchronous=OFF")
        self.con.execute("BEGIN")
        self.projects: set[str] = set()
        self.sessions = 0
        self.n = 0  # row id counter: ids sort in insertion order within a session

    def _id(self, prefix: str, ms: int) -> str:
        self.n += 1
        return f"{prefix}_{ms:012x}{self.n:010d}"

    def add(self, s: Session, project_root: str, slug: str) -> None:
        pid = hashlib.sha1(project_root.encode()).hexdigest()
        con = self.con
        if pid not in self.projects:
            self.projects.add(pid)
            con.execute(_INSERT_PROJECT, (pid, project_root, project_root.rsplit("/", 1)[-1], s.start, s.start))
        title = s.title if s.title is not None and s.complete else opencode.placeholder_title(s.start)
        con.execute(_INSERT_SESSION, (s.sid, pid, slug, s.cwd, title, opencode.VERSION, s.start, s.end))
        messages: list[tuple[str, str, int, int, str]] = []
        parts: list[tuple[str, str, str, int, int, str]] = []

        def message(ms: int, info: dict[str, Any], body: list[dict[str, Any]]) -> str:
            mid = self._id("msg", ms)
            messages.append((mid, s.sid, ms, ms, orjson.dumps(info).decode()))
            parts.extend((self._id("prt", ms), mid, s.sid, ms, ms + k, orjson.dumps(p).decode())
                         for k, p in enumerate(body))
            return mid

        for turn in s.turns:
            user = message(turn.t, opencode.user_info(turn.t), [opencode.text_part(turn.prompt, turn.t)])
            for step in turn.steps:
                body = [opencode.step_start_part()]
                if step.thinking:
                    body.append(opencode.reasoning_part(step.thinking, step.t))
                if step.text:
                    body.append(opencode.text_part(step.text, step.t))
                body += [_opencode_tool(t) for t in step.tools]
                done = step.tools[-1].t_end if step.tools and step.tools[-1].output is not None else step.t + 1500
                body.append(opencode.step_finish_part("tool-calls" if step.tools else "stop"))
                message(step.t, opencode.assistant_info(step.t, user, s.cwd, completed=done,
                                                        finish="tool-calls" if step.tools else "stop"), body)
        con.executemany(_INSERT_MESSAGE, messages)
        con.executemany(_INSERT_PART, parts)
        self.sessions += 1
        if self.sessions % _OPENCODE_COMMIT_SESSIONS == 0:
            con.execute("COMMIT")
            con.execute("BEGIN")

    def close(self) -> int:
        """Commit, fold the WAL into the database file and close; returns the file's size."""
        self.con.execute("COMMIT")
        self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.con.close()
        return self.path.stat().st_size


def _opencode_tool(t: Tool) -> dict[str, Any]:
    name, args = _tool(_OPENCODE_TOOLS, t)
    if t.output is None:
        return opencode.tool_part(t.call_id, name, args, None, t.t, status="running")
    out = _output(t)
    if t.failed and t.name == "Bash":
        # A failed command still completes; its exit code is in the metadata (the reader prints it).
        return opencode.tool_part(t.call_id, name, args, out.removeprefix(_FAILED_PREFIX), t.t, exit_code=1)
    if t.failed:
        return opencode.tool_part(t.call_id, name, args, None, t.t, status="error", error=out)
    return opencode.tool_part(t.call_id, name, args, out, t.t, exit_code=0 if t.name == "Bash" else None)


# --- GitHub Copilot CLI (docs/formats.md §8) ----------------------------------------------------------------
def copilot_files(s: Session, r: random.Random) -> list[tuple[str, bytes]]:
    """``<id>/events.jsonl`` and ``<id>/workspace.yaml`` (paths relative to ``session-state``)."""
    lines: list[bytes] = []
    parent: str | None = None

    def emit(kind: str, data: dict[str, Any], ms: int) -> None:
        nonlocal parent
        event_id = uuid4(r)
        lines.append(orjson.dumps(copilot.event(kind, data, event_id, iso_ms(ms), parent)) + b"\n")
        parent = event_id

    emit("session.start", copilot.session_start(s.sid, iso_ms(s.start), s.cwd, s.branch, model=s.model), s.start)
    touched: list[str] = []
    for n, turn in enumerate(s.turns):
        emit("user.message", copilot.user_message(turn.prompt, uuid4(r)), turn.t)
        turn_id = str(n)
        emit("assistant.turn_start", copilot.turn(turn_id), turn.t)
        for step in turn.steps:
            if step.thinking:
                # Copilot logs the reasoning on its own and again as reasoningText: the reader keeps one.
                emit("assistant.reasoning", copilot.reasoning(uuid4(r), step.thinking), step.t)
            calls = [(t, *_tool(_COPILOT_TOOLS, t)) for t in step.tools]
            requests = [copilot.tool_request(t.call_id, name, args) for t, name, args in calls]
            emit("assistant.message", copilot.assistant_message(uuid4(r), step.text or "", requests,
                                                                reasoning_text=step.thinking, model=s.model), step.t)
            for t, name, args in calls:
                emit("tool.execution_start", copilot.tool_start(t.call_id, name, args), t.t)
                if t.output is not None:
                    emit("tool.execution_complete", copilot.tool_complete(t.call_id, _output(t), success=not t.failed),
                         t.t_end)
                if name in ("edit", "create"):
                    touched.append(str(args.get("path")))
        emit("assistant.turn_end", copilot.turn(turn_id), turn.steps[-1].t if turn.steps else turn.t)
    if s.complete:
        emit("session.shutdown", copilot.shutdown(sorted(set(touched))[:20]), s.end)
    summary = s.title if s.complete else None
    yaml = copilot.workspace_yaml(s.sid, s.cwd, summary=summary, created_at=iso_ms(s.start))
    return [(f"{s.sid}/events.jsonl", b"".join(lines)), (f"{s.sid}/workspace.yaml", yaml.encode())]
