"""Tests for the Claude Code and Codex transcript parsers (scanner.parsers.claude, scanner.parsers.codex)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from aivault.errors import ParserStateError
from aivault.scanner.model import KINDS, ROLES, Message, SessionInfo
from aivault.scanner.parsers.base import EXTRA_KEYS_MAX
from aivault.scanner.parsers.claude import ClaudeParser
from aivault.scanner.parsers.codex import CodexParser, read_session_index
from aivault.scanner.parsers.jsonutil import compact_json, loads_line, to_epoch_ms
from aivault.scanner.parsers.textutil import first_line_title
from tests.builders import claude as cl
from tests.builders import codex as cx
from tests.support.common import FIXTURES, REPO
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

AnyParser = ClaudeParser | CodexParser

CORPUS = FIXTURES / "corpus"
QUIRKS = FIXTURES / "quirks"
SAMPLES = REPO / "samples"

CLAUDE_QUIRKS = QUIRKS / "claude" / "-home-dev-quirks" / "5b3c0a52-8f0e-4d57-9c55-0f5f1f7c2a10.jsonl"
CLAUDE_SIBLING_AGENT = QUIRKS / "claude" / "-home-dev-legacy" / "agent-3f2a1b.jsonl"
CLAUDE_SIDECHAIN = QUIRKS / "claude" / "-home-dev-web" / "sidechain-copy.jsonl"
CLAUDE_SUBAGENT_PARENT = "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f"
CLAUDE_SUBAGENT = (
    CORPUS
    / "claude-code/agent-sessions/claude/subagent"
    / CLAUDE_SUBAGENT_PARENT
    / "subagents/agent-a0ad4f44468bdf20d.jsonl"
)
CODEX_EVENT_FIRST = (
    QUIRKS
    / "codex/sessions/2026/02/03/rollout-2026-02-03T10-00-00-0199c0de-0000-7000-8000-00000000000a.jsonl"
)
CODEX_ITEMS_FIRST = (
    QUIRKS
    / "codex/sessions/2026/02/04/rollout-2026-02-04T08-30-00-0199c0de-0000-7000-8000-00000000000b.jsonl"
)
CODEX_EVENTS_ONLY = (
    QUIRKS / "codex/archived_sessions/rollout-2026-02-05T07-00-00-0199c0de-0000-7000-8000-00000000000c.jsonl"
)
CODEX_LEGACY = (
    QUIRKS
    / "codex/sessions/2025/08/20/rollout-2025-08-20T13-20-47-c27a914d-5e6f-4a0b-9c1d-2e3f4a5b6c7d.jsonl"
)
CODEX_NO_META = (
    QUIRKS
    / "codex/sessions/2026/05/06/rollout-2026-05-06T07-08-09-0199dead-beef-7000-8000-000000000001.jsonl"
)


# -- helpers ---------------------------------------------------------------------------------


def agent_of(path: Path) -> str:
    """'claude' or 'codex', from the first folder below fixtures/corpus, fixtures/quirks or samples."""
    for root in (CORPUS, QUIRKS, SAMPLES):
        if path.is_relative_to(root):
            top = path.relative_to(root).parts[0]
            return "codex" if top == "codex" else "claude"
    raise AssertionError(f"not a fixture: {path}")


def make_parser(path: Path, state: dict[str, Any] | None = None) -> AnyParser:
    if agent_of(path) == "codex":
        return CodexParser(str(path), state)
    return ClaudeParser(str(path), state)


def parse(path: Path) -> tuple[AnyParser, list[Message]]:
    parser = make_parser(path)
    messages: list[Message] = []
    for line in file_lines(path):
        messages.extend(parser.feed(line))
    return parser, messages


def encode(record: dict[str, Any] | bytes) -> bytes:
    return record if isinstance(record, bytes) else json.dumps(record, ensure_ascii=False).encode()


def feed_all(parser: AnyParser, records: Iterable[dict[str, Any] | bytes]) -> list[Message]:
    out: list[Message] = []
    for record in records:
        out.extend(parser.feed(encode(record)))
    return out


def pairs(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


def fixture_files() -> list[Path]:
    files = sorted(CORPUS.rglob("*.jsonl")) + sorted(QUIRKS.rglob("*.jsonl"))
    files += sorted(SAMPLES.rglob("*.jsonl")) if SAMPLES.is_dir() else []
    return [f for f in files if not f.name.startswith(("history", "session_index"))]


SID = "11111111-2222-4333-8444-555555555555"


def claude_line(rtype: str, uuid: str, ts: str = "2026-03-01T10:00:00.000Z", **fields: Any) -> dict[str, Any]:
    """A record of session SID in /home/dev/app (the builders' envelope), with ``fields`` over it."""
    record = cl.envelope(cl.session_fields(SID, "/home/dev/app", "main"), rtype, uuid, None, ts)
    record.update(fields)
    return record


def claude_user(uuid: str, content: Any, **fields: Any) -> dict[str, Any]:
    return claude_line("user", uuid, message={"role": "user", "content": content}, **fields)


def claude_assistant(
    uuid: str, msg_id: str | None, blocks: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "model": "claude-sonnet-4-5", "content": blocks}
    if msg_id is not None:
        message["id"] = msg_id
    return claude_line("assistant", uuid, message=message, **fields)


def codex_line(rtype: str, payload: dict[str, Any], ts: str = "2026-03-02T09:00:00.000Z") -> dict[str, Any]:
    return cx.line(ts, rtype, payload)


def codex_user(text: str) -> dict[str, Any]:
    return codex_line("response_item", cx.user_item(text))


def codex_event(etype: str, **fields: Any) -> dict[str, Any]:
    return codex_line("event_msg", {"type": etype, **fields})


# -- jsonutil and textutil --------------------------------------------------------------------


def test_loads_line_returns_none_instead_of_raising() -> None:
    """Non-JSON, truncated and empty lines give None; JSON of any type is returned as parsed."""
    assert loads_line(b"{not json") is None
    assert loads_line(b'{"a": 1') is None
    assert loads_line(b"") is None
    assert loads_line(b"NaN") is None
    assert loads_line(b"[1, 2]") == [1, 2]
    assert loads_line(b'{"a": "b"}\r') == {"a": "b"}


def test_loads_line_repairs_bad_utf8_bom_and_lone_surrogates() -> None:
    """Invalid UTF-8 bytes, a BOM and unpaired surrogate escapes become U+FFFD instead of losing the line."""
    assert loads_line(b'{"t": "caf\xe9 ok"}') == {"t": "caf\ufffd ok"}
    assert loads_line(b'\xef\xbb\xbf{"t": 1}') == {"t": 1}
    assert loads_line(b'{"t": "cut \\ud83d here"}') == {"t": "cut \ufffd here"}
    assert loads_line(b'{"t": "pair \\ud83d\\ude00"}') == {"t": "pair \U0001f600"}
    # An escaped backslash followed by the letters "ud83d" is literal text, not a surrogate.
    assert loads_line(b'{"t": "\\\\ud83d", "u": "\\udc00"}') == {"t": "\\ud83d", "u": "\ufffd"}


def test_to_epoch_ms_accepts_iso_and_epoch_numbers() -> None:
    """ISO-8601 with Z or offsets and fractions, epoch ms and epoch s all map to epoch ms; garbage to None."""
    assert to_epoch_ms("2026-03-01T10:00:00.000Z") == 1772359200000
    assert to_epoch_ms("2026-03-01T10:00:00.123456Z") == 1772359200123
    assert to_epoch_ms("2026-03-01T12:00:00+02:00") == 1772359200000
    assert to_epoch_ms("2026-03-01T10:00:00") == 1772359200000
    assert to_epoch_ms(1772359200000) == 1772359200000
    assert to_epoch_ms(1772359200) == 1772359200000
    assert to_epoch_ms(1772359200.25) == 1772359200250
    garbage: list[object] = ["[trimmed for fixture]", "", None, True, 42, float("nan"), [], {"t": 1}]
    for value in garbage:
        assert to_epoch_ms(value) is None


def test_first_line_title_takes_first_nonblank_line_and_truncates() -> None:
    """Titles are the first non-blank line, stripped, at most ``limit`` characters."""
    assert first_line_title("\n\n  Fix the build  \nmore") == "Fix the build"
    long = first_line_title("x" * 200)
    assert long is not None and len(long) == 80 and long.endswith("…")
    assert first_line_title(" \n\t\n") is None
    assert first_line_title("abcdef", limit=4) == "abc…"


def test_compact_json_keeps_unicode_and_survives_big_ints() -> None:
    """compact_json writes no spaces, keeps non-ASCII text and falls back for values orjson refuses."""
    assert compact_json({"a": [1, "café"]}) == '{"a":[1,"café"]}'
    assert compact_json({"n": 2**70}) == '{"n":1180591620717411303424}'


# -- Claude ---------------------------------------------------------------------------------


def test_claude_split_assistant_lines_are_deduplicated() -> None:
    """Blocks of one response spread over lines, and re-written on later lines, are emitted once each."""
    parser, messages = parse(CLAUDE_QUIRKS)
    assistant = [(m.kind, m.text) for m in messages if m.role == "assistant"]
    assert assistant[:3] == [
        ("thinking", "The loop probably never advances past an empty line."),
        ("text", "Let me read the reader loop."),
        ("tool_call", 'Read {"file_path":"/home/dev/quirks/reader.py","limit":40}'),
    ]
    assert parser.stats.extra["duplicate_blocks"] == 2
    # Lines without message.id cannot be matched, so identical texts on them are both kept.
    assert [t for k, t in assistant].count("Running pytest.") == 2


def test_claude_same_text_in_a_new_response_is_not_a_duplicate() -> None:
    """Dedupe is per message.id: the same text in the next API response is a new message."""
    parser = ClaudeParser("/x/s.jsonl")
    out = feed_all(
        parser,
        [
            claude_assistant("a1", "msg_1", [{"type": "text", "text": "Done."}]),
            claude_assistant("a2", "msg_1", [{"type": "text", "text": "Done."}]),
            claude_assistant("a3", "msg_2", [{"type": "text", "text": "Done."}]),
        ],
    )
    assert pairs(out) == [("assistant", "text", "Done."), ("assistant", "text", "Done.")]


def test_claude_parallel_identical_tool_calls_are_both_kept() -> None:
    """Two tool_use blocks with equal input but different ids in one response are two calls."""
    blocks = [
        {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "ls"}},
    ]
    out = feed_all(ClaudeParser("/x/s.jsonl"), [claude_assistant("a1", "msg_1", blocks)])
    assert pairs(out) == [("assistant", "tool_call", 'Bash {"command":"ls"}')] * 2


