"""Tests for the Cursor agent reader (scanner.parsers.cursor: its store and text modules; docs/formats.md §5)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from aivault.errors import ParserStateError, UnitUnreadable
from aivault.home import Home
from aivault.scanner.model import Message
from aivault.scanner.parsers.cursor import SPEC, CursorParser, default_roots, locate, read_unit, side_titles
from aivault.scanner.parsers.cursor.store import decode_meta_value, read_store_meta
from aivault.scanner.parsers.cursor.text import parse_timestamp_tag, split_user_text
from aivault.scanner.parsers.jsonutil import to_epoch_ms
from aivault.scanner.sources import Found, Root, RootProblem
from tests.builders import cursor as cb
from tests.builders.common import BASE_TIME, epoch_ms
from tests.builders.cursor import CursorWriter
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.line_parsers import assert_resumes_at_every_split, file_lines

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "cursor" / "agent-sessions"
CORPUS_STORE = CORPUS / "chats-store" / "store.db"
CORPUS_STORE_ID = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
QUIRKS = REPO / "tests" / "fixtures" / "quirks" / "cursor" / "data"
QUIRK_PROJECT = QUIRKS / "projects" / "home-dev-quirkapp"
TRANSCRIPTS = QUIRK_PROJECT / "agent-transcripts"
MAIN_ID = "a1f3c9e0-5b7d-4c2a-9e81-0d6f4b2a7c13"
CHILD_ID = "7c2e9b14-0a3d-4f5e-8b6c-1d2e3f4a5b6c"
FLAT_ID = "0b9d8e7f-6a5c-4b3d-a2e1-f0c9d8b7a6e5"
TXT_ID = "5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b"
MAIN = TRANSCRIPTS / MAIN_ID / f"{MAIN_ID}.jsonl"
CHILD = TRANSCRIPTS / MAIN_ID / "subagents" / f"{CHILD_ID}.jsonl"
SAMPLES = REPO / "samples" / "cursor" / ".cursor"


def parse(path: Path) -> tuple[CursorParser, list[Message]]:
    parser = CursorParser(str(path))
    return parser, [m for line in file_lines(path) for m in parser.feed(line)]


def triples(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in messages]


def discover(root: Root, dirs: dict[str, int] | None = None, full: bool = True) -> list[Found]:
    return list(SPEC.discover(root, [], {} if dirs is None else dirs, full))


def copy_quirks(tmp_path: Path) -> Path:
    data = tmp_path / "user" / ".cursor"
    shutil.copytree(QUIRKS, data)
    return data


# -- the corpus (agent-sessions fixtures), counts verified by reading each file --------------------

# large.jsonl: 10 lines; the second holds thinking, text and a tool_use (3); the others one block
# each: 3 prompts, 2 tool results, 4 assistant texts/calls = 12. small.jsonl: 2 prompts, 2 texts and
# one tool_use on the last assistant line = 5 (turn_ended is bookkeeping). subagent/parent.jsonl:
# prompt, text, Agent call = 3; subagent/subagents/child.jsonl: prompt, answer = 2.
CORPUS_EXPECTED = {
    "cursor/large.jsonl": ("large", 12, "What files are here?", None),
    "cursor/small.jsonl": ("small", 5, "List the files.", None),
    "cursor/subagent/parent.jsonl": ("parent", 3, "Run a subagent.", None),
    "cursor/subagent/subagents/child.jsonl": ("child", 2, "subagent: List files", "subagent"),
}


def test_corpus_list_is_complete() -> None:
    """Every copied Cursor corpus transcript has expected counts below."""
    assert {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.jsonl")} == set(CORPUS_EXPECTED)


@pytest.mark.parametrize("relpath", sorted(CORPUS_EXPECTED))
def test_corpus_file_parses_to_the_counted_messages(relpath: str) -> None:
    """Each corpus transcript yields the hand-counted messages, its id (the file stem) and its parent."""
    sid, count, title, parent = CORPUS_EXPECTED[relpath]
    parser, messages = parse(CORPUS / relpath)
    s = parser.session
    assert (s.session_id, len(messages), s.message_count, s.title, s.parent_session_id) == \
        (sid, count, count, title, parent)
    assert parser.stats.malformed == 0 and all(m.text.strip() for m in messages)
    assert s.resume_command is None, "no chat store, so nothing cursor-agent could resume"
    assert s.started_at is not None and s.started_at == s.updated_at, "no times in the lines: the file's mtime"


def test_corpus_large_blocks() -> None:
    """large.jsonl: thinking, text, tool_use and tool_result blocks map to their kinds, one message each."""
    _, messages = parse(CORPUS / "cursor/large.jsonl")
    assert triples(messages[:5]) == [
        ("user", "text", "What files are here?"),
        ("assistant", "thinking", "Let me check the directory."),
        ("assistant", "text", "I will list the files."),
        ("assistant", "tool_call", 'Bash {"command":"ls -la"}'),
        ("tool", "tool_result", "file1.txt\nfile2.txt"),
    ]


def test_corpus_store_meta_is_hex_json() -> None:
    """The corpus store.db's meta row "0" is hex-encoded JSON with agentId, name and createdAt."""
    meta = read_store_meta(str(CORPUS_STORE))
    assert meta is not None and meta["agentId"] == CORPUS_STORE_ID and meta["name"] == "Test Session"
    assert decode_meta_value(json.dumps(meta)) == meta and decode_meta_value(b"zz") is None


