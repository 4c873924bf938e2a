"""Tests for the GitHub Copilot CLI reader (scanner.copilot, docs/formats.md §8)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgpack
import pytest

from aivault.errors import ParserStateError, UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.model import Message
from aivault.scanner.parsers.copilot import (
    CopilotParser,
    default_roots,
    read_history_unit,
    side_titles,
    workspace_fields,
)
from aivault.scanner.sources import Found, Root
from aivault.scanner.spec import file_discovery
from tests.builders import copilot as cb
from tests.builders.copilot import CopilotWriter
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "copilot-cli" / "agent-sessions" / "copilot"
QUIRKS = REPO / "tests" / "fixtures" / "quirks" / "copilot"
SAMPLES = REPO / "samples" / "copilot" / ".copilot"
QUIRK_ID = "5f0c2a1e-3b4d-4c5e-8f60-7a8b9c0d1e2f"
QUIRK_EVENTS = QUIRKS / "session-state" / QUIRK_ID / "events.jsonl"
FLAT_ID = "0c1d2e3f-4a5b-4c6d-9e7f-8a9b0c1d2e3f"
HISTORY = QUIRKS / "history-session-state" / "session_7e8f9a0b-1c2d-4e3f-8a4b-5c6d7e8f9a0b_1759958016398.json"


def parse(path: Path) -> tuple[CopilotParser, list[Message]]:
    parser = CopilotParser(str(path))
    return parser, [m for line in file_lines(path) for m in parser.feed(line)]


def feed(parser: CopilotParser, *records: dict[str, Any] | bytes) -> list[Message]:
    out: list[Message] = []
    for r in records:
        out += parser.feed(r if isinstance(r, bytes) else json.dumps(r).encode())
    return out


def triples(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


def ev(kind: str, data: dict[str, Any], n: int = 1) -> dict[str, Any]:
    return cb.event(kind, data, f"e{n}", f"2026-03-01T10:00:{n:02d}.000Z", None)


# -- the corpus (agent-sessions fixtures), counts verified by reading each file --------------------

# large.jsonl: user Step 1/2/3 (3), assistant "Ok", "Captured multiline output.", "Ok" (3), the
# call_1 request with its result (2), and call_2 announced only by tool.execution_start (1) = 9;
# model_change/info/system.message/turn/hook/truncation lines are bookkeeping.
# schema_drift.jsonl: call_1's start (1; the assistant.message repeating it is a duplicate), its
# result (1), call_2's orphan result (1), "Finished." (1) = 4.
# small.jsonl: "List the files", "Listing the files.", call-1, its result, "Done" (5), then the
# trimmed tail: 3 results, reasoningText, 3 texts, 1 call (all trimmed calls share one id, so the
# later ones are duplicates), 1 user message; the trimmed assistant.reasoning repeats the
# reasoningText = 9; 14 in all.
# subdir_v1 events.jsonl: user, the call (execution_start repeats it), its result, the answer = 4.
CORPUS_EXPECTED = {
    "large.jsonl": ("copilot_stage0_large", 9, "Step 1", None),
    "schema_drift.jsonl": ("copilot_stage0_drift", 4, None, None),
    "small.jsonl": ("copilot_stage0_small", 14, "List the files", "/tmp/repo"),
    "subdir_v1/aaaabbbb-1111-2222-3333-ccccddddeeee/events.jsonl":
        ("aaaabbbb-1111-2222-3333-ccccddddeeee", 4, "List the files", "/tmp/project"),
}


def test_corpus_list_is_complete() -> None:
    """Every copied Copilot corpus file has expected counts below."""
    assert {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.jsonl")} == set(CORPUS_EXPECTED)


@pytest.mark.parametrize("relpath", sorted(CORPUS_EXPECTED))
def test_corpus_file_parses_to_the_counted_messages(relpath: str) -> None:
    """Each corpus file yields the hand-counted messages, its own session id, title and cwd."""
    sid, count, title, cwd = CORPUS_EXPECTED[relpath]
    parser, messages = parse(CORPUS / relpath)
    session = parser.session
    assert (session.session_id, len(messages), session.message_count) == (sid, count, count)
    assert (session.title, session.cwd) == (title, cwd)
    assert session.resume_command == f"copilot --resume={sid}"
    assert parser.stats.malformed == 0
    assert all(m.text.strip() for m in messages)
    assert session.started_at is not None and session.updated_at is not None


def test_corpus_tool_call_announced_twice_is_one_call() -> None:
    """subdir_v1: the toolRequests entry and tool.execution_start of call_1 give one tool_call."""
    parser, messages = parse(CORPUS / "subdir_v1/aaaabbbb-1111-2222-3333-ccccddddeeee/events.jsonl")
    assert triples(messages) == [
        ("user", "text", "List the files"),
        ("assistant", "tool_call", 'bash {"command":"ls","description":"List files"}'),
        ("tool", "tool_result", "file1\nfile2\n"),
        ("assistant", "text", "The directory contains file1 and file2."),
    ]
    assert parser.stats.extra == {"duplicate_tool_call": 1}
    assert parser.session.branch == "main"


def test_corpus_arguments_as_json_string() -> None:
    """small.jsonl's toolRequests carry arguments as a JSON string: the call text holds the compact object."""
    _, messages = parse(CORPUS / "small.jsonl")
    assert ("assistant", "tool_call", 'shell {"command":"ls"}') in triples(messages)


