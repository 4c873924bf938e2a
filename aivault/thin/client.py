"""The calling side: ``Connection``, the one client, over the raw RPC client of a daemon.

``RpcClient.call`` returns a contract value or raises the typed error the daemon sent.
``Connection`` asks one execution host by whichever transport reaches it -- the daemon, this
process's own index (direct mode), or this process's own connection to a remote host -- and adds
the compatibility rule of docs/contract.md §7 once for all of them: an older peer that does not
know the method (-32601) means what the method's row of ``protocol.METHODS`` says
(``unavailable/no-service`` for search and read, the status sentinel for status); transport
failures, authentication errors and invalid payloads stay errors. It also retries page 1 once or
twice when the index moved while the page was assembled.

``connect_daemon`` is how a CLI picks its mode: no daemon (open the index directly), a daemon
answering, or a daemon alive but deaf -- which holds the index, so direct mode cannot work, and
the user is told which process to stop.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import TYPE_CHECKING, Any, Final

from aivault.codec import RpcRequest, decode_reply, encode_request
from aivault.errors import (
    AivaultError,
    Busy,
    DaemonNotAnswering,
    DaemonUnreachable,
    MethodNotFound,
    ProtocolError,
    from_error_value,
    old_peer_answer,
)
from aivault.home import Home
from aivault.protocol import (
    DEAF_PING_TIMEOUT_S,
    IDEMPOTENT_METHODS,
    METHOD_HOSTS,
    METHOD_PING,
    METHOD_SEARCH,
    METHOD_STATUS,
    PING_TIMEOUT_S,
    RPC_BUSY_RETRY_MAX_S,
    RPC_BUSY_RETRY_S,
    RPC_PEER_BACKLOG_MAX_BYTES,
    RPC_TIMEOUT_S,
)
from aivault.thin.zmtp import Dealer, ZmtpError

if TYPE_CHECKING:  # the thin client imports none of these: direct mode and remote hosts load them when used
    from collections.abc import Callable, Mapping

    from aivault.broker.remote.connections import HostConnections
    from aivault.protocol import ReadResult, SearchResult, Status, Unavailable
    from aivault.vault.readonly import DirectService, MissingIndexService


class RpcClient:
    """The local daemon's RPC socket (``ipc://``), spoken to by ``aivault/thin/zmtp.py``'s DEALER: a CLI
    call that talks to the daemon never imports pyzmq (~60 ms of a ~90 ms call)."""

    def __init__(self, endpoint: str, key: bytes, *, timeout_s: float = RPC_TIMEOUT_S) -> None:
        if not endpoint.startswith("ipc://"):
            raise ValueError(f"RpcClient speaks to a local daemon's ipc:// socket, not {endpoint!r}")
        self.endpoint = endpoint
        self.key = key
        self.timeout_s = timeout_s
        self.sock: Dealer | None = None

    @classmethod
    def for_home(cls, home: Home, *, timeout_s: float = RPC_TIMEOUT_S) -> RpcClient:
        return cls(home.rpc_endpoint, home.key(), timeout_s=timeout_s)

    def _socket(self) -> Dealer:
        if self.sock is None:
            self.sock = Dealer(self.endpoint.removeprefix("ipc://"), max_frame_bytes=RPC_PEER_BACKLOG_MAX_BYTES)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def call(self, method: str, params: Any = None, *, host: str | None = None, timeout_s: float | None = None) -> Any:
        """The method's result, or the typed error the daemon answered. An idempotent request
        answered `busy` is sent again after a growing pause, within the same timeout."""
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait_s
        pause = RPC_BUSY_RETRY_S
        while True:
            try:
                return self._call_once(method, params, host, deadline, wait_s)
            except Busy:
                if method not in IDEMPOTENT_METHODS or time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, RPC_BUSY_RETRY_MAX_S)

    def _call_once(self, method: str, params: Any, host: str | None, deadline: float, wait_s: float) -> Any:
        rid = os.urandom(16).hex()  # as unique as uuid4().hex, without importing uuid (and platform)
        frames = encode_request(self.key, RpcRequest(rid, method, params, host))
        sock = self._socket()
        try:
            sock.send_multipart(frames, deadline)
            while True:
                rep = decode_reply(self.key, sock.recv_multipart(deadline))
                if rep.id == rid:
                    break  # else a late reply to an earlier, timed-out call
        except TimeoutError:
            # The connection may hold a late reply now; a fresh one keeps later calls clean.
            self.close()
            raise DaemonUnreachable(
                f"no answer from the aivault daemon at {self.endpoint} within {wait_s:.1f} s. "
                "Is `aivault serve` running? Without it, commands open the index directly.") from None
        except ZmtpError as exc:
            self.close()
            raise ProtocolError(f"the socket {self.endpoint} does not answer as an aivault daemon: {exc}") from None
        except OSError as exc:  # refused until the deadline, or closed under the call
            self.close()
            raise DaemonUnreachable(
                f"the aivault daemon at {self.endpoint} is not reachable ({exc.strerror or exc}). "
                "Is `aivault serve` running? Without it, commands open the index directly.") from None
        if rep.ok:
            return rep.value
        raise from_error_value(rep.value)

    def ping(self, timeout_s: float = PING_TIMEOUT_S) -> dict[str, Any] | None:
        """The daemon's readiness, or None when nothing answers quickly."""
        try:
            value = self.call(METHOD_PING, {}, timeout_s=timeout_s)
        except (AivaultError, ProtocolError):
            return None
        return value if isinstance(value, dict) else None

    def answers(self, timeout_s: float) -> bool:
        """Whether anything answers on the socket within ``timeout_s`` -- an error reply counts
        (e.g. a key mismatch): the command's own call then reports it."""
        try:
            self.call(METHOD_PING, {}, timeout_s=timeout_s)
        except DaemonUnreachable:
            return False
        except AivaultError:
            return True
        return True