def test_corpus_store_joins_its_transcript(tmp_path: Path) -> None:
    """A transcript whose chat folder holds the corpus store.db takes its name, its creation time and
    a resume command; with the transcript present the store is not a unit of its own."""
    data = tmp_path / ".cursor"
    chat = cb.chat_dir(data / "chats", "/home/dev/corpus", CORPUS_STORE_ID)
    chat.mkdir(parents=True)
    shutil.copy(CORPUS_STORE, chat / "store.db")
    transcript = cb.transcript_path(data / "projects", "/home/dev/corpus", CORPUS_STORE_ID)
    transcript.parent.mkdir(parents=True)
    shutil.copy(CORPUS / "cursor/small.jsonl", transcript)
    found = discover(Root("cursor", str(data)))
    assert [f.path for f in found] == [str(transcript)]
    parser, messages = parse(transcript)
    s = parser.session
    assert (s.title, s.started_at, len(messages)) == ("Test Session", 1775522590321, 5)
    # No workspacePath in this store, but the slug read back matches the md5 of the chat's folder.
    assert s.cwd == "/home/dev/corpus"
    assert s.resume_command == f"cd /home/dev/corpus && cursor-agent --resume {CORPUS_STORE_ID}"


def test_corpus_store_alone_is_a_unit(tmp_path: Path) -> None:
    """The corpus store.db without a transcript is a whole unit: titled by its name, no blobs, no messages."""
    # The folder is the chat id (the store's agentId in real stores); another one than the test
    # above uses, whose transcript this scanner process has already seen.
    chat = cb.chat_dir(tmp_path / ".cursor" / "chats", "/home/dev/corpus-alone", "corpus-store-alone")
    chat.mkdir(parents=True)
    shutil.copy(CORPUS_STORE, chat / "store.db")
    [found] = discover(Root("cursor", str(tmp_path / ".cursor")))
    assert found.mode == "whole" and found.locator == (str(chat / "store.db"), "corpus-store-alone")
    unit = read_unit(found)
    assert unit.messages == [] and unit.signature == found.mtime_ns
    assert (unit.session.session_id, unit.session.title) == ("corpus-store-alone", "Test Session")
    assert unit.session.started_at == 1775522590321
    assert unit.session.resume_command == "cursor-agent --resume corpus-store-alone"


# -- quirks ----------------------------------------------------------------------------------------

