"""Goose (scanner/parsers/goose.py): sessions.db sessions read whole, legacy JSONL sessions read line by line."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgpack
import orjson
import pytest

import tests.builders.goose as gb
from aivault.errors import ParserStateError, UnitUnreadable
from aivault.scanner.model import Message
from aivault.scanner.parsers import goose
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import texts

SAMPLE = REPO / "samples" / "goose" / "data" / "sessions"  # GOOSE_PATH_ROOT=samples/goose
QUIRK = REPO / "tests/fixtures/quirks/goose/.local/share/goose/sessions/20250212_3.jsonl"
S0 = 1_772_900_000


def _discover(path: Path, dirs: dict[str, int] | None = None, full: bool = True) -> tuple[list[Found],
                                                                                         list[RootProblem]]:
    problems: list[RootProblem] = []
    found = list(goose.discover(Root("goose", str(path)), problems, {} if dirs is None else dirs, full))
    return found, problems


def _db_units(path: Path) -> dict[str, Unit]:
    found, problems = _discover(path)
    assert problems == []
    return {u.session.session_id: u for u in (goose.read_unit(f) for f in found if f.mode == "whole")}


_texts = texts


def _lines(path: Path) -> list[bytes]:
    lines = path.read_bytes().split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def _parse(path: Path) -> tuple[goose.GooseLineParser, list[Message]]:
    parser = goose.GooseLineParser(str(path))
    return parser, [m for line in _lines(path) for m in parser.feed(line)]


def test_the_corpus_has_no_goose_transcripts() -> None:
    """No licence-clean Goose session was found (tests/fixtures/corpus/SOURCES.md): the quirks are built here."""
    assert not (REPO / "tests" / "fixtures" / "corpus" / "goose").exists()


def test_sample_database() -> None:
    """samples/goose: one sessions.db session of 6 messages, titled by its name, in its working_dir."""
    [unit] = _db_units(SAMPLE).values()
    # user text; assistant text + shell call; the user-role toolResponse; assistant thinking + text.
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "thinking"), ("assistant", "text")]
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.resume_command) == (
        "20260302_1", "Fix flaky lanternfish spawn test", "/home/dev/lanternfish",
        "goose session -r --session-id 20260302_1")


def test_quirk_legacy_file_counted_by_reading_it() -> None:
    """The hand-written legacy file gives 9 messages (counted line by line in its comments' order)."""
    parser, messages = _parse(QUIRK)
    # 1 metadata; 2 user text; 3 thinking + text + call; 4 old-style list result; 5 redacted thinking (counted),
    # failed call, confirmation (bookkeeping); 6 error result; 7 text + image (counted); 8 userVisible:false
    # text as system; 9 compaction marker (bookkeeping) and an unknown block (counted).
    assert _texts(messages) == [
        ("user", "text", "heronctl panics when ~/.heronctl.toml exists but is empty"),
        ("assistant", "thinking", "toml::from_str on an empty string returns an error we unwrap."),
        ("assistant", "text", "Let me check the loader."),
        ("assistant", "tool_call", 'developer__text_editor {"command":"view","path":"src/config.rs"}'),
        ("tool", "tool_result", "let cfg: Config = toml::from_str(&raw).unwrap();"),
        ("assistant", "tool_call", 'invalid {"error":"-32602: Could not interpret tool use parameters"}'),
        ("tool", "tool_result", "[error] -32602: Could not interpret tool use parameters"),
        ("assistant", "text",
         "Fixed: an empty file now yields Config::default() instead of unwrapping the parse error."),
        ("system", "text", "Summary: the loader now tolerates empty config files."),
    ]
    s = parser.session
    assert (s.session_id, s.title, s.cwd, s.started_at, s.updated_at, s.message_count) == (
        "20250212_3", "Heronctl config loader panics on empty file", "/home/dev/heronctl", 1739350800000,
        1739350822000, 9)
    assert s.resume_command == "goose session -r --session-id 20250212_3"
    assert (parser.stats.lines, parser.stats.malformed, parser.stats.skipped) == (9, 0, 2)
    assert parser.stats.extra == {"redacted_thinking": 1, "bookkeeping:toolConfirmationRequest": 1,
                                  "attachment:image": 1, "bookkeeping:conversationCompacted": 1,
                                  "unknown_content:holoDeck": 1}


@pytest.mark.parametrize("path", [QUIRK], ids=["quirk"])
def test_legacy_parser_resumes_at_every_split_point(path: Path) -> None:
    """Lines 1..k, the state through msgpack, then k+1..n equal one whole pass (the Parser contract)."""
    lines = _lines(path)
    full, full_messages = _parse(path)
    head = goose.GooseLineParser(str(path))
    head_messages: list[Message] = []
    for k in range(len(lines) + 1):
        if k:
            head_messages += head.feed(lines[k - 1])
        state = msgpack.unpackb(msgpack.packb(head.state()), raw=False)
        assert len(msgpack.packb(state)) < 8192
        tail = goose.GooseLineParser(str(path), state)
        assert tail.session == head.session
        tail_messages = [m for line in lines[k:] for m in tail.feed(line)]
        assert head_messages + tail_messages == full_messages, k
        assert (tail.session, tail.stats) == (full.session, full.stats), k


def test_legacy_parser_survives_truncation_unknown_records_bad_bytes_and_empty_files(tmp_path: Path) -> None:
    """A cut-off last line is malformed (the scanner holds an unterminated one back), a later metadata-shaped
    record is counted, non-UTF-8 bytes are replaced, an empty file is an empty session; a foreign state is refused."""
    path = tmp_path / "20250101_1.jsonl"
    body = gb.legacy_lines("/home/dev/x", "", [gb.message("user", S0, [gb.text("first prompt")])])
    path.write_bytes(body + b'{"working_dir":"/elsewhere"}\n'
                     + b'{"role":"assistant","created":1772900005,"content":[{"type":"text","text":"ol\xe9"}]}\n'
                     + b'{"role":"assistant","created":177290')
    parser, messages = _parse(path)
    assert _texts(messages) == [("user", "text", "first prompt"), ("assistant", "text", "ol\ufffd")]
    assert parser.stats.malformed == 1 and parser.stats.extra == {"unknown_record:metadata": 1}
    assert parser.session.title == "first prompt" and parser.session.cwd == "/home/dev/x"
    empty = tmp_path / "20250101_2.jsonl"
    empty.write_bytes(b"")
    e, none = _parse(empty)
    assert none == [] and e.session.message_count == 0 and e.session.session_id == "20250101_2"
    with pytest.raises(ParserStateError):
        goose.GooseLineParser(str(path), {**parser.state(), "v": 99})


def test_content_blocks_and_hidden_messages_in_the_database(tmp_path: Path) -> None:
    """toolRequest/toolResponse (isError marked), systemNotification as system, userVisible:false as system and
    never the title, unknown blocks and bad JSON counted; no name means the first visible prompt is the title."""
    db = gb.GooseDb(tmp_path / "sessions.db")
    s = db.session("/home/dev/api")
    s.add("user", [gb.text("Instructions Goose adds for the model")], metadata=gb.AGENT_ONLY)
    s.user("run the migrations")
    s.add("assistant", [gb.tool_request("t1", "developer__shell", {"command": "make migrate"}),
                        gb.system_notification("Running the shell tool"), {"type": "sparkle"}])
    s.add("user", [gb.tool_response("t1", "relation users already exists", is_error=True)])
    db.con.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES (?, 'user', "
                   "'[{\"type\":\"text\",\"te', ?)", (s.session_id, S0))
    db.con.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES (?, 'robot', "
                   "'[]', ?)", (s.session_id, S0))
    [unit] = _db_units(tmp_path).values()
    assert _texts(unit.messages) == [
        ("system", "text", "Instructions Goose adds for the model"),
        ("user", "text", "run the migrations"),
        ("assistant", "tool_call", 'developer__shell {"command":"make migrate"}'),
        ("system", "text", "Running the shell tool"),
        ("tool", "tool_result", "[error] relation users already exists"),
    ]
    assert unit.session.title == "run the migrations"
    assert unit.skips == {"unknown_content:sparkle": 1, "malformed-record": 1, "unknown_role:robot": 1}


def test_legacy_files_the_database_imported_are_not_read_again(tmp_path: Path) -> None:
    """Goose imports <id>.jsonl into a new sessions.db under the same id: only the database copy is a unit."""
    db = gb.GooseDb(tmp_path / "sessions.db")
    db.session("/home/dev/a", "Imported", session_id="20250110_1").user("imported prompt")
    for sid in ("20250110_1", "20250111_4"):
        (tmp_path / f"{sid}.jsonl").write_bytes(gb.legacy_lines("/home/dev/a", f"legacy {sid}",
                                                                [gb.message("user", S0, [gb.text("old")])]))
    found, _ = _discover(tmp_path)
    assert sorted((f.mode, os.path.basename(f.path)) for f in found) == [
        ("lines", "20250111_4.jsonl"), ("whole", "sessions.db#20250110_1")]


def test_names_descriptions_and_older_schemas(tmp_path: Path) -> None:
    """A user-set name wins; before schema v4 (no name, no metadata_json) the description is the title; a
    database without content_json is a root problem naming it."""
    db = gb.GooseDb(tmp_path / "new" / "sessions.db")
    db.session("/home/dev/a").user("first words").rename("Renamed by the user")
    assert [u.session.title for u in _db_units(tmp_path / "new").values()] == ["Renamed by the user"]
    old = tmp_path / "old"
    old.mkdir()
    con = sqlite3.connect(old / "sessions.db")
    con.executescript("""
        CREATE TABLE sessions (id TEXT PRIMARY KEY, description TEXT NOT NULL DEFAULT '', working_dir TEXT NOT NULL,
                               created_at TIMESTAMP, updated_at TIMESTAMP);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                               content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL);""")
    con.execute("INSERT INTO sessions VALUES ('20250301_2', 'Old description', '/home/dev/old', "
                "'2025-03-01 09:00:00', '2025-03-01 09:05:00')")
    con.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES "
                "('20250301_2', 'user', ?, 1740819600)", (orjson.dumps([gb.text("hello")]).decode(),))
    con.commit()
    [unit] = _db_units(old).values()
    s = unit.session
    assert (s.title, s.cwd, s.started_at, s.updated_at) == ("Old description", "/home/dev/old", 1740819600000,
                                                             1740819900000)
    con.execute("ALTER TABLE messages RENAME COLUMN content_json TO content")
    con.commit()
    found, problems = _discover(old)
    assert found == [] and "table 'messages' has no column 'content_json'" in problems[0].reason
    with pytest.raises(UnitUnreadable):
        goose.read_unit(Found("x", "goose", 0, 0, 0, 0, "whole", (str(old / "sessions.db"), "20250301_2")))


