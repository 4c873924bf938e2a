"""2026 drift in Claude Code and Codex transcripts (docs/formats.md §1, §2): each handled, none twice."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from aivault.scanner.model import Message
from aivault.scanner.parsers.claude import ClaudeParser
from aivault.scanner.parsers.codex import CodexParser
from tests.builders import codex as cx
from tests.support.daemons import InprocDaemon


def _uuid7(ms: int) -> str:
    """A UUIDv7 whose embedded time is ``ms`` (as Codex's turn ids are)."""
    raw = ms.to_bytes(6, "big") + uuid.uuid4().bytes[6:]
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(b)))


def _feed(parser: Any, lines: list[dict[str, Any]]) -> list[Message]:
    out: list[Message] = []
    for obj in lines:
        out += parser.feed(json.dumps(obj).encode())
    return out


def _split_everywhere(make: Any, lines: list[dict[str, Any]]) -> None:
    """Parsing in two halves with the state in between gives what one pass gives, at every split."""
    whole = [(m.role, m.kind, m.text) for m in _feed(make(None), lines)]
    for cut in range(len(lines) + 1):
        first = make(None)
        got = _feed(first, lines[:cut])
        second = make(json.loads(json.dumps(first.state(), default=list)))
        got += _feed(second, lines[cut:])
        assert [(m.role, m.kind, m.text) for m in got] == whole, cut


T0 = 1_772_359_200_000  # 2026-03-01T10:00:00Z, the parent's turns
T1 = T0 + 3_600_000  # the fork, an hour later


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _fork_rollout(parent: str, child: str) -> list[dict[str, Any]]:
    meta = cx.session_meta(child, _iso(T1), "/home/dev/api", branch="main", commit_hash="abc")
    meta["forked_from_id"] = parent
    copied = cx.session_meta(parent, _iso(T0), "/home/dev/api", branch="main", commit_hash="abc")
    return [
        cx.line(_iso(T1), "session_meta", meta),
        cx.line(_iso(T1), "session_meta", copied),  # the parent's history starts here
        cx.line(_iso(T0), "turn_context", {"cwd": "/home/dev/api", "model": "gpt-5", "turn_id": _uuid7(T0)}),
        cx.line(_iso(T0), "response_item", cx.user_item("the parent's question about quasars")),
        cx.line(_iso(T0), "response_item", cx.assistant_item("the parent's answer about quasars")),
        cx.line(_iso(T1 + 10), "turn_context", {"cwd": "/home/dev/api", "model": "gpt-5",
                                                 "turn_id": _uuid7(T1 + 10)}),
        cx.line(_iso(T1 + 20), "response_item", cx.user_item("the fork's own question about pulsars")),
        cx.line(_iso(T1 + 30), "response_item", cx.assistant_item("the fork's own answer about pulsars")),
    ]


def test_a_codex_fork_does_not_index_its_parents_replayed_turns() -> None:
    """A fork starts with a copy of its parent (after the parent's session_meta): those turns are
    the parent's and are counted as replayed, not indexed again; the fork's own turns are."""
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    lines = _fork_rollout(parent, child)
    p = CodexParser("/x/rollout-2026-03-01T11-00-00-" + child + ".jsonl")
    msgs = _feed(p, lines)
    assert [m.text for m in msgs] == ["the fork's own question about pulsars", "the fork's own answer about pulsars"]
    assert p.stats.extra["replayed_parent"] == 2
    assert p.session.session_id == child and p.session.parent_session_id == parent
    assert p.session.title == "the fork's own question about pulsars"
    _split_everywhere(lambda st: CodexParser("/x/r.jsonl", st), lines)


def test_a_codex_subagent_named_by_thread_spawn_is_a_child_and_its_copy_is_trimmed() -> None:
    """The parent named only under source.subagent.thread_spawn.parent_thread_id makes a child too."""
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    lines = _fork_rollout(parent, child)
    meta = lines[0]["payload"]
    del meta["forked_from_id"]
    meta["source"] = {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1}}}
    p = CodexParser("/x/r.jsonl")
    msgs = _feed(p, lines)
    assert p.session.parent_session_id == parent
    assert all("pulsars" in m.text for m in msgs) and len(msgs) == 2


