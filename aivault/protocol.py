"""The contract's constants, method table and value records, shared by every process. The prose lives
in docs/contract.md and docs/protocol.md; the scanner <-> indexer side is aivault/ingest.py.

The protocol version is independent of the package version; bump it (and the document's
changelog) whenever a frame, method, field or result kind changes.

This module is part of the thin client's lean core (aivault/thin/__init__.py): every CLI call
through a daemon imports it, so it holds what the client side needs and nothing only the indexing
side does.
"""

# No `from __future__ import annotations` here: with it, every TypedDict field below is a string
# that typing compiles when the class is made (~60 compile() calls, ~2 ms of every CLI call).
from enum import IntEnum
from typing import Any, Final, Literal, NamedTuple, NotRequired, TypedDict

PROTOCOL_VERSION: Final = 1

# --- what a message is ---------------------------------------------------------------------
# The normalized roles and kinds of transcript messages (docs/formats.md §0). Their names are the
# wire words (``evidence.role``); their numbers are what chunks store, so SQL and arrays use them.
class Role(IntEnum):
    USER = 0
    ASSISTANT = 1
    TOOL = 2
    SYSTEM = 3

    @property
    def wire(self) -> str:
        return self.name.lower()


class Kind(IntEnum):
    TEXT = 0
    TOOL_CALL = 1
    TOOL_RESULT = 2
    THINKING = 3

    @property
    def wire(self) -> str:
        return self.name.lower()


# The conversation scope (docs/contract.md §2): user and assistant text, nothing else.
CONVERSATION_ROLES: Final = (Role.USER, Role.ASSISTANT)

# The agent names on the wire (``hit.agent``, ``filters.agents``, ``--root AGENT=PATH``), one per
# agent the scanner reads (docs/formats.md §13); scanner/agents.py registers exactly these, in
# this order. Here, not there, so that a client checks a name without importing any parser.
AGENT_NAMES: Final[tuple[str, ...]] = ("claude", "codex", "gemini", "qwen", "opencode", "crush", "goose", "cursor",
                                       "copilot", "cline", "roo", "kilo", "aider", "amp", "antigravity", "pi", "omp",
                                       "prime", "openclaw", "hermes", "kimi", "grok", "droid", "devin", "kiro",
                                       "continue", "openhands", "zed", "traex", "tabnine", "vscode-copilot", "vibe",
                                       "dsh", "junie", "rovodev", "auggie")


# --- client <-> broker RPC -------------------------------------------------------------
RPC_MAGIC: Final = b"AIV1"

METHOD_SEARCH: Final = "aiVault.searchSessions"
METHOD_STATUS: Final = "aiVault.searchStatus"
METHOD_PING: Final = "aiVault.ping"
METHOD_RECONCILE: Final = "aiVault.reconcile"
METHOD_STATS: Final = "aiVault.indexStats"
# What the index holds under given roots (aivault doctor): {roots: [path]} -> {path: {units, sessions, skipped}}.
METHOD_ROOTS: Final = "aiVault.rootReport"
# Local control (docs/contract.md §8): refused for any host but this machine's own index.
METHOD_CLEAR: Final = "aiVault.clearSearchIndex"
# The messages of one indexed session, a bounded window of them (the MCP tool read_session, the web page).
METHOD_READ: Final = "aiVault.readSession"

# The remote execution hosts this machine searches, with their connections' state (local control).
METHOD_HOSTS: Final = "aiVault.listHosts"
# One search over several execution hosts, merged as one index over all of them would rank it
# (docs/contract.md §9.5): asked of the machine the user sits at, which asks each host one step at a time.
METHOD_SEARCH_HOSTS: Final = "aiVault.searchHosts"
# One step of a merged search on one host (query/federated.py): its statistics for a query, a probe, a page
# ranked with the summed statistics. What a coordinator asks a host; a host answers for itself only.
METHOD_SHARD: Final = "aiVault.searchShard"
# The steps of METHOD_SHARD, in the order a merged search may ask them: a lexical search ends with "page", a
# hybrid one with "candidates" (lexical candidates and vector neighbours) and "hits" (the fused page's).
SHARD_STEPS: Final = ("stats", "termStats", "probe", "page", "candidates", "hits")


