"""One scan pass: find transcripts, read what is new in each, stream it to the indexer.

Per file the indexer remembers identity (device, inode), size, mtime, the byte offset after
the last complete line, a fingerprint of the file's head and the parser's state at that
offset. A pass reads only bytes past the offset; a file that was truncated, replaced or
rewritten is read again from the start and its old rows are replaced by the indexer.

A full pass walks every root. A recent pass (``full: false``) is bounded: it re-lists only
directories whose mtime changed and re-checks only files that changed recently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from aivault import log
from aivault.codec import packb
from aivault.protocol import K_BATCH, K_GET_STATES, K_HELLO, K_PROGRESS, PROTOCOL_VERSION, shard_of
from aivault.text import Tokenizer
from scanner.batch import BatchBuilder, session_dict
from scanner.discover import Found, Root, RootProblem, walk, walk_changed
from scanner.link import Link
from scanner.model import Parser
from scanner.reader import HEAD_BYTES, ReadStats, head_hash, iter_lines

_log = log.get("scanner.scan")

# A recent pass re-checks files modified within this window (plus any with a pending tail).
RECENT_WINDOW_S = 48 * 3600
PROGRESS_INTERVAL_S = 0.25
_STATE_PAGE = 500


@dataclass(slots=True)
class FileRec:
    path: str
    agent: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int
    head_len: int
    head_hash: int
    present: bool
    expired: bool = False  # its session fell out of retention: read again from 0 if it changes


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
    too_old: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)
    problems: list[RootProblem] = field(default_factory=list)


def make_parser(agent: str, path: str, state: dict[str, Any] | None) -> Parser:
    if agent == "claude":
        from scanner.claude import ClaudeParser

        return ClaudeParser(path, state)
    if agent == "codex":
        from scanner.codex import CodexParser

        return CodexParser(path, state)
    raise ValueError(f"no parser for agent {agent!r}")


class Scanner:
    def __init__(self, link: Link, roots: list[Root], *, shard: int = 0, shards: int = 1) -> None:
        self.link = link
        self.roots = roots
        self.shard = shard
        self.shards = shards
        self.tok = Tokenizer()
        self.builder = BatchBuilder(self.tok)
        self.known: dict[str, FileRec] = {}
        self.by_inode: dict[tuple[int, int], str] = {}
        self.states: dict[str, bytes] = {}
        self.dirs: dict[str, int] = {}
        self.index_sigs: dict[str, tuple[int, int]] = {}
        self.sent_titles: dict[tuple[str, str], str] = {}
        self.epoch = 0
        self.synced = False
        self._last_progress = 0.0

    # --- state from the indexer -------------------------------------------------------------
    def sync(self) -> None:
        """(Re)load what the indexer has committed; called at start and after a refusal."""
        pages = self.link.request(K_HELLO, {
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "shard": self.shard,
            "shards": self.shards,
            "roots": [[r.agent, r.path] for r in self.roots],
        })
        self.known.clear()
        self.by_inode.clear()
        self.states.clear()
        self.sent_titles.clear()
        self.index_sigs.clear()
        self.dirs.clear()
        self.tok = Tokenizer()
        self.builder = BatchBuilder(self.tok)
        for page in pages:
            self.epoch = int(page.header["epoch"])
            for row in page.header.get("files", []):
                rec = FileRec(*row)
                self.known[rec.path] = rec
                self.by_inode[(rec.dev, rec.ino)] = rec.path
        self.synced = True
        _log.info("synced", files=len(self.known), epoch=self.epoch)

    def _fetch_states(self, paths: list[str]) -> None:
        for i in range(0, len(paths), _STATE_PAGE):
            page = paths[i : i + _STATE_PAGE]
            for reply in self.link.request(K_GET_STATES, {"paths": page}):
                for path, blob in reply.header.get("states", {}).items():
                    if blob is not None:
                        self.states[path] = blob

    # --- a pass --------------------------------------------------------------------------------
    def run_pass(self, req: int | None, full: bool, on_control: Callable[[], None] | None = None,
                 cutoff_ms: int | None = None) -> PassStats:
        if not self.synced:
            self.sync()
        stats = PassStats()
        candidates = self._candidates(full, stats)
        work: list[tuple[Found, FileRec | None]] = []
        cutoff_ns = cutoff_ms * 1_000_000 if cutoff_ms else None
        if self.shards > 1:
            # Other scanners' files (one may have been ours before it was replaced) are theirs to
            # count and read; ``candidates`` still holds them so that none is taken for gone.
            mine = [f for f in candidates if shard_of(f.dev, f.ino, self.shards) == self.shard]
            stats.files_seen = len(mine)
        else:
            mine = candidates
        for found in mine:
            rec = self.known.get(found.path)
            if rec is None and cutoff_ns is not None and found.mtime_ns < cutoff_ns:
                stats.too_old += 1  # last written before the retention window: nothing to keep
                continue
            # Unchanged only if nothing is left past the committed offset: a pass interrupted
            # between two batches of one file recorded the file's size but not its end.
            if rec is not None and rec.present and found.size == rec.size == rec.offset \
                    and found.mtime_ns == rec.mtime_ns and (found.dev, found.ino) == (rec.dev, rec.ino):
                continue
            work.append((found, rec))
            stats.bytes_total += max(0, found.size - (rec.offset if rec else 0))
        stats.files_changed = len(work)
        need = [f.path for f, rec in work if rec is not None and f.path not in self.states
                and (f.dev, f.ino) == (rec.dev, rec.ino) and f.size >= rec.offset]
        self._fetch_states(need)
        self._progress(req, stats, force=True)
        for found, rec in work:
            self._scan_file(found, rec, stats, req)
            stats.files_done += 1
            self._progress(req, stats)
            if on_control is not None:
                on_control()
        self._titles()
        if full:
            self._mark_gone(candidates, stats)
        self._flush()
        self.link.drain()
        self._progress(req, stats, force=True)
        return stats

    def _candidates(self, full: bool, stats: PassStats) -> list[Found]:
        found: dict[str, Found] = {}
        for root in self.roots:
            if full:
                it = walk(root, stats.problems, self.dirs)
            else:
                it = walk_changed(root, stats.problems, self.dirs) if self._has_dirs(root) \
                    else walk(root, stats.problems, self.dirs)
            for f in it:
                found[f.path] = f
        if not full:
            horizon = time.time_ns() - RECENT_WINDOW_S * 1_000_000_000
            for rec in self.known.values():
                if rec.path in found or not rec.present:
                    continue
                if rec.mtime_ns >= horizon or rec.size != rec.offset:
                    try:
                        st = os.stat(rec.path)
                    except OSError:
                        continue  # absence is only concluded by a full pass
                    found[rec.path] = Found(rec.path, rec.agent, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        stats.files_seen = len(found)
        return list(found.values())

    def _has_dirs(self, root: Root) -> bool:
        return root.path in self.dirs

    def _scan_file(self, found: Found, rec: FileRec | None, stats: PassStats, req: int | None) -> None:
        path = found.path
        renamed_from: str | None = None
        if rec is None:
            old = self.by_inode.get((found.dev, found.ino))
            old_rec = self.known.get(old) if old else None
            if old_rec is not None and old != path and old_rec.agent == found.agent \
                    and not os.path.exists(old_rec.path):
                renamed_from, rec = old_rec.path, old_rec
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            stats.failed.append({"path": path, "reason": f"cannot open: {exc.strerror or exc}"})
            return
        try:
            st = os.fstat(fd)
            reset = (
                rec is None
                or rec.expired
                or (st.st_dev, st.st_ino) != (rec.dev, rec.ino)
                or st.st_size < rec.offset
                or (rec.head_len > 0 and (st.st_size < rec.head_len or head_hash(fd, rec.head_len) != rec.head_hash))
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
            self._read_file(fd, found, st, start, reset, state, renamed_from, stats, req)
        except OSError as exc:
            stats.failed.append({"path": path, "reason": f"cannot read: {exc.strerror or exc}"})
        finally:
            os.close(fd)

    def _read_file(self, fd: int, found: Found, st: os.stat_result, start: int, reset: bool,
                   state: dict[str, Any] | None, renamed_from: str | None, stats: PassStats,
                   req: int | None) -> None:
        parser = make_parser(found.agent, found.path, state)
        rstats = ReadStats()
        malformed0 = pass_malformed0 = parser.stats.malformed
        part_start = start
        part_reset = reset
        part_renamed = renamed_from
        fidx = self._open_part(found, st, part_start, part_reset, part_renamed)
        pos = start
        ordinal = parser.session.message_count
        for line, end in iter_lines(fd, start, st.st_size, rstats):
            msgs = parser.feed(line)
            for msg in msgs:
                self.builder.add_message(fidx, ordinal, msg)
                ordinal += 1
            stats.messages += len(msgs)
            stats.bytes_done += end - pos
            pos = end
            if self.builder.full:
                self._close_part(fidx, fd, parser, pos, rstats, parser.stats.malformed - malformed0)
                malformed0 = parser.stats.malformed
                stats.oversized += rstats.oversized
                rstats = ReadStats()
                self._flush()
                self._progress(req, stats)
                fidx = self._open_part(found, st, pos, False, None)
        self._close_part(fidx, fd, parser, pos, rstats, parser.stats.malformed - malformed0)
        stats.malformed += parser.stats.malformed - pass_malformed0
        stats.oversized += rstats.oversized
        if self.builder.full:
            self._flush()

    def _open_part(self, found: Found, st: os.stat_result, start: int, reset: bool, renamed_from: str | None) -> int:
        return self.builder.add_file({
            "path": found.path,
            "agent": found.agent,
            "reset": reset,
            "renamed_from": renamed_from,
            "dev": st.st_dev,
            "ino": st.st_ino,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "start": start,
        })

    def _close_part(self, fidx: int, fd: int, parser: Parser, end: int, rstats: ReadStats, malformed: int) -> None:
        part = self.builder.files[fidx]
        head_len = min(end, HEAD_BYTES)
        state_blob = packb(parser.state())
        part.update({
            "end": end,
            "head_len": head_len,
            "head_hash": head_hash(fd, head_len),
            "state": state_blob,
            "session": session_dict(parser.session),
            "malformed": malformed,
            "oversized": rstats.oversized,
        })
        path = part["path"]
        renamed = part.get("renamed_from")
        if renamed:
            self.known.pop(renamed, None)
            self.states.pop(renamed, None)
        self.known[path] = FileRec(path, part["agent"], part["dev"], part["ino"], part["size"], part["mtime_ns"],
                                   end, head_len, part["head_hash"], True)
        self.by_inode[(part["dev"], part["ino"])] = path
        self.states[path] = state_blob

    def _titles(self) -> None:
        """Send Codex thread names (session_index.jsonl) that changed since we last sent them."""
        from scanner.codex import read_session_index

        if self.shard != 0:
            return  # one scanner is enough to read the index of thread names
        for index in sorted({r.session_index for r in self.roots if r.session_index}):
            try:
                st = os.stat(index)
            except OSError:
                continue
            sig = (st.st_size, st.st_mtime_ns)
            if self.index_sigs.get(index) == sig:
                continue
            try:
                with open(index, "rb") as fh:
                    names = read_session_index(fh.read(64 << 20))
            except OSError as exc:
                _log.warning("cannot read session index", path=index, error=str(exc))
                continue
            self.index_sigs[index] = sig
            for sid, name in names.items():
                if self.sent_titles.get(("codex", sid)) != name:
                    self.builder.titles.append(["codex", sid, name])
                    self.sent_titles[("codex", sid)] = name

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
            rec.present = False
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
        self.link.send(K_PROGRESS, {
            "req": req,
            "files_seen": stats.files_seen,
            "files_changed": stats.files_changed,
            "files_done": stats.files_done,
            "bytes_total": stats.bytes_total,
            "bytes_done": stats.bytes_done,
            "messages": stats.messages,
        })
        self.link.pump(0)