def test_an_ordinary_rollout_mentioning_another_meta_is_not_trimmed() -> None:
    """Only a fork or sub-agent rollout can replay a parent: a plain session keeps every turn."""
    own, other = str(uuid.uuid4()), str(uuid.uuid4())
    lines = _fork_rollout(other, own)
    del lines[0]["payload"]["forked_from_id"]
    assert len(_feed(CodexParser("/x/r.jsonl"), lines)) == 4


def test_codex_item_completed_messages_and_code_mode_commands() -> None:
    """0.149+ item_completed: messages stand in for a missing event stream, and the commands a code-mode
    `exec` really ran are indexed once (a command already seen as a shell call is not repeated)."""
    sid = str(uuid.uuid4())
    t = _iso(T0)
    lines = [
        cx.line(t, "session_meta", cx.session_meta(sid, t, "/home/dev/api", branch="main", commit_hash="abc")),
        cx.line(t, "event_msg", {"type": "item_completed", "turn_id": "t1",
                                 "item": {"type": "UserMessage", "content": [{"type": "input_text",
                                                                              "text": "why does the build fail"}]}}),
        cx.line(t, "response_item", cx.function_call(
            "exec", json.dumps({"code": "const r = await tools.exec_command({cmd: 'cargo build'})"}), "c1")),
        cx.line(t, "event_msg", {"type": "item_completed", "turn_id": "t1",
                                 "item": {"type": "CommandExecution", "command": "cargo build", "exit_code": 101,
                                          "aggregated_output": "error[E0432]: unresolved import"}}),
        cx.line(t, "response_item", cx.function_call("shell", json.dumps({"command": ["ls", "-la"]}), "c2")),
        cx.line(t, "event_msg", {"type": "item_completed", "turn_id": "t1",
                                 "item": {"type": "CommandExecution", "command": ["ls", "-la"], "exit_code": 0}}),
        cx.line(t, "event_msg", {"type": "item_completed", "turn_id": "t1",
                                 "item": {"type": "AgentMessage", "content": [{"type": "output_text",
                                                                               "text": "a missing crate"}]}}),
    ]
    p = CodexParser("/x/r.jsonl")
    got = [(m.role, m.kind, m.text) for m in _feed(p, lines)]
    assert ("user", "text", "why does the build fail") in got
    assert ("assistant", "text", "a missing crate") in got
    assert ("assistant", "tool_call", "shell cargo build") in got
    assert ("tool", "tool_result", "error[E0432]: unresolved import\nexit code 101") in got
    assert sum(1 for r in got if r[1] == "tool_call" and "ls" in r[2].split("command")[-1]) == 1
    _split_everywhere(lambda st: CodexParser("/x/r.jsonl", st), lines)


def test_new_injected_envelopes_are_not_user_speech() -> None:
    """Codex's <recommended_plugins> and <codex_internal_context>, Claude's IDE wrappers: context, not
    prompts (a wrapper in front of a real prompt is cut off and the prompt kept)."""
    sid = str(uuid.uuid4())
    t = _iso(T0)
    codex = [
        cx.line(t, "session_meta", cx.session_meta(sid, t, "/w", branch="main", commit_hash="abc")),
        cx.line(t, "response_item", cx.user_item("<recommended_plugins>\n- figma\n</recommended_plugins>")),
        cx.line(t, "response_item",
                cx.user_item('<codex_internal_context source="goal">ship it</codex_internal_context>')),
        cx.line(t, "response_item", cx.user_item("the real prompt about tokens")),
    ]
    p = CodexParser("/x/r.jsonl")
    assert [m.text for m in _feed(p, codex)] == ["the real prompt about tokens"]
    assert p.session.title == "the real prompt about tokens"
    base = {"sessionId": "s", "cwd": "/w", "timestamp": "2026-03-01T10:00:00.000Z"}
    claude = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content":
            "<ide_opened_file>The user opened src/app.ts</ide_opened_file>"}},
        {**base, "type": "user", "uuid": "u2", "message": {"role": "user", "content":
            "<ide_selection>lines 3-9</ide_selection> refactor this loop"}},
    ]
    c = ClaudeParser("/x/s.jsonl")
    assert [m.text for m in _feed(c, claude)] == ["refactor this loop"]
    assert c.session.title == "refactor this loop"