class Method(NamedTuple):
    """What is fixed about one RPC method, for every process that sends or serves it (docs/protocol.md §1.2).

    The one list of methods: ``RPC_METHODS``, ``IDEMPOTENT_METHODS`` and ``REMOTE_CLIENT_METHODS`` are
    derived from ``METHODS`` below, and broker/endpoints.py pairs each entry with its handler. A
    NamedTuple rather than a frozen dataclass: the thin CLI client imports this module, and nothing it
    loads imports ``dataclasses`` (with ``inspect``) otherwise.
    """

    name: str
    # Asking twice changes nothing: a client may send it again on its own after ``busy``.
    idempotent: bool
    # A relay or paired client may ask it, and it is routed to a remote execution host; every other
    # method is the machine owner's local control (docs/contract.md §6, §8).
    remote: bool
    # None when the index opened in the asking process answers it (direct mode); else the method
    # needs a running daemon, and this is what to do without one (the ``needs-daemon`` message's end).
    without_daemon: str | None
    # What an older peer's method-not-found (-32601) means for it (docs/contract.md §7): "no-service"
    # (``unavailable/no-service``), "sentinel" (the status sentinel), or None (it stays an error).
    old_peer: str | None

    def needs_daemon_message(self) -> str:
        return f"{self.name} needs a running daemon (`aivault serve`); {self.without_daemon}"

    def old_peer_answer(self) -> "Unavailable | Status | None":
        """The answer an older peer's method-not-found stands for; None: the error stands."""
        if self.old_peer == "no-service":
            return unavailable("no-service")
        if self.old_peer == "sentinel":
            return status_sentinel()
        return None


METHODS: Final[dict[str, Method]] = {m.name: m for m in (
    Method(METHOD_SEARCH, idempotent=True, remote=True, without_daemon=None, old_peer="no-service"),
    Method(METHOD_STATUS, idempotent=True, remote=True, without_daemon=None, old_peer="sentinel"),
    Method(METHOD_PING, idempotent=True, remote=True, without_daemon=None, old_peer=None),
    Method(METHOD_RECONCILE, idempotent=False, remote=False,
           without_daemon="without one, `aivault index` runs a scan pass", old_peer=None),
    Method(METHOD_STATS, idempotent=True, remote=False, without_daemon="`aivault status` works without one",
           old_peer=None),
    Method(METHOD_ROOTS, idempotent=True, remote=False, without_daemon=None, old_peer=None),
    Method(METHOD_CLEAR, idempotent=False, remote=False, without_daemon="without one, run `aivault clear`",
           old_peer=None),
    Method(METHOD_READ, idempotent=True, remote=True, without_daemon=None, old_peer="no-service"),
    Method(METHOD_HOSTS, idempotent=False, remote=False, without_daemon=None, old_peer=None),
    # Only the machine the user sits at fans out: a relay or paired runtime refuses it (never two hops).
    Method(METHOD_SEARCH_HOSTS, idempotent=True, remote=False, without_daemon=None, old_peer=None),
    Method(METHOD_SHARD, idempotent=True, remote=True, without_daemon=None, old_peer="no-service"),
)}
RPC_METHODS: Final = tuple(METHODS)
# What a relay or paired client may ask (docs/contract.md §6, §8): searching, reading, status and the probe.
# Everything else -- clearing, indexing, the host list -- is the machine owner's, asked on that machine.
REMOTE_CLIENT_METHODS: Final = frozenset(m.name for m in METHODS.values() if m.remote)
# Served only on a paired listener (docs/protocol.md §5): registering a client key with a one-time
# secret, and a paired client withdrawing its own key. Not endpoints: the listener's gate answers them.
METHOD_PAIR: Final = "aiVault.pair"
METHOD_UNPAIR: Final = "aiVault.unpair"
PAIRING_METHODS: Final = (METHOD_PAIR, METHOD_UNPAIR)
# Requests a client may send again on its own (after `busy`): asking twice changes nothing.
IDEMPOTENT_METHODS: Final = frozenset(m.name for m in METHODS.values() if m.idempotent)

# The RPC frames' headers (docs/protocol.md §1.1) and an error reply's body.
class RequestHeader(TypedDict):
    v: int
    id: str
    method: str
    host: str | None


class ReplyHeader(TypedDict):
    v: int
    id: str
    ok: bool


class ErrorBody(TypedDict):
    code: int
    name: str
    message: str


