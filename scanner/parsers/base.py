"""What the line parsers share: the state they keep between passes, and the line loop.

A line parser's whole memory between two passes over a growing file is its state (``Parser.state()``,
scanner/model.py): the indexer stores it, msgpack-encoded, with every batch it commits, and hands it
back when the file grows, possibly to a newer aivault. So a state's keys are a stored format that
existing indexes hold. :class:`ParserState` derives it from the fields of one dataclass per parser,
each field naming its stored key (:func:`stored_as`): written in field order after ``"v"``, read
back leniently (a missing key is the field's empty value, an unknown key is ignored) and strictly
(a value of the wrong type, or another version, is :class:`ParserStateError`, upon which the scanner
reads the file again from its start).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from aivault.errors import ParserStateError
from aivault.scanner.model import Message, ParseStats, SessionInfo
from aivault.scanner.parsers.jsonutil import loads_line, to_epoch_ms

_WIRE = "wire"  # the field metadata naming a state field's stored key
# Skip counters travel in every saved parser state and unit (ParseStats.extra, Unit.skips), and their
# keys partly come from the file (a record type nobody knows yet): cap how many distinct keys and
# how long a key may get.
EXTRA_KEYS_MAX = 24
REASON_DETAIL_MAX_CHARS = 40


def count_skip(skips: dict[str, int], reason: str, detail: str | None = None, n: int = 1) -> None:
    """Count ``n`` records skipped for ``reason``, or under ``"reason:detail"``, in ``skips`` (a
    unit's skips or a parser's ``stats.extra``).

    Once EXTRA_KEYS_MAX distinct keys exist, a new detail is counted under ``"reason:other"``,
    so a file full of made-up record types cannot grow the state without bound.
    """
    key = reason
    if detail is not None:
        key = f"{reason}:{detail[:REASON_DETAIL_MAX_CHARS]}"
        if key not in skips and len(skips) >= EXTRA_KEYS_MAX:
            key = f"{reason}:other"
    skips[key] = skips.get(key, 0) + n


def folder_titles(session_dirs: Iterable[str], file_name: str, sigs: MutableMapping[str, Any],
                  title: Callable[[str, str], str | None]) -> Iterator[tuple[str, str]]:
    """Side titles kept in a file of each session folder (Copilot's workspace.yaml, Kimi's state.json):
    (folder name, title) for the folders whose file changed since ``sigs`` last saw it, one stat each;
    ``title(session_dir, path)`` reads it (None: no title)."""
    for session_dir in session_dirs:
        path = os.path.join(session_dir, file_name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        sig = (st.st_size, st.st_mtime_ns)
        if sigs.get(path) == sig:
            continue
        sigs[path] = sig
        found = title(session_dir, path)
        if found:
            yield os.path.basename(session_dir), found


def keep_recent(recent: list[Any], item: Any, limit: int) -> None:
    """Append ``item`` to a list a state keeps bounded, dropping the oldest past ``limit`` (ids and
    hashes remembered to recognise a repeat that arrives soon after)."""
    recent.append(item)
    if len(recent) > limit:
        del recent[0]


def file_stem(path: str, suffix: str = ".jsonl") -> str:
    """The file name of ``path`` without ``suffix`` (or its last extension): the session id of a
    transcript that carries none."""
    base = os.path.basename(path)
    return base[: -len(suffix)] if base.endswith(suffix) else os.path.splitext(base)[0]


def stored_as(key: str, default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A :class:`ParserState` field stored under ``key`` (spelled as existing indexes hold it,
    whatever the field is called), starting as ``default``, or ``factory()`` for a list or the stats."""
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={_WIRE: key})
    return dataclasses.field(default=default, metadata={_WIRE: key})


def _text(wire: dict[str, Any], key: str) -> str | None:
    value = wire.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ParserStateError(f"state field {key!r} is not a string")


def _number(wire: dict[str, Any], key: str) -> int | None:
    value = wire.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ParserStateError(f"state field {key!r} is not an integer")


def _count(wire: dict[str, Any], key: str) -> int:
    return _number(wire, key) or 0


def _flag(wire: dict[str, Any], key: str) -> bool:
    return bool(wire.get(key))


def _list(wire: dict[str, Any], key: str) -> list[Any]:
    value = wire.get(key, [])
    if isinstance(value, list | tuple):
        return list(value)
    raise ParserStateError(f"state field {key!r} is not a list")


def _hashes(wire: dict[str, Any], key: str) -> list[int]:
    values = _list(wire, key)
    if not all(isinstance(h, int) for h in values):
        raise ParserStateError(f"state field {key!r} holds non-integers")
    return values


def _pairs(wire: dict[str, Any], key: str) -> list[tuple[str, str]]:
    values = _list(wire, key)
    if not all(isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in values):
        raise ParserStateError(f"state field {key!r} is malformed")
    return [(p[0], p[1]) for p in values]


def _stats(wire: dict[str, Any], key: str) -> ParseStats:
    value = wire.get(key)
    if not isinstance(value, list | tuple) or len(value) != 4 or not isinstance(value[3], dict):
        raise ParserStateError(f"state field {key!r} is malformed")
    lines, malformed, skipped, extra = value
    if not all(isinstance(n, int) for n in (lines, malformed, skipped, *extra.values())):
        raise ParserStateError(f"state field {key!r} holds a non-integer counter")
    return ParseStats(lines=lines, malformed=malformed, skipped=skipped, extra={str(k): v for k, v in extra.items()})


def _same(value: Any) -> Any:
    return value


