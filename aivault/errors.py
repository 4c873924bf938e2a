"""The typed errors every layer raises; the RPC boundary turns them into error replies.

Each error carries a ``code`` (docs/protocol.md §1.6) and a message that says what went
wrong and what to do about it.
"""

from __future__ import annotations

from aivault import protocol as p


class AivaultError(Exception):
    """Base class: a failure with a message meant for the user."""

    code: int = p.ERR_INTERNAL


class ProtocolError(AivaultError):
    """Frames that could not be decoded or do not follow docs/protocol.md."""

    code = p.ERR_PARSE


class HeaderInvalid(ProtocolError):
    """An ingest header that does not have its record's fields and types (aivault/ingest.py): found where it
    is decoded. ``seq`` is the batch's sequence number when the header has a readable one, so that the NACK
    can name it and the scanner sets aside that batch's files only."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


class ProtocolVersionError(ProtocolError):
    """The peer speaks another protocol version (its header's ``v``)."""

    code = p.ERR_PROTOCOL_VERSION


class AuthenticationError(AivaultError):
    """A message whose signature does not verify under this data directory's key."""

    code = p.ERR_AUTH


class InvalidParams(AivaultError):
    """A request payload of the wrong shape (wrong type for query, filters, scope, ...)."""

    code = p.ERR_INVALID_PARAMS


class MethodNotFound(AivaultError):
    code = p.ERR_METHOD_NOT_FOUND


def old_peer_answer(method: str, exc: BaseException) -> p.Unavailable | p.Status:
    """The old-peer rule (docs/contract.md §7), for whoever hears a peer's answer: a method-not-found from
    a peer that predates ``method`` stands for the answer its table row names (``unavailable/no-service``,
    the status sentinel); any other failure, or a method with no such answer, is raised as it came."""
    row = p.METHODS.get(method)
    answer = row.old_peer_answer() if row is not None and isinstance(exc, MethodNotFound) else None
    if answer is None:
        raise exc
    return answer


class HostUnavailable(AivaultError):
    """The addressed execution host cannot be reached; never answered from another host."""

    code = p.ERR_HOST_UNAVAILABLE


class IndexLocked(AivaultError):
    """The database file is held read-write by another process."""

    code = p.ERR_INDEX_LOCKED


class ReconcileFailed(AivaultError):
    code = p.ERR_RECONCILE


class IndexDamaged(AivaultError):
    """The database file cannot be read (truncated, overwritten, checksum mismatch)."""

    code = p.ERR_INDEX_DAMAGED


class IndexWriteFailed(AivaultError):
    """A commit failed for a reason that is not the data's (disk full, I/O error); it rolled back."""

    code = p.ERR_WRITE_FAILED


class IndexerClosed(AivaultError):
    """The indexer stopped before the requested work finished."""

    code = p.ERR_INDEXER_CLOSED


class DataDirUnusable(AivaultError):
    """The data directory (or a file in it) cannot be used; the message names the path."""

    code = p.ERR_DATA_DIR


class InvalidRequest(AivaultError):
    """Frames that decode, but not into a request this protocol accepts (e.g. an over-long id)."""

    code = p.ERR_INVALID_REQUEST


class Busy(AivaultError):
    """The daemon has more requests waiting than it queues; an idempotent request is retried."""

    code = p.ERR_BUSY


class ConfigInvalid(AivaultError):
    """config.json cannot be read or holds a value of the wrong shape; the message names it."""

    code = p.ERR_CONFIG


class PolicyInvalid(AivaultError):
    """policy.json cannot be read or holds invalid values; the message says how to rewrite it."""

    code = p.ERR_CONFIG


class AlreadyRunning(AivaultError):
    """Another process is this data directory's writer (a daemon or an `aivault index`)."""

    code = p.ERR_INDEX_LOCKED


class IndexingDisabled(AivaultError):
    """Indexing was asked for while the user's consent is off."""

    code = p.ERR_DISABLED


class NeedsDaemon(AivaultError):
    """A method only a running daemon answers, asked without one; the message says what to run."""

    code = p.ERR_NEEDS_DAEMON


class Refused(AivaultError):
    """A batch that does not continue the committed state (answered with NACK; the scanner re-syncs)."""

    code = p.ERR_INVALID_REQUEST


class DaemonUnreachable(AivaultError):
    """No reply from the daemon's socket within the timeout."""

    code = p.ERR_HOST_UNAVAILABLE


class DaemonNotAnswering(DaemonUnreachable):
    """A live daemon holds the data directory (and the index) but does not answer on its socket."""


class DaemonFailed(AivaultError):
    """A thread the daemon cannot serve without died; the daemon shut down instead of going deaf."""


class EmbedError(AivaultError):
    """Base class of the embedding layer's failures."""

    code = p.ERR_INTERNAL


class UnknownModel(EmbedError, InvalidParams):
    """A model name that is not on the allow-list; raised before anything is loaded or run.

    An ``EmbedError`` (callers that fall back to lexical search catch that) and, on the wire,
    invalid params: the request or config named something that cannot be chosen.
    """

    code = p.ERR_INVALID_PARAMS


class ModelNotInstalled(EmbedError):
    """The distribution that ships a model's weights is missing or has the wrong version."""


class BackendMissing(EmbedError):
    """llama-cpp-python (or gguf/safetensors for the conversion) is not importable."""


class ModelFileInvalid(EmbedError):
    """A converted model file that failed validation and could not be rebuilt."""


class RemoteEmbedError(EmbedError):
    """The remote embedding endpoint failed, refused, or answered something unusable."""


class RemoteNotConfigured(RemoteEmbedError):
    """Remote embedding was turned on but its environment variables or model are missing."""


class ParserStateError(AivaultError):
    """A saved parser state this version cannot continue from; the file is parsed again from its start."""


class IndexMissing(AivaultError):
    """No database file yet (a read-only open): the contract's answers are given instead."""

    code = p.ERR_NOT_READY


class SessionNotFound(AivaultError):
    """aiVault.readSession named a session this host's index does not hold (or no longer does)."""

    code = p.ERR_SESSION_NOT_FOUND


class NotPermitted(AivaultError):
    """A request the client's authenticated kind may not make: relay and paired clients cannot clear the
    index, index, or list hosts; consent, retention and relay policy are changed on their machine only."""

    code = p.ERR_NOT_PERMITTED


class MalformedCursor(AivaultError):
    """A cursor that is not one we minted for this query (answered with ``malformed-cursor``)."""

    code = p.ERR_INVALID_PARAMS


class UnitChanged(AivaultError):
    """A transcript unit changed while it was being read: it is read again on the next pass."""


class UnitUnreadable(AivaultError):
    """A transcript unit that cannot be read (permissions, a broken document, a locked database)."""


class InvalidRoot(ConfigInvalid):
    """A transcript root spec that is not AGENT=PATH with a known agent."""


# The scanner's control flow between its socket (aivault.scanner.link) and its main loop.
class IndexerGone(AivaultError):
    """The indexer stopped answering, or our parent process died: exit quietly."""


class StopRequested(AivaultError):
    """The indexer (or SIGTERM) asked the scanner to stop."""


class Resync(AivaultError):
    """The indexer refused a batch; the scanner must reload file state and start over.

    ``poison`` lists the files of a batch the indexer could not accept as sent (not a state
    mismatch, which re-reading fixes): sending them again unchanged would be refused again, for
    ever, so the scanner sets them aside until they change.
    """

    def __init__(self, reason: str, retry_after_s: float = 0.0, poison: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.poison = poison or []


_BY_CODE: dict[int, type[AivaultError]] = {
    cls.code: cls
    for cls in (ProtocolError, AuthenticationError, InvalidParams, MethodNotFound, HostUnavailable,
                IndexLocked, ReconcileFailed, Busy, InvalidRequest, IndexDamaged, IndexWriteFailed, IndexerClosed,
                DataDirUnusable, ConfigInvalid, IndexingDisabled, NeedsDaemon, ProtocolVersionError, SessionNotFound,
                NotPermitted)
}


def clip(text: str, limit: int = p.RPC_ECHO_MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: a peer's strings repeated in
    error messages and log lines stay small (docs/protocol.md §1.1, echoes)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def error_value(exc: AivaultError) -> dict[str, object]:
    """The wire form of an error reply body."""
    return {"code": exc.code, "name": p.ERROR_CODES.get(exc.code, "error"), "message": str(exc)}


def from_error_value(value: object) -> AivaultError:
    """The typed exception for an error reply body received from a peer."""
    if not isinstance(value, dict):
        return ProtocolError(f"malformed error reply: {value!r:.200}")
    code = value.get("code")
    message = str(value.get("message", "unknown error"))
    cls = _BY_CODE.get(code, AivaultError) if isinstance(code, int) else AivaultError
    err = cls(message)
    if cls is AivaultError and isinstance(code, int):
        err.code = code
    return err