# Result kinds of aiVault.searchSessions (docs/contract.md §2).
RESULT_KINDS: Final = ("results", "stale-cursor", "malformed-cursor", "unavailable")
UNAVAILABLE_REASONS: Final = ("disabled", "not-ready", "no-service")
# A search page holds 1..SEARCH_MAX_LIMIT sessions (docs/contract.md §2.1, `limit`: a value outside is clamped).
# Here so that the CLI can say so without importing the query layer.
SEARCH_MAX_LIMIT: Final = 100


# --- the contract's values (docs/contract.md §2-§4, docs/protocol.md §3) ----------------------------------
# Typed records of what the endpoints answer. At run time each is a plain dict (a TypedDict), so what is
# encoded is exactly what was before; the fields are written in the order the wire has always had them,
# and the constructors below are the only places the non-index answers are written.
class Evidence(TypedDict):
    snippet: str
    role: str  # Role.wire
    timestamp: int | None


class SessionInfo(TypedDict):
    """A session as a hit and a read window describe it (the order of a value's keys is its constructor's)."""

    agent: str
    sessionId: str
    title: str | None
    cwd: str | None
    branch: str | None
    updatedAt: int | None
    messageCount: int
    resumeCommand: str | None
    source: str  # "present" | "unverifiable"


class Hit(SessionInfo):
    score: float
    evidence: Evidence | None


class Page(TypedDict):
    cursor: str | None
    hasMore: bool


class Truncated(TypedDict):
    candidates: bool
    snippets: int
    query: bool
    freshness: bool


class Results(TypedDict):
    kind: Literal["results"]
    hits: list[Hit]
    page: Page
    generation: int
    truncated: Truncated
    durationMs: float
    debug: NotRequired[dict[str, Any]]  # asked with ``debug: true``


class Unavailable(TypedDict):
    kind: Literal["unavailable"]
    reason: str  # one of UNAVAILABLE_REASONS


class StaleCursor(TypedDict):
    kind: Literal["stale-cursor"]
    generation: int  # the index's generation now
    expectedGeneration: int  # the cursor's


class MalformedCursor(TypedDict):
    kind: Literal["malformed-cursor"]


# What aiVault.searchSessions answers: one of the four result kinds (an error reply is not a result).
SearchResult = Results | Unavailable | StaleCursor | MalformedCursor


class DegradedRoot(TypedDict):
    root: str
    reason: str


class Status(TypedDict):
    enabled: bool
    phase: str  # one of STATUS_PHASES
    filesIndexed: int
    filesDue: int
    filesFailed: int
    degradedRoots: list[DegradedRoot]
    lastReconcileAt: int | None
    lastSweepCompletedAt: int | None
    generation: int


STATUS_PHASES: Final = ("idle", "indexing", "current", "degraded", "closed")


class Message(TypedDict):
    position: int
    role: str  # Role.wire
    kind: str  # Kind.wire
    timestamp: int | None
    text: str
    truncated: bool
    chars: int


class ReadResult(TypedDict):
    """aiVault.readSession's answer: a window of one session's messages (docs/protocol.md §3)."""

    session: SessionInfo
    messages: list[Message]
    anchor: int | None
    total: int
    before: int | None
    after: int | None
    generation: int


def results(hits: list[Hit], *, cursor: str | None, has_more: bool, generation: int, truncated: Truncated,
            duration_ms: float) -> Results:
    """``{kind: "results", ...}``: a page of hits from an index (docs/contract.md §2.2)."""
    return Results(kind="results", hits=hits, page=Page(cursor=cursor, hasMore=has_more), generation=generation,
                   truncated=truncated, durationMs=duration_ms)


def unavailable(reason: str) -> Unavailable:
    """``{kind: "unavailable", reason}``: no search here now; ``reason`` is one of UNAVAILABLE_REASONS."""
    assert reason in UNAVAILABLE_REASONS, reason
    return Unavailable(kind="unavailable", reason=reason)


def stale_cursor(generation: int, expected: int) -> StaleCursor:
    """``{kind: "stale-cursor", generation, expectedGeneration}``: the index moved since the cursor was made."""
    return StaleCursor(kind="stale-cursor", generation=generation, expectedGeneration=expected)


def malformed_cursor() -> MalformedCursor:
    """``{kind: "malformed-cursor"}``: the cursor is not one this index made for this query."""
    return MalformedCursor(kind="malformed-cursor")