def test_claude_meta_and_injected_user_text_dropped() -> None:
    """isMeta lines, <system-reminder>/<command-*>/caveat markup never become messages or the title."""
    parser = ClaudeParser("/x/s.jsonl")
    out = feed_all(
        parser,
        [
            claude_user("u1", "<local-command-caveat>Caveat: ...</local-command-caveat>", isMeta=True),
            claude_user("u2", "Base directory for this skill: /home/dev/.claude/skills/pdf", isMeta=True),
            claude_user(
                "u3", "<command-name>/clear</command-name>\n<command-message>clear</command-message>"
            ),
            claude_user("u4", "  <system-reminder>\nstay focused\n</system-reminder>"),
            claude_user("u5", "<local-command-stdout>Cleared</local-command-stdout>"),
            claude_user(
                "u6",
                "Caveat: The messages below were generated by the user while running local commands. DO NOT…",
            ),
            claude_user(
                "u7",
                [
                    {"type": "text", "text": "<system-reminder>todo list is empty</system-reminder>"},
                    {"type": "text", "text": "Why is the build red?"},
                    {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                ],
            ),
        ],
    )
    assert pairs(out) == [("user", "text", "Why is the build red?")]
    assert parser.session.title == "Why is the build red?"
    assert parser.stats.skipped == 6


def test_claude_meta_tool_results_are_kept() -> None:
    """A tool_result on an isMeta line (Claude Code 2.1 marks some so) is still indexed as tool output."""
    _, messages = parse(CLAUDE_QUIRKS)
    assert ("tool", "tool_result", "  10→while pos < end:\n  11→    if not line: continue") in pairs(messages)


def test_claude_compact_summary_is_system_text_and_never_a_title() -> None:
    """isCompactSummary user lines become role=system kind=text and are not used as the title."""
    parser = ClaudeParser("/x/s.jsonl")
    out = feed_all(
        parser,
        [
            claude_user(
                "u1", "This session is being continued from a previous conversation.", isCompactSummary=True
            ),
            claude_user("u2", "Next: add the migration"),
        ],
    )
    assert pairs(out) == [
        ("system", "text", "This session is being continued from a previous conversation."),
        ("user", "text", "Next: add the migration"),
    ]
    assert parser.session.title == "Next: add the migration"


def test_claude_local_command_output_is_system_text_without_markup() -> None:
    """system/local_command becomes system text with markup tags stripped; other subtypes are skipped."""
    parser = ClaudeParser("/x/s.jsonl")
    out = feed_all(
        parser,
        [
            claude_line(
                "system",
                "s1",
                subtype="local_command",
                content="<local-command-stdout>Set model to opus</local-command-stdout>",
            ),
            claude_line("system", "s2", subtype="turn_duration", durationMs=1200),
            claude_line("system", "s3", subtype="compact_boundary", content="Conversation compacted"),
        ],
    )
    assert pairs(out) == [("system", "text", "Set model to opus")]
    assert parser.stats.skipped == 2


def test_claude_tool_call_and_result_text() -> None:
    """tool_use is '<name> <compact JSON input>', tool_result joins the text blocks of list content."""
    out = feed_all(
        ClaudeParser("/x/s.jsonl"),
        [
            claude_assistant(
                "a1",
                "m1",
                [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Edit",
                        "input": {"file_path": "/a.py", "old": "é"},
                    }
                ],
            ),
            claude_user(
                "u1",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                    },
                    {"type": "tool_result", "tool_use_id": "t2", "content": "plain string", "is_error": True},
                    {"type": "tool_result", "tool_use_id": "t3", "content": []},
                ],
            ),
        ],
    )
    assert pairs(out) == [
        ("assistant", "tool_call", 'Edit {"file_path":"/a.py","old":"é"}'),
        ("tool", "tool_result", "one\ntwo"),
        ("tool", "tool_result", "plain string"),
    ]


def test_claude_empty_and_redacted_thinking_skipped() -> None:
    """Thinking with empty text (signature only) and redacted_thinking produce no messages."""
    out = feed_all(
        ClaudeParser("/x/s.jsonl"),
        [
            claude_assistant(
                "a1",
                "m1",
                [
                    {"type": "thinking", "thinking": "", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "thinking", "thinking": "real plan", "signature": "sig"},
                ],
            )
        ],
    )
    assert pairs(out) == [("assistant", "thinking", "real plan")]