def test_quirk_transcript_messages_and_counts() -> None:
    """<user_query> unwrapped, <timestamp> stripped and used, <user_info> and attached files are system
    text, a timestamp-only line is nothing; unknown records, roles and blocks are counted."""
    parser, messages = parse(MAIN)
    t1 = to_epoch_ms("2026-03-03T08:15:00Z")
    t2 = to_epoch_ms("2026-03-03T08:42:00Z")
    assert [(m.role, m.kind, m.text[:40], m.ts) for m in messages] == [
        ("user", "text", "the upload endpoint returns 413 for 12 M", t1),
        ("system", "text", "<user_info>\nOS Version: linux 6.8.0\nShel", None),
        ("assistant", "thinking", "nginx client_max_body_size defaults to 1", None),
        ("assistant", "text", "Checking the nginx config.", None),
        ("assistant", "tool_call", 'Read {"path":"deploy/nginx.conf"}', None),
        ("tool", "tool_result", "server {\n  client_max_body_size 10m;\n}", None),
        ("assistant", "text", "Raised client_max_body_size to 25m in de", None),
        ("system", "text", '<attached_files>\n<file path="deploy/stag', t2),
        ("user", "text", "also apply it to the staging vhost", t2),
        ("assistant", "tool_call", 'Subagent {"prompt":"find every vhost tha', None),
        ("assistant", "text", "Both vhosts now allow 25 MB uploads.", None),
    ]
    stats = parser.stats
    assert (stats.lines, stats.skipped, stats.malformed) == (13, 5, 0)
    assert stats.extra == {"unknown_block:citation": 1, "unknown_record:context_checkpoint": 1,
                           "unknown_role:moderator": 1}
    s = parser.session
    assert (s.session_id, s.title, s.cwd) == (MAIN_ID, "the upload endpoint returns 413 for 12 MB files",
                                              "/home/dev/quirkapp")
    assert s.started_at == t1, "the first <timestamp> tag"


def test_quirk_subagent_is_its_own_session() -> None:
    """<id>/subagents/<child>.jsonl is a session of its own whose parent is <id>."""
    parser, messages = parse(CHILD)
    s = parser.session
    assert (s.session_id, s.parent_session_id) == (CHILD_ID, MAIN_ID)
    assert s.title == "subagent: find every vhost that sets client_max_body_size"
    assert triples(messages)[2] == ("tool", "tool_result", "deploy/nginx.conf:2\ndeploy/staging.conf:4")
    assert len(messages) == 4


def test_quirk_layouts_discovered_once_each() -> None:
    """Nested, flat and .txt transcripts and subagents are found; a flat copy of a nested chat is not."""
    found = {Path(f.path).relative_to(TRANSCRIPTS).as_posix(): f.mode
             for f in discover(Root("cursor", str(QUIRKS), explicit=True))}
    assert found == {
        f"{MAIN_ID}/{MAIN_ID}.jsonl": "lines",
        f"{MAIN_ID}/subagents/{CHILD_ID}.jsonl": "lines",
        f"{FLAT_ID}.jsonl": "lines",
        f"{TXT_ID}.txt": "whole",
    }


def test_quirk_txt_transcript() -> None:
    """An old plain-text transcript: user:/assistant: turns, [Thinking], [Tool call] and [Tool result]."""
    [found] = [f for f in discover(Root("cursor", str(QUIRKS), explicit=True)) if f.mode == "whole"]
    unit = read_unit(found)
    assert triples(unit.messages) == [
        ("user", "text", "why does `make release` skip the changelog step?"),
        ("assistant", "thinking",
         "The release target depends on a phony target with a typo.\nIt is spelled chnagelog."),
        ("assistant", "text", "The `release` target depends on `chnagelog`, a typo, so make treats it as an empty "
                              "file target."),
        ("assistant", "tool_call", 'Read {"path":"Makefile"}'),
        ("tool", "tool_result", "release: build chnagelog\n\t./scripts/publish.sh"),
        ("assistant", "text", "Fixed the typo; `make release` now runs the changelog step."),
    ]
    assert unit.signature == found.mtime_ns and unit.session.session_id == TXT_ID
    assert unit.session.cwd == "/home/dev/quirkapp" and unit.session.message_count == 6


def test_flat_legacy_transcript() -> None:
    """A flat <id>.jsonl of an older build: id from the name, the query unwrapped as the title."""
    parser, messages = parse(TRANSCRIPTS / f"{FLAT_ID}.jsonl")
    assert parser.session.session_id == FLAT_ID and len(messages) == 2
    assert parser.session.title == "bump pillow to 11.1 in requirements.txt"


