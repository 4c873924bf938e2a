"""Talking to a daemon: the raw RPC client and the session search client over it.

``RpcClient.call`` returns a contract value or raises the typed error the daemon sent.
``SessionSearchClient`` adds the compatibility rule of docs/contract.md §7: an older peer that does not
know the method (-32601) means ``unavailable/no-service`` for search and the status sentinel
for status; transport failures, authentication errors and invalid payloads stay errors. It
also retries page 1 once or twice when the index moved while the page was assembled.

``connect_daemon`` is how a CLI picks its mode: no daemon (open the index directly), a daemon
answering, or a daemon alive but deaf -- which holds the index, so direct mode cannot work, and
the user is told which process to stop.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Any

from aivault.broker.zmtp import Dealer, ZmtpError
from aivault.codec import RpcRequest, decode_reply, encode_request
from aivault.errors import (
    AivaultError,
    Busy,
    DaemonNotAnswering,
    DaemonUnreachable,
    MethodNotFound,
    ProtocolError,
    from_error_value,
)
from aivault.home import Home
from aivault.protocol import (
    DEAF_PING_TIMEOUT_S,
    IDEMPOTENT_METHODS,
    METHOD_HOSTS,
    METHOD_PING,
    METHOD_SEARCH,
    METHOD_STATUS,
    METHODS,
    PING_TIMEOUT_S,
    RPC_BUSY_RETRY_MAX_S,
    RPC_BUSY_RETRY_S,
    RPC_PEER_BACKLOG_MAX_BYTES,
    RPC_TIMEOUT_S,
)


class RpcClient:
    """The local daemon's RPC socket (``ipc://``), spoken to by ``broker/zmtp.py``'s DEALER: a CLI
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


def _old_peer(method: str, exc: MethodNotFound) -> dict[str, Any]:
    """What an older peer's method-not-found stands for (docs/contract.md §7), or the error again."""
    answer = METHODS[method].old_peer_answer()
    if answer is None:
        raise exc
    return answer


class SessionSearchClient:
    def __init__(self, rpc: RpcClient, host: str | None = None) -> None:
        self.rpc = rpc
        self.host = host

    def search(self, request: dict[str, Any], *, retries: int = 2) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for attempt in range(retries + 1):
            try:
                value = self.rpc.call(METHOD_SEARCH, request, host=self.host)
            except MethodNotFound as exc:
                return _old_peer(METHOD_SEARCH, exc)
            if not isinstance(value, dict) or "kind" not in value:
                raise ProtocolError(f"searchSessions answered something that is not a result: {value!r:.200}")
            # Page 1 has no cursor to drop: asking again is what docs/contract.md §3 tells the client to do.
            if value["kind"] == "stale-cursor" and not request.get("cursor") and attempt < retries:
                continue
            return value
        return value

    def status(self) -> dict[str, Any]:
        try:
            value = self.rpc.call(METHOD_STATUS, {}, host=self.host)
        except MethodNotFound as exc:
            return _old_peer(METHOD_STATUS, exc)
        if not isinstance(value, dict):
            raise ProtocolError(f"searchStatus answered something that is not a status: {value!r:.200}")
        return value