# -- quirks -----------------------------------------------------------------------------------------

def test_quirk_file_messages() -> None:
    """Skill messages dropped, reasoning and calls de-duplicated, args/arguments, error results, compaction."""
    parser, messages = parse(QUIRK_EVENTS)
    assert triples(messages) == [
        ("user", "text", "Why does the cache TTL test flake on CI?"),
        ("assistant", "thinking", "The TTL check compares wall-clock times; look at cache.py."),
        ("assistant", "text", "Looking at the cache module first."),
        ("assistant", "tool_call", 'view {"path":"src/cache.py"}'),
        ("tool", "tool_result", "TTL_SECONDS = 0.5\nexpired = time.time() - entry.stamp > TTL_SECONDS"),
        ("assistant", "tool_call", 'bash {"command":"pytest -k ttl -x"}'),
        ("tool", "tool_result", "exit code 1: test_ttl_expiry FAILED (clock went backwards)"),
        ("system", "text", "Summary: the TTL test flakes because cache.py compares time.time() stamps; "
                           "NTP steps the clock."),
        ("user", "text", "Use a monotonic clock instead."),
        ("assistant", "text", "Switched the stamps to time.monotonic(); the flake is gone."),
    ]
    assert parser.stats.extra == {
        "skill_context": 2, "duplicate_reasoning": 1, "duplicate_tool_call": 2,
        "unknown_record:session.compaction": 1, "unknown_record:assistant.quota_snapshot": 1,
    }
    assert parser.stats.malformed == 0


def test_quirk_session_metadata() -> None:
    """The /rename name wins over the generated summary; session.resume moves cwd and branch."""
    parser, _ = parse(QUIRK_EVENTS)
    s = parser.session
    assert s.session_id == QUIRK_ID
    assert s.title == "cache ttl: it's the clock"
    assert (s.cwd, s.branch) == ("/home/dev/quirks/pkg", "fix/monotonic-ttl")
    assert s.resume_command == f"copilot --resume={QUIRK_ID}"
    assert (s.started_at, s.updated_at) == (1776675600010, 1776684622000)


def test_legacy_flat_layout() -> None:
    """session-state/<id>.jsonl (before 1.0.11): id from session.start, title from the first prompt."""
    parser, messages = parse(QUIRKS / "session-state" / f"{FLAT_ID}.jsonl")
    assert parser.session.session_id == FLAT_ID
    assert parser.session.title == "rename the --verbose flag to --debug in cli.ts"
    assert len(messages) == 2


def test_legacy_history_document() -> None:
    """history-session-state/session_<id>_<ts>.json is read whole: chat messages, tool calls, times."""
    st = os.stat(HISTORY)
    unit = read_history_unit(Found(str(HISTORY), "copilot", st.st_dev, st.st_ino, st.st_size, 0, "whole"))
    assert triples(unit.messages) == [
        ("user", "text", "please add the github mcp server to my config"),
        ("assistant", "text", "Reading the MCP config first."),
        ("assistant", "tool_call",
         'str_replace_editor {"command":"view","path":"/home/dev/.copilot/mcp-config.json"}'),
        ("tool", "tool_result", '{"mcpServers": {}}'),
        ("assistant", "text", "Added the github server under mcpServers."),
    ]
    assert unit.skips == {"system_prompt": 1}
    s = unit.session
    assert (s.session_id, s.message_count) == ("7e8f9a0b-1c2d-4e3f-8a4b-5c6d7e8f9a0b", 5)
    assert (s.started_at, s.updated_at) == (1759957816398, 1759957831500)
    walked = list(file_discovery(lambda d, n: "whole" if n.endswith(".json") else None)(
        Root("copilot", str(HISTORY.parent)), [], None, True))
    assert [f.mtime_ns for f in walked] == [unit.signature], "the signature read is the one discovery saw"