def test_locate_reads_every_layout() -> None:
    """Chat id, parent and project folder come from the path in each layout."""
    at = "/h/.cursor/projects/home-dev-x/agent-transcripts"
    assert locate(f"{at}/A/A.jsonl").chat_id == "A"
    assert locate(f"{at}/A/transcript.jsonl").chat_id == "A"
    assert locate(f"{at}/A.jsonl").chat_id == "A"
    sub = locate(f"{at}/A/subagents/C.jsonl")
    assert (sub.chat_id, sub.parent_id, sub.project_dir, sub.chats_guess) == \
        ("C", "A", "/h/.cursor/projects/home-dev-x", "/h/.cursor/chats")


# -- the chat store: metadata ----------------------------------------------------------------------

def test_meta_json_title_wins_and_new_agent_is_no_title(tmp_path: Path) -> None:
    """Title precedence: meta.json title, then the store's name unless it is "New Agent", then the prompt."""
    w = CursorWriter(tmp_path / ".cursor", cwd="/home/dev/shop").user("why is checkout slow").assistant("N+1 query")
    w.store(name="New Agent")
    assert parse(w.path)[0].session.title == "why is checkout slow"
    w.store(name="Checkout latency")
    assert parse(w.path)[0].session.title == "Checkout latency"
    w.store(name="Checkout latency", title="Fix N+1 in checkout")
    s = parse(w.path)[0].session
    assert s.title == "Fix N+1 in checkout"
    assert s.cwd == "/home/dev/shop" and s.resume_command == f"cd /home/dev/shop && cursor-agent --resume {w.chat_id}"
    assert s.started_at == epoch_ms(BASE_TIME), "meta.json createdAtMs"


def test_chat_folder_under_the_config_root(tmp_path: Path) -> None:
    """Chats kept in ~/.config/cursor/chats (Linux) join transcripts kept in ~/.cursor/projects."""
    home = tmp_path / "home"
    w = CursorWriter(home / ".cursor", cwd="/home/dev/api", chats=home / ".config" / "cursor" / "chats")
    w.user("add pagination").assistant("Added cursor-based pagination.").store(title="Pagination")
    roots = default_roots({}, home)
    assert [r.path for r in roots][:2] == [str(home / ".cursor"), str(home / ".config" / "cursor")]
    for root in roots:
        discover(root)  # discovery registers every chats folder before transcripts are parsed
    s = parse(w.path)[0].session
    assert (s.title, s.cwd) == ("Pagination", "/home/dev/api")


def test_config_capital_cursor_root_is_read_unless_it_is_the_same_folder(tmp_path: Path) -> None:
    """~/.config/Cursor/chats (cc-connect #1232) is a chats root; when it is ~/.config/cursor itself
    (a case-insensitive disk, here a symlink) it is listed once."""
    home = tmp_path / "home"
    chat = cb.chat_dir(home / ".config" / "Cursor" / "chats", "/w", "chat-capital")
    cb.write_store_db(chat / "store.db", cb.store_meta("chat-capital", 1, name="Capital"),
                      [cb.blob("user", cb.user_query("capital C chats"))])
    capital = Root("cursor", str(home / ".config" / "Cursor"))
    assert [f.locator[1] for f in discover(capital)] == ["chat-capital"]
    os.symlink(home / ".config" / "Cursor", home / ".config" / "cursor")
    assert discover(capital) == []
    assert len(discover(Root("cursor", str(home / ".config" / "cursor")))) == 1


def test_default_roots_and_overrides(tmp_path: Path) -> None:
    """CURSOR_DATA_DIR moves the data folder; CURSOR_CONFIG_DIR / XDG_CONFIG_HOME the chats folder."""
    paths = [r.path for r in default_roots({"CURSOR_DATA_DIR": str(tmp_path / "d"),
                                            "CURSOR_CONFIG_DIR": str(tmp_path / "c")}, tmp_path)]
    assert paths == [str(tmp_path / "d"), str(tmp_path / "c"), str(tmp_path / ".config" / "cursor"),
                     str(tmp_path / ".config" / "Cursor")]
    xdg = [r.path for r in default_roots({"XDG_CONFIG_HOME": str(tmp_path / "x")}, tmp_path)]
    assert xdg[:2] == [str(tmp_path / ".cursor"), str(tmp_path / "x" / "cursor")]


