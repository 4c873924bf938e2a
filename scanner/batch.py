"""Building one ingest batch: file progress, session metadata, chunk rows and postings.

The layout on the wire is in docs/protocol.md §2.2 (`BATCH`). Chunk columns travel as one msgpack
frame; postings as three raw little-endian arrays (chunk index uint32, term int64, tf uint16)
so the indexer hands them to DuckDB without touching each row in Python.
"""

from __future__ import annotations

from typing import Any

from aivault import protocol
from aivault.ingest import (
    BATCH_MAX_BYTES,
    BATCH_MAX_HEADER_BYTES,
    BATCH_MAX_MESSAGES,
    Batch,
    BatchPayload,
    FilePart,
    SessionMeta,
    Title,
    encode_batch,
)
from aivault.redact import REDACTED_SKIP, Redactor
from aivault.scanner.model import Message, SessionInfo
from aivault.text import Tokenizer, chunk_text, tool_index_text

ROLE_CODE: dict[str, int] = {r.wire: int(r) for r in protocol.Role}
KIND_CODE: dict[str, int] = {k.wire: int(k) for k in protocol.Kind}
_DL_MAX = 65535
# The indexed text of one transcript record (one line) is cut after this many UTF-8 bytes; the
# rest of that record is not indexed and the cut is counted (skip reason ``record-cut``). With
# the batch bound this keeps every batch's text frame under 2 x BATCH_MAX_BYTES, far below the
# ingest frame limit, however long a line is (a pasted 60 MB log would otherwise make a batch
# the indexer must refuse, and the scanner would re-send it for ever).
RECORD_TEXT_MAX_BYTES = 4 << 20
# Per-part header cost beyond its parser state: path, session metadata, counters.
_PART_HEADER_BYTES = 512