class _DirectAnswers:
    """Direct mode's answers for the endpoint table: the index opened here on first use."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def search(self, params: Any) -> dict[str, Any]:
        from aivault.vault.endpoints import search_sessions

        return search_sessions(self.conn._direct(), params)

    def status(self) -> dict[str, Any]:
        from aivault.vault.endpoints import search_status

        return search_status(self.conn._direct())

    def read(self, params: Any) -> dict[str, Any]:
        from aivault.query.transcript import read_session

        return read_session(self.conn._direct(), params)

    def root_report(self, roots: list[str]) -> dict[str, dict[str, Any]]:
        report: dict[str, dict[str, Any]] = self.conn._direct().root_report(roots)
        return report


class Connection:
    """Either a running daemon (over ZeroMQ) or the index opened read-only in this process.

    The auto rule (docs/contract.md §9): a daemon that answers its readiness probe is used; with none, the
    index is opened read-only here. The query layer (and so DuckDB) is imported only in that case.
    """

    def __init__(self, home: Home) -> None:
        self.home = home
        self.direct: Any = None
        # None: no daemon, open the index directly; a live daemon that does not answer raises
        # DaemonNotAnswering, naming the pid to stop.
        self.rpc: RpcClient | None = connect_daemon(home)
        self.mode = "daemon" if self.rpc else "direct"
        self.index_missing = False
        self.remote: Any = None  # HostConnections, made when a remote host is asked without a daemon

    def _direct(self) -> Any:
        if self.direct is None:
            from aivault.errors import IndexMissing
            from aivault.indexer.opening import open_reader
            from aivault.vault.readonly import DirectService, MissingIndexService

            try:
                self.direct = DirectService(self.home, open_reader(self.home))
            except IndexMissing:
                # Contract answers (unavailable / zero status), so `rpc` and `--json` stay exact.
                self.index_missing = True
                self.direct = MissingIndexService(self.home)
        return self.direct

    def _remote(self) -> Any:
        if self.remote is None:
            from aivault.broker.remote import HostConnections

            self.remote = HostConnections(self.home)
        return self.remote

    def call(self, method: str, params: Any, host: str | None = None) -> Any:
        """``method`` asked of ``host`` (None or ``local``: this machine). Through the daemon when one
        answers (it routes to remote hosts); without one, local methods open the index here and remote
        hosts are reached from this process (broker/remote.py)."""
        if host is not None and host != "local":
            if self.rpc is not None:
                return self.rpc.call(method, params, host=host)
            from aivault.broker.hosts import parse_host

            return self._remote().call(parse_host(host), method, params)
        if self.rpc is not None:
            return self.rpc.call(method, params)
        # Direct mode: the endpoint table, as the daemon answers, with this process's index (opened, and the
        # query layer and DuckDB imported, only by the methods that read it) and no daemon's controls.
        from concurrent.futures import Future

        from aivault.broker.endpoints import Context, dispatch
        from aivault.broker.exposure import LOCAL_CALLER

        ctx = Context(LOCAL_CALLER, _DirectAnswers(self), self._ping, roots=_DirectAnswers(self), hosts=self._remote)
        value = dispatch(ctx, RpcRequest("direct", method, params, None))
        return value.result() if isinstance(value, Future) else value

    def _ping(self) -> dict[str, Any]:
        return {"pong": True, "mode": "direct", "home": str(self.home.path)}

    def direct_counts(self) -> dict[str, Any] | None:
        """Session count and skips straight from the read-only index (no daemon to ask)."""
        svc = self._direct()
        con = getattr(svc, "con", None)
        if con is None:
            return None
        from aivault.query.reports import index_counts

        return index_counts(con)

    def search(self, request: dict[str, Any], host: str | None = None) -> dict[str, Any]:
        if self.rpc is not None:
            return SessionSearchClient(self.rpc, host).search(request)
        value: dict[str, Any] = self.call(METHOD_SEARCH, request, host)
        return value

    def status(self, host: str | None = None) -> dict[str, Any]:
        if self.rpc is not None:
            return SessionSearchClient(self.rpc, host).status()
        value: dict[str, Any] = self.call(METHOD_STATUS, {}, host)
        return value

    def hosts(self, check: bool = False) -> dict[str, Any]:
        """The configured remote hosts and their connections' state (``aiVault.listHosts``)."""
        value: dict[str, Any] = self.call(METHOD_HOSTS, {"check": check})
        return value

    def close(self) -> None:
        """Close the daemon socket, the directly opened index and its handle, and remote connections."""
        if self.rpc is not None:
            self.rpc.close()
        direct, self.direct = self.direct, None
        if direct is not None:
            for closing in (getattr(direct, "close", None), getattr(getattr(direct, "con", None), "close", None)):
                if closing is not None:
                    try:
                        closing()
                    except Exception:  # closing is best effort: a handle already closed is fine
                        continue
        remote, self.remote = self.remote, None
        if remote is not None:
            remote.close()