def test_claude_title_precedence_latest_of_each_kind_wins() -> None:
    """custom-title > ai-title > summary > first user text; a later value of one kind replaces the earlier."""
    parser = ClaudeParser("/x/s.jsonl")
    steps: list[tuple[dict[str, Any], str]] = [
        (claude_user("u1", "first question\nwith details"), "first question"),
        (claude_user("u2", "second question"), "first question"),
        ({"type": "summary", "summary": "Summary title", "leafUuid": "u2"}, "Summary title"),
        ({"type": "ai-title", "sessionId": SID, "aiTitle": "AI title"}, "AI title"),
        ({"type": "summary", "summary": "Newer summary", "leafUuid": "u1"}, "AI title"),
        ({"type": "custom-title", "sessionId": SID, "customTitle": "my title"}, "my title"),
        ({"type": "ai-title", "sessionId": SID, "aiTitle": "Newer AI title"}, "my title"),
        ({"type": "custom-title", "sessionId": SID, "customTitle": "  renamed  "}, "renamed"),
        ({"type": "custom-title", "sessionId": SID, "customTitle": ""}, "renamed"),
    ]
    for record, expected in steps:
        parser.feed(encode(record))
        assert parser.session.title == expected


def test_claude_summary_needs_its_leaf_in_this_file() -> None:
    """A summary without a sessionId counts only when its leafUuid is a line of this file, before or after it."""
    parser = ClaudeParser("/x/s.jsonl")
    feed_all(
        parser,
        [
            {"type": "summary", "summary": "About another session", "leafUuid": "elsewhere"},
            {"type": "summary", "summary": "Pending summary", "leafUuid": "u9"},
            claude_user("u1", "hello there"),
        ],
    )
    assert parser.session.title == "hello there"
    parser.feed(encode(claude_user("u9", "later line")))
    assert parser.session.title == "Pending summary"

    after = ClaudeParser("/x/t.jsonl")
    feed_all(
        after,
        [claude_user("u1", "question"), {"type": "summary", "summary": "After the leaf", "leafUuid": "u1"}],
    )
    assert after.session.title == "After the leaf"


def test_claude_pending_summaries_are_bounded() -> None:
    """Only the latest 20 summaries wait for their leaf; older ones are forgotten, keeping state small."""
    parser = ClaudeParser("/x/s.jsonl")
    feed_all(
        parser, [{"type": "summary", "summary": f"summary {i}", "leafUuid": f"leaf-{i}"} for i in range(25)]
    )
    assert len(parser.state()["pending"]) == 20
    parser.feed(encode(claude_user("leaf-0", "x")))
    assert parser.session.title == "x"
    parser.feed(encode(claude_user("leaf-24", "y")))
    assert parser.session.title == "summary 24"


def test_claude_summary_carrying_a_session_id_is_trusted_for_that_session_only() -> None:
    """A summary's own sessionId decides: another session's is ignored even if its leaf is here."""
    parser = ClaudeParser("/x/s.jsonl")
    feed_all(
        parser,
        [
            claude_user("u1", "first prompt"),
            {"type": "summary", "summary": "Another session", "leafUuid": "u1", "sessionId": "other-session"},
        ],
    )
    assert parser.session.title == "first prompt"
    parser.feed(encode({"type": "summary", "summary": "This session", "sessionId": SID}))
    assert parser.session.title == "This session"


def test_claude_records_skipped_for_an_unknown_shape_are_counted_by_reason() -> None:
    """Unknown record types and tool/summary records of no known shape are counted in stats.extra by reason."""
    parser = ClaudeParser("/x/s.jsonl")
    out = feed_all(
        parser,
        [
            {"type": "frobnicate", "sessionId": SID},
            {"type": "frobnicate", "sessionId": SID},
            {"type": "tool_use", "input": {"command": "ls"}},
            {"type": "tool_result", "name": "bash", "exitCode": 1},
            {"type": "summary", "leafUuid": "u1"},
            {"type": "permission-mode", "permissionMode": "default", "sessionId": SID},
        ],
    )
    assert out == []
    assert parser.stats.skipped == 6
    assert parser.stats.extra == {
        "unknown_record:frobnicate": 2,
        "unparsed_record:tool_use": 1,
        "unparsed_record:tool_result": 1,
        "unparsed_record:summary": 1,
    }


def test_skip_reason_keys_are_capped() -> None:
    """Hundreds of made-up record types keep stats.extra to a bounded key set, with every record still counted."""
    parser = ClaudeParser("/x/s.jsonl")
    feed_all(parser, [{"type": f"invented-{i}-" + "x" * 200} for i in range(300)])
    extra = parser.stats.extra
    assert len(extra) == EXTRA_KEYS_MAX + 1  # the capped keys plus the overflow key
    assert sum(extra.values()) == 300 and extra["unknown_record:other"] == 300 - EXTRA_KEYS_MAX
    assert max(len(key) for key in extra) == len("unknown_record:") + 40
    assert len(msgpack.packb(parser.state())) < 8192


def test_claude_latest_cwd_branch_and_relocation() -> None:
    """cwd and branch follow the latest non-empty values; a relocated record moves the cwd."""
    parser = ClaudeParser("/x/s.jsonl")
    feed_all(parser, [claude_user("u1", "a", cwd="/home/dev/one", gitBranch="main")])
    assert (parser.session.cwd, parser.session.branch) == ("/home/dev/one", "main")
    feed_all(parser, [claude_user("u2", "b", cwd="/home/dev/two", gitBranch="feat/x")])
    feed_all(parser, [claude_user("u3", "c", cwd="", gitBranch="")])
    assert (parser.session.cwd, parser.session.branch) == ("/home/dev/two", "feat/x")
    parser.feed(encode({"type": "relocated", "sessionId": SID, "relocatedCwd": "/home/dev/two-worktree"}))
    session = parser.session
    assert session.cwd == "/home/dev/two-worktree"
    assert session.resume_command == f"cd /home/dev/two-worktree && claude --resume {SID}"


def test_claude_quirk_file_session_summary() -> None:
    """The hand-written quirk file yields the expected ids, title, times, counts and resume command."""
    parser, messages = parse(CLAUDE_QUIRKS)
    session = parser.session
    assert session == SessionInfo(
        agent="claude",
        session_id="5b3c0a52-8f0e-4d57-9c55-0f5f1f7c2a10",
        title="blank-line hang",
        cwd="/home/dev/quirks-worktree",
        branch="fix/blank-lines",
        started_at=to_epoch_ms("2026-02-10T09:00:00.000Z"),
        updated_at=to_epoch_ms("2026-02-10T10:02:00.000Z"),
        message_count=12,
        resume_command="cd /home/dev/quirks-worktree && claude --resume 5b3c0a52-8f0e-4d57-9c55-0f5f1f7c2a10",
        parent_session_id=None,
    )
    assert len(messages) == 12
    assert messages[0] == Message(
        "system", "text", "Set model to opus (claude-opus-4-1)", to_epoch_ms("2026-02-10T09:00:02.000Z")
    )
    assert messages[-1].text == "café bad byte \ufffd here"
    # Five malformed lines: not JSON, an array, a bare string, a non-object message, a non-string type.
    assert (parser.stats.lines, parser.stats.malformed) == (29, 5)


def test_claude_subagent_2_1_layout() -> None:
    """<parent>/subagents/agent-<id>.jsonl is its own session, linked to its parent, titled by agentType."""
    parser, messages = parse(CLAUDE_SUBAGENT)
    session = parser.session
    assert session.session_id == "agent-a0ad4f44468bdf20d"
    assert session.parent_session_id == CLAUDE_SUBAGENT_PARENT
    assert session.title == "subagent (general-purpose): Search the repo for TODO comments"
    assert session.resume_command == f"cd /tmp && claude --resume {CLAUDE_SUBAGENT_PARENT}"
    assert [m.kind for m in messages] == ["text", "text", "tool_call", "tool_result"]


