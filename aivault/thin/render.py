"""Human output: search hits with highlighted matches, status, and a progress line."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

BOLD = "\033[1m"
DIM = "\033[2m"
MARK = "\033[1;33m"
CYAN = "\033[36m"
GREEN = "\033[32m"
RED = "\033[31m"
YELLOW = "\033[33m"
RESET = "\033[0m"
# Beside a hit found by meaning alone: none of the query's words matched it, so its snippet has
# nothing highlighted and the reader should know why it is listed.
SIMILAR_TAG = "≈ similar meaning"


class Style:
    def __init__(self, stream: TextIO) -> None:
        self.on = stream.isatty()

    def __call__(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.on else text


def when(ms: int | None) -> str:
    """An epoch-ms time in the user's local time zone, e.g. ``2026-03-01 11:00 CET``."""
    if ms is None:
        return "unknown time"
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone().strftime("%Y-%m-%d %H:%M %Z")


_SKIP_WORDS = {
    "malformed-line": ("malformed line", "not JSON, or not a record this reader knows"),
    "malformed-record": ("malformed record", "not JSON, or not a record this reader knows"),
    "line-too-long": ("line over 64 MiB", "skipped whole"),
    "record-cut": ("record cut", "its text past 4 MiB is not indexed"),
    "bookkeeping": ("bookkeeping record", "no message in it"),
    "unknown_record": ("record of an unknown type", "a newer format? aivault doctor lists them"),
    "encrypted-store": ("encrypted conversation", "Antigravity's legacy .pb: only the agent holds its key"),
}


def _reason_words(kind: str, names: list[str]) -> str:
    word, why = _SKIP_WORDS.get(kind, (kind.replace("_", " ").replace("-", " "), ""))
    detail = ", ".join(names[:4]) + (f", +{len(names) - 4} more" if len(names) > 4 else "")
    inside = "; ".join(x for x in (detail, why) if x)
    return word + (f" ({inside})" if inside else "")


def skip_lines(skipped: dict[str, dict[str, int]]) -> list[str]:
    """One line per agent saying what was left out of the index and why (duplicates are not losses).

    Reasons of one kind (``bookkeeping:<type>``, ``unknown_record:<type>``) are added up, their
    names listed: ``2 × bookkeeping record (api_req_started, finish; no message in it)``.
    """
    lines = []
    for agent, reasons in sorted(skipped.items()):
        kinds: dict[str, tuple[int, list[str]]] = {}
        for reason, n in sorted(reasons.items()):
            if reason.startswith("duplicate_") or n <= 0:
                continue
            kind, _, name = reason.partition(":")
            total, names = kinds.get(kind, (0, []))
            kinds[kind] = (total + n, [*names, name] if name else names)
        parts = [f"{n:,} × {_reason_words(kind, names)}"
                 for kind, (n, names) in sorted(kinds.items(), key=lambda kv: (-kv[1][0], kv[0]))]
        if parts:
            lines.append(f"{agent}: " + ", ".join(parts))
    return lines


def highlight(snippet: str, style: Style) -> str:
    """Replace the contract's [[ ]] marks by terminal highlighting (or keep them when piped)."""
    if not style.on:
        return snippet
    out: list[str] = []
    pos = 0
    while True:
        a = snippet.find("[[", pos)
        if a == -1:
            break
        b = snippet.find("]]", a + 2)
        if b == -1:
            break
        out.append(snippet[pos:a])
        out.append(style(MARK, snippet[a + 2 : b]))
        pos = b + 2
    out.append(snippet[pos:])
    return "".join(out)


def found_by_meaning(result: dict[str, Any]) -> set[str]:
    """Session ids of the hits only the vector route found, from ``debug.trace`` (empty without it).

    Hits carry no route in the contract; a caller that wants them marked asks for ``debug``.
    """
    trace = (result.get("debug") or {}).get("trace") or []
    return {str(t["sessionId"]) for t in trace if t.get("matchedBy") == "vector"}