def test_history_document_being_written_or_broken(tmp_path: Path) -> None:
    """A cut-off document is UnitChanged (retried); valid JSON that is no object is UnitUnreadable."""
    doc = tmp_path / "session_x_1.json"
    doc.write_text('{"sessionId": "x", "chatMessages": [{"role": "user", "content": "hal')
    found = Found(str(doc), "copilot", 0, 0, 0, 0, "whole")
    with pytest.raises(UnitChanged):
        read_history_unit(found)
    doc.write_text("[1, 2]")
    with pytest.raises(UnitUnreadable):
        read_history_unit(found)
    doc.write_bytes(b'{"sessionId": "x", "chatMessages": [{"role": "user", "content": "caf\xe9 ok"}, 7]}')
    unit = read_history_unit(found)
    assert triples(unit.messages) == [("user", "text", "caf\ufffd ok")] and unit.skips == {"malformed-record": 1}


def test_skill_message_marked_by_source_or_content() -> None:
    """A user.message with source skill-* or starting with <skill-context is not user speech, nor a title."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    out = feed(parser,
               ev("user.message", cb.user_message("<skill-context name=\"a\">x</skill-context>", "i"), 1),
               ev("user.message", cb.user_message("Use the gh skill body", "i", source="skill-gh"), 2),
               ev("user.message", cb.user_message("real question", "i", source="user"), 3))
    assert triples(out) == [("user", "text", "real question")]
    assert parser.session.title == "real question"


def test_arguments_under_args_or_arguments_object_or_string() -> None:
    """Tool arguments are found under either key, as an object or a JSON string, and compacted alike."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    out = feed(parser,
               ev("assistant.message", cb.assistant_message("m1", "", [
                   cb.tool_request("a", "view", {"path": "a.py"}),
                   cb.tool_request("b", "view", '{"path": "b.py"}'),
                   cb.tool_request("c", "view", {"path": "c.py"}, key="args"),
                   cb.tool_request("d", "view", "not json"),
               ]), 1),
               ev("tool.execution_start", cb.tool_start("e", "bash", {"command": "ls"}, key="args"), 2),
               ev("tool.execution_start", cb.tool_start("f", "bash", {}), 3))
    assert [m.text for m in out] == ['view {"path":"a.py"}', 'view {"path":"b.py"}', 'view {"path":"c.py"}',
                                      "view not json", 'bash {"command":"ls"}', "bash {}"]


def test_call_announced_by_start_first_then_request_is_one_call() -> None:
    """tool.execution_start before the assistant.message naming the same toolCallId: one call, not two."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    out = feed(parser,
               ev("tool.execution_start", cb.tool_start("c1", "bash", {"command": "make"}), 1),
               ev("assistant.message", cb.assistant_message("m", "Building.", [
                   cb.tool_request("c1", "bash", {"command": "make"})]), 2),
               ev("tool.execution_complete", cb.tool_complete("c1", "ok"), 3))
    assert triples(out) == [("assistant", "tool_call", 'bash {"command":"make"}'),
                            ("assistant", "text", "Building."), ("tool", "tool_result", "ok")]


def test_bookkeeping_and_unknown_events_are_counted_not_indexed() -> None:
    """Shutdown, usage, hooks, abort, subagent and system events are skipped; unknown types are counted by name."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    kinds = ["session.shutdown", "session.usage_checkpoint", "hook.start", "hook.end", "abort",
             "subagent.started", "subagent.completed", "system.message", "system.notification",
             "assistant.turn_start", "session.model_change"]
    out = feed(parser, *(ev(k, {"content": "noise", "reason": "x"}, i) for i, k in enumerate(kinds)),
               ev("session.brand_new", {"x": 1}, 50))
    assert out == []
    assert parser.stats.skipped == len(kinds) + 1
    assert parser.stats.extra == {"unknown_record:session.brand_new": 1}
    assert feed(parser, {"type": "user.message", "data": "not an object"}) == []
    assert feed(parser, {"data": {}}) == []
    assert parser.stats.malformed == 2