def test_claude_subagent_parent_comes_from_lines(tmp_path: Path) -> None:
    """Subagent lines carrying the parent's sessionId name the parent; an unreadable meta.json is ignored."""
    folder = tmp_path / "-home-dev-app" / "not-the-parent" / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-abc123.meta.json").write_bytes(b"{broken")
    path = folder / "agent-abc123.jsonl"
    parser = ClaudeParser(str(path))
    feed_all(parser, [claude_user("u1", "Audit the SQL for injection", isSidechain=True, agentId="abc123")])
    session = parser.session
    assert (session.session_id, session.parent_session_id) == ("agent-abc123", SID)
    assert session.title == "subagent: Audit the SQL for injection"


def test_claude_subagent_sibling_layout() -> None:
    """A ≤2.0 sibling agent-<id>.jsonl takes its parent from the lines and resumes the parent."""
    parser, _ = parse(CLAUDE_SIBLING_AGENT)
    session = parser.session
    assert session.session_id == "agent-3f2a1b"
    assert session.parent_session_id == "9d1e7c44-3b2a-4f10-8e21-6a5b4c3d2e1f"
    assert session.title == "subagent: Find every TODO in src/ and group them by owner"
    assert (
        session.resume_command
        == "cd /home/dev/legacy && claude --resume 9d1e7c44-3b2a-4f10-8e21-6a5b4c3d2e1f"
    )


def test_claude_sidechain_recognised_from_lines_and_title_record_wins() -> None:
    """A file starting with a sidechain line with agentId is a subagent; a title record beats the prefix."""
    parser, _ = parse(CLAUDE_SIDECHAIN)
    session = parser.session
    assert session.session_id == "agent-b77e0f"
    assert session.parent_session_id == "c0ffee00-1111-4222-8333-944445555666"
    assert session.title == "Accessibility review of the diff"


def test_claude_main_session_never_turns_into_a_subagent() -> None:
    """Sidechain lines later in a main session do not change its identity."""
    parser = ClaudeParser("/x/main.jsonl")
    feed_all(parser, [claude_user("u1", "hi"), claude_user("u2", "side", isSidechain=True, agentId="zzz")])
    assert (parser.session.session_id, parser.session.parent_session_id) == (SID, None)


def test_claude_session_id_falls_back_to_file_stem() -> None:
    """Without any sessionId the file stem is the id, and it is what resume uses."""
    parser = ClaudeParser("/p/-home-dev-x/2b1f9a7e-0000-4000-8000-000000000001.jsonl")
    parser.feed(
        encode(
            {
                "type": "user",
                "uuid": "u",
                "message": {"role": "user", "content": "hi"},
                "cwd": "/home/dev/my app",
            }
        )
    )
    session = parser.session
    assert session.session_id == "2b1f9a7e-0000-4000-8000-000000000001"
    assert (
        session.resume_command
        == "cd '/home/dev/my app' && claude --resume 2b1f9a7e-0000-4000-8000-000000000001"
    )


# -- Codex ----------------------------------------------------------------------------------


def test_codex_event_stream_first_is_not_indexed_twice() -> None:
    """Events seen before any response_item are emitted; their response_item copies are then skipped."""
    parser, messages = parse(CODEX_EVENT_FIRST)
    texts = pairs(messages)
    question = "why does /login 500?\nIt started after the PyJWT upgrade."
    assert texts.count(("user", "text", question)) == 1
    assert texts.count(("assistant", "thinking", "**Checking the auth handler**")) == 1
    fixed = 'Fixed: PyJWT 2 requires `algorithms=["HS256"]` in jwt.decode().'
    assert texts.count(("assistant", "text", fixed)) == 1
    assert texts.count(("user", "text", "also add a regression test")) == 1
    assert parser.stats.extra["duplicate_stream"] == 2
    assert messages[0].ts == to_epoch_ms("2026-02-03T10:00:01.000Z")  # the event's copy was the one kept


def test_codex_response_items_first_events_ignored() -> None:
    """With response_items present the event copies are ignored, and a repeated prompt is still kept."""
    _, messages = parse(CODEX_ITEMS_FIRST)
    prompt = "Add a /healthz endpoint that checks the DB pool"
    assert pairs(messages) == [
        ("user", "text", prompt),
        ("assistant", "thinking", "**Finding the router**\n**Reusing the pool check**"),
        ("assistant", "text", "Added GET /healthz; it runs `SELECT 1` on a pooled connection."),
        ("user", "text", prompt),
    ]


def test_codex_reasoning_split_over_events_is_matched_part_by_part() -> None:
    """One agent_reasoning event per summary part, seen before the reasoning item, is not duplicated."""
    parser = CodexParser("/x/rollout.jsonl")
    out = feed_all(
        parser,
        [
            codex_event("agent_reasoning", text="**Plan**"),
            codex_event("agent_reasoning", text="**Check**"),
            codex_line(
                "response_item",
                {
                    "type": "reasoning",
                    "summary": [
                        {"type": "summary_text", "text": "**Plan**"},
                        {"type": "summary_text", "text": "**Check**"},
                    ],
                },
            ),
        ],
    )
    assert pairs(out) == [("assistant", "thinking", "**Plan**"), ("assistant", "thinking", "**Check**")]


def test_codex_event_only_file() -> None:
    """A rollout with only event_msg records is indexed from the events, injected context still dropped."""
    parser, messages = parse(CODEX_EVENTS_ONLY)
    assert pairs(messages) == [
        ("user", "text", "Summarize CHANGELOG.md for the 2.0 release notes"),
        ("assistant", "thinking", "Reading the changelog"),
        ("assistant", "thinking", "Reading the changelog"),
        ("assistant", "text", "2.0 drops Python 3.9 and adds async sessions."),
    ]
    assert parser.session.title == "Summarize CHANGELOG.md for the 2.0 release notes"


def test_codex_injected_context_dropped_shell_command_kept() -> None:
    """Injected AGENTS.md/environment/instruction messages and developer prompts drop; shell commands stay."""
    parser = CodexParser("/x/rollout.jsonl")
    injected = [
        "# AGENTS.md instructions for /home/dev/api\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>",
        "\n  <environment_context>\n  <cwd>/home/dev/api</cwd>\n</environment_context>",
        "<user_instructions>answer in English</user_instructions>",
        "<INSTRUCTIONS>x</INSTRUCTIONS>",
        "<permissions instructions>sandbox</permissions instructions>",
    ]
    out = feed_all(parser, [codex_user(text) for text in injected])
    developer = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "You are Codex."}],
    }
    out += feed_all(
        parser,
        [codex_line("response_item", developer), codex_user("<user_shell_command>ls</user_shell_command>")],
    )
    assert pairs(out) == [("user", "text", "<user_shell_command>ls</user_shell_command>")]
    assert parser.stats.skipped == 6


def test_codex_tool_calls_and_outputs() -> None:
    """Argument JSON strings are decoded (raw if invalid); outputs are unwrapped from strings, lists, JSON."""
    _, messages = parse(CODEX_EVENT_FIRST)
    calls = [m.text for m in messages if m.kind == "tool_call"]
    assert calls == [
        'shell {"command":["bash","-lc","rg -n \'def login\' src"],"timeout_ms":10000}',
        "shell not json {",
        "apply_patch *** Begin Patch\n*** Update File: src/auth.py\n@@\n-    jwt.decode(token, key)\n"
        '+    jwt.decode(token, key, algorithms=["HS256"])\n*** End Patch\n',
        'local_shell {"type":"exec","command":["pytest","-q","tests/test_auth.py"]}',
        'web_search {"type":"search","query":"pyjwt 2 decode algorithms required"}',
    ]
    results = [m.text for m in messages if m.kind == "tool_result"]
    assert results == [
        "src/auth.py:12:def login(request):\n",
        "jwt.decode(token, key)\n"
        'DecodeError: It is required that you pass in a value for the "algorithms" argument',
        "Success. Updated the following files:\nM src/auth.py\n",
    ]
    assert all(m.role == "tool" for m in messages if m.kind == "tool_result")