def test_slug_is_trusted_only_when_its_md5_names_the_chat_folder(tmp_path: Path) -> None:
    """Without workspacePath or project files the slug read back is the cwd only if md5 agrees."""
    data = copy_quirks(tmp_path)
    (data / "projects" / "home-dev-quirkapp" / ".workspace-trusted").unlink()
    path = data / "projects" / "home-dev-quirkapp" / "agent-transcripts" / f"{FLAT_ID}.jsonl"
    good = cb.chat_dir(data / "chats", "/home/dev/quirkapp", FLAT_ID)
    cb.write_store_db(good / "store.db", cb.store_meta(FLAT_ID, 1), [])
    assert parse(path)[0].session.cwd == "/home/dev/quirkapp"
    shutil.rmtree(good.parent)
    wrong = cb.chat_dir(data / "chats", "/home/dev/quirk-app", FLAT_ID)  # same slug, another path
    cb.write_store_db(wrong / "store.db", cb.store_meta(FLAT_ID, 1), [])
    discover(Root("cursor", str(data)))
    assert parse(path)[0].session.cwd is None


def test_reaped_chat_folder_means_no_resume_command(tmp_path: Path) -> None:
    """A transcript whose chat folder is gone keeps its messages but offers no resume (agf #45)."""
    w = CursorWriter(tmp_path / ".cursor").user("hello there").assistant("hi").store()
    assert parse(w.path)[0].session.resume_command is not None
    shutil.rmtree(w.chat)
    discover(Root("cursor", str(tmp_path / ".cursor")))
    assert parse(w.path)[0].session.resume_command is None


def test_side_titles_report_changed_chat_titles(tmp_path: Path) -> None:
    """side_titles yields a chat's title once, then again only after meta.json changes."""
    data = tmp_path / ".cursor"
    w = CursorWriter(data).user("first prompt").store(title="Original title")
    root = Root("cursor", str(data))
    discover(root)
    sigs: dict[str, Any] = {}
    assert list(side_titles(root, sigs)) == [(w.chat_id, "Original title")]
    assert list(side_titles(root, sigs)) == []
    meta = orjson.loads((w.chat / "meta.json").read_bytes())
    (w.chat / "meta.json").write_bytes(orjson.dumps({**meta, "title": "A renamed chat title"}))
    assert list(side_titles(root, sigs)) == [(w.chat_id, "A renamed chat title")]


# -- the chat store: chats without a transcript ----------------------------------------------------

def _store_chat(data: Path, chat_id: str, blobs: list[bytes], **meta: Any) -> Path:
    chat = cb.chat_dir(data / "chats", "/home/dev/storeonly", chat_id)
    meta_row = cb.store_meta(chat_id, 1_772_000_000_000, workspace_path="/home/dev/storeonly")
    cb.write_store_db(chat / "store.db", meta_row, blobs, **meta)
    return chat


