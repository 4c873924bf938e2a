"""Aider chat histories (scanner.aider): chats as units, header scanning, parsing, roots, pipeline.

There is no shared corpus for Aider: every count below was verified by reading the hand-written
fixtures under tests/fixtures/quirks/aider/ and the sample, line by line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from aivault.errors import UnitChanged
from aivault.home import Home
from aivault.scanner.agents import SPECS
from aivault.scanner.parsers import aider
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders.aider import AiderWriter
from tests.support.common import FIXTURES, REPO
from tests.support.daemons import InprocDaemon

QUIRKS = FIXTURES / "quirks" / "aider"
SAMPLES = REPO / "samples" / "aider"


def _chats(root: Path, dirs: dict[str, int] | None = None, full: bool = True) -> list[Found]:
    problems: list[RootProblem] = []
    found = list(aider.discover(Root("aider", str(root), explicit=True), problems, {} if dirs is None else dirs,
                                full))
    assert problems == []
    return found


def _shape(unit: Unit) -> list[tuple[str, str]]:
    return [(m.role, m.kind) for m in unit.messages]


def _local(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp() * 1000)


def test_three_chats_in_one_file_with_aiders_own_line_ends() -> None:
    """Each chat is one unit keyed by its header offset; user/tool/reply runs, titles and ids as read."""
    path = QUIRKS / "webapp" / ".aider.chat.history.md"
    found = _chats(QUIRKS / "webapp")
    data = path.read_bytes()
    offsets = [m.start() + 1 for m in re.finditer(rb"\n# aider chat started at ", data)]
    assert [f.path for f in found] == [f"{path}#{o}" for o in offsets]
    one, two, three = (aider.read_chat(f) for f in found)
    # Chat 1, counted line by line: banner (system), /add, its output (tool), the two-line prompt (one
    # message), the reply with its SEARCH/REPLACE fence, the edit+commit lines (tool; token line
    # dropped), /run, its three-line output plus the confirmation (one tool run), the question, the
    # reply holding a "#### Fix" heading and a "> Note" quote (both stay in the reply) = 10.
    assert _shape(one) == [("system", "text"), ("user", "text"), ("tool", "tool_result"), ("user", "text"),
                           ("assistant", "text"), ("tool", "tool_result"), ("user", "text"), ("tool", "tool_result"),
                           ("user", "text"), ("assistant", "text")]
    assert one.messages[3].text == "add a /health route\nthat returns ok as plain text"
    assert one.messages[4].text.endswith(">>>>>>> REPLACE\n```")
    assert one.messages[5].text == "Applied edit to app.py\nCommit 1a2b3c4 feat: add health route"
    assert one.messages[7].text.startswith("..F\nFAILED tests/test_health.py") and "1 failed, 2 passed" in \
        one.messages[7].text
    assert "#### Fix" in one.messages[9].text and "> Note: FastAPI" in one.messages[9].text
    assert one.skips == {"token-report": 2}
    s = one.session
    assert (s.session_id, s.title, s.cwd) == (f"{QUIRKS / 'webapp'}#2026-03-05 14:02:11", "add a /health route",
                                              str(QUIRKS / "webapp"))
    assert s.started_at == s.updated_at == _local("2026-03-05 14:02:11")  # a closed chat: its header time
    assert s.resume_command == f"cd {QUIRKS / 'webapp'} && aider --restore-chat-history"
    assert all(m.ts == s.started_at for m in one.messages)
    # Chat 2 starts in the same second: its id is kept apart; only /commands, so no title.
    assert _shape(two) == [("system", "text"), ("user", "text"), ("system", "text"), ("user", "text")]
    assert two.session.session_id == f"{QUIRKS / 'webapp'}#2026-03-05 14:02:11#2" and two.session.title is None
    # Chat 3: /ask's prompt is the title; a Latin-1 byte is replaced and counted.
    assert _shape(three) == [("system", "text"), ("user", "text"), ("assistant", "text")]
    assert three.session.title == "why does the session cache miss so often?"
    assert "\u2014 every call is a new key" in three.messages[2].text and "caf\ufffd" in three.messages[2].text
    assert three.skips == {"invalid-utf8": 1}
    assert three.session.updated_at is not None and three.session.started_at is not None
    assert three.session.updated_at >= three.session.started_at  # the open chat: the file's mtime


def test_a_history_without_aiders_line_ends_is_read_too() -> None:
    """Hand-written or old histories (no two-space ends, the FORMATS example) split the same way."""
    [f] = _chats(QUIRKS / "legacy")
    unit = aider.read_chat(f)
    # banner, /add, its output, the prompt, the reply (fence included), the edit line = 6.
    assert _shape(unit) == [("system", "text"), ("user", "text"), ("tool", "tool_result"), ("user", "text"),
                            ("assistant", "text"), ("tool", "tool_result")]
    assert unit.messages[4].text.endswith(">>>>>>> REPLACE")
    assert unit.session.title == "add a /health route"


def test_the_sample_holds_two_chats() -> None:
    """samples/aider/ledger-sync: a refund fix and a follow-up question, two sessions from one file."""
    first, second = (aider.read_chat(f) for f in _chats(SAMPLES))
    # banner, /add, its output, the prompt, the reply, the edit/commit run = 6; banner, /ask, reply = 3.
    assert len(first.messages) == 6 and len(second.messages) == 3
    assert first.session.title == "the nightly reconcile double-counts refunds that arrive after midnight"
    assert second.session.title == "does the ledger export still assume UTC for settled_at?"


# --- header scanning and incremental discovery -------------------------------------------------------
def test_headers_are_found_across_block_boundaries(tmp_path: Path) -> None:
    """A multi-megabyte history: every header found, one placed across the 1 MiB read boundary too."""
    path = tmp_path / ".aider.chat.history.md"
    filler = "x" * 99 + "\n"
    parts = []
    size = 0
    for k in range(40):
        head = f"\n# aider chat started at 2026-01-{k % 28 + 1:02d} 10:00:{k % 60:02d}\n\n"
        pad = filler * (700 if k != 9 else 11)
        parts.append(head + "#### go\n" + pad)
        size += len(parts[-1])
    data = "".join(parts).encode()
    boundary = 1 << 20
    cut = data.rfind(b"\n# aider", 0, boundary)
    data = data[:cut] + b"y" * (boundary - cut - 10) + data[cut:]  # a header straddling the boundary
    path.write_bytes(data)
    expected = [m.start() + 1 for m in re.finditer(rb"\n# aider chat started at ", data)]
    fd = os.open(path, os.O_RDONLY)
    try:
        found, scanned = aider.scan_headers(fd, 0, len(data))
    finally:
        os.close(fd)
    assert [o for o, _ in found] == expected and scanned == len(data)
    assert any(o < boundary < o + 40 for o in expected)


def test_a_grown_file_is_scanned_from_where_the_last_scan_ended(tmp_path: Path) -> None:
    """Appending keeps closed chats' signatures; only the new bytes are scanned; a new chat appears."""
    w = AiderWriter(tmp_path / "repo").start(datetime(2026, 3, 1, 9, 0, 0)).user("first prompt").reply("first")
    w.start(datetime(2026, 3, 1, 10, 0, 0)).user("second prompt")
    before = {f.path: f.mtime_ns for f in _chats(tmp_path)}
    rec = aider._FILES[str(w.path)]
    scanned = rec.scanned
    w.reply("an answer").start(datetime(2026, 3, 2, 8, 0, 0)).user("third prompt")
    after = {f.path: f.mtime_ns for f in _chats(tmp_path)}
    assert aider._FILES[str(w.path)].scanned > scanned
    first, second = (f"{w.path}#{o}" for o in w.offsets[:2])
    assert after[first] == before[first]  # closed: its bytes did not change
    assert after[second] != before[second]  # it was the open chat: it grew and closed
    assert len(after) == 3
    fresh = aider.HistoryFile(0, 0, 0, 0, 0, 0, 0)
    fd = os.open(w.path, os.O_RDONLY)
    try:
        fresh.headers, _ = aider.scan_headers(fd, 0, w.path.stat().st_size)
    finally:
        os.close(fd)
    assert aider._FILES[str(w.path)].headers == fresh.headers


