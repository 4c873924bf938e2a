"""One scan pass: find transcript units, read what is new in each, stream it to the indexer.

Per unit (aivault/scanner/sources.py) the indexer remembers identity (device, inode), size,
mtime or change signature, the offset reached, a fingerprint of the head and the parser's state
at that offset. For line files a pass reads only bytes past the offset; a file that was
truncated, replaced or rewritten is read again from the start and its old rows are replaced by
the indexer. A unit read whole is read again when its signature changes.

A full pass walks every root. A recent pass (``full: false``) is bounded: it re-lists only
directories whose mtime changed and re-checks only files that changed recently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack

from aivault import log
from aivault.codec import packb
from aivault.errors import ParserStateError, UnitChanged, UnitUnreadable
from aivault.ingest import (
    K_BATCH,
    K_GET_STATES,
    K_HELLO,
    K_PROGRESS,
    FileState,
    GetStates,
    Hello,
    Progress,
    State,
    shard_of,
)
from aivault.protocol import PROTOCOL_VERSION
from aivault.redact import Redactor
from aivault.scanner.agents import SPECS
from aivault.scanner.batch import BatchBuilder
from aivault.scanner.link import IngestLink
from aivault.scanner.model import Parser
from aivault.scanner.parsers.jsonutil import loads_line
from aivault.scanner.reader import HEAD_BYTES, MAX_LINE_BYTES, ReadStats
from aivault.scanner.sources import Found, LineFile, Root, RootProblem, census, head_fingerprint
from aivault.text import Tokenizer

_log = log.get("scanner.scan")

# A recent pass re-checks files modified within this window (plus any with a pending tail).
RECENT_WINDOW_S = 48 * 3600
# A last line without its newline is indexed once the file has been left alone this long.
TAIL_SETTLE_S = 30
PROGRESS_INTERVAL_S = 0.25
_STATE_PAGE = 500


@dataclass(slots=True)
class _OpenPart:
    """One file's part of the batch being built, and what was skipped in it."""

    idx: int  # the part's index in the batch builder
    malformed0: int  # the parser's malformed count when the part began
    extra0: dict[str, int]  # the parser's reason counters when the part began
    read: ReadStats = field(default_factory=ReadStats)
    record_cut: int = 0  # records whose text was cut at RECORD_TEXT_MAX_BYTES


@dataclass(slots=True)
class PassStats:
    files_seen: int = 0
    files_changed: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    messages: int = 0
    malformed: int = 0
    oversized: int = 0
    record_cut: int = 0
    too_old: int = 0
    busy: int = 0  # units that changed while being read: read again next pass
    failed: list[dict[str, str]] = field(default_factory=list)
    roots: list[dict[str, Any]] = field(default_factory=list)  # full passes: what each root holds
    problems: list[RootProblem] = field(default_factory=list)


def make_parser(agent: str, path: str, state: dict[str, Any] | None) -> Parser:
    factory = SPECS[agent].line_parser
    if factory is None:
        raise ValueError(f"{agent} units are not line files")
    return factory(path, state)


# How much of the indexed end of a line file its fingerprint covers, beside its head.
EDGE_TAIL_BYTES = 4096


def edges_fingerprint(src: LineFile, head_len: int, end: int) -> int:
    """A fingerprint of a file's first ``head_len`` bytes and of the indexed bytes just before ``end``
    (a compressed file, written once, by its head only)."""
    head = src.head(head_len)
    if src.mode != "lines" or end <= head_len:
        return head_fingerprint(head)
    start = max(head_len, end - EDGE_TAIL_BYTES)
    return head_fingerprint(head + b"\0" + src.tail(start, end - start))


def unchanged(found: Found, rec: FileState) -> bool:
    """Nothing to read: the same unit, and everything it held was committed.

    A line file is unchanged when its size and mtime are and its offset reached its end (a pass
    interrupted between two batches of one file recorded its size but not its end). A compressed
    file or a unit read whole is unchanged when its signature is and it was read to the end.
    """
    if (found.dev, found.ino) != (rec.dev, rec.ino) or found.mtime_ns != rec.mtime_ns:
        return False
    if found.mode == "lines":
        return found.size == rec.size == rec.offset
    return rec.offset == rec.size