def test_store_only_chat_is_read_from_its_json_blobs(tmp_path: Path) -> None:
    """JSON blobs in rowid order become messages; the system prompt, the protobuf graph, redacted
    reasoning and a repeated (content-addressed) blob are not messages; unknown blocks are counted."""
    data = tmp_path / ".cursor"
    ask = cb.blob("user", [{"type": "text", "text": cb.user_query("migrate the orders table", BASE_TIME)}])
    chat = _store_chat(data, "chat-store-1", [
        cb.blob("system", "You are a coding agent."),
        cb.blob("user", "<user_info>OS: linux</user_info>"),
        ask, ask,
        cb.turn_graph_blob("conversation"),
        cb.blob("assistant", [{"type": "reasoning", "text": "add a nullable column first"},
                              {"type": "redacted-reasoning", "data": "xx"},
                              {"type": "text", "text": "Adding the migration."},
                              {"type": "tool-call", "toolCallId": "t1", "toolName": "Shell",
                               "args": {"command": "alembic revision -m orders"}}], created_at=1_772_000_100_000),
        cb.blob("tool", [{"type": "tool-result", "toolCallId": "t1", "toolName": "Shell",
                          "result": "Generating migration 3f2a", "isError": False},
                         {"type": "tool-result", "toolCallId": "t2", "toolName": "Read",
                          "output": {"type": "text", "value": "v5 output shape"}},
                         {"type": "widget"}]),
    ])
    (chat / "meta.json").write_bytes(orjson.dumps(cb.meta_json(1_772_000_000_000, 1_772_000_200_000, title="Orders")))
    [found] = discover(Root("cursor", str(data)))
    unit = read_unit(found)
    assert triples(unit.messages) == [
        ("system", "text", "<user_info>OS: linux</user_info>"),
        ("user", "text", "migrate the orders table"),
        ("assistant", "thinking", "add a nullable column first"),
        ("assistant", "text", "Adding the migration."),
        ("assistant", "tool_call", 'Shell {"command":"alembic revision -m orders"}'),
        ("tool", "tool_result", "Generating migration 3f2a"),
        ("tool", "tool_result", "v5 output shape"),
    ]
    assert unit.skips == {"system_prompt": 1, "turn_graph_blob": 1, "unknown_block:widget": 1}
    s = unit.session
    assert (s.session_id, s.title, s.cwd) == ("chat-store-1", "Orders", "/home/dev/storeonly")
    assert (s.started_at, s.updated_at) == (1_772_000_000_000, epoch_ms(BASE_TIME)), "meta.json, the tag"
    assert s.resume_command == "cd /home/dev/storeonly && cursor-agent --resume chat-store-1"
    assert unit.signature == found.mtime_ns, "the reader's signature is the one discovery saw"


def test_store_only_recent_pass_relists_a_store_only_when_it_changed(tmp_path: Path) -> None:
    """A recent pass lists a store-only chat again only after a commit (WAL included) or a meta.json change."""
    data = tmp_path / ".cursor"
    chat = _store_chat(data, "chat-store-2", [cb.blob("user", cb.user_query("one"))], wal=True)
    root = Root("cursor", str(data))
    dirs: dict[str, int] = {}
    [first] = discover(root, dirs, full=True)
    assert discover(root, dirs, full=False) == []
    assert [f.mtime_ns for f in discover(root, dirs, full=True)] == [first.mtime_ns]
    with closing(sqlite3.connect(chat / "store.db")) as writer:  # stays open: the commit sits in the WAL
        writer.execute("INSERT INTO blobs VALUES ('b2', ?)", (cb.blob("user", cb.user_query("two")),))
        writer.commit()
        [again] = discover(root, dirs, full=False)
        assert again.mtime_ns != first.mtime_ns
        assert [m.text for m in read_unit(again).messages] == ["one", "two"]


def test_empty_chat_and_broken_stores(tmp_path: Path) -> None:
    """A chat meta.json marks as empty is not a unit; a store without blobs or not SQLite is unreadable."""
    data = tmp_path / ".cursor"
    empty = _store_chat(data, "chat-empty", [])
    (empty / "meta.json").write_bytes(orjson.dumps(cb.meta_json(1, 2, has_conversation=False)))
    assert discover(Root("cursor", str(data))) == []
    bad = cb.chat_dir(data / "chats", "/w", "chat-bad") / "store.db"
    bad.parent.mkdir(parents=True)
    with closing(sqlite3.connect(bad)) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    found = Found(f"{bad}#chat-bad", "cursor", 0, 0, 0, 0, "whole", (str(bad), "chat-bad"))
    with pytest.raises(UnitUnreadable, match="no blobs table"):
        read_unit(found)
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UnitUnreadable):
        read_unit(found)