def test_a_rewritten_file_is_scanned_again_and_a_stale_unit_is_unit_changed(tmp_path: Path) -> None:
    """A history replaced by other content is re-scanned from 0; reading a unit of the old layout is retried."""
    w = AiderWriter(tmp_path / "repo").start(datetime(2026, 3, 1, 9, 0, 0)).user("old prompt").reply("old")
    w.start(datetime(2026, 3, 1, 10, 0, 0)).user("old two")
    stale = _chats(tmp_path)[1]
    w.path.write_text("\n# aider chat started at 2026-04-01 08:00:00\n\n#### a new history\n")
    with pytest.raises(UnitChanged):
        aider.read_chat(stale)
    [f] = _chats(tmp_path)
    assert [m.text for m in aider.read_chat(f).messages] == ["a new history"]


def test_empty_headerless_and_cut_off_histories(tmp_path: Path) -> None:
    """An empty file has no chat; a file with no header is one chat from byte 0; a last line without
    its newline (Aider mid-write) is still read."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".aider.chat.history.md").write_bytes(b"")
    assert _chats(tmp_path / "a") == []
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".aider.chat.history.md").write_text("#### hello there  \n\nGeneral Kenobi")
    [f] = _chats(tmp_path / "b")
    unit = aider.read_chat(f)
    assert [m.text for m in unit.messages] == ["hello there", "General Kenobi"]
    assert unit.session.session_id == f"{tmp_path / 'b'}#start" and unit.session.started_at is None


def test_the_walk_is_bounded_and_skips_hidden_and_heavy_folders(tmp_path: Path) -> None:
    """Repos are found a few levels down; node_modules, dot-folders and very deep trees are not walked."""
    AiderWriter(tmp_path / "work" / "api").start(datetime(2026, 3, 1)).user("a")
    AiderWriter(tmp_path / "work" / "node_modules" / "pkg").start(datetime(2026, 3, 1)).user("b")
    AiderWriter(tmp_path / ".cache" / "x").start(datetime(2026, 3, 1)).user("c")
    AiderWriter(tmp_path.joinpath(*["d"] * (aider.MAX_DEPTH + 1))).start(datetime(2026, 3, 1)).user("d")
    assert [os.path.dirname(f.locator[0]) for f in _chats(tmp_path)] == [str(tmp_path / "work" / "api")]


def test_roots_are_only_what_the_user_names() -> None:
    """No default root, except an absolute AIDER_CHAT_HISTORY_FILE as a single-file root."""
    assert SPECS["aider"].default_roots({}, Path("/home/u")) == []
    assert SPECS["aider"].default_roots({"AIDER_CHAT_HISTORY_FILE": "notes/chat.history.txt"}, Path("/home/u")) == []
    [root] = SPECS["aider"].default_roots({"AIDER_CHAT_HISTORY_FILE": "/srv/logs/chat.md"}, Path("/home/u"))
    assert root.path == "/srv/logs/chat.md"


def test_a_single_file_root_with_another_name_resumes_with_that_file(tmp_path: Path) -> None:
    """AIDER_CHAT_HISTORY_FILE-style roots: the resume command names the file."""
    w = AiderWriter(tmp_path / "my repo", name="team.chat.md").start(datetime(2026, 3, 1)).user("pin numpy")
    [f] = list(aider.discover(Root("aider", str(w.path)), [], {}, True))
    unit = aider.read_chat(f)
    quoted = "'" + str(tmp_path / "my repo") + "'"
    assert unit.session.resume_command == (
        f"cd {quoted} && aider --restore-chat-history --chat-history-file '{w.path}'")


# --- through the real pipeline -------------------------------------------------------------------------
@pytest.fixture
def aider_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path]]:
    code = tmp_path / "code"
    code.mkdir()
    with InprocDaemon(home, {"aider": code}) as d:
        yield d, code


def test_chats_are_found_searched_and_only_the_changed_one_is_re_read(
        aider_daemon: tuple[InprocDaemon, Path]) -> None:
    """Two chats under a projects root are two sessions; a second pass reads nothing; appending re-reads
    the open chat exactly once (no duplicate); a new chat adds a session and re-reads its predecessor."""
    d, code = aider_daemon
    w = AiderWriter(code / "ledger").start(datetime(2026, 3, 1, 9, 0, 0)).user("/add sync.py")
    w.tool("Added sync.py to the chat").user("refunds after midnight are double counted").reply("Use settled_at.")
    w.start(datetime(2026, 3, 2, 9, 0, 0)).user("why is the CSV export in UTC").reply("It calls astimezone(utc).")
    summary = d.reconcile()
    assert summary["files_changed"] == 2 and summary["messages"] == 5 + 3
    [hit] = d.search("double counted")["hits"]
    assert hit["agent"] == "aider" and hit["sessionId"] == f"{code / 'ledger'}#2026-03-01 09:00:00"
    assert hit["messageCount"] == 5 and hit["title"] == "refunds after midnight are double counted"
    assert hit["cwd"] == str(code / "ledger")
    assert hit["resumeCommand"] == f"cd {code / 'ledger'} && aider --restore-chat-history"
    assert d.reconcile()["files_changed"] == 0
    w.user("and keep the merchant zone").reply("Added a tz column.")
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 5
    [hit] = d.search("merchant zone")["hits"]
    assert hit["messageCount"] == 5 and hit["title"] == "why is the CSV export in UTC"
    w.start(datetime(2026, 3, 3, 9, 0, 0)).user("rename the settled column")
    grown = d.reconcile(full=False)
    assert grown["files_changed"] == 2  # the new chat, and the one it closed (its end moved)
    assert len(d.search("merchant zone")["hits"]) == 1 and len(d.search("settled column")["hits"]) == 1