def test_codex_unknown_items_and_records_are_counted_by_reason() -> None:
    """Response items and records of unknown type are counted in stats.extra by name; known bookkeeping is not."""
    parser = CodexParser("/x/rollout.jsonl")
    out = feed_all(
        parser,
        [
            codex_line("response_item", {"type": "tool_search_call", "call_id": "c1", "arguments": {}}),
            codex_line("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
            codex_line("response_item", {"type": 7}),
            codex_line("world_state", {"full": True}),
            codex_line("mystery_record", {"x": 1}),
            codex_event("task_started"),
        ],
    )
    assert out == [] and parser.stats.skipped == 6
    assert parser.stats.extra == {
        "unknown_item:tool_search_call": 1,
        "unknown_item:(none)": 1,
        "unknown_record:mystery_record": 1,
    }


def test_codex_encrypted_only_reasoning_skipped() -> None:
    """Reasoning with an empty summary (only encrypted_content) produces nothing."""
    parser = CodexParser("/x/rollout.jsonl")
    out = feed_all(
        parser,
        [codex_line("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"})],
    )
    assert out == [] and parser.stats.skipped == 1


def test_codex_session_metadata() -> None:
    """Id, branch, fork parent from session_meta; cwd from the latest turn_context; title from thread name."""
    parser, messages = parse(CODEX_EVENT_FIRST)
    assert parser.session == SessionInfo(
        agent="codex",
        session_id="0199c0de-0000-7000-8000-00000000000a",
        title="login 500 after PyJWT upgrade",
        cwd="/home/dev/api/services/auth",
        branch="feat/login",
        started_at=to_epoch_ms("2026-02-03T10:00:00.000Z"),
        updated_at=to_epoch_ms("2026-02-03T11:00:02.000Z"),
        message_count=len(messages),
        resume_command="codex resume 0199c0de-0000-7000-8000-00000000000a",
        parent_session_id="0199c0de-0000-7000-8000-0000000000ff",
    )
    assert messages[-1] == Message(
        "system",
        "text",
        "Fixed the /login 500 (PyJWT 2 algorithms argument); a regression test is pending.",
        to_epoch_ms("2026-02-03T11:00:00.000Z"),
    )


def test_codex_title_before_and_after_thread_name() -> None:
    """The first real user text is the title until a thread name is set, which then wins."""
    parser = CodexParser("/x/rollout.jsonl")
    feed_all(
        parser,
        [
            codex_user("<environment_context></environment_context>"),
            codex_user("\n  fix the flaky test\nplease"),
        ],
    )
    assert parser.session.title == "fix the flaky test"
    parser.feed(encode(codex_event("thread_name_updated", thread_name="flaky test")))
    assert parser.session.title == "flaky test"


def test_codex_only_the_first_session_meta_counts() -> None:
    """Later session_meta records (copied from forked or sub-agent threads) do not change the identity."""
    parser = CodexParser("/x/rollout.jsonl")
    meta = {"id": "first-id", "cwd": "/home/dev/a", "git": {"branch": "main"}}
    other = {"id": "other-id", "cwd": "/home/dev/b", "git": {"branch": "other"}, "forked_from_id": "zzz"}
    feed_all(parser, [codex_line("session_meta", meta), codex_line("session_meta", other)])
    session = parser.session
    assert (session.session_id, session.cwd, session.branch, session.parent_session_id) == (
        "first-id",
        "/home/dev/a",
        "main",
        None,
    )


def test_codex_session_id_from_file_name() -> None:
    """Without session_meta the UUID at the end of the rollout file name is the id; otherwise the stem."""
    parser, messages = parse(CODEX_NO_META)
    assert parser.session.session_id == "0199dead-beef-7000-8000-000000000001"
    assert parser.session.title == "what does the --frozen flag of uv sync do?"
    assert len(messages) == 2
    assert CodexParser("/x/custom-name.jsonl").session.session_id == "custom-name"


def test_codex_legacy_bare_format() -> None:
    """Early Rust rollouts (bare SessionMeta, items, record_type=state and {role, message} lines) are read."""
    parser, messages = parse(CODEX_LEGACY)
    assert pairs(messages) == [
        ("user", "text", "index the pre-envelope rollouts\nsecond line of the same turn"),
        ("assistant", "tool_call", 'shell {"command":["ls"]}'),
        ("tool", "tool_result", "README.md\nsrc"),
        ("assistant", "text", "Both rollouts are indexed now."),
        ("user", "text", "an object of a shape no Codex build wrote"),
    ]
    assert all(m.ts is None for m in messages[:4])
    # The last line is the {created_at, role, message} shape of the corpus drift file.
    assert messages[4].ts == to_epoch_ms("2025-08-20T13:21:00Z")
    session = parser.session
    assert session.session_id == "c27a914d-5e6f-4a0b-9c1d-2e3f4a5b6c7d"
    assert session.branch == "legacy-main"
    assert session.started_at == to_epoch_ms("2025-08-20T13:20:47.060Z")
    assert session.updated_at == to_epoch_ms("2025-08-20T13:21:00Z")
    assert (parser.stats.malformed, parser.stats.skipped) == (0, 4)


def test_read_session_index_last_line_wins() -> None:
    """session_index.jsonl maps id → thread_name; later lines override, empty clears, junk is ignored."""
    data = b"\n".join(
        [
            b'{"id":"a","thread_name":"first name","updated_at":"2026-01-01T00:00:00Z"}',
            b'{"id":"b","thread_name":"bee"}',
            b"not json",
            b'["a","array"]',
            b'{"id":"a","thread_name":"  second name "}',
            b'{"id":"c","thread_name":"sea"}',
            b'{"id":"c","thread_name":""}',
            b'{"id":"d","thread_name":7}',
            b'{"id":"b"}',
            b"",
        ]
    )
    assert read_session_index(data) == {"a": "second name", "b": "bee"}
    assert read_session_index(b"") == {}


# -- both parsers -----------------------------------------------------------------------------

PARSERS = [
    pytest.param(lambda: ClaudeParser("/p/-home-dev-x/s.jsonl"), id="claude"),
    pytest.param(lambda: CodexParser("/p/rollout-2026-01-01T00-00-00-x.jsonl"), id="codex"),
]


@pytest.mark.parametrize("factory", PARSERS)
def test_malformed_lines_never_raise_and_are_counted(factory: Any) -> None:
    """Garbage, non-object JSON, wrong shapes and undecodable bytes are counted as malformed, never raised."""
    parser = factory()
    garbage = [
        b"{",
        b"not json",
        b"42",
        b"[1, 2]",
        b'"string"',
        b"null",
        b"\xff\xfe\x00garbage",
        b'{"type": "user", "message": [1]}' if isinstance(parser, ClaudeParser) else b'{"type": "mystery"}',
        b'{"type": "assistant", "message": {"content": 5}}'
        if isinstance(parser, ClaudeParser)
        else b'{"no": "type"}',
    ]
    for line in garbage:
        assert parser.feed(line) == []
    assert (parser.stats.lines, parser.stats.malformed, parser.stats.skipped) == (
        len(garbage),
        len(garbage),
        0,
    )
    assert parser.session.message_count == 0
    assert parser.feed(b"") == [] and parser.feed(b"  \r") == []
    assert parser.stats.skipped == 2


