"""One request at a time for a long-lived front end (the MCP server, the web page).

A CLI command picks its mode once and exits; a server lives for hours while daemons come and go.
So every request here applies the auto rule afresh (docs/contract.md §9.3): a daemon that answers
its readiness probe is asked, else the index is opened read-only *for that request only* and
closed again. Holding a read-only handle between requests would keep ``aivault serve`` from
opening the database read-write (DuckDB: one writer or many readers, never both), so a web page
left open would stop the user's daemon from starting.

RPC calls carry a short timeout: a front end answers an agent or a browser, and a daemon busy
swapping its database (a clear) is reported as such instead of holding the caller for 30 s.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from aivault.broker.client import Connection, RpcClient, SessionSearchClient, connect_daemon
from aivault.broker.hosts import parse_host, remote_unavailable
from aivault.errors import MethodNotFound
from aivault.home import Home
from aivault.protocol import METHOD_SEARCH, METHOD_STATUS, METHODS

# How long a front end waits for the daemon's answer before saying it did not answer.
FRONT_END_RPC_TIMEOUT_S = 10.0


class Asker:
    """Asks one execution host (``host``; None is local) through the daemon or the index directly."""

    def __init__(self, home: Home, host: str | None = None, *, timeout_s: float = FRONT_END_RPC_TIMEOUT_S) -> None:
        self.home = home
        self.host = parse_host(host).id if host is not None else None
        self.timeout_s = timeout_s
        # Direct mode opens the file in this process: one request at a time is plenty for a front end,
        # and it keeps two read-only opens of one file from racing a daemon that is starting.
        self._direct_lock = threading.Lock()
        self.last_mode = "direct"

    @property
    def is_local(self) -> bool:
        return self.host is None or self.host == "local"

    def daemon_running(self) -> bool:
        rpc = connect_daemon(self.home)
        if rpc is None:
            return False
        rpc.close()
        return True

    def call(self, method: str, params: Any, *, timeout_s: float | None = None) -> Any:
        """The method's answer. Search and status follow the compatibility rule of docs/contract.md §7
        (an older peer's method-not-found is ``unavailable/no-service`` or the status sentinel)."""
        conn = Connection(self.home)
        if conn.rpc is None:
            self.last_mode = "direct"
            if not self.is_local:
                raise remote_unavailable(parse_host(self.host))
            with self._direct_lock:
                try:
                    return conn.call(method, params)
                finally:
                    _close_direct(conn.direct)
        self.last_mode = "daemon"
        rpc = conn.rpc
        rpc.timeout_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            return _over_rpc(rpc, self.host, method, params)
        finally:
            rpc.close()


def _over_rpc(rpc: RpcClient, host: str | None, method: str, params: Any) -> Any:
    client = SessionSearchClient(rpc, host)
    if method == METHOD_SEARCH:
        return client.search(params)
    if method == METHOD_STATUS:
        return client.status()
    try:
        return rpc.call(method, params, host=host)
    except MethodNotFound:
        answer = METHODS[method].old_peer_answer() if method in METHODS else None
        if answer is None:
            raise
        return answer


def _close_direct(svc: Any) -> None:
    """Close a direct service and its database handle (DirectService.close leaves the handle open)."""
    if svc is None:
        return
    with contextlib.suppress(Exception):
        svc.close()
    con = getattr(svc, "con", None)
    if con is not None:
        with contextlib.suppress(Exception):
            con.close()