# -- text conventions ------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "iso"), [
    ("Wednesday, Sep 9, 2026, 1:36 AM (UTC+8)", "2026-09-08T17:36:00Z"),
    ("Sunday, Apr 26, 2026, 9:53 PM (UTC-4)", "2026-04-27T01:53:00Z"),
    ("Apr 26, 2026, 9:53 PM (UTC+05:30)", "2026-04-26T16:23:00Z"),
    ("Sep 9, 2026, 12:05 PM", "2026-09-09T12:05:00Z"),
    ("Sep 9, 2026, 12:05 AM (UTC)", "2026-09-09T00:05:00Z"),
    ("2026-04-26T21:53:00Z", "2026-04-26T21:53:00Z"),
    ("Blursday, Foo 9, 2026, 1:36 AM", None),
    ("Sep 31, 2026, 1:00 AM", None),
    ("yesterday", None),
])
def test_timestamp_tag(body: str, iso: str | None) -> None:
    """Cursor's <timestamp> text parses to UTC (minute precision), ISO too; anything else is no time."""
    assert parse_timestamp_tag(body) == (to_epoch_ms(iso) if iso else None)


def test_user_text_split() -> None:
    """Typed text is the <user_query>; context around it is injected; plain text stays user speech."""
    assert split_user_text("<user_query>\n  fix it \n</user_query>") == ("fix it", None, None)
    assert split_user_text("plain <b>html</b> question") == ("plain <b>html</b> question", None, None)
    assert split_user_text("<rules>\nbe terse\n</rules>") == (None, "<rules>\nbe terse\n</rules>", None)
    assert split_user_text("<timestamp>Sep 9, 2026, 12:05 PM</timestamp>")[0:2] == (None, None)
    speech, context, ts = split_user_text("<timestamp>Sep 9, 2026, 12:05 PM</timestamp>\n<user_info>x</user_info>")
    assert (speech, context, ts) == (None, "<user_info>x</user_info>", to_epoch_ms("2026-09-09T12:05:00Z"))


# -- robustness ------------------------------------------------------------------------------------

def test_truncated_unknown_non_utf8_and_empty_input() -> None:
    """A cut-off last line is malformed, unknown records counted, bad bytes repaired, an empty file is nothing."""
    parser = CursorParser("/d/projects/s/agent-transcripts/x/x.jsonl")
    good = json.dumps(cb.line("user", [cb.text_block(cb.user_query("caf PLACEHOLDER"))])).encode()
    repaired = parser.feed(good.replace(b"PLACEHOLDER", b"\xe9\xff ok"))
    assert triples(repaired) == [("user", "text", "caf \ufffd\ufffd ok")]
    assert parser.feed(good[: len(good) - 7]) == []
    assert parser.feed(b"") == [] and parser.feed(b"\xff\xfe") == []
    assert parser.feed(b'{"type": "new_bookkeeping"}') == []
    assert parser.feed(b'{"role": "user", "message": {"content": 5}}') == []
    assert parser.feed(b'{"neither": 1}') == []
    assert (parser.stats.malformed, parser.stats.skipped) == (4, 2)
    assert parser.stats.extra == {"unknown_record:new_bookkeeping": 1}
    empty = CursorParser("/d/projects/s/agent-transcripts/e/e.jsonl")
    assert empty.session.session_id == "e" and empty.session.message_count == 0


def _split_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.jsonl")) + sorted(QUIRKS.rglob("*.jsonl")) + sorted(SAMPLES.rglob("*.jsonl"))