class BatchBuilder:
    """Accumulates file parts until the batch reaches its message or byte bound (``scale`` times
    the protocol's: BULK_BATCH_SCALE for a bulk load)."""

    def __init__(self, tokenizer: Tokenizer, scale: int = 1, redactor: Redactor | None = None) -> None:
        self.tok = tokenizer
        self.max_messages = BATCH_MAX_MESSAGES * scale
        self.max_bytes = BATCH_MAX_BYTES * scale
        self.redactor = redactor  # None: index the text raw (config.json redact.enabled false)
        self._reset()

    def _reset(self) -> None:
        self.files: list[FilePart] = []
        self.gone: list[str] = []  # paths a full pass no longer finds
        self.titles: list[Title] = []
        self.c_file: list[int] = []
        self.c_ord: list[int] = []
        self.c_part: list[int] = []
        self.c_role: list[int] = []
        self.c_kind: list[int] = []
        self.c_ts: list[int | None] = []
        self.c_dl: list[int] = []
        self.c_text: list[str] = []
        self.messages = 0
        self.bytes = 0  # cost estimate of the payload: text bytes + 8 per token
        self.header_bytes = 0  # estimate of the msgpack header (file parts, gone paths, titles)
        self.dropped_lines = 0
        self.record_left = RECORD_TEXT_MAX_BYTES
        self.record_cut = False
        self.redacted: dict[int, dict[str, int]] = {}  # file part index -> secrets replaced, by kind

    @property
    def empty(self) -> bool:
        return not (self.files or self.gone or self.titles)

    @property
    def full(self) -> bool:
        return (self.messages >= self.max_messages or self.bytes >= self.max_bytes
                or self.header_bytes >= BATCH_MAX_HEADER_BYTES)

    def room_for(self, line_bytes: int) -> bool:
        """Whether a record of ``line_bytes`` may join this batch without pushing it past its bound.

        A line's length bounds the text it yields (JSON escapes only lengthen text), and a
        record's text is cut at RECORD_TEXT_MAX_BYTES, so a batch that takes the record stays
        under its byte bound plus one record.
        """
        return self.bytes == 0 or self.bytes + min(line_bytes, RECORD_TEXT_MAX_BYTES) <= self.max_bytes

    def begin_record(self) -> None:
        """The messages that follow come from one new record (line): its text budget starts over."""
        self.record_left = RECORD_TEXT_MAX_BYTES
        self.record_cut = False

    def add_header_bytes(self, n: int) -> None:
        self.header_bytes += n

    def add_file(self, update: FilePart) -> int:
        """Register a file part; returns its index for the messages that follow."""
        self.files.append(update)
        self.header_bytes += _PART_HEADER_BYTES + 2 * len(update["path"])
        return len(self.files) - 1

    def add_message(self, file_idx: int, ordinal: int, msg: Message, *, screened: bool = False) -> bool:
        """Chunk, tokenize and add one message; False when the record's text budget cut it. ``screened``:
        the redactor's screen found no candidate in the line or unit the message came from, so the
        detector is not run again on it."""
        self.messages += 1
        text = msg.text
        if self.redactor is not None and not screened:  # before anything is cut or chunked: whole secrets
            text, found = self.redactor.redact(text)
            if found:
                counts = self.redacted.setdefault(file_idx, {})
                for secret, n in found.items():
                    counts[secret] = counts.get(secret, 0) + n
        if msg.kind in ("tool_call", "tool_result"):
            text, dropped = tool_index_text(text)
            self.dropped_lines += dropped
        role = ROLE_CODE[msg.role]
        kind = KIND_CODE[msg.kind]
        if len(text) > self.record_left:
            # A character is at least one byte: nothing past this many characters can fit.
            text = text[: self.record_left]
            self.record_cut = True
        for part, piece in enumerate(chunk_text(text)):
            size = len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
            if size > self.record_left:
                self.record_cut = True
                break
            self.record_left -= size
            ci = len(self.c_text)
            length = self.tok.add(ci, piece)
            if not length:
                continue
            self.c_file.append(file_idx)
            self.c_ord.append(ordinal)
            self.c_part.append(part)
            self.c_role.append(role)
            self.c_kind.append(kind)
            self.c_ts.append(msg.ts)
            self.c_dl.append(min(length, _DL_MAX))
            self.c_text.append(piece)
            self.bytes += size + 8 * length
        return not self.record_cut

    def redacted_skips(self, file_idx: int) -> dict[str, int]:
        """The secrets replaced in a file part, as its ``skips`` entries ``redacted:<kind>`` (counted with
        the file, so a file read again replaces its counts instead of adding to them)."""
        return {f"{REDACTED_SKIP}{k}": n for k, n in self.redacted.pop(file_idx, {}).items()}

    def session(self, info: SessionInfo) -> SessionMeta:
        """The session's metadata for the batch, its title redacted."""
        meta = session_dict(info)
        if self.redactor is not None and meta["title"]:
            meta["title"] = self.redactor.redact_text(meta["title"])
        return meta

    def title(self, agent: str, session_id: str, name: str) -> Title:
        """A side title (an agent's own name for a session), redacted."""
        return Title(agent, session_id, self.redactor.redact_text(name) if self.redactor is not None else name)

    def finish(self, seq: int, epoch: int) -> tuple[Batch, list[bytes]]:
        """The batch's header and payload frames; the builder is empty afterwards."""
        p_chunk, p_term, p_tf = self.tok.finish()
        header = Batch(seq=seq, epoch=epoch, files=self.files, gone=self.gone, titles=self.titles,
                       chunks=len(self.c_text), postings=len(p_term), messages=self.messages,
                       dropped_lines=self.dropped_lines)
        columns: dict[str, list[Any]] = {
            "file": self.c_file,
            "ord": self.c_ord,
            "part": self.c_part,
            "role": self.c_role,
            "kind": self.c_kind,
            "ts": self.c_ts,
            "dl": self.c_dl,
            "text": self.c_text,
        }
        payload = encode_batch(BatchPayload(columns, p_chunk, p_term, p_tf, self.tok.drain_new_terms()))
        self._reset()
        return header, payload


def session_dict(info: SessionInfo) -> SessionMeta:
    return SessionMeta(agent=info.agent, session_id=info.session_id, title=info.title, cwd=info.cwd,
                       branch=info.branch, started_at=info.started_at, updated_at=info.updated_at,
                       message_count=info.message_count, resume_command=info.resume_command,
                       parent_session_id=info.parent_session_id)
