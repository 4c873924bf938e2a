"""Incremental scanning: appends, partial lines, replaced and moved files, and bad input."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from aivault.codec import RpcRequest
from aivault.protocol import METHOD_STATUS
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import answer
from tests.support.daemons import InprocDaemon


def _ids(r: dict[str, Any]) -> list[str]:
    return [h["sessionId"] for h in r["hits"]]


def test_a_second_pass_reads_only_appended_lines(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """After an append, the next pass parses only the new lines and they become searchable."""
    c = ClaudeWriter(roots["claude"])
    for i in range(50):
        c.user(f"message number {i} about caching")
    first = inproc_daemon.reconcile()
    assert first["messages"] == 50
    c.user("a brand new remark about zeppelins")
    second = inproc_daemon.reconcile()
    assert second["messages"] == 1 and second["files_changed"] == 1
    [hit] = inproc_daemon.search("zeppelins")["hits"]
    assert hit["messageCount"] == 51
    third = inproc_daemon.reconcile()
    assert third["files_changed"] == 0 and third["messages"] == 0


def test_a_last_line_without_newline_waits_for_its_end(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A line still being written (no newline yet) is left for later, then indexed once complete."""
    c = ClaudeWriter(roots["claude"])
    c.user("first complete line")
    c.user("second line mentions walrus")
    data = c.path.read_bytes()
    c.path.write_bytes(data[:-1])  # drop the final newline
    inproc_daemon.reconcile()
    assert inproc_daemon.search("walrus")["hits"] == []
    assert len(inproc_daemon.search("first")["hits"]) == 1
    with c.path.open("ab") as fh:
        fh.write(b"\n")
    inproc_daemon.reconcile()
    [hit] = inproc_daemon.search("walrus")["hits"]
    assert hit["messageCount"] == 2


