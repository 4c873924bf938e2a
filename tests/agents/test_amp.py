"""Amp thread documents (scanner.amp): blocks to messages, session fields, broken documents, roots, pipeline.

There is no shared corpus for Amp: every count below was verified by reading the hand-written
fixtures under tests/fixtures/quirks/amp/ and the sample, block by block.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.home import Home
from aivault.scanner.agents import SPECS
from aivault.scanner.parsers import amp
from aivault.scanner.sources import Found, Root, RootProblem, Unit
from tests.builders import amp as b
from tests.support.common import FIXTURES, REPO
from tests.support.daemons import InprocDaemon

QUIRKS = FIXTURES / "quirks" / "amp"
SAMPLES = REPO / "samples" / "amp"
T1 = "T-0199bbbb-0000-7000-8000-000000000001"
T2 = "T-0199bbbb-0000-7000-8000-000000000002"


def _threads(root: Path) -> dict[str, Unit]:
    problems: list[RootProblem] = []
    found = list(SPECS["amp"].discover(Root("amp", str(root), explicit=True), problems, {}, True))
    assert problems == []
    return {Path(f.path).stem: amp.read_thread(f) for f in found}


def _shape(unit: Unit) -> list[tuple[str, str]]:
    return [(m.role, m.kind) for m in unit.messages]


def _found(path: Path) -> Found:
    [f] = [x for x in SPECS["amp"].discover(Root("amp", str(path.parent)), [], {}, True) if x.path == str(path)]
    return f


def test_a_thread_with_every_block_kind() -> None:
    """Text, thinking, tool_use (legacy Bash and modern shell_command), tool results by run status."""
    units = _threads(QUIRKS)
    assert set(units) == {T1, T2}  # the .json.tmp beside them is not a thread
    unit = units[T1]
    # Counted block by block: user text; thinking (redacted skipped), Read; its result; text, Bash,
    # shell_command; error result, cancelled result (image skipped); final text (server_tool_use
    # skipped); the "info" message and the bare string are not messages = 10.
    assert _shape(unit) == [("user", "text"), ("assistant", "thinking"), ("assistant", "tool_call"),
                            ("tool", "tool_result"), ("assistant", "text"), ("assistant", "tool_call"),
                            ("assistant", "tool_call"), ("tool", "tool_result"), ("tool", "tool_result"),
                            ("assistant", "text")]
    texts = [m.text for m in unit.messages]
    assert texts[2] == 'Read {"path":"src/fetch.ts"}'
    assert texts[5] == 'Bash {"cmd":"npm test","cwd":"/home/dev/fetcher"}'
    assert texts[6] == 'shell_command {"command":"npx tsc --noEmit","workdir":"/home/dev/fetcher"}'
    assert texts[7] == '[error] {"output":"FAIL src/fetch.test.ts\\n  retries 3 times","exitCode":1}'
    assert texts[8] == "[cancelled]"
    s = unit.session
    assert (s.session_id, s.title, s.cwd, s.branch) == (T1, "Add retry to fetcher", "/home/dev/fetcher", "feat/retry")
    assert (s.started_at, s.updated_at) == (1772800000000, 1772800025000)
    assert s.resume_command == f"amp threads continue {T1}" and s.parent_session_id is None
    assert [m.ts for m in unit.messages][:4] == [1772800001000, 1772800003000, 1772800003000, None]
    assert unit.skips == {"redacted_thinking": 1, "image": 1, "unknown_block:server_tool_use": 1,
                          "unknown_role:info": 1, "malformed-record": 1}


def test_a_handoff_thread_without_a_title() -> None:
    """No title: the first user text (first line) is; a file:// URI is decoded; a handoff names its parent."""
    unit = _threads(QUIRKS)[T2]
    assert _shape(unit) == [("user", "text"), ("assistant", "text")]
    s = unit.session
    assert s.title == "Carry the retry helper over to the upload client"
    assert (s.cwd, s.branch, s.parent_session_id) == ("/home/dev/my app", "main", T1)


def test_the_sample_thread() -> None:
    """samples/amp: user, thinking, Bash, its result, the answer = 5 messages."""
    [unit] = _threads(SAMPLES / ".local/share/amp/threads").values()
    assert len(unit.messages) == 5 and unit.session.title == "Flaky websocket reconnect test"
    assert unit.session.branch == "fix/ws-reconnect" and unit.session.cwd == "/home/dev/chatterbox"