def status(*, enabled: bool, phase: str, files_indexed: int = 0, files_due: int = 0, files_failed: int = 0,
           degraded_roots: list[DegradedRoot] | None = None, last_reconcile_at: int | None = None,
           last_sweep_completed_at: int | None = None, generation: int = 0) -> Status:
    """aiVault.searchStatus's answer (docs/contract.md §4): every service's status is built here."""
    assert phase in STATUS_PHASES, phase
    return Status(enabled=enabled, phase=phase, filesIndexed=files_indexed, filesDue=files_due,
                  filesFailed=files_failed, degradedRoots=degraded_roots if degraded_roots is not None else [],
                  lastReconcileAt=last_reconcile_at, lastSweepCompletedAt=last_sweep_completed_at,
                  generation=generation)


def status_sentinel() -> Status:
    """aiVault.searchStatus where no service is registered (docs/contract.md §4): "no service", not "an empty,
    current index". A new value each call, the caller's to change."""
    return status(enabled=False, phase="idle")


# The sentinel as a value to compare with (tests, clients); never changed: status_sentinel() makes copies.
STATUS_SENTINEL: Final[Status] = status_sentinel()


class HostReport(TypedDict):
    """One host's part of a merged search (aiVault.searchHosts)."""

    id: str
    state: str  # ok | unavailable | failed | timeout | skipped
    reason: NotRequired[str]
    generation: NotRequired[int]
    freshnessTruncated: NotRequired[bool]
    # A hybrid search: "used" (its vector neighbours took part), "none" (no vectors ready there) or
    # "other-model" (vectors of another embedding model, which do not compare): the last two contribute lexically.
    vectors: NotRequired[str]


class MergedResults(TypedDict):
    kind: Literal["results"]
    hits: list[dict[str, Any]]  # Hit, with executionHostId and executionHostIds
    page: Page
    hosts: list[HostReport]
    partial: bool  # a host named gave no part of this list
    truncated: Truncated
    route: str | None
    durationMs: float


class MovedHost(TypedDict):
    id: str
    generation: int
    expectedGeneration: int


class MergedStaleCursor(TypedDict):
    kind: Literal["stale-cursor"]
    hosts: list[MovedHost]  # the hosts whose fence moved since the cursor was made


def merged_results(hits: list[dict[str, Any]], *, cursor: str | None, has_more: bool, hosts: list[HostReport],
                   truncated: Truncated, route: str | None, duration_ms: float) -> MergedResults:
    """aiVault.searchHosts's page: ``partial`` when any host named is not ``ok``."""
    return MergedResults(kind="results", hits=hits, page=Page(cursor=cursor, hasMore=has_more), hosts=hosts,
                         partial=any(h["state"] != "ok" for h in hosts), truncated=truncated, route=route,
                         durationMs=duration_ms)


def merged_stale_cursor(moved: list[MovedHost]) -> MergedStaleCursor:
    """aiVault.searchHosts's answer to a cursor made before a host's fence moved, naming those hosts."""
    return MergedStaleCursor(kind="stale-cursor", hosts=moved)


class SearchParams(TypedDict, total=False):
    """aiVault.searchSessions's request (docs/contract.md §2.1)."""

    query: str
    limit: int
    filters: dict[str, Any]
    scope: str
    cursor: str
    freshness: str
    debug: bool


def search_request(query: str, *, limit: int | None = None, agents: list[str] | None = None,
                   scope_paths: list[str] | None = None, since: str | None = None, sort: str | None = None,
                   scope: str | None = None, cursor: str | None = None, fresh: bool = False,
                   debug: bool = False) -> SearchParams:
    """The one builder of a search request, for the CLI, the web page and the MCP server: what is not
    given is left out (the host's defaults apply); ``filters`` is always sent."""
    filters: dict[str, Any] = {}
    if agents:
        filters["agents"] = agents
    if scope_paths:
        filters["scopePaths"] = scope_paths
    if since:
        filters["since"] = since
    if sort:
        filters["sort"] = sort
    req = SearchParams(query=query)
    if limit is not None:
        req["limit"] = limit
    req["filters"] = filters
    if scope:
        req["scope"] = scope
    if cursor:
        req["cursor"] = cursor
    if fresh:
        req["freshness"] = "wait-until-current"
    if debug:
        req["debug"] = True
    return req


