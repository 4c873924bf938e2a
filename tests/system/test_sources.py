"""Units that are not plain line files: compressed Codex rollouts, and how a pass finds and reads units."""

from __future__ import annotations

import os
from pathlib import Path

import zstandard

from tests.builders import CodexWriter
from tests.support.daemons import InprocDaemon


def _compress(path: Path) -> Path:
    target = path.with_name(path.name + ".zst")
    target.write_bytes(zstandard.ZstdCompressor(level=3).compress(path.read_bytes()))
    return target


def test_a_compressed_rollout_is_read_transparently(inproc_daemon: InprocDaemon, roots: dict[str, Path]) -> None:
    """A rollout that exists only as .jsonl.zst (Codex >= 0.137 after a week idle) is indexed like a plain one."""
    x = CodexWriter(roots["codex"])
    x.user("the zstd rollout mentions narwhals").assistant("narwhal facts follow")
    zst = _compress(x.path)
    x.path.unlink()
    summary = inproc_daemon.reconcile()
    assert summary["messages"] == 2
    [hit] = inproc_daemon.search("narwhals")["hits"]
    assert hit["sessionId"] == x.session_id and hit["messageCount"] == 2 and hit["source"] == "present"
    again = inproc_daemon.reconcile()
    assert again["files_changed"] == 0, "an unchanged compressed rollout is not read again"
    assert zst.exists()


def test_a_rollout_compressed_after_indexing_stays_one_session(inproc_daemon: InprocDaemon,
                                                               roots: dict[str, Path]) -> None:
    """Plain and compressed copies coexisting during the rewrite, then the plain one deleted: one session,
    never two, and nothing re-read or duplicated."""
    x = CodexWriter(roots["codex"])
    for i in range(30):
        x.user(f"question {i} about belugas").assistant(f"answer {i} about belugas")
    inproc_daemon.reconcile()
    _compress(x.path)
    inproc_daemon.reconcile()  # both copies exist: the plain one is the session
    assert len(inproc_daemon.search("belugas", limit=10)["hits"]) == 1
    os.unlink(x.path)
    summary = inproc_daemon.reconcile()
    # The scanner holding the plain file continues it (nothing read); when the compressed file's
    # inode falls to the other scanner shard, it is read once and replaces the plain file's rows.
    assert summary["messages"] in (0, 60)
    [hit] = inproc_daemon.search("belugas", limit=10)["hits"]
    assert hit["messageCount"] == 60 and hit["source"] == "present"
    assert inproc_daemon.reconcile(full=True)["messages"] == 0
    assert len(inproc_daemon.search("belugas", limit=10)["hits"]) == 1


def test_a_corrupt_compressed_rollout_is_a_failed_file_and_the_pass_goes_on(inproc_daemon: InprocDaemon,
                                                                             roots: dict[str, Path]) -> None:
    """A .jsonl.zst whose stream breaks mid-way is reported failed with the reason; the other rollouts are indexed."""
    good = CodexWriter(roots["codex"])
    good.user("the healthy rollout talks about puffins")
    bad = CodexWriter(roots["codex"])
    for i in range(200):
        bad.user(f"line {i} of a rollout whose compressed copy breaks")
    data = bytearray(_compress(bad.path).read_bytes())
    bad.path.unlink()
    data[len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)  # garbage from the middle on
    bad.path.with_name(bad.path.name + ".zst").write_bytes(bytes(data))
    inproc_daemon.reconcile()
    assert len(inproc_daemon.search("puffins")["hits"]) == 1
    failed = inproc_daemon.service.indexer.obs.failed
    assert [f["path"] for f in failed] == [str(bad.path) + ".zst"]
    assert "corrupt zstd stream" in failed[0]["reason"]