def _age(path: Path, seconds: float) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_broken_documents(tmp_path: Path) -> None:
    """Truncated JSON being written is UnitChanged; left alone it is UnitUnreadable; so is an empty or
    non-object file once settled; invalid UTF-8 inside strings is repaired."""
    doc = json.dumps(b.thread("T-1", 1772800000000, [b.user(0, [b.text("rotate the keys")], 1772800001000)]))
    p = tmp_path / "T-1.json"
    p.write_text(doc[:-15])
    with pytest.raises(UnitChanged):
        amp.read_thread(_found(p))
    _age(p, 3600)
    with pytest.raises(UnitUnreadable, match="not valid JSON"):
        amp.read_thread(_found(p))
    for name, data in (("T-2.json", b""), ("T-3.json", b"[1, 2]")):
        (tmp_path / name).write_bytes(data)
        _age(tmp_path / name, 3600)
        with pytest.raises(UnitUnreadable):
            amp.read_thread(_found(tmp_path / name))
    (tmp_path / "T-4.json").write_bytes(doc.replace("rotate", "rot\\u00e9").encode().replace(b"keys", b"k\xffys"))
    unit = amp.read_thread(_found(tmp_path / "T-4.json"))
    assert [m.text for m in unit.messages] == ["rot\u00e9 the k\ufffdys"]


def test_roots_follow_amp_data_dir_and_xdg(tmp_path: Path) -> None:
    """AMP_DATA_DIR is Amp's data folder (threads/ inside, comma-separated for several); else XDG_DATA_HOME."""
    home = tmp_path
    assert [r.path for r in SPECS["amp"].default_roots({}, home)] == [str(home / ".local/share/amp/threads")]
    assert [r.path for r in SPECS["amp"].default_roots({"XDG_DATA_HOME": str(tmp_path / "x")}, home)] == [
        str(tmp_path / "x/amp/threads")]
    roots = SPECS["amp"].default_roots({"AMP_DATA_DIR": f"{tmp_path / 'a'},{tmp_path / 'b'}"}, home)
    assert [r.path for r in roots] == [str(tmp_path / "a"), str(tmp_path / "b")]
    w = b.ThreadWriter(tmp_path / "a" / "threads", "T-9").user("find threads under the data dir")
    assert [Path(f.path) for f in SPECS["amp"].discover(roots[0], [], {}, True)] == [w.path]


@pytest.fixture
def amp_daemon(home: Home, tmp_path: Path) -> Iterator[tuple[InprocDaemon, Path]]:
    threads = tmp_path / "userhome" / ".local" / "share" / "amp" / "threads"
    threads.mkdir(parents=True)
    with InprocDaemon(home, {"amp": threads}) as d:
        yield d, threads


def test_a_thread_is_found_searched_and_re_read_once_when_rewritten(amp_daemon: tuple[InprocDaemon, Path]) -> None:
    """Default-shaped root, search, hit fields; an unchanged pass reads nothing; Amp's whole-file
    rewrite re-reads the thread exactly once, still one session."""
    d, threads = amp_daemon
    w = b.ThreadWriter(threads, "T-0199cccc-0000-7000-8000-00000000abcd", title="Flaky websocket reconnect")
    w.user("the reconnect test hangs on the backoff timer")
    w.assistant(b.tool_use("toolu_1", "Bash", {"cmd": "npx vitest run reconnect"}))
    w.result("toolu_1", {"output": "1 failed", "exitCode": 1})
    summary = d.reconcile()
    assert summary["messages"] == 3
    [hit] = d.search("backoff timer")["hits"]
    assert hit["agent"] == "amp" and hit["sessionId"] == w.id and hit["messageCount"] == 3
    assert hit["title"] == "Flaky websocket reconnect" and hit["cwd"] == "/home/dev/app"
    assert hit["resumeCommand"] == f"amp threads continue {w.id}"
    assert d.reconcile()["files_changed"] == 0
    w.assistant(b.text("Awaiting server.ready fixes the race."))
    changed = d.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 4
    [hit] = d.search("server ready race")["hits"]
    assert hit["messageCount"] == 4
    assert len(d.search("backoff timer")["hits"]) == 1