# Error codes carried in an error reply (JSON-RPC numbering so old peers map cleanly).
ERR_PARSE: Final = -32700  # the frames could not be decoded
ERR_INVALID_REQUEST: Final = -32600  # decodable, but not a request
ERR_METHOD_NOT_FOUND: Final = -32601
ERR_INVALID_PARAMS: Final = -32602
ERR_INTERNAL: Final = -32603
ERR_AUTH: Final = -32001  # signature missing or wrong
ERR_HOST_UNAVAILABLE: Final = -32002  # the addressed execution host cannot be reached
ERR_INDEX_LOCKED: Final = -32003  # the database is held by another process
ERR_RECONCILE: Final = -32004  # a reconcile failed before the freshness deadline
ERR_BUSY: Final = -32005  # the daemon has more requests waiting than it queues: retry after a pause
ERR_INDEX_DAMAGED: Final = -32010  # the database file cannot be read: rebuild it
ERR_WRITE_FAILED: Final = -32011  # the index could not be written (disk full, I/O error); nothing was lost
ERR_INDEXER_CLOSED: Final = -32012  # the indexer stopped (disabled, cleared, shutting down) before the work ended
ERR_DATA_DIR: Final = -32013  # the data directory cannot be used (permissions, read-only, not ours)
ERR_CONFIG: Final = -32014  # config.json cannot be read or holds a wrong value
ERR_DISABLED: Final = -32015  # indexing asked for while consent is off
ERR_NEEDS_DAEMON: Final = -32016  # a method only a running daemon answers, asked without one
ERR_PROTOCOL_VERSION: Final = -32017  # the peer speaks another protocol version
ERR_NOT_READY: Final = -32018  # the index does not exist yet (never indexed, or cleared while disabled)
ERR_SESSION_NOT_FOUND: Final = -32019  # aiVault.readSession: no indexed session has that id
ERR_NOT_PERMITTED: Final = -32020  # the client's authenticated kind may not ask this (relay, paired: local control)

ERROR_CODES: Final = {
    ERR_PARSE: "parse-error",
    ERR_INVALID_REQUEST: "invalid-request",
    ERR_METHOD_NOT_FOUND: "method-not-found",
    ERR_INVALID_PARAMS: "invalid-params",
    ERR_INTERNAL: "internal-error",
    ERR_AUTH: "authentication-failed",
    ERR_HOST_UNAVAILABLE: "host-unavailable",
    ERR_INDEX_LOCKED: "index-locked",
    ERR_RECONCILE: "reconcile-failed",
    ERR_BUSY: "busy",
    ERR_INDEX_DAMAGED: "index-damaged",
    ERR_WRITE_FAILED: "index-write-failed",
    ERR_INDEXER_CLOSED: "indexer-closed",
    ERR_DATA_DIR: "data-dir-unusable",
    ERR_CONFIG: "config-invalid",
    ERR_DISABLED: "indexing-disabled",
    ERR_NEEDS_DAEMON: "needs-daemon",
    ERR_PROTOCOL_VERSION: "protocol-version",
    ERR_NOT_READY: "index-not-ready",
    ERR_SESSION_NOT_FOUND: "session-not-found",
    ERR_NOT_PERMITTED: "not-permitted",
}

# --- client timeouts -------------------------------------------------------------------------
# How long a client waits for an RPC reply before it reports the daemon as unreachable.
RPC_TIMEOUT_S: Final = 30.0
# The readiness probe a CLI runs before choosing daemon mode over direct mode.
PING_TIMEOUT_S: Final = 0.5
# docs/contract.md §5: wait-until-current waits at most this long for the reconcile.
FRESHNESS_DEADLINE_S: Final = 5.0