def test_a_metadata_rewrite_of_a_recent_message_changes_the_signature(tmp_path: Path) -> None:
    """update_message_metadata rewrites a row in place (no new id, no new time): the signature moves."""
    db = gb.GooseDb(tmp_path / "sessions.db")
    s = db.session("/home/dev/a")
    s.user("visible for now").assistant("ok")
    [before], _ = _discover(tmp_path)
    db.con.execute("UPDATE messages SET metadata_json = ? WHERE content_json LIKE '%visible for now%'",
                   (orjson.dumps(gb.AGENT_ONLY).decode(),))
    [after], _ = _discover(tmp_path)
    assert after.mtime_ns != before.mtime_ns
    assert goose.read_unit(after).messages[0].role == "system"


def test_default_roots_follow_goose_path_root_and_xdg(tmp_path: Path) -> None:
    """GOOSE_PATH_ROOT (absolute only) gives <root>/data/sessions; else $XDG_DATA_HOME/goose/sessions (absolute
    only); else ~/.local/share/goose/sessions; the pre-1.20 folders are roots too."""
    home = tmp_path / "h"
    legacy = [str(home / ".config/goose/sessions"), str(home / ".goose/sessions")]
    default = str(home / ".local/share/goose/sessions")

    def paths(env: dict[str, str]) -> list[str]:
        return [r.path for r in goose.default_roots(env, home)]

    assert paths({}) == [default, *legacy]
    assert paths({"XDG_DATA_HOME": "/x/share"}) == ["/x/share/goose/sessions", *legacy]
    assert paths({"XDG_DATA_HOME": "rel"}) == [default, *legacy]
    assert paths({"GOOSE_PATH_ROOT": "/srv/g", "XDG_DATA_HOME": "/x"}) == ["/srv/g/data/sessions", *legacy]
    assert paths({"GOOSE_PATH_ROOT": "g"}) == [default, *legacy]


