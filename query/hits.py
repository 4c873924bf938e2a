"""Hit assembly: a ranked page becomes the contract's hits (metadata, evidence, snippet), and the
debug trace of where each hit ranked."""

from __future__ import annotations

from typing import Any

import duckdb

from aivault.protocol import Evidence, Hit, Role
from aivault.query import sql
from aivault.query.bm25 import evidence_rows
from aivault.query.hybrid import CUT_REPORTED, Fused, trace_entry
from aivault.query.records import Plan, Row
from aivault.query.request import SearchRequest
from aivault.query.snippets import Matcher, make_snippet
from aivault.redact import Redactor


def assemble(cur: duckdb.DuckDBPyConnection, req: SearchRequest, plan: Plan,
             rows: list[Row], postings: Any = None, kept: list[int] | None = None, *,
             redactor: Redactor | None = None) -> tuple[list[Hit], int]:
    """The hits of ``rows`` in their order, and how many snippets were cut; ``kept``, when given, receives
    the internal session id of each hit. ``redactor``: each title and evidence text is redacted before the
    snippet is cut from it (aivault/redact.py; None: shown as indexed).

    A session deleted since it was ranked has no metadata row and is left out, rather than
    answered with holes.
    """
    if not rows:
        return [], 0
    sess_ids = [r[0] for r in rows]
    if postings is not None:  # the daemon's fast path (query/fastrank.py)
        from aivault.query.fastrank import page_sessions

        meta = page_sessions(postings, sess_ids)
    else:
        meta = {int(r[0]): r for r in cur.execute(
            sql.SELECT_HIT_SESSIONS.format(sessions=", ".join(str(int(x)) for x in sess_ids))).fetchall()}
    chunk_ids = [r[2] for r in rows if r[2] is not None]
    chunks = {c: plan.evidence[c] for c in chunk_ids if c in plan.evidence}
    missing = [c for c in chunk_ids if c not in chunks]
    if missing:
        chunks.update((int(r[0]), r) for r in evidence_rows(cur, postings, missing))
    terms = Matcher(set(plan.terms))
    hits: list[Hit] = []
    cut = 0
    for sess, score, chunk in rows:
        m = meta.get(sess)
        if m is None:
            continue
        evidence: Evidence | None = None
        c = chunks.get(chunk) if chunk is not None else None
        title = m[3]
        if redactor is not None and title:
            title = redactor.redact_text(title)
        if c is not None:
            snip = make_snippet(c[3] if redactor is None else redactor.redact_text(c[3]), terms)
            cut += 1 if snip.cut else 0
            evidence = Evidence(snippet=snip.text, role=Role(int(c[1])).wire, timestamp=c[2])
        if kept is not None:
            kept.append(sess)
        hits.append(Hit(agent=m[1], sessionId=m[2], title=title, cwd=m[4], branch=m[5], updatedAt=m[6],
                        messageCount=int(m[7]), score=score, source="present" if m[9] else "unverifiable",
                        evidence=evidence, resumeCommand=m[8]))
    return hits, cut


def lexical_ranks(sess: int, lexical_rank: int | None, ranks: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """Where the words ranked a session: by the session as one document and by its best chunk
    (any-word ranking); in the strict routes a session is ranked by its best chunk alone."""
    if sess in ranks:
        return {"lexicalSessionRank": ranks[sess][0], "lexicalChunkRank": ranks[sess][1]}
    return {"lexicalSessionRank": None, "lexicalChunkRank": lexical_rank}


def trace(cur: duckdb.DuckDBPyConnection, rows: list[Row], fused: list[Fused], offset: int,
          ranks: dict[int, tuple[int, int]] | None = None) -> dict[str, Any]:
    """Per-hit ranks in each route and the fused score; and why the next candidates were cut."""
    ranks = ranks or {}
    by_sess = {f.sess: f for f in fused}
    page = [r[0] for r in rows]
    after = fused[offset + len(rows) : offset + len(rows) + CUT_REPORTED] if fused else []
    ids = dict(cur.execute(sql.SELECT_SESSION_IDS.format(
        sessions=", ".join(map(str, page + [f.sess for f in after])) or "NULL")).fetchall())
    if not fused:  # a lexical route: the rank is the position in the lexical order
        entries: list[dict[str, Any]] = [
            {"sessionId": ids.get(s), "matchedBy": "lexical", "lexicalRank": offset + i + 1,
             **lexical_ranks(s, offset + i + 1, ranks), "vectorRank": None,
             "score": score} for i, (s, score, _) in enumerate(rows)]
        return {"trace": entries}

    def entry(f: Fused) -> dict[str, Any]:
        e = trace_entry(str(ids.get(f.sess)), f)
        return {**e, **(lexical_ranks(f.sess, f.lexical_rank, ranks) if f.lexical_rank is not None
                        else {"lexicalSessionRank": None, "lexicalChunkRank": None})}

    entries = [entry(by_sess[s]) for s in page]
    cut = [{**entry(f), "reason": "ranked below this page"} for f in after]
    return {"trace": entries, "cut": cut}