def test_compaction_summary_is_system_text() -> None:
    """session.compaction_complete's summaryContent is kept as a system message; a failed one is not."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    out = feed(parser,
               ev("session.compaction_complete", {"success": True, "summaryContent": "we fixed the cache"}, 1),
               ev("session.compaction_complete", {"success": False, "summaryContent": "partial"}, 2),
               ev("session.compaction_start", {"preCompactionTokens": 10}, 3))
    assert triples(out) == [("system", "text", "we fixed the cache")]


# -- workspace.yaml ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("name: build perf\n", "build perf"),
    ('name: "quoted: with colon \\u00e9"\n', "quoted: with colon é"),
    ("name: 'it''s single'\n", "it's single"),
    ("name: plain # a comment\n", "plain"),
    ("name: |\n  first line\n  second\n", "first line\nsecond"),
    ("name: >-\n  folded\n  text\n", "folded text"),
    ("name: long plain\n  continued here\n", "long plain continued here"),
    ("context:\n  name: nested\nname: top\n", "top"),
    ("  name: indented only\n", None),
    ("name:\n  - a list\n", None),
    ("name: ~\n", None),
    ("---\nname: after marker\n", "after marker"),
])
def test_workspace_yaml_top_level_name(text: str, expected: str | None) -> None:
    """Only the top-level name: is read, quoted or not, as Copilot writes it."""
    assert workspace_fields(text).get("name") == expected


def test_workspace_title_falls_back_to_the_summary(tmp_path: Path) -> None:
    """Without a /rename name the generated summary is the title; without either, the first prompt."""
    w = CopilotWriter(tmp_path / "session-state", cwd="/home/dev/site")
    w.user("why is the build slow?")
    (w.dir / "workspace.yaml").write_text(cb.workspace_yaml(w.session_id, "/home/dev/site", summary="Build perf"))
    parser, _ = parse(w.path)
    assert parser.session.title == "Build perf"
    (w.dir / "workspace.yaml").write_text(cb.workspace_yaml(w.session_id, "/home/dev/site"))
    parser, _ = parse(w.path)
    assert parser.session.title == "why is the build slow?"


def test_side_titles_report_only_changed_workspace_files(tmp_path: Path) -> None:
    """side_titles yields a folder's title once, then again only after its workspace.yaml changes."""
    state = tmp_path / "session-state"
    w = CopilotWriter(state).user("hello")
    w.rename("first name")
    root = Root("copilot", str(state))
    sigs: dict[str, Any] = {}
    assert list(side_titles(root, sigs)) == [(w.session_id, "first name")]
    assert list(side_titles(root, sigs)) == []
    w.rename("a much longer second name")
    assert list(side_titles(root, sigs)) == [(w.session_id, "a much longer second name")]
    assert list(side_titles(Root("copilot", str(tmp_path / "missing")), sigs)) == []


# -- robustness ------------------------------------------------------------------------------------

