"""Kimi Code and the Python Kimi CLI (docs/formats.md §20): append-only ``wire.jsonl`` logs.

Both products are ``kimi`` on the command line and both log every session as a ``wire.jsonl``,
read incrementally like Claude's transcripts. Kimi Code (``~/.kimi-code``) writes one log per agent
of a session: the main agent's is the session, each sub-agent's is a session of its own linked to
the agent that started it. The Kimi CLI (``~/.kimi``) writes one log per session and one per
sub-agent instance. Which format a line is in is told by its shape (scanner/parsers/kimi/records.py);
where a log sits, and the titles and work dirs beside it, by scanner/parsers/kimi/store.py.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aivault.scanner.model import Message, ParseStats, RoleName, SessionInfo
from aivault.scanner.parsers.base import LineParser, ParserState, count_skip, stored_as
from aivault.scanner.parsers.jsonutil import as_object
from aivault.scanner.parsers.kimi import records as rec
from aivault.scanner.parsers.kimi.store import MAIN_AGENT, WIRE_FILE, is_internal, layout, side_info, side_titles
from aivault.scanner.parsers.textutil import nonblank, text_crc
from aivault.scanner.sources import Mode, Root
from aivault.scanner.spec import AgentSpec, file_discovery

RESUME = "kimi --session"
GENERIC_AGENT_TYPES = frozenset({"sub", "main"})  # state.json agent types that name no profile


@dataclass(slots=True)
class KimiState(ParserState):
    """What a Kimi parser remembers between passes (stored with every batch)."""

    VERSION: ClassVar[int] = 1
    AGENT: ClassVar[str] = "kimi"

    cwd: str | None = stored_as("cwd")  # Kimi Code's config.update (the state.json work dir wins)
    profile: str | None = stored_as("profile")  # a sub-agent's profile (explore, coder, ...)
    started: int | None = stored_as("t0")
    updated: int | None = stored_as("t1")
    count: int = stored_as("n", 0)
    first_user: str | None = stored_as("first_user")
    # The last prompt's text: the context.append_message that repeats it is not indexed again.
    prompt_crc: int | None = stored_as("prompt")
    # Loop events seen: from then on assistant and tool messages come from them, not from the context.
    loop_seen: bool = stored_as("loop", False)
    stats: ParseStats = stored_as("stats", factory=ParseStats)


class KimiParser(LineParser[KimiState]):
    """Turns the lines of one Kimi ``wire.jsonl`` into Messages (see scanner.model.Parser)."""

    agent = "kimi"
    fallback_time_key = "time"  # Kimi Code's epoch ms; the Kimi CLI's records carry "timestamp"

    def __init__(self, path: str, state: dict[str, Any] | None = None) -> None:
        self.path = path
        self._where = layout(path)
        # Read once per read of the log: a rename between two reads shows on the next one (and
        # through side_titles when only state.json changed).
        self._side = side_info(self._where)
        self.st = KimiState.load(state)

    # -- session ----------------------------------------------------------------------------

    @property
    def session(self) -> SessionInfo:
        """The session as known from the lines fed so far."""
        where, side, st = self._where, self._side, self.st
        cwd = side.cwd or st.cwd
        resume = None
        if not where.desktop:  # Kimi Work's conversations are resumed in the app
            # A sub-agent is continued through its session; Kimi refuses a session from another folder.
            resume = f"{RESUME} {shlex.quote(where.session_id)}"
            if cwd:
                resume = f"cd {shlex.quote(cwd)} && {resume}"
        parent = None
        if where.agent_id is not None:
            parent = where.session_id
            if side.parent_agent not in (None, MAIN_AGENT):
                parent = f"{where.session_id}:{side.parent_agent}"
        return self._session(where.unit_id, self._title(), cwd, None, resume, parent)

    def _title(self) -> str | None:
        if self._where.agent_id is None:
            return self._side.title or self.st.first_user
        kind = self.st.profile or self._side.agent_type
        label = f"subagent ({kind})" if kind and kind not in GENERIC_AGENT_TYPES else "subagent"
        task = self._side.description or self.st.first_user
        return f"{label}: {task}" if task else label

    # -- lines ------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        rtype = obj.get("type")
        if isinstance(rtype, str):
            return self._code(rtype, obj, ms)
        message = obj.get("message")
        if type(message) is dict and isinstance(message.get("type"), str):
            return self._legacy(message["type"], as_object(message.get("payload")), ms)
        return None

    def _prompt(self, text: str, origin: object, ms: int | None, *, echoed: bool = False) -> list[Message]:
        """A prompt: the person's words (user), Kimi's own (injected context, dropped), or a trigger
        Kimi fired (a sub-agent's task is its user prompt; any other is system text). ``echoed``: a
        turn.prompt, which the context repeats next."""
        if not text.strip():
            return []
        if echoed:
            self.st.prompt_crc = text_crc(text)
        if rec.is_person(origin):
            role: RoleName = "user"
        elif as_object(origin).get("kind") == "injection":
            count_skip(self.stats.extra, "injected-context")
            return []
        else:
            role = "user" if self._where.agent_id is not None else "system"
        if role == "user" and self.st.first_user is None:
            self.st.first_user = rec.prompt_title(text)
        return [Message(role, "text", text, ms)]

    # Kimi Code: {"type": "<family>.<event>", "time": <ms>, ...}
    def _code(self, rtype: str, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        if rtype == "context.append_loop_event":
            event = obj.get("event")
            return self._loop(event, ms) if type(event) is dict else None
        if rtype in rec.CODE_PROMPTS:
            return self._prompt(rec.parts_text(obj.get("input")), obj.get("origin"), ms, echoed=True)
        if rtype == "context.append_message":
            message = obj.get("message")
            return self._appended(message, ms) if type(message) is dict else None
        if rtype == "context.apply_compaction":
            summary = nonblank(obj.get("summary")) or nonblank(obj.get("contextSummary"))
            return [Message("system", "text", summary, ms)] if summary else []
        if rtype == "config.update":
            cwd = obj.get("cwd")
            if isinstance(cwd, str) and os.path.isabs(cwd):
                self.st.cwd = cwd
            self.st.profile = nonblank(obj.get("profileName")) or self.st.profile
        elif rtype not in rec.CODE_BOOKKEEPING and not rtype.startswith(rec.CODE_BOOKKEEPING_PREFIXES):
            count_skip(self.stats.extra, "unknown_record", rtype)
        return []

    def _appended(self, message: dict[str, Any], ms: int | None) -> list[Message]:
        """A message that entered the context. A prompt is appended right after its turn.prompt (the
        copy is dropped); reminders Kimi injects arrive here only. Assistant and tool messages come
        from the loop events; logs of protocols without them carry these instead."""
        role, content = message.get("role"), message.get("content")
        if role == "user":
            text = rec.parts_text(content)
            if self.st.prompt_crc is not None and text_crc(text) == self.st.prompt_crc:
                self.st.prompt_crc = None
                count_skip(self.stats.extra, "prompt-echo")
                return []
            return self._prompt(text, message.get("origin"), ms)
        if self.st.loop_seen:
            count_skip(self.stats.extra, "context-copy")
            return []
        out: list[Message] = []
        if role == "assistant":
            text = rec.parts_text(content)
            if text.strip():
                out.append(Message("assistant", "text", text, ms))
            calls = message.get("toolCalls")
            for call in calls if isinstance(calls, list) else []:
                if type(call) is dict:
                    out.append(Message("assistant", "tool_call", rec.code_call(call), ms))
        elif role == "tool":
            text = rec.parts_text(content)
            if text.strip():
                out.append(Message("tool", "tool_result", text, ms))
        else:
            count_skip(self.stats.extra, "unknown_role", role if isinstance(role, str) else "(none)")
        return out

    def _loop(self, event: dict[str, Any], ms: int | None) -> list[Message] | None:
        self.st.loop_seen = True
        etype = event.get("type")
        if etype == "content.part":
            part = event.get("part")
            if type(part) is not dict:
                return None
            mapped = rec.part_message(part)
            if mapped is None:
                count_skip(self.stats.extra, "unparsed_part", str(part.get("type")))
                return []
            return [Message("assistant", mapped[0], mapped[1], ms)]
        if etype == "tool.call":
            return [Message("assistant", "tool_call", rec.code_call(event), ms)]
        if etype == "tool.result":
            text = rec.output_text(as_object(event.get("result")))
            return [Message("tool", "tool_result", text, ms)] if text.strip() else []
        if etype not in rec.CODE_LOOP_BOOKKEEPING:
            count_skip(self.stats.extra, "unknown_event", etype if isinstance(etype, str) else "(none)")
        return []

    # Kimi CLI: {"timestamp": <s>, "message": {"type": <WireType>, "payload": {...}}}
    def _legacy(self, mtype: str, payload: dict[str, Any], ms: int | None) -> list[Message]:
        if mtype in rec.LEGACY_PROMPTS:
            return self._prompt(rec.parts_text(payload.get("user_input")), None, ms)
        if mtype in rec.LEGACY_PARTS:
            mapped = rec.part_message(payload)
            if mapped is None:
                count_skip(self.stats.extra, "unparsed_part", str(payload.get("type")))
                return []
            return [Message("assistant", mapped[0], mapped[1], ms)]
        if mtype == "ToolCall":
            return [Message("assistant", "tool_call", rec.legacy_call(payload), ms)]
        if mtype == "ToolResult":
            text = rec.output_text(as_object(payload.get("return_value")))
            return [Message("tool", "tool_result", text, ms)] if text.strip() else []
        if mtype == "SubagentEvent":
            # The sub-agent's own log (subagents/<id>/wire.jsonl) is indexed as its session.
            count_skip(self.stats.extra, "subagent-event")
        elif mtype not in rec.LEGACY_BOOKKEEPING:
            count_skip(self.stats.extra, "unknown_record", mtype)
        return []


# --- where Kimi keeps its sessions (docs/formats.md §20) ----------------------------------------------
KIMI_WORK_HOME = ("kimi-desktop", "daimon-share", "daimon", "runtime", "kimi-code", "home")


def _home(env: Mapping[str, str], name: str, default: Path) -> Path:
    value = env.get(name)
    return Path(value).expanduser().absolute() if value else default


def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """``$KIMI_CODE_HOME/sessions`` (``~/.kimi-code``), the Kimi CLI's ``$KIMI_SHARE_DIR/sessions``
    (``~/.kimi``), and Kimi Work's kernel home under ``~/Library/Application Support`` (macOS),
    ``$XDG_CONFIG_HOME`` and ``$XDG_DATA_HOME`` (``~/.config``, ``~/.local/share``)."""
    roots = [_home(env, "KIMI_CODE_HOME", home / ".kimi-code"), _home(env, "KIMI_SHARE_DIR", home / ".kimi")]
    config = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else home / ".config"
    data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    for base in (home / "Library" / "Application Support", config, data):
        roots.append(base.joinpath(*KIMI_WORK_HOME))
    return [Root("kimi", str(r / "sessions")) for r in roots]


def _wanted(directory: str, name: str) -> Mode | None:
    if name != WIRE_FILE or is_internal(os.path.basename(layout(os.path.join(directory, name)).session_dir)):
        return None
    return "lines"


SPEC = AgentSpec(
    # <group>/<session>/agents/<agent>/wire.jsonl is four folders below the sessions root.
    name="kimi", label="Kimi Code / Kimi CLI", default_roots=default_roots,
    discover=file_discovery(_wanted, max_depth=4), line_parser=KimiParser, side_titles=side_titles,
    expects="<workdir>/<session>/agents/<agent>/wire.jsonl (Kimi Code) or <md5>/<session>/wire.jsonl (Kimi CLI)",
    shaped=lambda name: name == WIRE_FILE)