def test_a_file_replaced_by_a_shorter_one_is_reread(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Replacing a transcript (new inode, shorter) replaces its old rows; nothing old survives."""
    c = ClaudeWriter(roots["claude"], session_id="11111111-0000-4000-8000-000000000001")
    for w in ("alpha", "bravo", "charlie"):
        c.user(f"old content {w}")
    inproc_daemon.reconcile()
    assert len(inproc_daemon.search("charlie")["hits"]) == 1
    tmp = c.path.with_suffix(".tmp")
    d = ClaudeWriter(roots["claude"], session_id="11111111-0000-4000-8000-000000000001")
    d.path = tmp
    d.user("new content delta")
    os.replace(tmp, c.path)
    inproc_daemon.reconcile()
    assert inproc_daemon.search("charlie")["hits"] == []
    [hit] = inproc_daemon.search("delta")["hits"]
    assert hit["messageCount"] == 1


def test_a_file_rewritten_in_place_is_detected_by_its_head(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """Same inode, same or larger size, different content: the head fingerprint forces a re-read."""
    c = ClaudeWriter(roots["claude"], session_id="22222222-0000-4000-8000-000000000002")
    c.user("original words platypus")
    inproc_daemon.reconcile()
    ino = c.path.stat().st_ino
    body = c.path.read_text().replace("platypus", "echidnas")
    with c.path.open("r+") as fh:  # rewrite in place, keeping the inode
        fh.write(body)
    with c.path.open("a") as fh:
        fh.write(c.path.read_text().splitlines()[0].replace("echidnas", "wombats") + "\n")
    assert c.path.stat().st_ino == ino
    inproc_daemon.reconcile()
    assert inproc_daemon.search("platypus")["hits"] == []
    [hit] = inproc_daemon.search("echidnas")["hits"]
    assert hit["messageCount"] == 2


def test_a_moved_file_keeps_its_session_without_rereading(inproc_daemon: InprocDaemon, roots: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """Codex archiving moves a rollout; the same inode at a new path is the same session, once."""
    x = CodexWriter(roots["codex"])
    x.user("archive me later: narwhal")
    inproc_daemon.reconcile()
    dest = roots["codex"] / "archived"
    dest.mkdir()
    os.rename(x.path, dest / x.path.name)
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 0
    [hit] = inproc_daemon.search("narwhal")["hits"]
    assert hit["source"] == "present"


def test_a_deleted_transcript_stays_searchable_as_unverifiable(inproc_daemon: InprocDaemon,
                                                                roots: dict[str, Path]) -> None:
    """The agent may clean up old transcripts; the index keeps them and says the file is not verifiable."""
    c = ClaudeWriter(roots["claude"])
    c.user("remember the capybara incident")
    inproc_daemon.reconcile()
    c.path.unlink()
    inproc_daemon.reconcile(full=True)
    [hit] = inproc_daemon.search("capybara")["hits"]
    assert hit["source"] == "unverifiable"


def test_bad_input_is_counted_and_skipped_and_the_rest_is_indexed(inproc_daemon: InprocDaemon,
                                                                   roots: dict[str, Path]) -> None:
    """Malformed JSON, invalid UTF-8 and a 10 MB line never stop the pass; good lines around them index."""
    c = ClaudeWriter(roots["claude"])
    c.user("before the garbage: ocelot")
    with c.path.open("ab") as fh:
        fh.write(b"{this is not json\n")
        fh.write(b"[1, 2, 3]\n")
        fh.write(b'{"type":"user","message":{"role":"user","content":"bad bytes \xff\xfe here lynx"},'
                 b'"timestamp":"2026-03-01T10:00:00.000Z","sessionId":"x"}\n')
        big = "y" * (10 * 1024 * 1024)
        fh.write(('{"type":"user","message":{"role":"user","content":"huge ' + big + ' serval"},'
                  '"timestamp":"2026-03-01T10:00:01.000Z"}\n').encode())
    c.user("after the garbage: caracal")
    summary = inproc_daemon.reconcile()
    assert summary["malformed"] == 2
    for word in ("ocelot", "lynx", "caracal"):
        assert len(inproc_daemon.search(word)["hits"]) == 1, word
    [hit] = inproc_daemon.search("caracal")["hits"]
    assert hit["messageCount"] == 4


def test_unreadable_roots_and_files_are_reported_and_the_rest_goes_on(home: object, tmp_path: Path,
                                                                       roots: dict[str, Path]) -> None:
    """A root that cannot be listed and a transcript that cannot be read degrade status, not indexing."""
    from aivault.home import Home
    from tests.support.common import root_args

    assert isinstance(home, Home)
    ok = ClaudeWriter(roots["claude"])
    ok.user("healthy transcript mentions okapi")
    (roots["claude"] / "-home-dev-app").mkdir(exist_ok=True)
    (roots["claude"] / "-home-dev-app" / "broken.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    bad_root = f"claude={blocker}/projects"
    with InprocDaemon(home, [*root_args(roots), bad_root]) as d:
        d.service.indexer.reconcile(True).result(60)
        from aivault.vault.endpoints import search_sessions

        assert len(answer(search_sessions(d.service, {"query": "okapi"}))["hits"]) == 1
        st = d.daemon.handle(RpcRequest("1", METHOD_STATUS, {}))
        assert st["phase"] == "degraded"
        reasons = {r["root"]: r["reason"] for r in st["degradedRoots"]}
        assert any("broken.jsonl" in r for r in reasons.values())
        assert str(blocker / "projects") in reasons
        assert st["filesIndexed"] == 1


def test_replacements_that_move_a_file_between_scanner_shards_never_duplicate(inproc_daemon: InprocDaemon,
                                                                              roots: dict[str, Path]) -> None:
    """A replaced file gets a new inode and maybe another scanner; its session stays single and current."""
    from aivault.ingest import shard_of

    sid = "33333333-0000-4000-8000-000000000003"
    slots = len(inproc_daemon.service.indexer.slots)
    shards_seen = set()
    for round_ in range(8):
        c = ClaudeWriter(roots["claude"], session_id=sid)
        # Filesystems reuse freed inodes, so pick the replacement among fresh files (all kept
        # until the swap, so each has its own inode) to alternate the shard on purpose.
        candidates: list[Path] = []
        for attempt in range(64):
            w = ClaudeWriter(roots["claude"], session_id=sid)
            w.path = c.path.with_suffix(f".new{attempt}")
            for i in range(round_ + 1):
                w.user(f"round{round_} line {i} tapir")
            candidates.append(w.path)
            st = w.path.stat()
            if shard_of(st.st_dev, st.st_ino, slots) == round_ % slots:
                break
        os.replace(candidates[-1], c.path)
        for extra in candidates[:-1]:
            extra.unlink()
        st = c.path.stat()
        shards_seen.add(shard_of(st.st_dev, st.st_ino, slots))
        inproc_daemon.reconcile()
        [hit] = inproc_daemon.search("tapir")["hits"]
        assert hit["messageCount"] == round_ + 1
        assert len(inproc_daemon.search(f"round{round_}")["hits"]) == 1
        if round_:
            assert inproc_daemon.search(f"round{round_ - 1}")["hits"] == []
    if slots > 1:
        assert len(shards_seen) > 1, "the file never changed shard; the test proved less than it claims"


def test_repeated_vocabulary_is_deduplicated_when_idle(inproc_daemon: InprocDaemon, roots: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scanner restart re-sends its vocabulary; the idle clean-up keeps one row per term."""
    import aivault.indexer.service

    # Hold the idle clean-up back while the test writes duplicates on its own thread.
    monkeypatch.setattr(aivault.indexer.service, "IDLE_FREEZE_AFTER_S", 1e9)
    c = ClaudeWriter(roots["claude"])
    c.user(" ".join(f"uniqueword{i}" for i in range(12_000)))
    inproc_daemon.reconcile()
    con = inproc_daemon.service.con.cursor()
    # Its own connection: the indexer thread may still be writing on the writer's (observations).
    con.execute("INSERT INTO vocab_log SELECT term FROM vocab_log")  # as after a restart
    dupes_sql = "SELECT count(*) - count(DISTINCT term) FROM vocab_log"
    dupes = con.execute(dupes_sql).fetchone()
    assert dupes is not None and dupes[0] >= 12_000
    # Now let the indexer thread see that it is idle: it removes the repeats by itself.
    monkeypatch.setattr(aivault.indexer.service, "IDLE_FREEZE_AFTER_S", 0.0)
    deadline = time.monotonic() + 30
    while con.execute(dupes_sql).fetchone() != (0,):
        assert time.monotonic() < deadline, "the idle clean-up never removed the repeated vocabulary"
        time.sleep(0.05)
    distinct = con.execute("SELECT count(DISTINCT term) FROM vocab_log").fetchone()
    assert distinct is not None and distinct[0] >= 12_000
    con.close()
    assert len(inproc_daemon.search("uniqueword7")["hits"]) == 1
