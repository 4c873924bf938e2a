"""DeepSeek Harness logs (scanner.dsh): multi-frame zstd, seq order, streamed answers, seeds, discovery, daemon."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import orjson
import pytest
import zstandard

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.parsers import dsh
from aivault.scanner.sources import Root, RootProblem, Unit
from tests.builders import dsh as b
from tests.support.common import REPO
from tests.support.daemons import InprocDaemon
from tests.support.units import timed_shape, whole_unit

CORPUS = REPO / "tests" / "fixtures" / "corpus" / "deepseek-harness" / "deja-vu" / "sessions"
FIXTURE_ID = "session-eaf5c9ac-0e47-4d2f-b982-8bae306062d1"
FIXTURE = CORPUS / "--work-pgbouncer-lab--" / FIXTURE_ID / "session.jsonl"
SAMPLES = REPO / "samples" / "dsh" / ".dsh"
OLD_NS = 1_600_000_000 * 1_000_000_000
FIXTURE_MESSAGES = [
    ("user", "text", "how many connections do we hold per shard"),
    ("assistant", "thinking", "the pool size lives in notes.txt"),
    ("assistant", "text", "let me check the config"),
    ("assistant", "tool_call", 'read {"file_path":"/work/pgbouncer-lab/notes.txt"}'),
    ("tool", "tool_result", "pgbouncer pool_size = 40"),
    ("assistant", "text", "we hold 40 per shard, pinned in the pgbouncer config"),
]


def read(path: Path) -> Unit:
    return whole_unit("dsh", path)


shape = timed_shape


def _compress_per_line(src: Path, dest: Path) -> None:
    """``src`` as dsh's default persistence writes it: one checksummed zstd frame per appended line."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    c = zstandard.ZstdCompressor(write_checksum=True)
    dest.write_bytes(b"".join(c.compress(line) for line in src.read_bytes().splitlines(keepends=True)))


# -- the copied corpus --------------------------------------------------------------------------------------
def test_corpus_list_is_complete() -> None:
    """The one DeepSeek Harness corpus file is the one tested below."""
    assert [p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()] == [
        f"--work-pgbouncer-lab--/{FIXTURE_ID}/session.jsonl"]


def test_corpus_raw_log_in_seq_order_without_injected_context() -> None:
    """The raw v0 log: six messages in seq order; the plugin's runtime snapshot is injected context; the streamed
    chunks (one plain, one packed row of three) are superseded by the final message; the fallback title wins."""
    unit = read(FIXTURE)
    assert shape(unit) == FIXTURE_MESSAGES
    s = unit.session
    assert (s.agent, s.session_id, s.title, s.cwd, s.branch, s.parent_session_id, s.resume_command) == (
        "dsh", FIXTURE_ID, "pgbouncer pool size", "/work/pgbouncer-lab", None, None, None)
    assert (s.started_at, s.updated_at) == (1787320263519, 1787320263902)
    assert unit.skips == {"bookkeeping": 4, "injected-context": 1, "duplicate_stream": 4}


def test_corpus_compressed_one_frame_per_line_reads_every_frame(tmp_path: Path) -> None:
    """The same log compressed as dsh writes it, one zstd frame per append, gives the same session: every
    frame is decoded, not only the first."""
    dest = tmp_path / "sessions" / "--work-pgbouncer-lab--" / FIXTURE_ID / "session.jsonl.zstd"
    _compress_per_line(FIXTURE, dest)
    assert dest.read_bytes().count(b"\x28\xb5\x2f\xfd") == len(FIXTURE.read_bytes().splitlines())  # frame magic
    unit = read(dest)
    assert shape(unit) == FIXTURE_MESSAGES and unit.session.title == "pgbouncer pool size"


# -- the format from the builder -----------------------------------------------------------------------------
def test_turns_tools_and_titles_from_the_builder(tmp_path: Path) -> None:
    """A two-turn session: prompt, answer text, tool call (the tool/call event) and result, reasoning; an injected
    plugin message is not speech; the llm title wins over the first prompt."""
    w = b.DshWriter(tmp_path / ".dsh", cwd="/home/dev/heron", session_id="session-0000aaaa-0000-4000-8000-000000000001")
    w.injected("sandbox: workspace-write")
    w.user("why does heron drop BOM rows", reply="Open with utf-8-sig.", thinking="BOM",
           tool=("read", {"file_path": "importer.py"}, "open(path)"))
    unit = read(w.path)
    assert shape(unit) == [
        ("user", "text", "why does heron drop BOM rows"),
        ("assistant", "text", "Running read."),
        ("assistant", "tool_call", 'read {"file_path":"importer.py"}'),
        ("tool", "tool_result", "open(path)"),
        ("assistant", "thinking", "BOM"),
        ("assistant", "text", "Open with utf-8-sig."),
    ]
    assert unit.session.title == "why does heron drop BOM rows" and unit.skips["injected-context"] == 1
    w.title("heron BOM rows")
    assert read(w.path).session.title == "heron BOM rows"


