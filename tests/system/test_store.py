"""Opening the index: an index whose terms another TOKENIZER_VERSION cut is never searched as it is.

Real DuckDB files, real indexing passes (the daemon object in this process, its scanner a child
process) and the real openers: ``open_writer`` for the indexer, ``open_reader`` + ``DirectService``
for a search without a daemon. The stale index is made the way an upgrade leaves one: a database
written by this code whose ``meta.tokenizer`` is then set to an older version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from structlog.testing import capture_logs

from aivault.home import Home
from aivault.indexer.opening import open_reader, open_writer
from aivault.text import TOKENIZER_VERSION
from aivault.vault.endpoints import search_sessions
from aivault.vault.readonly import DirectService
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.daemons import InprocDaemon

VECTOR_HASH = 4242


def _corpus(roots: dict[str, Path]) -> None:
    for i in range(3):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{i}")
        c.user(f"Could not set lock on file, attempt {i}: the daemon holds the index")
        c.assistant("Only one process may open a DuckDB file read-write.")
    x = CodexWriter(roots["codex"], cwd="/home/dev/api")
    x.user("the lock file of the package manager is out of date")
    x.assistant("Run the install again to refresh the lock file.")


def _index(home: Home, roots: dict[str, Path]) -> dict[str, Any]:
    """Index the corpus; the first page (one hit) of a search for "lock", which has more pages."""
    _corpus(roots)
    with InprocDaemon(home, roots) as d:
        d.reconcile()
        first = d.search("lock", limit=1)
    assert first["kind"] == "results" and first["page"]["hasMore"], first
    return first


def _sql(home: Home, statement: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(home.db_path))
    try:
        return con.execute(statement, args or []).fetchall()
    finally:
        con.close()


def _stamp_old_tokenizer(home: Home) -> None:
    """What an upgrade of the tokenizer leaves: the terms on disk were cut by the previous version."""
    con = duckdb.connect(str(home.db_path))
    try:
        con.execute("UPDATE meta SET tokenizer = ?", [TOKENIZER_VERSION - 1])
        # A stored vector and the vector state, as a semantic index would hold them.
        con.execute("INSERT INTO vectors VALUES (?, 'v'::BLOB)", [VECTOR_HASH])
        if con.execute("SELECT count(*) FROM vector_state").fetchone() == (0,):
            con.execute("INSERT INTO vector_state VALUES ('model', 0, 3)")
    finally:
        con.close()


def _counts(home: Home) -> dict[str, int]:
    tables = ("chunks", "sessions", "files", "vocab_log", "segments")
    return {t: int(_sql(home, f"SELECT count(*) FROM {t}")[0][0]) for t in tables}


def test_a_writer_re_indexes_an_index_another_tokenizer_built(home: Home, roots: dict[str, Path]) -> None:
    """The writer's open empties a stale index (keeping identity and vectors), advances the generation, and the
    next pass reads every transcript again."""
    first = _index(home, roots)
    _stamp_old_tokenizer(home)
    epoch = int(_sql(home, "SELECT epoch FROM vector_state")[0][0])
    identity = str(_sql(home, "SELECT identity FROM meta")[0][0])
    with capture_logs() as logs:
        con, meta = open_writer(home)
        con.close()
    assert meta.tokenizer == TOKENIZER_VERSION
    assert meta.identity == identity
    assert meta.generation > first["generation"]
    assert _counts(home) == {"chunks": 0, "sessions": 0, "files": 0, "vocab_log": 0, "segments": 0}
    assert _sql(home, r"SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'seg\_%' ESCAPE '\'") == []
    assert _sql(home, "SELECT hash FROM vectors") == [(VECTOR_HASH,)]  # keyed by text hash: still valid
    assert _sql(home, "SELECT epoch FROM vector_state") == [(epoch + 1,)]  # the sidecar's chunk ids are not
    assert [e["log_level"] for e in logs if "tokenizer" in e["event"]] == ["warning"]

    with InprocDaemon(home, roots) as d:
        summary = d.reconcile()
        assert summary["files_changed"] == 4  # every transcript, though none changed on disk
        again = d.search("lock", limit=1)
        assert again["kind"] == "results" and again["hits"][0]["sessionId"] == first["hits"][0]["sessionId"]
        stale = d.search("lock", limit=1, cursor=first["page"]["cursor"])
        assert stale["kind"] == "stale-cursor", stale
    rebuilt = _counts(home)
    con, meta = open_writer(home)  # the version now matches: nothing is emptied again
    con.close()
    assert _counts(home) == rebuilt and rebuilt["chunks"] > 0
    assert meta.generation == again["generation"]


def test_a_read_only_search_of_an_index_another_tokenizer_built_is_not_ready(home: Home,
                                                                           roots: dict[str, Path]) -> None:
    """Without a daemon, a stale index answers unavailable/not-ready, logs that `aivault index` re-indexes it,
    and is left as it was."""
    _index(home, roots)
    _stamp_old_tokenizer(home)
    before = _counts(home)
    with capture_logs() as logs:
        svc = DirectService(home, open_reader(home))
        try:
            r = search_sessions(svc, {"query": "lock"})
            r_debug = search_sessions(svc, {"query": "daemon holds", "debug": True})
        finally:
            svc.close()
            svc.con.close()
    assert r == r_debug == {"kind": "unavailable", "reason": "not-ready"}
    warnings = [e for e in logs if e["log_level"] == "warning" and "`aivault index`" in e["event"]]
    assert len(warnings) == 1, logs  # once per process, not once per search
    assert _sql(home, "SELECT tokenizer FROM meta") == [(TOKENIZER_VERSION - 1,)]
    assert _counts(home) == before