def test_empty_and_broken_databases(tmp_path: Path) -> None:
    """An empty sessions.db is no unit; one that is not SQLite is a root problem; the JSONL files still count."""
    gb.create_db(tmp_path / "sessions.db").close()
    assert _discover(tmp_path) == ([], [])
    (tmp_path / "sessions.db").write_bytes(b"not sqlite" * 100)
    (tmp_path / "20250101_1.jsonl").write_bytes(b"")
    found, problems = _discover(tmp_path)
    assert [f.mode for f in found] == ["lines"] and len(problems) == 1


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".local" / "share" / "goose" / "sessions"
    sessions.mkdir(parents=True)
    return {"goose": sessions}


def test_daemon_indexes_both_stores_once_and_rereads_a_change_once(inproc_daemon: InprocDaemon,
                                                                   roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a sessions.db session and a legacy file under a default-shaped root are
    searchable with the right metadata; a second pass reads nothing; a new message is re-read once."""
    db = gb.GooseDb(roots["goose"] / "sessions.db")
    s = db.session("/home/dev/puffin", "Puffin retries")
    s.user("the puffin client retries forever").assistant(
        "It ignores the max_retries option.", tools=[("developer__shell", {"command": "rg retries"}, "client.rs:8")])
    (roots["goose"] / "20250105_2.jsonl").write_bytes(gb.legacy_lines(
        "/home/dev/tern", "Tern parser", [gb.message("user", S0, [gb.text("old tern parser question")])]))
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 5
    [hit] = inproc_daemon.search("puffin")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "goose", s.session_id, 4, "Puffin retries", "/home/dev/puffin")
    assert hit["resumeCommand"] == f"goose session -r --session-id {s.session_id}"
    [old] = inproc_daemon.search("tern")["hits"]
    assert (old["sessionId"], old["title"], old["cwd"]) == ("20250105_2", "Tern parser", "/home/dev/tern")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    s.user("and the gannet client too")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("gannet")["hits"]
    assert hit["sessionId"] == s.session_id and hit["messageCount"] == 5
    assert len(inproc_daemon.search("puffin", limit=10)["hits"]) == 1