def test_tool_call_block_and_event_are_one_call(tmp_path: Path) -> None:
    """A call announced by a tool-call block of the answer and again by tool/call is indexed once."""
    w = b.DshWriter(tmp_path / ".dsh", compressed=False)
    args = orjson.dumps({"command": "ls"}).decode()
    w.write([w.next("user/message", b.user_data([b.text("list it")])),
             w.next("assistant/message", b.assistant_data(1, 1, [{"type": "tool-call", "id": "c9", "name": "bash",
                                                                  "arguments": args}])),
             w.next("tool/call", {"turn": 1, "step": 1, "callId": "c9", "name": "bash", "arguments": args}),
             w.next("tool/result", b.tool_result_data(1, 1, "c9", "permission denied", is_error=True))])
    unit = read(w.path)
    assert shape(unit) == [("user", "text", "list it"), ("assistant", "tool_call", 'bash {"command":"ls"}'),
                           ("tool", "tool_result", "[error] permission denied")]
    assert unit.skips["duplicate_call"] == 1


def test_an_interrupted_answer_is_what_was_streamed(tmp_path: Path) -> None:
    """A turn whose final message never came keeps its packed text-chunks, joined, at the first chunk's place."""
    w = b.DshWriter(tmp_path / ".dsh")
    w.user("first", reply="done")
    w.interrupted("second", ["the pool ", "is 40 ", "per shard"])
    unit = read(w.path)
    assert shape(unit)[-2:] == [("user", "text", "second"), ("assistant", "text", "the pool is 40 per shard")]
    assert "duplicate_stream" not in unit.skips


def test_a_child_skips_its_parents_seed_and_links_to_it(tmp_path: Path) -> None:
    """A subagent log replays its parent's first seedLength events: they are not indexed again; the header's
    parentSession is the parent."""
    parent = "session-0000aaaa-0000-4000-8000-00000000000p"
    w = b.DshWriter(tmp_path / ".dsh", session_id="session-0000aaaa-0000-4000-8000-00000000000c",
                    parentSession=parent, origin="subagent", delegationDepth=1, seedLength=2)
    w.write([w.next("user/message", b.user_data([b.text("parent prompt")])),
             w.next("assistant/message", b.assistant_data(1, 1, [b.text("parent answer")]))])
    w.user("child task", reply="child answer")
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["child task", "child answer"]
    assert unit.session.parent_session_id == parent and unit.skips["seed-replay"] == 2


def test_surface_replacements_and_unknown_events_are_counted(tmp_path: Path) -> None:
    """A later-generation surface replacement adds no message; unknown events, a non-object line and a future
    header version are counted, never fatal; a compaction summary is system text."""
    w = b.DshWriter(tmp_path / ".dsh", compressed=False, version=7)
    w.write([w.next("user/message", b.user_data([b.text("kept")]), surfaceOp="append"),
             w.next("user/message", b.user_data([b.text("rewritten")]), surfaceOp={"op": "replace", "startSeq": 0,
                                                                                  "endSeq": 0}),
             w.next("hologram/beam", {"x": 1}),
             w.next("compaction/summary", {"summary": [b.text("we found the pool size")]})])
    with w.path.open("ab") as f:
        f.write(b"[1, 2]\n")
    unit = read(w.path)
    assert shape(unit) == [("user", "text", "kept"), ("system", "text", "we found the pool size")]
    assert unit.skips == {"unknown_version:7": 1, "surface-replace": 1, "unknown_record:hologram/beam": 1,
                          "malformed-record": 1}


def test_a_log_being_appended_waits_and_a_corrupt_one_is_reported(tmp_path: Path) -> None:
    """A cut-off last record waits while the log is fresh and is counted once it settled; a .zstd log that
    does not decode is retried while fresh, then reported unreadable with the reason."""
    w = b.DshWriter(tmp_path / ".dsh", compressed=False)
    w.user("hello dsh", reply="hi")
    with w.path.open("ab") as f:
        f.write(b'{"type":"user/mess')
    with pytest.raises(UnitChanged):
        read(w.path)
    os.utime(w.path, ns=(OLD_NS, OLD_NS))
    unit = read(w.path)
    assert [m.text for m in unit.messages] == ["hello dsh", "hi"] and unit.skips["truncated-record"] == 1
    z = b.DshWriter(tmp_path / ".dsh2")
    z.user("hello zstd", reply="hi")
    with z.path.open("ab") as f:
        f.write(b"\x28\xb5\x2f\xfd" + b"\xff" * 64)  # a frame header followed by garbage
    with pytest.raises(UnitChanged):
        read(z.path)
    os.utime(z.path, ns=(OLD_NS, OLD_NS))
    with pytest.raises(UnitUnreadable, match="cannot decode"):
        read(z.path)


def test_empty_log_is_an_empty_session(tmp_path: Path) -> None:
    """An empty log gives no message, the folder name as id, and empty-file and missing-header counts."""
    path = tmp_path / "sessions" / "_no-cwd" / "session-e" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    unit = read(path)
    assert (unit.messages, unit.session.session_id) == ([], "session-e")
    assert unit.skips == {"empty-file": 1, "missing-header": 1}