def _stats_wire(stats: ParseStats) -> list[Any]:
    return [stats.lines, stats.malformed, stats.skipped, dict(stats.extra)]


# How a field is read back and written, by its declared type: the only types a state may hold.
# Lists are written as copies (the state of a batch must not change with the parser after it).
_Load = Callable[[dict[str, Any], str], Any]
_CODECS: dict[object, tuple[_Load, Callable[[Any], Any]]] = {
    str | None: (_text, _same),
    int | None: (_number, _same),
    int: (_count, _same),
    bool: (_flag, _same),
    list[int]: (_hashes, list),
    list[tuple[str, str]]: (_pairs, lambda pairs: [list(p) for p in pairs]),
    ParseStats: (_stats, _stats_wire),
}
_Field = tuple[str, str, _Load, Callable[[Any], Any]]  # attribute, stored key, load, dump
_FIELDS: dict[type[ParserState], tuple[_Field, ...]] = {}


@dataclasses.dataclass(slots=True)
class ParserState:
    """The base of every line parser's state: one dataclass whose fields (each declared with
    :func:`stored_as`, of a type :data:`_CODECS` knows) are what :meth:`to_wire` writes."""

    VERSION: ClassVar[int]  # a parser that reads files differently raises it: they are read again
    AGENT: ClassVar[str]

    @classmethod
    def _fields(cls) -> tuple[_Field, ...]:
        found = _FIELDS.get(cls)
        if found is None:
            hints = typing.get_type_hints(cls)
            fields = dataclasses.fields(cls)
            unknown = [f.name for f in fields if hints[f.name] not in _CODECS or _WIRE not in f.metadata]
            if unknown:
                raise TypeError(f"{cls.__name__}: fields {unknown} need stored_as() and a type the state codecs know")
            found = tuple((f.name, f.metadata[_WIRE], *_CODECS[hints[f.name]]) for f in fields)
            _FIELDS[cls] = found
        return found

    def to_wire(self) -> dict[str, Any]:
        """The stored form: ``"v"``, then every field under its key, in field order."""
        wire: dict[str, Any] = {"v": self.VERSION}
        for attr, key, _, dump in self._fields():
            wire[key] = dump(getattr(self, attr))
        return wire

    @classmethod
    def from_wire(cls, wire: object) -> Self:
        """The state :meth:`to_wire` wrote; ParserStateError for another version or a wrong type."""
        if not isinstance(wire, dict) or wire.get("v") != cls.VERSION:
            raise ParserStateError(f"not a {cls.AGENT} parser state of this version")
        return cls(**{attr: load(wire, key) for attr, key, load, _ in cls._fields()})

    @classmethod
    def load(cls, wire: dict[str, Any] | None) -> Self:
        """A fresh state (a file read from its start), or the one ``wire`` holds."""
        return cls() if wire is None else cls.from_wire(wire)


class LineState(Protocol):
    """What the line loop keeps up to date in every parser's state."""

    started: int | None
    updated: int | None
    count: int
    stats: ParseStats

    def to_wire(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=LineState)


class LineParser(ABC, Generic[S]):
    """The line loop the JSONL parsers share: decode, dispatch, keep the session's counters.

    A subclass sets ``st`` (its :class:`ParserState`, fresh or restored) and implements ``_record``:
    the messages of one decoded JSON object, or None when the object has an unexpected shape
    (counted as malformed; nothing else of it is kept).
    """

    agent: str  # the wire name (scanner/agents.py)
    # Where a record's time is when it has no "timestamp" (some writers use another name).
    fallback_time_key: ClassVar[str | None] = None
    st: S  # everything the parser remembers between passes

    @property
    def stats(self) -> ParseStats:
        """What was skipped or repaired so far (part of the state)."""
        return self.st.stats

    def state(self) -> dict[str, Any]:
        """Everything needed to continue after the last fed line (msgpack-serializable, bounded)."""
        return self.st.to_wire()

    def _session(self, session_id: str, title: str | None, cwd: str | None, branch: str | None = None,
                 resume_command: str | None = None, parent_session_id: str | None = None) -> SessionInfo:
        """The session with what the line loop knows (its times and message count) filled in."""
        st = self.st
        return SessionInfo(agent=self.agent, session_id=session_id, title=title, cwd=cwd, branch=branch,
                           started_at=st.started, updated_at=st.updated, message_count=st.count,
                           resume_command=resume_command, parent_session_id=parent_session_id)

    def feed(self, line: bytes) -> list[Message]:
        """Parse one line (without its newline) into zero or more Messages. Never raises."""
        st = self.st
        stats = st.stats
        stats.lines += 1
        obj = loads_line(line)
        if type(obj) is not dict:
            if obj is None and not line.strip():
                stats.skipped += 1
            else:
                stats.malformed += 1
            return []
        ts = obj.get("timestamp")
        if ts is None and self.fallback_time_key is not None:
            ts = obj.get(self.fallback_time_key)
        ms = to_epoch_ms(ts) if ts is not None else None
        out = self._record(obj, ms)
        if out is None:
            stats.malformed += 1
            return []
        if ms is not None:
            if st.started is None or ms < st.started:
                st.started = ms
            if st.updated is None or ms > st.updated:
                st.updated = ms
        if out:
            st.count += len(out)
        else:
            stats.skipped += 1
        return out

    @abstractmethod
    def _record(self, obj: dict[str, Any], ms: int | None) -> list[Message] | None:
        """The messages of one JSON object (a transcript line), or None if it is malformed."""