def print_results(result: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """The hits for a person; a hit no query word matched is tagged ``SIMILAR_TAG`` when the result
    has a ``debug.trace`` to tell (see ``found_by_meaning``)."""
    st = Style(out)
    hits = result.get("hits") or []
    by_meaning = found_by_meaning(result)
    if not hits:
        print("No matching sessions.", file=out)
    for i, h in enumerate(hits, 1):
        title = h.get("title") or "(untitled)"
        tag = f"  {st(DIM, SIMILAR_TAG)}" if h.get("sessionId") in by_meaning else ""
        # A remote host's hits carry the host that answered (stamped by the router); local ones may not.
        host = f" @ {st(BOLD, str(h['executionHostId']))}" if h.get("executionHostId") else ""
        head = f"{i:>2}. {st(CYAN, h['agent'])}{host} · {st(BOLD, title)}{tag}"
        print(head, file=out)
        where = h.get("cwd") or "(unknown folder)"
        branch = f" ({h['branch']})" if h.get("branch") else ""
        source = "" if h.get("source") == "present" else st(DIM, "  [transcript file not found]")
        print(f"    {where}{branch} · {when(h.get('updatedAt'))} · {h.get('messageCount', 0)} messages{source}",
              file=out)
        ev = h.get("evidence")
        if ev:
            print(f"    {st(DIM, ev['role'] + ':')} {highlight(ev['snippet'], st)}", file=out)
        if h.get("resumeCommand"):
            print(f"    {st(GREEN, '↻')} {h['resumeCommand']}", file=out)
    trunc = result.get("truncated") or {}
    notes = []
    if trunc.get("candidates"):
        notes.append("very common terms: only their best matches were ranked")
    if trunc.get("query"):
        notes.append("the query was shortened")
    if trunc.get("freshness"):
        notes.append("the index may be slightly behind (refresh took over 5 s)")
    meaning = sum(1 for h in hits if h.get("sessionId") in by_meaning)
    found = f"{len(hits)} session(s)" + (f" ({meaning} by similar meaning only)" if meaning else "")
    gen = result.get("generation")
    footer = f"{found} · {result.get('durationMs', 0):.1f} ms" + (f" · generation {gen}" if gen is not None else "")
    print(st(DIM, footer + ("; " + "; ".join(notes) if notes else "")), file=out)
    cursor = (result.get("page") or {}).get("cursor")
    if cursor:
        print(st(DIM, f"more: add --cursor {cursor}"), file=out)


def print_debug(debug: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """The planner's report under --debug: the route taken, repaired words, and each hit's ranks."""
    st = Style(out)
    report = debug.get("plannerReport") or {}
    route = report.get("route") or debug.get("route") or "?"
    print(st(DIM, f"debug: route {route} · scope {report.get('scope', 'all')}"), file=out)
    repaired = report.get("repairedTerms") or debug.get("repairedTerms") or {}
    if repaired:
        print(st(DIM, "  repaired: " + ", ".join(f"{a} -> {b}" for a, b in repaired.items())), file=out)
    for i, t in enumerate(debug.get("trace") or [], 1):
        lex, vec = t.get("lexicalRank"), t.get("vectorRank")
        score = t.get("fusedScore", t.get("score"))
        matched = t.get("matchedBy") or ("both" if lex and vec else "lexical" if lex else "vector" if vec else "")
        by = {"both": "words and meaning", "lexical": "words", "vector": "meaning only"}.get(matched, "filters")
        print(st(DIM, f"  {i:>2}. {t.get('sessionId')}: {by} · lexical rank {lex or '-'} · vector rank "
                      f"{vec or '-'} · score {score}"), file=out)
    for t in debug.get("cut") or []:
        print(st(DIM, f"   cut {t.get('sessionId')}: lexical rank {t.get('lexicalRank') or '-'} · vector rank "
                      f"{t.get('vectorRank') or '-'} ({t.get('reason', 'ranked lower')})"), file=out)


def redaction_line(counts: dict[str, int] | None) -> str | None:
    """How many secrets the index holds as markers instead, by kind (never the values)."""
    if not counts:
        return None
    total = sum(counts.values())
    kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"secrets redacted: {total:,} ({kinds}); search \"redacted\" to find where"


def print_host_lines(hosts: list[dict[str, Any]], out: TextIO = sys.stdout) -> None:
    """Under a merged search: one line per host that gave no part of the list, and which hosts answered."""
    st = Style(out)
    bad = [h for h in hosts if h.get("state") != "ok"]
    for h in bad:
        print(st(RED, f"  {h.get('id')}: {h.get('state')}: {h.get('reason') or ''}".rstrip(": ")), file=out)
    ok = [str(h.get("id")) for h in hosts if h.get("state") == "ok"]
    print(st(DIM, f"searched {', '.join(ok) or 'no host'}" + (f"; {len(bad)} host(s) missing: the list is partial"
                                                               if bad else "")), file=out)
    why = {"none": "no vectors there", "other-model": "its vectors are another model's"}
    for h in hosts:
        if h.get("state") == "ok" and h.get("vectors") in why:
            print(st(DIM, f"  {h.get('id')}: matched by words only ({why[str(h['vectors'])]})"), file=out)


def print_status_table(rows: list[dict[str, Any]], out: TextIO = sys.stdout) -> None:
    """``aivault status --all-hosts``: one row per host (its phase and counts, or why it could not be asked)."""
    st = Style(out)
    width = max([len(str(r["id"])) for r in rows] + [4])
    print(st(BOLD, f"{'host':<{width}}  {'search':<8}  {'phase':<9}  {'indexed':>8}  {'due':>6}  {'failed':>6}  "
                   "last sweep"), file=out)
    for r in rows:
        s = r.get("status")
        if s is None:
            print(f"{r['id']:<{width}}  " + st(RED, str(r.get("error"))), file=out)
            continue
        phase = str(s["phase"])
        color = {"current": GREEN, "degraded": RED}.get(phase, CYAN)
        sweep = s.get("lastSweepCompletedAt")
        print(f"{r['id']:<{width}}  {'enabled' if s['enabled'] else 'disabled':<8}  {st(color, f'{phase:<9}')}  "
              f"{s['filesIndexed']:>8,}  {s['filesDue']:>6,}  {s['filesFailed']:>6,}  "
              f"{when(sweep) if sweep is not None else 'never'}", file=out)
        for d in s.get("degradedRoots") or []:
            print(st(RED, f"{'':<{width}}  degraded: {d['root']}: {d['reason']}"), file=out)


def print_status(status: dict[str, Any], stats: dict[str, Any] | None, mode: str, out: TextIO = sys.stdout) -> None:
    st = Style(out)
    phase = status["phase"]
    color = {"current": GREEN, "degraded": RED}.get(phase, CYAN)
    print(f"search {'enabled' if status['enabled'] else st(RED, 'disabled')} · phase {st(color, phase)} · "
          f"{mode}", file=out)
    print(f"files indexed {status['filesIndexed']:,} · due {status['filesDue']:,} · failed {status['filesFailed']:,}"
          f" · generation {status['generation']}", file=out)
    last, sweep = status["lastReconcileAt"], status["lastSweepCompletedAt"]
    print(f"last reconcile {when(last) if last is not None else 'never'} · last full sweep "
          f"{when(sweep) if sweep is not None else 'never'}", file=out)
    for d in status.get("degradedRoots") or []:
        print(st(RED, f"  degraded: {d['root']}: {d['reason']}"), file=out)
    if stats:
        sizes = [f"sessions {stats.get('sessions', 0):,}"]
        if "chunks" in stats:
            sizes += [f"chunks {stats['chunks']:,}", f"segments {len(stats.get('segments') or [])}"]
        print(" · ".join(sizes), file=out)
        disk = disk_line(stats.get("disk"), stats.get("lastReclaim"))
        if disk:
            print(disk, file=out)
        for line in skip_lines(stats.get("skipped") or {}):
            print(st(DIM, f"  not indexed: {line}"), file=out)
        redacted = redaction_line(stats.get("redactions"))
        if redacted:
            print(st(DIM, f"  {redacted}"), file=out)
        if stats.get("writeError"):
            print(st(RED, f"  {stats['writeError']}"), file=out)
        repair_lines(stats.get("repairs"), st, out)
        watch_line(stats.get("watch"), st, out)
        state = stats.get("semanticState")
        if state == "off":
            print("semantic search off (config.json: embed.enabled = false)", file=out)
        elif state is not None:
            eligible, embedded = stats.get("semanticEligible", 0), stats.get("semanticEmbedded", 0)
            pct = f" ({100 * embedded / eligible:.0f}%)" if eligible else ""
            threads = stats.get("semanticThreads") if state == "embedding" else None
            on = f" on {threads} thread{'s' if threads != 1 else ''}" if threads else ""
            print(f"semantic {state}: embedded {embedded:,} of {eligible:,} chunks{pct} · "
                  f"{stats.get('semanticRatePerS', 0):.1f}/s{on} · model {stats.get('semanticModel') or '-'}", file=out)
            if stats.get("semanticError"):
                print(st(RED, f"  {stats['semanticError']}"), file=out)


def disk_line(disk: dict[str, int] | None, last: dict[str, Any] | None) -> str:
    """The index file's size beside its used data, and what the last reclaim did (indexer/reclaim.py)."""
    if not disk:
        return ""
    line = f"index file {disk['fileBytes'] / 1e6:,.0f} MB · data {disk['usedBytes'] / 1e6:,.0f} MB"
    if last:
        if last.get("done"):
            line += (f" · reclaimed {when(last.get('at'))}: {last['before']['fileBytes'] / 1e6:,.0f} -> "
                     f"{last['after']['fileBytes'] / 1e6:,.0f} MB in {last.get('seconds', 0):.1f} s")
        else:
            line += f" · not reclaimed {when(last.get('at'))}: {last.get('reason')}"
    return line


def repair_lines(repairs: dict[str, Any] | None, st: Style, out: TextIO) -> None:
    """What was repaired in the index file after a crash (indexer/integrity.py), newest first."""
    if not repairs or not repairs.get("count"):
        return
    n = int(repairs["count"])
    print(st(YELLOW, f"index repairs: {n} (after a crash or an upgrade; nothing indexed was lost: each was made "
                     "from the index's own tables)"), file=out)
    for r in repairs.get("latest") or []:
        print(st(DIM, f"  {when(r.get('at'))}: {r.get('kind')}: {r.get('what')}"), file=out)


def last_run_line(run: Any, last_sweep: int | None, out: TextIO = sys.stdout) -> str:
    """How the last one-shot `aivault index` ended, when it did not finish (aivault/lastrun.py) and no full
    pass has completed since; "" otherwise."""
    if run is None or (last_sweep is not None and last_sweep >= (run.ended_at or run.started_at)):
        return ""
    st = Style(out)
    if run.state == "failed":
        return st(RED, f"the last `aivault index` stopped {when(run.ended_at)}: {run.reason}")
    if run.stale():
        return st(YELLOW, f"the last `aivault index` (pid {run.pid}, started {when(run.started_at)}) did not finish: "
                          "it was killed or the machine stopped. What it committed is searchable; run `aivault index` "
                          "to finish.")
    return ""


def watch_line(watch: list[dict[str, Any]] | None, st: Style, out: TextIO) -> None:
    """How changes are noticed: file events (within a second) or the polling passes, and why."""
    if not watch:
        return  # a read-only search without a daemon: nothing is watching
    w = watch[0]  # every scanner watches the same roots
    if w.get("mode") == "events":
        print(f"changes noticed at once (watching {w.get('watched', 0)} folder tree(s))", file=out)
    else:
        print(st(YELLOW, f"changes noticed by polling only: {w.get('reason') or 'no root to watch'}"), file=out)
    for p in w.get("polled") or []:
        print(st(DIM, f"  polled, not watched: {p.get('root')}: {p.get('reason')}"), file=out)


class ProgressLine:
    """A single self-rewriting line on a terminal (files, messages, MB/s); silent otherwise."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.on = out.isatty()
        self.t0 = time.monotonic()
        self._last = 0.0

    def update(self, s: dict[str, Any]) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        elapsed = max(now - self.t0, 1e-6)
        total = max(int(s.get("filesChanged", 0)), 1)
        done = int(s.get("filesDone", 0))
        width = 24
        fill = int(width * min(done / total, 1.0))
        bar = "█" * fill + "░" * (width - fill)
        mb = s.get("bytesDone", 0) / 1e6
        line = (f"\rindexing ▕{bar}▏ {done:,}/{total:,} files · {int(s.get('messagesCommitted', 0)):,} messages · "
                f"{mb / elapsed:,.1f} MB/s ")
        self.out.write(line)
        self.out.flush()

    def finish(self) -> None:
        if self.on:
            self.out.write("\r\033[K")
            self.out.flush()