# --- broker limits (docs/protocol.md §1.1, §1.7) ------------------------------------------------
# The largest frame the broker's socket accepts (ZMQ_MAXMSGSIZE): a bigger one is refused by
# ZeroMQ while its length prefix is read, before any of it is buffered, and the connection dropped.
RPC_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
# Request ids are echoed into every reply and log line; a uuid is 32 characters.
RPC_MAX_ID_CHARS: Final = 128
# How much of a peer's string (an unknown method's name) an error message or a log line repeats.
RPC_ECHO_MAX_CHARS: Final = 64
# Requests waiting for a query worker, over all clients; one more is answered `busy` at once.
RPC_MAX_QUEUED_REQUESTS: Final = 64
# Requests of one client (one socket) waiting or running; one more is answered `busy`, so a
# client bursting without reading cannot take every slot from the others.
RPC_PEER_MAX_INFLIGHT: Final = 16
# Requests ZeroMQ buffers per client before its sends block (back-pressure, never a drop).
RPC_RECV_HWM_MESSAGES: Final = 256
# Replies held for a client that does not read them (its socket buffer is full). Past these the
# broker drops that client's further replies and logs it: a client that never reads cannot grow
# the daemon's memory without bound.
RPC_PEER_BACKLOG_MAX_BYTES: Final = 64 * 1024 * 1024
RPC_BACKLOG_MAX_BYTES: Final = 256 * 1024 * 1024
# A client retries an idempotent request answered `busy` after this pause, doubling up to the max.
RPC_BUSY_RETRY_S: Final = 0.05
RPC_BUSY_RETRY_MAX_S: Final = 1.0
# A daemon that holds the pid lock but missed the quick ping gets this long to answer before the
# CLI calls it deaf (a loaded daemon answers late; a deaf one never does).
DEAF_PING_TIMEOUT_S: Final = 3.0
# After a daemon thread died, the process exits within this long even if the orderly shutdown hangs.
DAEMON_FATAL_EXIT_TIMEOUT_S: Final = 20.0

# --- remote execution hosts (docs/protocol.md §5) -------------------------------------------------
# Frames to and from a relay or a paired listener are signed with this fixed key: ssh or CurveZMQ
# authenticates the peer and protects the bytes, and a data directory's own key (which also signs its
# cursors) never leaves its machine.
REMOTE_FRAME_KEY: Final = b"aivault remote transport, authenticated by ssh or CurveZMQ"
# What a relay writes first on its standard output, so that a client can skip what a login shell
# printed before it (a motd, a noisy .bashrc) and tell "not an aivault relay" from a slow one.
STREAM_PREAMBLE: Final = b"AIVSTREAM1\n"
# Bytes a client reads looking for the preamble before it gives up on the remote command.
STREAM_PREAMBLE_SEARCH_BYTES: Final = 64 * 1024
# A stream message is a frame count byte (1..STREAM_MAX_FRAMES) and that many u32-length-prefixed frames.
STREAM_MAX_FRAMES: Final = 8
# A whole stream message: a request's header (1 MiB) and body (RPC_MAX_FRAME_BYTES) plus its small frames.
STREAM_MAX_MESSAGE_BYTES: Final = RPC_MAX_FRAME_BYTES + 2 * 1024 * 1024
# Opening a connection to a host (ssh login and the relay's start, or the CurveZMQ handshake) and its
# first ping must succeed within this long, else the host is unavailable.
HOST_CONNECT_TIMEOUT_S: Final = 10.0
# A request to a remote host (its connection opening included) is answered within this long, or it
# fails host-unavailable. Shorter than RPC_TIMEOUT_S, so a daemon routing to a hung host answers its own
# client with that error before the client gives up on the daemon.
HOST_REQUEST_TIMEOUT_S: Final = 20.0
# An open connection that has received nothing for this long is pinged ...
HOST_HEARTBEAT_INTERVAL_S: Final = 5.0
# ... and one that has received nothing for this long is dead: it is closed and its requests fail.
HOST_HEARTBEAT_TIMEOUT_S: Final = 15.0
# A connection no request has used for this long is closed (heartbeats do not count as use).
HOST_IDLE_TIMEOUT_S: Final = 300.0
# After a failed opening, the next attempt waits this long, doubling per failure up to the max;
# requests meanwhile fail at once with the last error.
HOST_BACKOFF_S: Final = 1.0
HOST_BACKOFF_MAX_S: Final = 30.0
# Requests waiting or running on one host connection; one more is answered `busy`.
HOST_MAX_PENDING: Final = 64
# A relay that has heard nothing from its client for this long (the client pings every
# HOST_HEARTBEAT_INTERVAL_S) assumes it is gone and exits.
RELAY_SILENCE_TIMEOUT_S: Final = 60.0
# Requests a relay queues behind the one it is answering; one more is answered `busy`.
RELAY_MAX_QUEUED: Final = 16
# A pairing code's single-use secret expires after this long unless `aivault pair` says otherwise.
PAIRING_TTL_S: Final = 600.0
