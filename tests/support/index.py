"""An index file checked and compared: every row found through its ART index, and its content as a fingerprint."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from aivault.home import Home

# (chunk multiset keyed by session/ordinal/part/text, live posting count, message total)
Fingerprint = tuple[Counter[tuple[Any, ...]], int, int]


def assert_indexes_agree(db: Path) -> None:
    """Every row of every indexed table is found through its ART index (indexer/integrity.py)."""
    import duckdb

    from aivault.indexer.integrity import probe_all

    con = duckdb.connect(str(db), read_only=True)
    try:
        wrong = [p for p in probe_all(con, everything=True) if not p.agrees]
    finally:
        con.close()
    assert not wrong, f"indexes that disagree with their tables: {wrong}"


def fingerprint(db: Path) -> Fingerprint:
    """(chunk multiset keyed by session/ordinal/part/text, live posting count, message total)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        chunks = Counter(con.execute(
            """SELECT s.agent, s.session_id, s.file_id IS NOT NULL, c.ord, c.part, md5(c.text)
               FROM chunks c JOIN sessions s USING (sess)""").fetchall())
        segs = [r[0] for r in con.execute("SELECT name FROM segments").fetchall()]
        union = " UNION ALL ".join(f"SELECT sess FROM {s}" for s in segs)
        postings = con.execute(f"SELECT count(*) FROM ({union}) WHERE sess IN (SELECT sess FROM sessions)").fetchone()
        msgs = con.execute("SELECT sum(message_count) FROM sessions").fetchone()
        return chunks, int(postings[0]), int(msgs[0])  # type: ignore[index]
    finally:
        con.close()


def assert_same_index(db: Path, reference: Fingerprint) -> None:
    """Compare with the clean index, reporting a short difference (pytest's diff of 60k keys takes minutes)."""
    chunks, postings, msgs = fingerprint(db)
    extra, lost = chunks - reference[0], reference[0] - chunks
    assert (not extra and not lost and postings == reference[1] and msgs == reference[2]), (
        f"extra chunks {sum(extra.values())} e.g. {list(extra)[:3]}; lost chunks {sum(lost.values())} "
        f"e.g. {list(lost)[:3]}; postings {postings} vs {reference[1]}; messages {msgs} vs {reference[2]}")


def generation_over_rpc(home: Home) -> int:
    """The generation a running daemon or one-shot index of ``home`` reports now; 0 while none answers."""
    from aivault.thin.client import RpcClient

    c = RpcClient.for_home(home, timeout_s=2)
    try:
        return int(c.call("aiVault.indexStats", {}).get("generation", 0))
    except Exception:
        return 0
    finally:
        c.close()