def daemon_pid(home: Home) -> int | None:
    """The pid of the live daemon holding the data directory, or None when none does.

    A daemon holds an exclusive flock on ``daemon.pid`` for its whole life (the kernel drops it
    when the process dies, however it dies), so a lock we cannot share means a live daemon; 0
    when it holds the lock but its pid is not written yet.
    """
    try:
        fd = os.open(home.pid_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def connect_daemon(home: Home) -> RpcClient | None:
    """A client of the daemon serving ``home``; None when no daemon runs (open the index
    directly). Raises DaemonNotAnswering when a live daemon holds the data directory but its
    socket does not answer: it holds the index too, so direct mode would fail as well."""
    if not (home.path / "daemon.sock").exists():
        return None
    client = RpcClient.for_home(home)
    if client.answers(PING_TIMEOUT_S):
        return client
    pid = daemon_pid(home)
    if pid is None:  # a socket file left by a daemon that was killed
        client.close()
        return None
    # A loaded daemon may answer the quick probe late; a deaf one never answers.
    if client.answers(DEAF_PING_TIMEOUT_S):
        return client
    client.close()
    who = f"pid {pid}" if pid else "its pid is not written yet"
    stop = f"`kill -TERM {pid}` (and `kill -KILL {pid}` if it is still there after 30 s)" if pid else \
        f"the process holding {home.pid_path} (`fuser {home.pid_path}`)"
    raise DaemonNotAnswering(
        f"the aivault daemon ({who}) holds the index in {home.path} but does not answer on "
        f"{home.path / 'daemon.sock'} (no reply within {PING_TIMEOUT_S + DEAF_PING_TIMEOUT_S:.1f} s): it is deaf or "
        f"stuck, and commands cannot open the index while it runs. Stop it with {stop}, then run the "
        "command again (its log may say what happened).")


class _Probe:
    """The default of ``Connection(rpc=...)``: probe for the daemon serving the data directory."""


_PROBE: Final = _Probe()
# A first page answered stale-cursor is asked again at most this many times (docs/contract.md §3).
_FIRST_PAGE_RETRIES = 2


class Connection:
    """The one client: a method asked of one execution host, by the transport that reaches it.

    The auto rule (docs/contract.md §9) picks the transport once, when the connection is made:

    * **daemon** -- a daemon that answers its readiness probe is asked over its socket, for every host (it
      routes to remote hosts itself);
    * **direct** -- with none, a request for the local host is answered in this process through the
      endpoint table (broker/endpoints.py), from the index opened read-only here on first use: the query
      layer (and so DuckDB) is imported only then;
    * **remote** -- with none, a request for a remote host goes out from this process
      (``HostConnections``, broker/remote/connections.py), made on first use.

    Whatever the transport, ``call`` applies the compatibility rule of docs/contract.md §7 here and only
    here on the calling side: an older peer's method-not-found is what its row of ``protocol.METHODS``
    says it stands for (``unavailable/no-service``, the status sentinel), every other error stays one.
    (``HostConnections`` applies the same row to what a host answers: there the daemon is the caller.)
    A search or status answer of the wrong shape is a ``ProtocolError``, and a first page answered
    ``stale-cursor`` -- the index moved while it was assembled -- is asked again (docs/contract.md §3).
    """

    def __init__(self, home: Home, *, rpc: RpcClient | _Probe | None = _PROBE,
                 timeout_s: float | None = None) -> None:
        """``rpc``: a daemon's client the caller already holds (None: direct mode); by default the
        daemon serving ``home`` is probed. ``timeout_s``: how long a call waits for the daemon."""
        self.home = home
        # None: no daemon, answer here; a live daemon that does not answer raises DaemonNotAnswering,
        # naming the pid to stop.
        self.rpc: RpcClient | None = connect_daemon(home) if isinstance(rpc, _Probe) else rpc
        if self.rpc is not None and timeout_s is not None:
            self.rpc.timeout_s = timeout_s
        self.mode = "daemon" if self.rpc else "direct"
        self._index: _DirectIndex | None = None
        self._hosts: HostConnections | None = None
        self._index_was_missing = False  # kept once the index is closed: a caller reports it afterwards

    @property
    def index_missing(self) -> bool:
        """Direct mode found no index file (the answers were the contract's, not an index's)."""
        return self._index_was_missing or (self._index is not None and self._index.missing)

    # --- asking -------------------------------------------------------------------------------
    def call(self, method: str, params: Any, host: str | None = None, *, timeout_s: float | None = None) -> Any:
        """``method`` asked of ``host`` (None or ``local``: this machine): its contract value, or the typed
        error it was refused with."""
        if method != METHOD_SEARCH:
            value = self._ask(method, params, host, timeout_s)
            if method == METHOD_STATUS and not isinstance(value, dict):
                raise ProtocolError(f"searchStatus answered something that is not a status: {value!r:.200}")
            return value
        first_page = not (isinstance(params, dict) and params.get("cursor"))
        for attempt in range(_FIRST_PAGE_RETRIES + 1):
            value = self._ask(method, params, host, timeout_s)
            if not isinstance(value, dict) or "kind" not in value:
                raise ProtocolError(f"searchSessions answered something that is not a result: {value!r:.200}")
            # Page 1 has no cursor to drop: asking again is what docs/contract.md §3 tells the client to do.
            if value["kind"] != "stale-cursor" or not first_page or attempt == _FIRST_PAGE_RETRIES:
                break
        return value

    def _ask(self, method: str, params: Any, host: str | None, timeout_s: float | None) -> Any:
        try:
            return self._send(method, params, host, timeout_s)
        except MethodNotFound as exc:
            return old_peer_answer(method, exc)

    def _send(self, method: str, params: Any, host: str | None, timeout_s: float | None) -> Any:
        local = host is None or host == "local"
        if self.rpc is not None:
            return self.rpc.call(method, params, host=None if local else host, timeout_s=timeout_s)
        if local:
            return self._direct().call(method, params)
        from aivault.broker.remote.hosts import parse_host

        return self._remote().call(parse_host(host), method, params)

    def search(self, request: Mapping[str, Any], host: str | None = None) -> dict[str, Any]:
        value: dict[str, Any] = self.call(METHOD_SEARCH, request, host)
        return value

    def status(self, host: str | None = None) -> dict[str, Any]:
        value: dict[str, Any] = self.call(METHOD_STATUS, {}, host)
        return value

    def hosts(self, check: bool = False) -> dict[str, Any]:
        """The configured remote hosts and their connections' state (``aiVault.listHosts``)."""
        value: dict[str, Any] = self.call(METHOD_HOSTS, {"check": check})
        return value

    def direct_counts(self) -> dict[str, Any] | None:
        """Session count and skips straight from the read-only index (no daemon to ask)."""
        return self._direct().counts()

    # --- the transports made on first use -----------------------------------------------------
    def _direct(self) -> _DirectIndex:
        if self._index is None:
            self._index = _DirectIndex(self.home, self._remote)
        return self._index

    def _remote(self) -> HostConnections:
        if self._hosts is None:
            from aivault.broker.remote.connections import HostConnections

            self._hosts = HostConnections(self.home)
        return self._hosts

    def close(self) -> None:
        """Close the daemon socket, the directly opened index and its handle, and remote connections."""
        if self.rpc is not None:
            self.rpc.close()
        index, self._index = self._index, None
        if index is not None:
            self._index_was_missing |= index.missing
            index.close()
        hosts, self._hosts = self._hosts, None
        if hosts is not None:
            hosts.close()


class _DirectIndex:
    """Direct mode's transport: this process answers through the endpoint table as a daemon would, with the
    index opened read-only here on first use (a ping, a refusal or the host list never opens it), no
    daemon's controls (so ``reconcile``, ``indexStats`` and ``clearSearchIndex`` are ``needs-daemon``), and
    this process's own host connections for ``listHosts``."""

    def __init__(self, home: Home, hosts: Callable[[], HostConnections]) -> None:
        self.home = home
        self.hosts = hosts
        self.service: DirectService | MissingIndexService | None = None
        self.missing = False

    def call(self, method: str, params: Any) -> Any:
        from concurrent.futures import Future

        from aivault.broker.endpoints import Context, dispatch
        from aivault.broker.exposure import LOCAL_CALLER

        ctx = Context(LOCAL_CALLER, self, self._ping, roots=self, hosts=self.hosts)
        value = dispatch(ctx, RpcRequest("direct", method, params, None))
        return value.result() if isinstance(value, Future) else value

    def _ping(self) -> dict[str, Any]:
        return {"pong": True, "mode": "direct", "home": str(self.home.path)}

    def opened(self) -> DirectService | MissingIndexService:
        if self.service is None:
            from aivault.errors import IndexMissing
            from aivault.indexer.opening import open_reader
            from aivault.vault.readonly import DirectService, MissingIndexService

            try:
                self.service = DirectService(self.home, open_reader(self.home))
            except IndexMissing:
                # Contract answers (unavailable / zero status), so `rpc` and `--json` stay exact.
                self.missing = True
                self.service = MissingIndexService(self.home)
        return self.service

    # The endpoint table's Answers and RootReporter.
    def search(self, params: Any) -> SearchResult:
        from aivault.vault.endpoints import ServiceAnswers

        return ServiceAnswers(self.opened()).search(params)

    def status(self) -> Status:
        from aivault.vault.endpoints import ServiceAnswers

        return ServiceAnswers(self.opened()).status()

    def read(self, params: Any) -> ReadResult | Unavailable:
        from aivault.vault.endpoints import ServiceAnswers

        return ServiceAnswers(self.opened()).read(params)

    def shard(self, params: Any) -> dict[str, Any]:
        from aivault.vault.endpoints import ServiceAnswers

        return ServiceAnswers(self.opened()).shard(params)

    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]:
        return self.opened().root_report(roots)

    def counts(self) -> dict[str, Any] | None:
        from aivault.vault.readonly import DirectService

        service = self.opened()
        if not isinstance(service, DirectService):
            return None
        from aivault.query.reports import index_counts

        return index_counts(service.con)

    def close(self) -> None:
        """Close the service and its database handle (``DirectService.close`` leaves the handle open: a
        wait-until-current search may have swapped it, so the one to close is the service's now)."""
        service, self.service = self.service, None
        if service is None:
            return
        from aivault.vault.readonly import DirectService

        if isinstance(service, DirectService):
            for closing in (service.close, service.con.close):
                try:
                    closing()
                except Exception:  # closing is best effort: a handle already closed is fine
                    continue