def test_truncated_unknown_non_utf8_and_empty_input() -> None:
    """A cut-off last line is malformed, unknown events are counted, bad bytes are repaired, empty is nothing."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    good = json.dumps(ev("user.message", cb.user_message("caf PLACEHOLDER", "i"))).encode()
    out = parser.feed(good.replace(b"PLACEHOLDER", b"\xe9\xff ok"))
    assert triples(out) == [("user", "text", "caf \ufffd\ufffd ok")]
    assert parser.feed(good[: len(good) // 2]) == []
    assert parser.feed(b"") == [] and parser.feed(b"\xff\xfe") == []
    assert feed(parser, ev("totally.new", {"a": 1})) == []
    assert (parser.stats.malformed, parser.stats.skipped) == (2, 2)
    assert parser.stats.extra == {"unknown_record:totally.new": 1}
    empty = CopilotParser("/s/session-state/empty/events.jsonl")
    assert empty.session.session_id == "empty" and empty.session.message_count == 0


def _split_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.jsonl")) + sorted(QUIRKS.rglob("*.jsonl")) + sorted(SAMPLES.rglob("*.jsonl"))


@pytest.mark.parametrize("path", _split_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_state_resume_at_every_split_point(path: Path) -> None:
    """Parsing lines 1..k, saving state through msgpack and resuming for k+1..n equals one whole pass."""
    assert_resumes_at_every_split(lambda state: CopilotParser(str(path), state), path)


def test_state_stays_bounded_and_foreign_state_is_rejected() -> None:
    """Thousands of calls and reasonings keep the state small; a state of another shape is refused."""
    parser = CopilotParser("/s/session-state/x/events.jsonl")
    for i in range(3000):
        feed(parser, ev("tool.execution_start", cb.tool_start(f"call-{i}", "bash", {"i": i})),
             ev("assistant.reasoning", cb.reasoning(f"r{i}", f"thinking step {i}")))
    assert len(msgpack.packb(parser.state())) < 8192
    good = parser.state()
    for bad in ({}, {**good, "v": 99}, {**good, "calls": ["x"]}, {**good, "t0": "soon"}):
        with pytest.raises(ParserStateError):
            CopilotParser("/s/x.jsonl", bad)


# -- roots and discovery ----------------------------------------------------------------------------

def test_default_roots_follow_copilot_home(tmp_path: Path) -> None:
    """~/.copilot by default, $COPILOT_HOME when set; both the current and the legacy history folder."""
    assert [r.path for r in default_roots({}, tmp_path)] == [
        str(tmp_path / ".copilot" / "session-state"), str(tmp_path / ".copilot" / "history-session-state")]
    moved = default_roots({"COPILOT_HOME": str(tmp_path / "c")}, tmp_path)
    assert moved[0].path == str(tmp_path / "c" / "session-state")


def test_discovery_finds_every_layout_and_nothing_else() -> None:
    """events.jsonl folders, flat <id>.jsonl and legacy session_*.json are units; workspace.yaml is not."""
    from aivault.scanner.parsers.copilot import SPEC

    found = {Path(f.path).relative_to(QUIRKS).as_posix(): f.mode
             for r in (Root("copilot", str(QUIRKS / "session-state")),
                       Root("copilot", str(QUIRKS / "history-session-state")))
             for f in SPEC.discover(r, [], {}, True)}
    assert found == {
        f"session-state/{QUIRK_ID}/events.jsonl": "lines",
        f"session-state/{FLAT_ID}.jsonl": "lines",
        f"history-session-state/{HISTORY.name}": "whole",
    }


# -- end to end -------------------------------------------------------------------------------------

@pytest.fixture
def copilot_home(tmp_path: Path) -> Path:
    return tmp_path / "user" / ".copilot"


def test_end_to_end_discovery_search_rename_and_append(home: Home, copilot_home: Path) -> None:
    """A session under a default-shaped root is found and searchable; a second pass reads nothing; a
    /rename (workspace.yaml only) changes the title without a re-read; an append re-reads once."""
    [state_root, _] = default_roots({"COPILOT_HOME": str(copilot_home)}, Path("/nowhere"))
    w = CopilotWriter(Path(state_root.path), cwd="/home/dev/webshop", branch="feat/checkout")
    w.user("the checkout page throws a hydration warning with zephyrine prices")
    w.tool("view", {"path": "src/Price.tsx"}, "export function Price() {}")
    w.assistant("Render the price on the client only; zephyrine formatting differs by locale.")
    with InprocDaemon(home, {"copilot": Path(state_root.path)}) as daemon:
        first = daemon.reconcile()
        assert first["messages"] == 4
        [hit] = daemon.search("zephyrine")["hits"]
        assert hit["agent"] == "copilot" and hit["sessionId"] == w.session_id
        assert hit["messageCount"] == 4 and hit["cwd"] == "/home/dev/webshop"
        assert hit["title"] == "the checkout page throws a hydration warning with zephyrine prices"
        assert hit["resumeCommand"] == f"copilot --resume={w.session_id}"
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0), "nothing changed: nothing read"

        w.rename("hydration fix")
        renamed = daemon.reconcile()
        assert renamed["files_changed"] == 0, "the log did not change: only the title is sent"
        [hit] = daemon.search("zephyrine")["hits"]
        assert hit["title"] == "hydration fix"

        w.user("also check zephyrine rounding in the cart")
        appended = daemon.reconcile()
        assert (appended["files_changed"], appended["messages"]) == (1, 1)
        hits = daemon.search("zephyrine", limit=10)["hits"]
        assert len(hits) == 1 and hits[0]["messageCount"] == 5 and hits[0]["title"] == "hydration fix"
        assert daemon.reconcile()["files_changed"] == 0


def test_sample_session() -> None:
    """samples/copilot: the /rename name is the title; reasoning, a call announced twice, its result."""
    sid = "9b2f6c1d-4e8a-4f3b-a7d5-2c1e0f9b8a76"
    parser, messages = parse(SAMPLES / "session-state" / sid / "events.jsonl")
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.branch) == \
        (sid, "lock-free token bucket", "/home/dev/ratelimiter", "fix/race-counter")
    assert [m.kind for m in messages] == ["text", "thinking", "text", "tool_call", "tool_result", "text"]
