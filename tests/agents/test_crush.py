"""Crush (scanner/parsers/crush.py): project databases found through projects.json, sessions read as whole units."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

import tests.builders.crush as cb
from aivault.errors import UnitUnreadable
from aivault.home import Home
from aivault.scanner.parsers import crush
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.support.common import REPO, answer
from tests.support.daemons import InprocDaemon

SAMPLE = REPO / "samples" / "crush"
S0 = 1_772_900_000  # seconds, as Crush stores them


def _discover(path: Path, *, explicit: bool = True, dirs: dict[str, int] | None = None,
              full: bool = True) -> tuple[list[Found], list[RootProblem]]:
    problems: list[RootProblem] = []
    found = list(crush.discover(Root("crush", str(path), explicit=explicit), problems,
                                {} if dirs is None else dirs, full))
    return found, problems


def _units(path: Path) -> dict[str, Unit]:
    found, problems = _discover(path)
    assert problems == []
    return {u.session.session_id: u for u in map(crush.read_unit, found)}


def _texts(unit: Unit) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in unit.messages]


def test_the_corpus_has_no_crush_transcripts() -> None:
    """No licence-clean Crush database was found (tests/fixtures/corpus/SOURCES.md): the quirks are built here."""
    assert not (REPO / "tests" / "fixtures" / "corpus" / "crush").exists()


def test_sample_project_through_its_registry() -> None:
    """samples/crush: projects.json (a path relative to its folder) leads to one session of 6 messages; the
    title-generation side session is left out."""
    [unit] = _units(SAMPLE / ".local" / "share" / "crush").values()
    # user text; assistant reasoning, view call, text (finish counted); the view result; the final text.
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"), ("assistant", "text"),
        ("tool", "tool_result"), ("assistant", "text")]
    s = unit.session
    project = str(SAMPLE / "code" / "tidepool")
    assert (s.title, s.cwd, s.started_at, s.updated_at) == ("Cache Go modules in CI", project,
                                                            1772705000000, 1772705026000)
    assert s.resume_command == f"cd {project} && crush --session 8f3c2a1e-5b7d-4e96-a0c4-2d1f7e9b6a53"
    assert unit.skips == {"bookkeeping:finish": 2}


def test_parts_become_messages_and_odd_ones_are_counted(tmp_path: Path) -> None:
    """text/reasoning/tool_call (arguments a JSON string, kept raw when it is not JSON)/tool_result (errors
    marked); finish is bookkeeping, images attachments, unknown part types and bad JSON are counted."""
    db = cb.CrushDb(tmp_path / "proj")
    s = db.session("Parts")
    s.message("user", [cb.text("look at the router"), cb.image_url("data:image/png;base64,AAAA")])
    s.message("assistant", [cb.reasoning("Open it.", S0, S0), cb.tool_call("t1", "view", {"file_path": "r.go"}),
                            cb.tool_call("t2", "bash", '{"command": "go vet'), {"type": "shell_command", "data": {}},
                            cb.finish("tool_use", S0)])
    s.message("tool", [cb.tool_result("t1", "view", "package router"),
                       cb.tool_result("t2", "bash", "exit status 1", is_error=True)])
    s.message("system", [cb.text("You are Crush.")])
    s.message("critic", [cb.text("hm")])
    db.con.execute("INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) "
                   "VALUES ('bad', ?, 'user', '[{\"type\":\"text\",\"data\":{\"text\":\"hal', ?, ?)",
                   (s.session_id, S0 + 99, S0 + 99))
    [unit] = _units(tmp_path / "proj").values()
    assert _texts(unit) == [
        ("user", "text", "look at the router"),
        ("assistant", "thinking", "Open it."),
        ("assistant", "tool_call", 'view {"file_path":"r.go"}'),
        ("assistant", "tool_call", 'bash {"command": "go vet'),
        ("tool", "tool_result", "package router"),
        ("tool", "tool_result", "[error] exit status 1"),
        ("system", "text", "You are Crush."),
    ]
    assert unit.skips == {"attachment:image_url": 1, "unknown_part:shell_command": 1, "bookkeeping:finish": 1,
                          "unknown_role:critic": 1, "malformed-record": 1}


def test_title_sessions_are_left_out_and_children_link_without_resume(tmp_path: Path) -> None:
    """title-<parent> sessions are Crush asking for a title; an agent-tool child has its parent and no
    resume (Crush refuses to continue one); the placeholder 'New Session' falls back to the first prompt."""
    db = cb.CrushDb(tmp_path / "proj")
    parent = db.session().user("speed up the integration tests").assistant("Parallelised them.")
    db.session("Generate a title", parent_id=parent.session_id,
               session_id=f"title-{parent.session_id}").user("Generate a concise title")
    child = db.session("Explore test setup", parent_id=parent.session_id, session_id="toolu_01abc")
    child.user("find slow fixtures").assistant("db_fixture takes 4 s.")
    units = _units(tmp_path / "proj")
    assert set(units) == {parent.session_id, "toolu_01abc"}
    assert units[parent.session_id].session.title == "speed up the integration tests"
    c = units["toolu_01abc"].session
    assert (c.title, c.parent_session_id, c.resume_command) == ("Explore test setup", parent.session_id, None)


def test_summary_messages_are_system_text(tmp_path: Path) -> None:
    """A compaction summary (is_summary_message) is text Crush wrote for the model, never a prompt or title."""
    db = cb.CrushDb(tmp_path / "proj")
    s = db.session()
    s.message("user", [cb.text("Summary of the conversation so far: we fixed the cache.")], summary=True)
    s.user("now the flaky test")
    [unit] = _units(tmp_path / "proj").values()
    assert [m.role for m in unit.messages] == ["system", "user"]
    assert unit.session.title == "now the flaky test"


def test_millisecond_and_second_timestamps_are_both_epoch_ms(tmp_path: Path) -> None:
    """Crush times in seconds or (some builds) milliseconds are read by magnitude (docs/formats.md §0 rule 5)."""
    db = cb.CrushDb(tmp_path / "proj")
    s = db.session("Times")
    s.user("seconds")
    db.con.execute("INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) "
                   "VALUES ('ms', ?, 'user', ?, ?, ?)",
                   (s.session_id, orjson.dumps([cb.text("millis")]).decode(), (S0 + 50) * 1000, (S0 + 50) * 1000))
    [unit] = _units(tmp_path / "proj").values()
    assert [m.ts for m in unit.messages] == [1772359205000, (S0 + 50) * 1000]


def test_a_rewrite_within_the_same_second_changes_the_signature(tmp_path: Path) -> None:
    """Streaming rewrites the newest message; when its updated_at (whole seconds) stays the same, the
    signature still moves with its size."""
    db = cb.CrushDb(tmp_path / "proj")
    s = db.session("Stream")
    s.user("write the changelog")
    mid = s.message("assistant", [cb.text("Added")])
    db.con.execute("DROP TRIGGER update_messages_updated_at")  # as if rewritten within the same second
    [before], _ = _discover(tmp_path / "proj")
    db.con.execute("UPDATE messages SET parts = ? WHERE id = ?",
                   (orjson.dumps([cb.text("Added the 2.3 entry"), cb.finish("end_turn", S0)]).decode(), mid))
    [after], _ = _discover(tmp_path / "proj")
    assert after.mtime_ns != before.mtime_ns
    assert crush.read_unit(after).messages[-1].text == "Added the 2.3 entry"


def test_default_roots_follow_crush_global_data_and_xdg(tmp_path: Path) -> None:
    """$CRUSH_GLOBAL_DATA, else $XDG_DATA_HOME/crush, else ~/.local/share/crush; plus each registered project's
    data directory (relative paths from the registry's folder)."""
    home = tmp_path / "home"
    assert crush.default_roots({}, home) == [Root("crush", str(home / ".local/share/crush"))]
    assert crush.default_roots({"XDG_DATA_HOME": str(tmp_path / "xdg")}, home) == [
        Root("crush", str(tmp_path / "xdg" / "crush"))]
    cb.write_registry(tmp_path / "g", [("../projects/kite", ".crush"), (str(tmp_path / "abs"), "/srv/data/abs")])
    roots = crush.default_roots({"CRUSH_GLOBAL_DATA": str(tmp_path / "g"), "XDG_DATA_HOME": "/ignored"}, home)
    assert [r.path for r in roots] == [str(tmp_path / "g"), str(tmp_path / "projects" / "kite" / ".crush"),
                                       "/srv/data/abs"]


def test_explicit_roots_a_project_a_folder_of_projects_a_data_dir_or_a_registry(tmp_path: Path) -> None:
    """--root crush= a project folder, a folder holding projects, a .crush folder, a registry folder or file."""
    for name in ("alpha", "beta"):
        cb.CrushDb(tmp_path / "code" / name).session(f"{name} work").user(f"hello {name}")
    registry = cb.write_registry(tmp_path / "reg", [("../code/alpha", ".crush")])
    cases = {tmp_path / "code" / "alpha": {"alpha"}, tmp_path / "code": {"alpha", "beta"},
             tmp_path / "code" / "beta" / ".crush": {"beta"}, tmp_path / "reg": {"alpha"}, registry: {"alpha"}}
    for path, names in cases.items():
        units = _units(path)
        assert {u.session.title.split()[0] for u in units.values() if u.session.title} == names, path
        assert {u.session.cwd for u in units.values()} == {str(tmp_path / "code" / n) for n in names}
    assert _discover(tmp_path / "missing") == ([], [RootProblem(str(tmp_path / "missing"), "root does not exist")])


def test_schema_drift_and_broken_databases_are_problems_naming_the_cause(tmp_path: Path) -> None:
    """A messages table without 'parts', a database without 'sessions', a file that is not SQLite and an empty
    database give no unit (and no exception); non-UTF-8 text reads with replacement characters."""
    db = cb.CrushDb(tmp_path / "proj")
    s = db.session("Bytes")
    db.con.execute("INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) "
                   "VALUES ('u', ?, 'user', CAST(? AS TEXT), ?, ?)",
                   (s.session_id, b'[{"type":"text","data":{"text":"gr\xfc\xdf dich"}}]', S0, S0))
    [unit] = _units(tmp_path / "proj").values()
    assert _texts(unit) == [("user", "text", "gr\ufffd\ufffd dich")]
    db.con.execute("ALTER TABLE messages RENAME COLUMN parts TO content")
    found, problems = _discover(tmp_path / "proj")
    assert found == [] and "table 'messages' has no column 'parts'" in problems[0].reason
    with pytest.raises(UnitUnreadable, match="no column 'parts'"):
        crush.read_unit(Found("x", "crush", 0, 0, 0, 0, "whole", (str(db.path), s.session_id)))
    db.con.executescript("DROP TABLE messages; DROP TABLE sessions;")
    assert "no table 'sessions'" in _discover(tmp_path / "proj")[1][0].reason
    (tmp_path / "junk" / ".crush").mkdir(parents=True)
    (tmp_path / "junk" / ".crush" / "crush.db").write_bytes(b"\x00garbage" * 500)
    assert _discover(tmp_path / "junk")[0] == [] and len(_discover(tmp_path / "junk")[1]) == 1
    cb.create_db(tmp_path / "empty" / ".crush" / "crush.db").close()
    assert _discover(tmp_path / "empty") == ([], [])


def test_the_registry_is_read_again_each_pass(tmp_path: Path) -> None:
    """A project registered after the scanner started is found by the next pass through the registry root."""
    cb.write_registry(tmp_path / "reg", [])
    dirs: dict[str, int] = {}
    assert _discover(tmp_path / "reg", dirs=dirs, explicit=False)[0] == []
    cb.CrushDb(tmp_path / "late").session("Late").user("registered later")
    cb.write_registry(tmp_path / "reg", [(str(tmp_path / "late"), str(tmp_path / "late" / ".crush"))])
    [found], _ = _discover(tmp_path / "reg", dirs=dirs, explicit=False, full=False)
    assert crush.read_unit(found).session.cwd == str(tmp_path / "late")


# -- end to end ----------------------------------------------------------------------------------------------
def test_daemon_indexes_a_session_once_rereads_a_change_once_and_sees_a_deleted_one_gone(
        home: Home, tmp_path: Path) -> None:
    """Through a real daemon and scanner on the default roots (the registry under a default-shaped home and the
    project's data directory): searchable with the right metadata; a second pass reads nothing; a new message
    is re-read once, still one session; a session Crush deleted is no longer present after the next full pass."""
    from aivault.vault.endpoints import search_sessions

    user = tmp_path / "user"
    project = user / "code" / "osprey"
    db = cb.CrushDb(project)
    cb.write_registry(user / ".local" / "share" / "crush", [(str(project), str(project / ".crush"))])
    s = db.session("Osprey build cache")
    s.user("why is the osprey build cache cold").assistant("The key includes the timestamp.",
                                                            tools=[("grep", {"pattern": "key"}, "cache.go:9")])
    gone = db.session("Scratch").user("a throwaway heron question")
    roots = crush.default_roots({}, user)
    assert [r.path for r in roots] == [str(user / ".local" / "share" / "crush"), str(project / ".crush")]
    with InprocDaemon(home, [f"crush={r.path}" for r in roots]) as d:
        def reconcile(full: bool = True) -> dict[str, Any]:
            result: dict[str, Any] = d.service.indexer.reconcile(full).result(120)
            return result

        def search(q: str) -> list[dict[str, Any]]:
            hits: list[dict[str, Any]] = answer(search_sessions(d.service, {"query": q, "limit": 10}))["hits"]
            return hits

        assert reconcile()["messages"] == 5
        [hit] = search("osprey")
        assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
            "crush", s.session_id, 4, "Osprey build cache", str(project))
        assert hit["resumeCommand"] == f"cd {project} && crush --session {s.session_id}"
        again = reconcile()
        assert again["files_changed"] == 0 and again["messages"] == 0
        s.user("and the pelican cache too")
        changed = reconcile(full=False)
        assert changed["files_changed"] == 1 and changed["messages"] == 5
        assert reconcile(full=False)["messages"] == 0
        [hit] = search("pelican")
        assert hit["sessionId"] == s.session_id and hit["messageCount"] == 5
        assert len(search("osprey")) == 1
        assert len(search("heron")) == 1
        db.con.execute("DELETE FROM messages WHERE session_id = ?", (gone.session_id,))
        db.con.execute("DELETE FROM sessions WHERE id = ?", (gone.session_id,))
        reconcile()
        # Kept, as a transcript that went away is (docs/contract.md): no longer present.
        assert [h["source"] for h in search("heron")] == ["unverifiable"]
        assert [h["source"] for h in search("osprey")] == ["present"]


def test_sqlite_connection_stays_usable_for_the_builder(tmp_path: Path) -> None:
    """The builder's database is a WAL database Crush itself could open (journal mode and triggers)."""
    db = cb.CrushDb(tmp_path / "p")
    db.session("x").user("y")
    con = sqlite3.connect(db.path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert con.execute("SELECT message_count FROM sessions").fetchone() == (1,)
