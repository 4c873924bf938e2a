"""Reports read from the index for status and doctor: counts, skips, repairs, roots, degraded roots.

Read-only helpers over one DuckDB connection (the live service's or a read-only one's); the
endpoints that answer with them are in ``aivault/vault``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from aivault.home import Home
from aivault.indexer.duck import one
from aivault.indexer.store import UNREADABLE, damaged
from aivault.protocol import DegradedRoot
from aivault.query import sql as q
from aivault.redact import REDACTED_SKIP


@contextmanager
def reading(svc: object) -> Iterator[None]:
    """Turn a read failure of the database into IndexDamaged naming the file and the rebuild command."""
    try:
        yield
    except UNREADABLE as exc:
        home = getattr(svc, "home", None)
        raise damaged(home.db_path if isinstance(home, Home) else Path("index.duckdb"), exc) from exc


def degraded_roots(problems: list[dict[str, str]], failed: list[dict[str, str]],
                   roots: list[str]) -> list[DegradedRoot]:
    """Root problems as reported, plus unreadable files grouped under the root holding them."""
    out = [DegradedRoot(root=p["root"], reason=p["reason"]) for p in problems]
    by_root: dict[str, list[dict[str, str]]] = {}
    for f in failed:
        root = next((r for r in sorted(roots, key=len, reverse=True) if f["path"].startswith(r.rstrip("/") + "/")),
                    f["path"])
        by_root.setdefault(root, []).append(f)
    for root, files in sorted(by_root.items()):
        first = files[0]
        more = f" (and {len(files) - 1} more)" if len(files) > 1 else ""
        out.append(DegradedRoot(root=root, reason=f"{len(files)} file(s) could not be read: {first['path']}: "
                                                  f"{first['reason']}{more}"))
    return out


def index_counts(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Sessions in the index and everything left out of it, per agent and reason, and the file's
    size beside its used data (for humans: `aivault status`); the meta counters only ever grow, so
    they are not counts."""
    from aivault.indexer.integrity import repairs as repair_journal
    from aivault.indexer.reclaim import usage

    cur = con.cursor()
    try:
        try:
            disk: dict[str, int] = usage(cur).as_dict()
        except (duckdb.Error, OSError):
            disk = {}
        row = one(cur, q.COUNT_SESSIONS)
        skipped: dict[str, dict[str, int]] = {}
        redactions: dict[str, int] = {}
        for agent, malformed, oversized, maps in cur.execute(q.SELECT_SKIPS).fetchall():
            reasons = skip_reasons(malformed, oversized, maps, redactions)
            if reasons:
                skipped[str(agent)] = reasons
        repairs = repair_journal(cur)
    finally:
        cur.close()
    return {"sessions": int(row[0]) if row else 0, "skipped": skipped, "redactions": redactions, "disk": disk,
            "repairs": repairs}


def skip_reasons(malformed: int | None, oversized: int | None, maps: list[str] | None,
                 redactions: dict[str, int] | None = None) -> dict[str, int]:
    """What was left out, by reason: the files' two counted columns and their ``skips`` maps (JSON) summed.
    The secrets replaced (``redacted:<kind>`` entries: nothing was left out) are added to ``redactions``."""
    reasons: dict[str, int] = {}
    if malformed:
        reasons["malformed-line"] = int(malformed)
    if oversized:
        reasons["line-too-long"] = int(oversized)
    for text in maps or []:
        for k, v in json.loads(text).items():
            if k.startswith(REDACTED_SKIP):
                if redactions is not None:
                    kind = k[len(REDACTED_SKIP):]
                    redactions[kind] = redactions.get(kind, 0) + int(v)
                continue
            reasons[k] = reasons.get(k, 0) + int(v)
    return reasons


def root_report(con: duckdb.DuckDBPyConnection, roots: list[str]) -> dict[str, dict[str, Any]]:
    """Per root path: the units the index holds under it, its sessions with messages, and its skips."""
    cur = con.cursor()
    out: dict[str, dict[str, Any]] = {}
    try:
        for path in roots:
            prefix = path.rstrip("/") + "/"
            row = one(cur, q.SELECT_ROOT_REPORT, [prefix])
            units, sessions, malformed, oversized, maps = row if row else (0, 0, 0, 0, [])
            out[path] = {"units": int(units or 0), "sessions": int(sessions or 0),
                         "skipped": skip_reasons(malformed, oversized, maps)}
    finally:
        cur.close()
    return out


def silent_roots(census: list[dict[str, Any]], report: dict[str, dict[str, Any]]) -> list[DegradedRoot]:
    """Degraded-root entries for roots that hold transcript-shaped files but no session with a
    message: the parser or the discovery does not understand what is there."""
    out: list[DegradedRoot] = []
    for c in census:
        shaped = int(c.get("shaped") or 0)
        indexed = report.get(str(c.get("root")), {}).get("sessions", 0)
        if shaped > 0 and indexed == 0:
            out.append({"root": str(c["root"]),  # a DegradedRoot
                        "reason": f"holds {shaped} file(s) that look like {c.get('agent')} transcripts but no session "
                                  f"was indexed from them (expected: {c.get('expects') or 'its transcripts'}); "
                                  "run `aivault doctor` for details"})
    return out