@pytest.mark.parametrize("path", _split_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_state_resume_at_every_split_point(path: Path) -> None:
    """Parsing lines 1..k, saving state through msgpack and resuming for k+1..n equals one whole pass."""
    assert_resumes_at_every_split(lambda state: CursorParser(str(path), state), path)


def test_foreign_state_is_rejected() -> None:
    """A state of another version or with wrong field types raises ParserStateError."""
    good = CursorParser("/x/a.jsonl").state()
    for bad in ({}, {**good, "v": 7}, {**good, "n": "many"}, {**good, "stats": None}):
        with pytest.raises(ParserStateError):
            CursorParser("/x/a.jsonl", bad)


def test_unlistable_projects_folder_is_a_problem_of_the_root(tmp_path: Path) -> None:
    """A listing failure inside the root is reported against the root (so a full pass keeps its files)."""
    data = tmp_path / ".cursor"
    (data / "projects").mkdir(parents=True)
    (data / "projects").chmod(0)
    try:
        problems: list[RootProblem] = []
        assert list(SPEC.discover(Root("cursor", str(data)), problems, {}, True)) == []
        if os.geteuid() != 0:
            assert problems and all(p.root == str(data) for p in problems)
    finally:
        (data / "projects").chmod(0o755)


# -- end to end -------------------------------------------------------------------------------------

def test_end_to_end_discovery_search_title_change_and_append(home: Home, tmp_path: Path) -> None:
    """Transcripts and a store-only chat under a default-shaped ~/.cursor are found and searchable with
    title, cwd and resume command; a second pass reads nothing; a meta.json title change is sent
    without a re-read; an append re-reads the transcript once."""
    user_home = tmp_path / "user"
    [data_root, *_] = default_roots({}, user_home)
    data = Path(data_root.path)
    w = CursorWriter(data, cwd="/home/dev/invoicer")
    w.user("the PDF export renders quokkabold glyphs as boxes").tool("Read", {"path": "pdf/fonts.py"}, "FONT = None")
    w.assistant("Embedded the quokkabold font in the PDF writer.").store(title="PDF font boxes")
    _store_chat(data, "chat-e2e-store", [cb.blob("user", cb.user_query("quokkabold in the store only chat")),
                                          cb.blob("assistant", [{"type": "text", "text": "ok"}])])
    with InprocDaemon(home, {"cursor": data}) as daemon:
        first = daemon.reconcile()
        assert first["messages"] == 6
        hits = {h["sessionId"]: h for h in daemon.search("quokkabold", limit=10)["hits"]}
        assert set(hits) == {w.chat_id, "chat-e2e-store"}
        hit = hits[w.chat_id]
        assert (hit["agent"], hit["messageCount"], hit["title"], hit["cwd"]) == \
            ("cursor", 4, "PDF font boxes", "/home/dev/invoicer")
        assert hit["resumeCommand"] == f"cd /home/dev/invoicer && cursor-agent --resume {w.chat_id}"
        assert hits["chat-e2e-store"]["messageCount"] == 2
        again = daemon.reconcile()
        assert (again["files_changed"], again["messages"]) == (0, 0)

        meta = orjson.loads((w.chat / "meta.json").read_bytes())
        (w.chat / "meta.json").write_bytes(orjson.dumps({**meta, "title": "Embed quokkabold in PDFs"}))
        retitled = daemon.reconcile(full=False)
        assert retitled["files_changed"] == 0
        hit = next(h for h in daemon.search("quokkabold", limit=10)["hits"] if h["sessionId"] == w.chat_id)
        assert hit["title"] == "Embed quokkabold in PDFs"

        w.user("and quokkabold italics too")
        appended = daemon.reconcile()
        assert (appended["files_changed"], appended["messages"]) == (1, 1)
        hits = daemon.search("quokkabold", limit=10)["hits"]
        assert sorted(h["sessionId"] for h in hits) == sorted([w.chat_id, "chat-e2e-store"])
        assert next(h for h in hits if h["sessionId"] == w.chat_id)["messageCount"] == 5
        assert daemon.reconcile()["files_changed"] == 0


def test_sample_session() -> None:
    """samples/cursor: the transcript joins its chat folder (meta.json title, workspacePath, resume)."""
    sid = "3d7e1f0a-8c2b-4e6d-9f15-a4b3c2d1e0f9"
    [found] = discover(Root("cursor", str(SAMPLES)))
    assert found.path.endswith(f"agent-transcripts/{sid}/{sid}.jsonl")
    parser, messages = parse(Path(found.path))
    s = parser.session
    assert (s.session_id, s.title, s.cwd, len(messages)) == \
        (sid, "Open-Meteo ReadTimeout on cold start", "/home/dev/weatherbot", 6)
    assert s.resume_command == f"cd /home/dev/weatherbot && cursor-agent --resume {sid}"
    assert s.started_at == to_epoch_ms("2026-06-18T17:42:00Z")