# -- discovery and roots -------------------------------------------------------------------------------------
def test_default_roots_follow_dsh_home(tmp_path: Path) -> None:
    """~/.dsh/sessions on Linux and macOS alike; DSH_HOME replaces ~/.dsh."""
    assert [r.path for r in dsh.default_roots({}, tmp_path)] == [str(tmp_path / ".dsh" / "sessions")]
    assert [r.path for r in dsh.default_roots({"DSH_HOME": str(tmp_path / "d")}, tmp_path)] == [
        str(tmp_path / "d" / "sessions")]


def test_discovery_finds_every_generation_and_prefers_the_compressed_twin(tmp_path: Path) -> None:
    """session.jsonl(.zstd) and session.vN.jsonl(.zstd) under <slug>/<session>/ are units, one per folder: the
    newest generation, the compressed twin of a raw log; other files are not; a recent pass lists known session
    folders again."""
    root = tmp_path / "sessions"
    for rel in ("--a--/session-1/session.jsonl.zstd", "--a--/session-1/session.jsonl", "--a--/session-2/session.jsonl",
                "--b--/session-3/session.v3.jsonl.zstd", "--b--/session-3/session.jsonl.zstd",
                "--b--/session-3/session.v2.jsonl", "--b--/session-3/notes.txt", "cordis.patch.yml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"")
    problems: list[RootProblem] = []
    dirs: dict[str, int] = {}
    got = {os.path.relpath(f.path, root) for f in dsh.SPEC.discover(Root("dsh", str(root)), problems, dirs, True)}
    assert problems == [] and got == {"--a--/session-1/session.jsonl.zstd", "--a--/session-2/session.jsonl",
                                      "--b--/session-3/session.v3.jsonl.zstd"}
    again = {os.path.relpath(f.path, root) for f in dsh.SPEC.discover(Root("dsh", str(root)), problems, dirs, False)}
    assert again == got
    assert dsh.SPEC.shaped("session.jsonl.zstd") and not dsh.SPEC.shaped("session.json")


# -- the shipped sample --------------------------------------------------------------------------------------
def test_sample_session() -> None:
    """samples/dsh (DSH_HOME=samples/dsh/.dsh): a five-frame log, 13 messages, the llm title, the cwd, the
    duplicate announcement of the edit call indexed once, the plugin snapshot left out."""
    [f] = dsh.SPEC.discover(Root("dsh", str(SAMPLES / "sessions")), [], {}, True)
    unit = dsh.read_unit(f)
    assert [(m.role, m.kind) for m in unit.messages] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "text"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("user", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text")]
    s = unit.session
    assert (s.title, s.cwd) == ("pgbouncer transaction pooling vs psycopg prepared statements", "/home/dev/ledger-api")
    assert unit.skips == {"bookkeeping": 16, "injected-context": 1, "duplicate_call": 1}
    assert "DuplicatePreparedStatement" in unit.messages[0].text and "max_prepared_statements" in unit.messages[-1].text


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "user" / ".dsh" / "sessions"
    sessions.mkdir(parents=True)
    return {"dsh": sessions}


def test_daemon_indexes_a_dsh_session_once_and_rereads_an_append_once(inproc_daemon: InprocDaemon,
                                                                        roots: dict[str, Path]) -> None:
    """Through a real daemon and scanner: a compressed log found under a default-shaped root, searchable, right
    metadata; a second pass reads nothing; a new frame appended is seen by a recent pass and read once."""
    w = b.DshWriter(roots["dsh"].parent, cwd="/home/dev/osprey",
                    session_id="session-0000bbbb-0000-4000-8000-0000000000e1")
    w.user("osprey exporter leaks file descriptors", reply="Close the gzip writer.",
           tool=("bash", {"command": "ls /proc/self/fd | wc -l"}, "1021"))
    w.title("osprey fd leak")
    assert inproc_daemon.reconcile()["messages"] == 5
    [hit] = inproc_daemon.search("osprey")["hits"]
    assert (hit["agent"], hit["sessionId"], hit["messageCount"], hit["title"], hit["cwd"]) == (
        "dsh", w.session_id, 5, "osprey fd leak", "/home/dev/osprey")
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0 and again["messages"] == 0
    time.sleep(0.01)
    w.user("does the kestrel exporter leak too", reply="No, it uses a context manager.")
    changed = inproc_daemon.reconcile(full=False)
    assert changed["files_changed"] == 1 and changed["messages"] == 7
    assert inproc_daemon.reconcile(full=False)["messages"] == 0
    [hit] = inproc_daemon.search("kestrel")["hits"]
    assert hit["sessionId"] == w.session_id and hit["messageCount"] == 7


def test_copied_fixture_through_the_daemon(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """The corpus log copied under a root is indexed as one session whose plugin snapshot is not searchable."""
    shutil.copytree(CORPUS, roots["dsh"], dirs_exist_ok=True)
    assert inproc_daemon.reconcile()["messages"] == 6
    [hit] = inproc_daemon.search("shard")["hits"]
    assert hit["sessionId"] == FIXTURE_ID and hit["title"] == "pgbouncer pool size"
    assert inproc_daemon.search("supersedes")["hits"] == []