class Scanner:
    def __init__(self, link: IngestLink, roots: list[Root], *, shard: int = 0, shards: int = 1, token: str = "",
                 batch_scale: int = 1, redactor: Redactor | None = None, raw: bool = False) -> None:
        self.link = link
        # Every text is redacted before it is indexed (aivault/redact.py) unless config.json turns it off.
        self.redactor = None if raw else (redactor or Redactor())
        self.batch_scale = batch_scale  # BULK_BATCH_SCALE when started for a bulk load
        self.token = token
        self.roots = roots
        self.shard = shard
        self.shards = shards
        self.tok = Tokenizer()
        self.builder = BatchBuilder(self.tok, batch_scale, self.redactor)
        self.known: dict[str, FileState] = {}
        self.by_inode: dict[tuple[int, int], str] = {}
        self.states: dict[str, bytes] = {}
        self.dirs: dict[str, int] = {}
        self.index_sigs: dict[str, object] = {}
        self.sent_titles: dict[tuple[str, str], str] = {}
        # Files the indexer refused as sent (see link.Resync): path -> (size, mtime_ns, reason).
        # They are reported as failed until they change, instead of being re-sent for ever.
        self.aside: dict[str, tuple[int, int, str]] = {}
        self.seen: dict[str, Found] = {}  # the units of the current pass
        self.epoch = 0
        self.synced = False
        self._last_progress = 0.0

    # --- state from the indexer -------------------------------------------------------------
    def sync(self) -> None:
        """(Re)load what the indexer has committed; called at start and after a refusal."""
        pages = self.link.request(K_HELLO, Hello(
            req=self.link.next_seq(), protocol=PROTOCOL_VERSION, pid=os.getpid(), shard=self.shard,
            shards=self.shards, token=self.token, roots=[[r.agent, r.path] for r in self.roots]))
        self.known.clear()
        self.by_inode.clear()
        self.states.clear()
        self.sent_titles.clear()
        self.index_sigs.clear()
        self.dirs.clear()
        self.tok = Tokenizer()
        self.builder = BatchBuilder(self.tok, self.batch_scale, self.redactor)
        for page in pages:
            state = cast(State, page.header)
            self.epoch = state.get("epoch", self.epoch)
            for row in state.get("files", []):
                rec = FileState(*row)
                self.known[rec.path] = rec
                self.by_inode[(rec.dev, rec.ino)] = rec.path
        self.synced = True
        _log.info("synced", files=len(self.known), epoch=self.epoch)

    def set_aside(self, paths: list[str], reason: str) -> None:
        """Skip these units (as failed, with the reason) until their size or signature changes."""
        for path in paths:
            found = self.seen.get(path)
            if found is None:
                continue
            self.aside[path] = (found.size, found.mtime_ns, reason[:300])
            _log.error("file set aside: the indexer refused its batch", path=path, reason=reason)

    def _fetch_states(self, paths: list[str]) -> None:
        for i in range(0, len(paths), _STATE_PAGE):
            page = paths[i : i + _STATE_PAGE]
            for reply in self.link.request(K_GET_STATES, GetStates(req=self.link.next_seq(), paths=page)):
                for path, blob in cast(State, reply.header).get("states", {}).items():
                    if blob is not None:
                        self.states[path] = blob

    # --- a pass --------------------------------------------------------------------------------
    def run_pass(self, req: int | None, full: bool, on_control: Callable[[], None] | None = None,
                 cutoff_ms: int | None = None, hints: set[str] | None = None) -> PassStats:
        """One pass: ``full`` walks every root; otherwise changed folders and recently written files
        are looked at, plus ``hints`` (paths the file watcher saw change, scanner/watch.py)."""
        if not self.synced:
            self.sync()
        stats = PassStats()
        candidates = self._candidates(full, stats, hints or set())
        work: list[tuple[Found, FileState | None]] = []
        cutoff_ns = cutoff_ms * 1_000_000 if cutoff_ms else None
        if self.shards > 1:
            # Other scanners' files (one may have been ours before it was replaced) are theirs to
            # count and read; ``candidates`` still holds them so that none is taken for gone.
            mine = [f for f in candidates if shard_of(f.dev, f.ino, self.shards) == self.shard]
            stats.files_seen = len(mine)
        else:
            mine = candidates
        for found in mine:
            held = self.aside.get(found.path)
            if held is not None:
                if held[:2] == (found.size, found.mtime_ns):
                    stats.failed.append({"path": found.path, "reason": f"the indexer refused it: {held[2]}"})
                    continue
                del self.aside[found.path]  # it changed: try again
            rec = self.known.get(found.path)
            if rec is None and cutoff_ns is not None and found.mtime_ns < cutoff_ns:
                stats.too_old += 1  # last written before the retention window: nothing to keep
                continue
            if rec is not None and rec.present and unchanged(found, rec) \
                    and not (full and found.mode == "lines" and not self._edges_match(found, rec)):
                continue
            work.append((found, rec))
            stats.bytes_total += max(0, found.size - (rec.offset if rec and found.mode == "lines" else 0))
        stats.files_changed = len(work)
        need = [f.path for f, rec in work if rec is not None and f.path not in self.states and f.mode != "whole"
                and (f.dev, f.ino) == (rec.dev, rec.ino) and (f.mode == "zst" or f.size >= rec.offset)]
        self._fetch_states(need)
        self._progress(req, stats, force=True)
        for found, rec in work:
            self._scan_file(found, rec, stats, req)
            stats.files_done += 1
            self._progress(req, stats)
            if on_control is not None:
                on_control()
        self._side_titles()
        if full:
            self._mark_gone(candidates, stats)
            if self.shard == 0:  # every scanner sees every root; one census is enough
                self._census(candidates, stats)
        self._flush()
        self.link.drain()
        self._progress(req, stats, force=True)
        return stats

    def _candidates(self, full: bool, stats: PassStats, hints: set[str]) -> list[Found]:
        found: dict[str, Found] = {}
        for root in self.roots:
            for f in SPECS[root.agent].discover(root, stats.problems, self.dirs, full):
                found[f.path] = f
        # One file reached by two paths (a symlinked folder and its target) is one transcript:
        # keep the path already indexed, else the first found. (Units inside one database share
        # its device and inode: they are told apart by their keys.)
        by_id: dict[tuple[int, int], str] = {}
        for path in sorted(found, key=lambda p: (p not in self.known, p)):
            f = found[path]
            if f.mode == "whole" and f.locator:
                continue
            other = by_id.setdefault((f.dev, f.ino), path)
            if other != path:
                del found[path]
        if not full:
            horizon = time.time_ns() - RECENT_WINDOW_S * 1_000_000_000
            for rec in self.known.values():
                if rec.path in found or not rec.present or rec.mode != "lines":
                    continue  # compressed files never change; other units are re-listed by their agent
                if rec.mtime_ns >= horizon or rec.size != rec.offset or rec.path in hints:
                    try:
                        st = os.stat(rec.path)
                    except OSError:
                        continue  # absence is only concluded by a full pass
                    found[rec.path] = Found(rec.path, rec.agent, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        stats.files_seen = len(found)
        self.seen = found
        return list(found.values())

    def _scan_file(self, found: Found, rec: FileState | None, stats: PassStats, req: int | None) -> None:
        if found.mode == "whole":
            self._read_whole(found, rec, stats, req)
            return
        path = found.path
        renamed_from: str | None = None
        predecessor: str | None = None
        if rec is None:
            predecessor = SPECS[found.agent].predecessor(path)
            old = predecessor
            if old is None and found.mode == "lines":
                old = self.by_inode.get((found.dev, found.ino))
            old_rec = self.known.get(old) if old else None
            if old_rec is not None and old != path and old_rec.agent == found.agent \
                    and not os.path.exists(old_rec.path):
                renamed_from, rec = old_rec.path, old_rec
        try:
            src = LineFile(path, found.mode)
        except OSError as exc:
            stats.failed.append({"path": path, "reason": f"cannot open: {exc.strerror or exc}"})
            return
        try:
            st = src.stat
            same_file = rec is not None and (st.st_dev, st.st_ino) == (rec.dev, rec.ino)
            # A compressed rollout continues its plain predecessor: offsets count decompressed
            # bytes, so its committed offset (and parser state) carry over; the head check below
            # proves it holds the same bytes.
            continues = rec is not None and renamed_from is not None and found.mode == "zst"
            reset = (
                rec is None
                or rec.expired
                or not (same_file or continues)
                or (found.mode == "lines" and st.st_size < rec.offset)
                or (rec.head_len > 0 and edges_fingerprint(src, rec.head_len, rec.offset) != rec.head_hash)
            )
            start = 0 if reset or rec is None else rec.offset
            state: dict[str, Any] | None = None
            if not reset:
                key = renamed_from or path
                blob = self.states.get(key)
                if blob is None:
                    self._fetch_states([key])
                    blob = self.states.get(key)
                if blob is None and start > 0:
                    reset, start = True, 0  # no parser state to continue from: re-read it all
                elif blob is not None:
                    state = msgpack.unpackb(blob, raw=False, strict_map_key=False)
            if reset and renamed_from is None and predecessor is not None and not os.path.exists(predecessor):
                # Another scanner may have indexed the file this one replaces (shards go by inode):
                # read from 0 and let the indexer replace the predecessor's rows, if it has any.
                renamed_from = predecessor
            self._read_file(src, found, start, reset, state, renamed_from, stats, req)
        except OSError as exc:  # a disk error, or a corrupt compressed stream (LineFile)
            stats.failed.append({"path": path, "reason": f"cannot read: {exc.strerror or exc}"[:300]})
        finally:
            # The indexer's control flow (Resync on a NACK, StopRequested, IndexerGone) raised
            # while a batch is flushed passes through: it is never a property of this file.
            src.close()

    def _read_file(self, src: LineFile, found: Found, start: int, reset: bool,
                   state: dict[str, Any] | None, renamed_from: str | None, stats: PassStats,
                   req: int | None) -> None:
        try:
            parser = make_parser(found.agent, found.path, state)
        except ParserStateError:
            # A state this version cannot continue from (a parser upgrade): read the file again
            # from its start; the indexer replaces its old rows.
            start, reset, state = 0, True, None
            parser = make_parser(found.agent, found.path, None)
        part = _OpenPart(self._open_part(found, src.stat, start, reset, renamed_from), parser.stats.malformed,
                     dict(parser.stats.extra))
        pass_malformed0 = parser.stats.malformed
        pos = start
        ordinal = parser.session.message_count

        def split_batch() -> _OpenPart:
            # The batch ends at ``pos`` (a line boundary, the parser's state is exactly there) and
            # the file goes on in a new part of the next batch.
            self._close_part(part, src, parser, pos)
            stats.oversized += part.read.oversized
            self._flush()
            self._progress(req, stats)
            return _OpenPart(self._open_part(found, src.stat, pos, False, None), parser.stats.malformed,
                         dict(parser.stats.extra))

        try:
            for line, end, clean in self._screened(self._lines(src, start, part)):
                if line is not None:
                    if not self.builder.room_for(len(line)):
                        part = split_batch()
                    msgs = parser.feed(line)
                    if msgs:
                        self.builder.begin_record()
                        for msg in msgs:
                            self.builder.add_message(part.idx, ordinal, msg, screened=clean)
                            ordinal += 1
                        if self.builder.record_cut:
                            part.record_cut += 1
                            stats.record_cut += 1
                    stats.messages += len(msgs)
                stats.bytes_done += end - pos
                pos = end
                if self.builder.full:
                    part = split_batch()
        except OSError:
            # The read broke off (a disk error, a corrupt compressed stream): what was read up to
            # the last complete line is kept, its part closed there, and the file reported failed.
            self._close_part(part, src, parser, pos)
            raise
        self._close_part(part, src, parser, pos, complete=True)
        stats.malformed += parser.stats.malformed - pass_malformed0
        stats.oversized += part.read.oversized
        if self.builder.full:
            self._flush()

    def _screened(self, lines: Iterator[tuple[bytes | None, int]]) -> Iterator[tuple[bytes | None, int, bool]]:
        """Each line with whether the redactor's screen found nothing in it (its messages then skip the
        detector; aivault/redact.py ``Redactor.screen``)."""
        if self.redactor is None:
            return ((line, end, True) for line, end in lines)
        return self.redactor.screen(lines)

    def _lines(self, src: LineFile, start: int, part: _OpenPart) -> Iterator[tuple[bytes | None, int]]:
        """The complete lines after ``start``, then a settled last line that has no newline.

        An incomplete last line normally waits: its writer may be in the middle of it. But a
        finished transcript whose writer never wrote the final newline would lose that record for
        ever, so a last line is taken once the file has not changed for TAIL_SETTLE_S and the line
        parses as a complete JSON object. The offset then ends at the file's end; if the file grows
        later, reading resumes exactly there (the writer's newline reads as an empty line).
        """
        pos = start
        for line, end in src.lines(start, part.read):
            pos = end
            yield line, end
        st = src.stat
        rest = st.st_size - pos
        if src.mode != "lines" or rest <= 0 or rest > MAX_LINE_BYTES \
                or time.time_ns() - st.st_mtime_ns < TAIL_SETTLE_S * 1_000_000_000:
            return
        tail = src.tail(pos, rest)
        if len(tail) == rest and b"\n" not in tail and type(loads_line(tail)) is dict:
            yield tail, st.st_size

    def _open_part(self, found: Found, st: os.stat_result | None, start: int, reset: bool,
                   renamed_from: str | None, *, size: int | None = None) -> int:
        # A line file's size and mtime are the file's; a compressed file's size is the
        # decompressed length once its end is read (-1 until then), a whole unit's its message
        # count; their mtime field holds the change signature.
        return self.builder.add_file({
            "path": found.path,
            "agent": found.agent,
            "mode": found.mode,
            "reset": reset,
            "renamed_from": renamed_from,
            "dev": st.st_dev if st is not None else found.dev,
            "ino": st.st_ino if st is not None else found.ino,
            "size": size if size is not None else (st.st_size if st is not None and found.mode == "lines" else -1),
            "mtime_ns": st.st_mtime_ns if st is not None and found.mode == "lines" else found.mtime_ns,
            "start": start,
        })

    def _close_part(self, part: _OpenPart, src: LineFile, parser: Parser, end: int, *, complete: bool = False) -> None:
        fp = self.builder.files[part.idx]
        if complete and src.mode == "zst" and src.eof:
            fp["size"] = end  # the whole decompressed stream is read: nothing is left
        head_len = min(end, HEAD_BYTES)
        state_blob = packb(parser.state())
        skips = {k: v - part.extra0.get(k, 0) for k, v in parser.stats.extra.items() if v != part.extra0.get(k, 0)}
        if part.record_cut:
            skips["record-cut"] = part.record_cut
        skips.update(self.builder.redacted_skips(part.idx))
        fp.update({
            "end": end,
            "head_len": head_len,
            "head_hash": edges_fingerprint(src, head_len, end),
            "state": state_blob,
            "session": self.builder.session(parser.session),
            "malformed": parser.stats.malformed - part.malformed0,
            "oversized": part.read.oversized,
            "skips": skips,
        })
        self.builder.add_header_bytes(len(state_blob))
        path = fp["path"]
        renamed = fp.get("renamed_from")
        if renamed:
            self.known.pop(renamed, None)
            self.states.pop(renamed, None)
        self.known[path] = FileState(path, fp["agent"], fp["dev"], fp["ino"], fp["size"], fp["mtime_ns"],
                                     end, head_len, fp["head_hash"], present=True, expired=False, mode=fp["mode"])
        if fp["mode"] == "lines":
            self.by_inode[(fp["dev"], fp["ino"])] = path
        self.states[path] = state_blob

    def _edges_match(self, found: Found, rec: FileState) -> bool:
        """A full pass re-checks an unchanged-looking line file's first and last indexed bytes: a
        rewrite in place can keep size, mtime and inode (and would otherwise never be read again)."""
        if rec.head_len <= 0:
            return True
        try:
            src = LineFile(found.path, "lines")
        except OSError:
            return True  # unreadable now: the next real change is noticed as usual
        try:
            return edges_fingerprint(src, rec.head_len, rec.offset) == rec.head_hash
        except OSError:
            return True
        finally:
            src.close()

    # --- units read whole ---------------------------------------------------------------------------
    def _read_whole(self, found: Found, rec: FileState | None, stats: PassStats, req: int | None) -> None:
        """Read a unit at once (a document, a task folder, a database session) and send it in
        message-counted parts: a unit larger than a batch resumes after its last committed part."""
        read = SPECS[found.agent].read_unit
        assert read is not None, f"{found.agent} has no reader for whole units"
        try:
            unit = read(found)
        except UnitChanged:
            stats.busy += 1  # it is being written: the next pass reads it whole
            return
        except UnitUnreadable as exc:
            stats.failed.append({"path": found.path, "reason": str(exc)[:300]})
            return
        total = len(unit.messages)
        reset = rec is None or rec.expired or rec.mtime_ns != unit.signature or rec.offset > total \
            or (rec.dev, rec.ino) != (found.dev, found.ino)
        start = 0 if reset or rec is None else rec.offset
        info = self.builder.session(unit.session)
        info["message_count"] = total
        stats.bytes_done += found.size
        # A unit the agent moved to a new name (Gemini's session-*.json resumed as .jsonl) replaces
        # the one it continues: named as a hint on the part read from 0, whose commit drops it
        # (the indexer knows every shard's files, so the hint holds when another shard read it).
        pred = SPECS[found.agent].predecessor(found.path) if rec is None else None
        renamed_from = pred if pred != found.path else None

        def open_part(first: int, fresh: bool) -> int:
            return self._open_part(Found(found.path, found.agent, found.dev, found.ino, found.size, unit.signature,
                                         "whole", found.locator), None, first, fresh,
                                   renamed_from if fresh else None, size=total)

        def close_part(idx: int, end: int, skips: dict[str, int]) -> None:
            fp = self.builder.files[idx]
            state_blob = packb({"v": 1})
            skips.update(self.builder.redacted_skips(idx))
            fp.update({"end": end, "head_len": 0, "head_hash": 0, "state": state_blob, "session": info,
                       "malformed": skips.pop("malformed-record", 0), "oversized": 0, "skips": skips})
            self.builder.add_header_bytes(len(state_blob))
            if renamed_from is not None:
                self.known.pop(renamed_from, None)
            self.known[found.path] = FileState(found.path, found.agent, found.dev, found.ino, total, unit.signature,
                                               end, 0, 0, present=True, expired=False, mode="whole")

        idx = open_part(start, reset)
        skips = dict(unit.skips) if start == 0 else {}  # counted once, with the part that reads from 0
        flagged = self.redactor.flag_texts([m.text for m in unit.messages[start:total]]) \
            if self.redactor is not None else set()
        for ordinal in range(start, total):
            if self.builder.full:
                close_part(idx, ordinal, skips)
                skips = {}
                self._flush()
                self._progress(req, stats)
                idx = open_part(ordinal, False)
            self.builder.begin_record()
            self.builder.add_message(idx, ordinal, unit.messages[ordinal], screened=ordinal - start not in flagged)
            if self.builder.record_cut:
                skips["record-cut"] = skips.get("record-cut", 0) + 1
                stats.record_cut += 1
        stats.messages += total - start
        close_part(idx, total, skips)
        if self.builder.full:
            self._flush()

    def _side_titles(self) -> None:
        """Send titles agents keep beside their transcripts (AgentSpec.side_titles: Codex thread
        names, Copilot's workspace.yaml, Cursor's chat meta) that changed."""
        if self.shard != 0:
            return  # one scanner is enough to read them
        for root in self.roots:
            read = SPECS[root.agent].side_titles
            if read is None:
                continue
            try:
                pairs = list(read(root, self.index_sigs))
            except Exception as exc:  # a title source is metadata only: the transcripts are still read
                _log.warning("cannot read titles", root=root.path, error=str(exc)[:200])
                continue
            for sid, name in pairs:
                if self.sent_titles.get((root.agent, sid)) != name:
                    self.builder.titles.append(self.builder.title(root.agent, sid, name))
                    self.builder.add_header_bytes(len(sid) + len(name) + 16)
                    self.sent_titles[(root.agent, sid)] = name
                    if self.builder.full:
                        self._flush()

    def _census(self, candidates: list[Found], stats: PassStats) -> None:
        """Per root: its units and the files that look like the agent's transcripts. A root holding
        such files that yields no session is the failure users report most ("it indexed zero
        sessions of agent X and said it was healthy"), so it is counted, not guessed."""
        for root in self.roots:
            spec = SPECS[root.agent]
            if not os.path.isdir(root.path):
                continue
            prefix = root.path.rstrip(os.sep) + os.sep
            units = sum(1 for f in candidates if f.path.startswith(prefix) and f.agent == root.agent)
            stats.roots.append({"root": root.path, "agent": root.agent, "units": units,
                                "shaped": census(root.path, spec.shaped), "expects": spec.expects})

    def _mark_gone(self, candidates: list[Found], stats: PassStats) -> None:
        """Files we indexed that a full pass no longer finds, under roots listed without error."""
        seen = {f.path for f in candidates}
        troubled = {p.root for p in stats.problems}
        for rec in list(self.known.values()):
            if not rec.present or rec.path in seen:
                continue
            root = next((r for r in self.roots if rec.path.startswith(r.path + os.sep)), None)
            if root is None or root.path in troubled:
                continue
            self.builder.gone.append(rec.path)
            self.builder.add_header_bytes(len(rec.path) + 8)
            self.known[rec.path] = rec._replace(present=False)
            if self.builder.full:
                self._flush()

    def _flush(self) -> None:
        if self.builder.empty:
            return
        seq = self.link.next_seq()
        header, payload = self.builder.finish(seq, self.epoch)
        self.link.send_batch(K_BATCH, header, payload)

    def _progress(self, req: int | None, stats: PassStats, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        self.link.send(K_PROGRESS, Progress(
            req=req, files_seen=stats.files_seen, files_changed=stats.files_changed, files_done=stats.files_done,
            bytes_total=stats.bytes_total, bytes_done=stats.bytes_done, messages=stats.messages))
        self.link.pump(0)