@pytest.mark.parametrize("factory", PARSERS)
def test_invalid_utf8_inside_a_record_is_repaired(factory: Any) -> None:
    """A record with invalid UTF-8 bytes in a string is still parsed, the bad byte replaced by U+FFFD."""
    parser = factory()
    if isinstance(parser, ClaudeParser):
        line = encode(claude_user("u1", "naïve PLACEHOLDER")).replace(b"PLACEHOLDER", b"\xc3\x28 ok")
    else:
        line = encode(codex_user("naïve PLACEHOLDER")).replace(b"PLACEHOLDER", b"\xc3\x28 ok")
    assert pairs(parser.feed(line)) == [("user", "text", "naïve \ufffd( ok")]


@pytest.mark.parametrize("factory", PARSERS)
def test_ten_megabyte_line_parses(factory: Any) -> None:
    """A single 10 MB tool output line is parsed whole."""
    parser = factory()
    big = "0123456789abcdef\n" * (10 * 1024 * 1024 // 17)
    if isinstance(parser, ClaudeParser):
        record = claude_user("u1", [{"type": "tool_result", "tool_use_id": "t", "content": big}])
    else:
        record = codex_line("response_item", {"type": "function_call_output", "call_id": "c", "output": big})
    line = encode(record)
    assert len(line) > 10_000_000
    out = parser.feed(line)
    assert len(out) == 1 and out[0].kind == "tool_result" and out[0].text == big


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_state_resume_at_every_split_point(path: Path) -> None:
    """Parsing lines 1..k, saving state through msgpack and resuming for k+1..n equals one whole pass."""
    assert_resumes_at_every_split(lambda state: make_parser(path, state), path)


@pytest.mark.parametrize("factory", PARSERS)
def test_state_stays_bounded_on_long_sessions(factory: Any) -> None:
    """Thousands of lines (uuids, summaries, split responses, event messages) leave the state a few KB."""
    parser = factory()
    for i in range(5000):
        if isinstance(parser, ClaudeParser):
            record = claude_assistant(f"a{i}", "msg_same", [{"type": "text", "text": f"block {i}"}])
            parser.feed(encode(record))
            parser.feed(encode({"type": "summary", "summary": f"s{i}", "leafUuid": f"nowhere-{i}"}))
        else:
            parser.feed(encode(codex_event("user_message", message=f"prompt {i}")))
    size = len(msgpack.packb(parser.state()))
    assert size < 8192, size


@pytest.mark.parametrize("factory", [ClaudeParser, CodexParser])
def test_foreign_or_corrupt_state_is_rejected(factory: Any) -> None:
    """A state of another version or with wrong field types raises ParserStateError, never resumes wrongly."""
    good = factory("/x/rollout.jsonl").state()
    for bad in ({}, {**good, "v": 999}, {**good, "stats": "x"}, {**good, "t0": "yesterday"}):
        with pytest.raises(ParserStateError):
            factory("/x/rollout.jsonl", bad)


def test_stats_account_for_every_line() -> None:
    """Every fed line is counted and is either malformed, skipped, or produced at least one message."""
    for path in fixture_files():
        parser = make_parser(path)
        productive = sum(1 for line in file_lines(path) if parser.feed(line))
        stats = parser.stats
        assert stats.lines == len(file_lines(path))
        assert stats.lines == stats.malformed + stats.skipped + productive, path


# -- the copied corpus ------------------------------------------------------------------------

CORPUS_SESSION_IDS = {
    "claude-code/agent-history/compaction/claude/session_with_compaction.jsonl": "compact-session-001",
    "claude-code/agent-history/forks/claude_forked_session.jsonl": "fork-session-001",
    "claude-code/agent-history/rejections/claude_with_rejection.jsonl": "rejection-claude-001",
    "claude-code/agent-history/telemetry/claude_history.jsonl": "claude_history",
    "claude-code/agent-history/v1/claude_golden.jsonl": "golden-claude-001",
    "claude-code/agent-sessions/claude/large.jsonl": "ses_stage0_large",
    "claude-code/agent-sessions/claude/schema_drift.jsonl": "ses_stage0_drift",
    "claude-code/agent-sessions/claude/small.jsonl": "ses_stage0_small",
    f"claude-code/agent-sessions/claude/subagent/{CLAUDE_SUBAGENT_PARENT}.jsonl": CLAUDE_SUBAGENT_PARENT,
    str(CLAUDE_SUBAGENT.relative_to(CORPUS)): "agent-a0ad4f44468bdf20d",
    "claude-code/claude-code-log/edge_cases.jsonl": "edge_cases",
    "claude-code/claude-code-log/representative_messages.jsonl": "test_session",
    "claude-code/claude-code-log/todowrite_examples.jsonl": "todowrite_session",
    "codex/agent-history/compaction/codex/session_with_compaction.jsonl": "compact-codex-001",
    "codex/agent-history/rejections/codex_with_escalation.jsonl": "rejection-codex-001",
    "codex/agent-history/telemetry/codex_history.jsonl": "codex_history",
    "codex/agent-history/v1/codex_golden.jsonl": "golden-codex-001",
    "codex/agent-sessions/codex/large.jsonl": "019b2ea4-aaaa-bbbb-cccc-58208e1f0000",
    "codex/agent-sessions/codex/schema_drift.jsonl": "schema_drift",
    "codex/agent-sessions/codex/small.jsonl": "019fc8be-3658-7ca3-9e29-000000000000",
    "codex/agent-sessions/codex_050_legacy.jsonl": "test-legacy-session",
    "codex/agent-sessions/codex_053_rate_limit.jsonl": "test-ratelimit-session",
    "codex/claude-code-transcripts/sample_codex_session.jsonl": "019b64e5-57fa-7463-b644-fba7e456f905",
}


# Files with deliberately broken lines: edge_cases.jsonl has a non-object message, a message
# without content, a bare string, a typeless object, a number and an array.
CORPUS_MALFORMED = {
    "claude-code/claude-code-log/edge_cases.jsonl": 6,
}


def test_corpus_fixture_list_is_complete() -> None:
    """Every copied Claude/Codex corpus transcript has an expected session id below (and every listed file exists)."""
    found = {str(p.relative_to(CORPUS)) for agent in ("claude-code", "codex")
             for p in (CORPUS / agent).rglob("*.jsonl")}
    assert found == set(CORPUS_SESSION_IDS)


@pytest.mark.parametrize("relpath", sorted(CORPUS_SESSION_IDS))
def test_corpus_fixture_parses_sanely(relpath: str) -> None:
    """Each copied real-format file parses without exceptions into a sane session with valid messages."""
    parser, messages = parse(CORPUS / relpath)
    session = parser.session
    assert session.session_id == CORPUS_SESSION_IDS[relpath]
    assert session.agent == ("codex" if relpath.startswith("codex/") else "claude")
    assert session.message_count == len(messages)
    if session.started_at is not None:
        assert session.updated_at is not None and session.started_at <= session.updated_at
    for message in messages:
        assert message.role in ROLES and message.kind in KINDS
        assert isinstance(message.text, str) and message.text.strip()
    if "telemetry" in relpath:  # prompt-history files are not transcripts: every line is malformed
        assert messages == [] and parser.stats.malformed == parser.stats.lines > 0
    else:
        assert parser.stats.malformed == CORPUS_MALFORMED.get(relpath, 0)


def test_corpus_claude_compaction_summary_record_titles_and_is_indexed() -> None:
    """A summary record of this session, written as a compaction line, is the title and a system message."""
    parser, messages = parse(CORPUS / "claude-code/agent-history/compaction/claude/session_with_compaction.jsonl")
    summary = (
        "Previous conversation summary: Working on authentication module. Added login functionality "
        "and beginning session management with JWT."
    )
    assert parser.session.title == first_line_title(summary, 120)
    assert len(messages) == 16  # 6 user lines, 3+3 assistant lines of one and two blocks, the summary
    assert messages[10] == Message("system", "text", summary, to_epoch_ms("2025-12-16T10:37:05.000Z"))
    assert (parser.stats.skipped, parser.stats.extra) == (1, {})  # only the compact_boundary line


def test_corpus_claude_drift_top_level_tool_records_are_parsed() -> None:
    """The drift file's top-level tool_use / tool_result records become a tool call and its result."""
    parser, messages = parse(CORPUS / "claude-code/agent-sessions/claude/schema_drift.jsonl")
    assert messages == [
        Message("user", "text", "Open README", to_epoch_ms("2025-12-16T01:00:00.000Z")),
        Message("assistant", "tool_call", 'bash {"command":"cat README.md"}', to_epoch_ms("2025-12-16T01:00:01.000Z")),
        Message("tool", "tool_result", "# Title\n\nBody\n", to_epoch_ms("2025-12-16T01:00:02.000Z")),
        Message("assistant", "text", "Read README and extracted the title.", to_epoch_ms("2025-12-16T01:00:03.000Z")),
        Message("user", "text", "List files", to_epoch_ms("2026-03-31T00:00:05.000Z")),
    ]
    # turn_duration, permission-mode, mode, attachment and stop_hook_summary are bookkeeping.
    assert (parser.stats.malformed, parser.stats.skipped, parser.stats.extra) == (0, 5, {})


def test_corpus_codex_0_106_tool_call_and_tool_result_items() -> None:
    """The 0.106 rollout's tool_call / tool_result response items become a tool call and its output."""
    parser, messages = parse(CORPUS / "codex/agent-sessions/codex/large.jsonl")
    assert len(messages) == 15  # "Start" once (event copy), 2 answers, the tool pair, 5 steps and 5 "Ok"s
    assert messages[2:4] == [
        Message(
            "assistant",
            "tool_call",
            'run_shell_command {"command":"printf \'line1\\\\nline2\\\\nline3\\\\n\'","cwd":"/tmp/large"}',
            to_epoch_ms("2025-12-18T10:00:03.000Z"),
        ),
        Message("tool", "tool_result", "line1\nline2\nline3\n", to_epoch_ms("2025-12-18T10:00:04.000Z")),
    ]
    assert parser.stats.skipped == 5  # meta, turn_context, token_count, the repeated "Start", environment


def test_corpus_codex_drift_prompt_and_answer_are_parsed() -> None:
    """The drift file's envelope-less {role, message} prompt, function_result and {role, content} answer are parsed."""
    parser, messages = parse(CORPUS / "codex/agent-sessions/codex/schema_drift.jsonl")
    assert messages == [
        Message("user", "text", "Translate 'hello' to Spanish", to_epoch_ms("2025-09-10T12:00:00Z")),
        Message("assistant", "tool_call", 'translate {"text":"hello","to":"es"}', to_epoch_ms("2025-09-10T12:00:01Z")),
        Message("tool", "tool_result", "hola", to_epoch_ms("2025-09-10T12:00:01Z")),
        Message("assistant", "text", '"hola"', to_epoch_ms("2025-09-10T12:00:02Z")),
    ]
    assert parser.session.title == "Translate 'hello' to Spanish"
    # world_state is bookkeeping and the file ends with an empty line.
    assert (parser.stats.malformed, parser.stats.skipped, parser.stats.extra) == (0, 2, {})


def test_corpus_real_codex_excerpt_drops_injected_context() -> None:
    """In the real Codex 0.77 excerpt the AGENTS.md and environment_context messages are dropped."""
    parser, messages = parse(CORPUS / "codex/claude-code-transcripts/sample_codex_session.jsonl")
    assert len(messages) == 1
    assert messages[0].text.startswith("can you analyse the MD files in this directory")
    assert parser.session.cwd == "/Users/macmini/Code/homelab-migration"


# -- the shipped samples --------------------------------------------------------------------

CLAUDE_PROJECTS = "claude/projects"
STOREFRONT = "c4d5e6f7-0819-4a2b-8c3d-4e5f60718293"
# relpath → (session_id, title, cwd, branch, parent_session_id)
SAMPLE_SESSIONS: dict[str, tuple[str, str, str, str, str | None]] = {
    f"{CLAUDE_PROJECTS}/-home-dev-analytics/3e1f8a42-7b9c-4d21-9e0a-5c6b7d8e9f01.jsonl": (
        "3e1f8a42-7b9c-4d21-9e0a-5c6b7d8e9f01",
        "duckdb lock fix",
        "/home/dev/analytics",
        "fix/duckdb-lock",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-chatbot/8a7b6c5d-4e3f-4a1b-9c2d-0e1f2a3b4c5d.jsonl": (
        "8a7b6c5d-4e3f-4a1b-9c2d-0e1f2a3b4c5d",
        "Fix pytest hang from asyncio event loop",
        "/home/dev/chatbot",
        "main",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-storefront/{STOREFRONT}.jsonl": (
        STOREFRONT,
        "React hydration mismatch in PriceTag fixed",
        "/home/dev/storefront",
        "feat/ssr-prices",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-storefront/{STOREFRONT}/subagents/agent-a7c41e9b2d5f60718.jsonl": (
        "agent-a7c41e9b2d5f60718",
        "subagent (Explore): Find every component or helper in /home/dev/storefront/src that formats prices…",
        "/home/dev/storefront",
        "feat/ssr-prices",
        STOREFRONT,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-tilegrid/0f9e8d7c-6b5a-4948-8a7b-6c5d4e3f2a1b.jsonl": (
        "0f9e8d7c-6b5a-4948-8a7b-6c5d4e3f2a1b",
        "Rust borrow checker: double-buffer Grid::step",
        "/home/dev/tilegrid/crates/grid-core",
        "refactor/double-buffer",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-i18n-slugger/5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d.jsonl": (
        "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d",
        "Slugs for café, 修復 and 안녕하세요 come out different on macOS and Linux.",
        "/home/dev/i18n-slugger",
        "fix/nfc-normalization",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-vscode-ext/6c7d8e9f-a0b1-4c2d-9e3f-4a5b6c7d8e9f.jsonl": (
        "6c7d8e9f-a0b1-4c2d-9e3f-4a5b6c7d8e9f",
        "resolveTerminalPath returns undefined for foo_bar.ts on Windows",
        "/home/dev/vscode-ext",
        "main",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-ops-scripts/7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a.jsonl": (
        "7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a",
        "deploy.sh fails in the alpine container with `deploy.sh: line 14: [[: not found…",
        "/home/dev/ops-scripts",
        "chore/posix-sh",
        None,
    ),
    f"{CLAUDE_PROJECTS}/-home-dev-metrics-ui/8e9f0a1b-2c3d-4e4f-9a5b-6c7d8e9f0a1b.jsonl": (
        "8e9f0a1b-2c3d-4e4f-9a5b-6c7d8e9f0a1b",
        "Vite build crash: undefined ticks in chart.min.js",
        "/home/dev/metrics-ui",
        "fix/chart-ticks",
        None,
    ),
    "codex/sessions/2026/01/27/rollout-2026-01-27T11-04-52-019bff20-b420-7ec3-8168-2fde56191795.jsonl": (
        "019bff20-b420-7ec3-8168-2fde56191795",
        "flaky CI cache",
        "/home/dev/webapp",
        "ci/cache-key",
        None,
    ),
    "codex/sessions/2026/02/16/rollout-2026-02-16T15-22-09-019c670b-70e8-7844-8ecc-08164e2eab27.jsonl": (
        "019c670b-70e8-7844-8ecc-08164e2eab27",
        "Write the Alembic migration that adds 'refunded' to the order_status enum and b…",
        "/home/dev/orders-api",
        "feat/order-status",
        None,
    ),
    "codex/sessions/2026/04/08/rollout-2026-04-08T09-47-30-019d6c7d-6350-7844-8b69-c4d54cc264bc.jsonl": (
        "019d6c7d-6350-7844-8b69-c4d54cc264bc",
        "Memory of the ingest worker grows ~40 MB/hour and pprof shows thousands of goro…",
        "/home/dev/ingest",
        "main",
        None,
    ),
    "codex/sessions/2026/06/03/rollout-2026-06-03T13-30-00-019e8dad-37c0-7798-85b0-c8b858e77f57.jsonl": (
        "019e8dad-37c0-7798-85b0-c8b858e77f57",
        "slim docker image",
        "/home/dev/api-gateway",
        "chore/docker-slim",
        None,
    ),
    "codex/sessions/2026/07/21/rollout-2026-07-21T06-58-14-019f8377-cb70-729f-8239-4eb92d0ded92.jsonl": (
        "019f8377-cb70-729f-8239-4eb92d0ded92",
        "terraform plan in envs/staging says Error acquiring the state lock: Conditional…",
        "/home/dev/infra/envs/staging",
        "infra/staging-rds",
        None,
    ),
    "codex/sessions/2026/09/14/rollout-2026-09-14T10-10-10-01a09f65-47d0-7052-8022-0e0f12bb847b.jsonl": (
        "01a09f65-47d0-7052-8022-0e0f12bb847b",
        "`uv sync --frozen` passes locally but CI says: The lockfile at `uv.lock` needs…",
        "/home/dev/mlkit",
        "main",
        None,
    ),
    "codex/archived_sessions/rollout-2026-11-05T22-03-41-01a1adbd-3648-78cf-83eb-bdacddfddd6f.jsonl": (
        "01a1adbd-3648-78cf-83eb-bdacddfddd6f",
        "payments-api pods are in CrashLoopBackOff right after the JVM upgrade. kubectl…",
        "/home/dev/platform-charts",
        "fix/probe-timeouts",
        None,
    ),
}


def test_samples_list_is_complete() -> None:
    """Every shipped sample transcript is listed with its expected session (at least 8 Claude, 7 Codex)."""
    # Other agents' samples (samples/<agent>/) are checked by their own test modules.
    found = {str(p.relative_to(SAMPLES)) for p in SAMPLES.rglob("*.jsonl")
             if p.name != "session_index.jsonl" and p.relative_to(SAMPLES).parts[0] in ("claude", "codex")}
    assert found == set(SAMPLE_SESSIONS)
    main_claude = [p for p in found if p.startswith("claude/") and "/subagents/" not in p]
    assert len(main_claude) >= 8 and sum(p.startswith("codex/") for p in found) >= 7


@pytest.mark.parametrize("relpath", sorted(SAMPLE_SESSIONS))
def test_sample_parses_to_expected_session(relpath: str) -> None:
    """Each sample parses cleanly to its expected id, title, cwd, branch and parent."""
    parser, messages = parse(SAMPLES / relpath)
    session = parser.session
    expected = SAMPLE_SESSIONS[relpath]
    actual = (session.session_id, session.title, session.cwd, session.branch, session.parent_session_id)
    assert actual == expected
    assert parser.stats.malformed == 0
    assert session.message_count == len(messages) > 0
    assert session.started_at is not None and session.updated_at is not None
    assert 1767225600000 <= session.started_at <= session.updated_at  # 2026-01-01T00:00:00Z


def sample_text(relpath: str) -> str:
    return "\n".join(m.text for m in parse(SAMPLES / relpath)[1])


def test_samples_carry_the_searchable_content() -> None:
    """The distinctive strings the demo searches for are in the parsed sample messages."""
    keys = {k.split("/")[-1][:8] if k.startswith("claude") else k.split("-")[-5]: k for k in SAMPLE_SESSIONS}
    assert 'Could not set lock on file "/home/dev/analytics/data/warehouse.duckdb"' in sample_text(
        keys["3e1f8a42"]
    )
    assert "attached to a different loop" in sample_text(keys["8a7b6c5d"])
    assert "Hydration failed" in sample_text(keys["c4d5e6f7"])
    assert "error[E0499]: cannot borrow `*self` as mutable" in sample_text(keys["0f9e8d7c"])
    unicode = sample_text(keys["5a6b7c8d"])
    assert all(word in unicode for word in ("café", "修復", "안녕하세요"))
    ts_session = sample_text(keys["6c7d8e9f"])
    assert "resolveTerminalPath" in ts_session and "foo_bar.ts" in ts_session
    brackets = sample_text(keys["7d8e9f0a"])
    assert "[[ -f x ]]" in brackets and "[[1,2]]" in brackets
    long_lines = [line for line in sample_text(keys["8e9f0a1b"]).split("\n") if len(line) > 3072]
    # The marker sits past the first 3,072 characters of a single line: indexes that cut long lines lose it.
    assert len(long_lines) == 1 and long_lines[0].find("latency-p99-chart") > 3072
    assert "Cannot find module '@esbuild/linux-x64'" in sample_text(keys["019bff20"])
    assert "ADD VALUE cannot run inside a transaction block" in sample_text(keys["019c670b"])


def test_sample_quirks_are_exercised() -> None:
    """The samples contain re-written responses, injected context and duplicated Codex streams."""
    slugger, _ = parse(
        SAMPLES / f"{CLAUDE_PROJECTS}/-home-dev-i18n-slugger/5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d.jsonl"
    )
    assert slugger.stats.extra["duplicate_blocks"] == 2
    events_first, _ = parse(
        SAMPLES
        / "codex/sessions/2026/04/08/rollout-2026-04-08T09-47-30-019d6c7d-6350-7844-8b69-c4d54cc264bc.jsonl"
    )
    # Only the first event (before any response_item) is emitted; its item copy is the duplicate.
    assert events_first.stats.extra["duplicate_stream"] == 1
    assert events_first.session.message_count == 10
    for relpath in SAMPLE_SESSIONS:
        texts = sample_text(relpath)
        for marker in (
            "<environment_context>",
            "# AGENTS.md instructions",
            "<system-reminder>",
            "<command-name>",
        ):
            assert marker not in texts, (relpath, marker)
    raw = b"".join((SAMPLES / p).read_bytes() for p in SAMPLE_SESSIONS)
    for raw_marker in (
        b"<environment_context>",
        b"# AGENTS.md instructions",
        b"<system-reminder>",
        b'"isMeta":true',
    ):
        assert raw_marker in raw


def test_sample_session_index_names_threads() -> None:
    """samples/codex/session_index.jsonl names three Codex threads, the last line per id winning."""
    names = read_session_index((SAMPLES / "codex/session_index.jsonl").read_bytes())
    assert names == {
        "019bff20-b420-7ec3-8168-2fde56191795": "flaky CI cache",
        "019c670b-70e8-7844-8ecc-08164e2eab27": "pg migration: order status enum",
        "01a1adbd-3648-78cf-83eb-bdacddfddd6f": "k8s probe crashloop",
    }