def test_a_claude_queued_command_attachment_is_a_prompt() -> None:
    """A prompt typed while a tool ran arrives as a uuid-less queued_command attachment: it is indexed."""
    base = {"sessionId": "s", "cwd": "/w", "timestamp": "2026-03-01T10:00:00.000Z"}
    lines = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "run the tests"}},
        {**base, "type": "attachment", "attachment": {"type": "queued_command", "prompt": "also lint the marmot module",
                                                      "commandMode": "prompt",
                                                      "timestamp": "2026-03-01T10:00:09.000Z"}},
        {**base, "type": "attachment", "attachment": {"type": "queued_command",
                                                      "prompt": [{"type": "text", "text": "and the wombat one"}]}},
        {**base, "type": "attachment", "attachment": {"type": "todo_reminder", "content": []}},
    ]
    msgs = _feed(ClaudeParser("/x/s.jsonl"), lines)
    assert [(m.role, m.text) for m in msgs] == [("user", "run the tests"), ("user", "also lint the marmot module"),
                                                ("user", "and the wombat one")]
    assert msgs[1].ts == 1_772_359_209_000


def _claude(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")


def _turn(sid: str, n: int, text: str, kind: str = "") -> list[dict[str, Any]]:
    base = {"sessionId": sid, "cwd": "/home/dev/app", "timestamp": f"2026-03-01T10:00:{n:02d}.000Z"}
    if kind:
        base["sessionKind"] = kind
    return [{**base, "type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": f"{text} question"}},
            {**base, "type": "assistant", "uuid": f"a{n}", "message": {"id": f"m{n}", "role": "assistant",
                                                                       "content": [{"type": "text",
                                                                                    "text": f"{text} answer"}]}}]


def test_a_backgrounded_claude_session_is_not_indexed_twice(inproc_daemon: InprocDaemon,
                                                             roots: dict[str, Path]) -> None:
    """Backgrounding copies the conversation into a new file (sessionKind "bg") and goes on there:
    the copied turns stay in the original session only, the new ones in the background one."""
    project = roots["claude"] / "-home-dev-app"
    original, bg = str(uuid.uuid4()), str(uuid.uuid4())
    _claude(project / f"{original}.jsonl", _turn(original, 1, "gazelle") + _turn(original, 2, "impala"))
    _claude(project / f"{bg}.jsonl", [{**r, "sessionId": bg, "sessionKind": "bg"}
                                      for r in _turn(original, 1, "gazelle") + _turn(original, 2, "impala")]
            + _turn(bg, 3, "springbok", kind="bg"))
    inproc_daemon.reconcile()
    for word, sid, count in (("gazelle", original, 4), ("springbok", bg, 2)):
        [hit] = inproc_daemon.search(word)["hits"]
        assert hit["sessionId"] == sid and hit["messageCount"] == count, word
    assert len(inproc_daemon.search("impala")["hits"]) == 1


def test_a_claude_transcript_rewritten_in_place_with_the_same_size_and_mtime_is_read_again(
        inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A rewrite that keeps size, mtime and inode is caught by the full pass's fingerprint of the file's
    indexed end: the new words are found, the old ones are gone."""
    import os

    path = roots["claude"] / "-home-dev-app" / "s.jsonl"
    _claude(path, _turn("s", 1, "ocelot") + _turn("s", 2, "margay"))
    inproc_daemon.reconcile()
    st = os.stat(path)
    data = path.read_bytes().replace(b"margay", b"jaguar")
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns, os.stat(path).st_ino) == \
        (st.st_size, st.st_mtime_ns, st.st_ino)
    inproc_daemon.reconcile(full=True)
    assert len(inproc_daemon.search("jaguar")["hits"]) == 1
    assert inproc_daemon.search("margay")["hits"] == []


def test_codex_thread_names_come_from_the_state_database_when_session_index_is_gone(
        inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Newer Codex keeps /rename names in state_<N>.sqlite's threads table (no session_index.jsonl):
    they title the session, and a later rename there is picked up."""
    import sqlite3

    from tests.builders import CodexWriter

    x = CodexWriter(roots["codex"])
    x.user("a prompt about capybara herds").assistant("herd facts")
    db = roots["codex"].parent / "state_5.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT, cwd TEXT, name TEXT)")
    con.execute("INSERT INTO threads VALUES (?, ?, ?, ?)",
                (x.session_id, str(x.path), "/home/dev/api", "herd planning"))
    con.commit()
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("capybara")["hits"]
    assert hit["title"] == "herd planning"
    con.execute("UPDATE threads SET name = 'renamed herd work' WHERE id = ?", (x.session_id,))
    con.commit()
    con.close()
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("capybara")["hits"]
    assert hit["title"] == "renamed herd work"
