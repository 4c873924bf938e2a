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

import threading
from typing import Any

from aivault.broker.remote.hosts import parse_host, remote_unavailable
from aivault.home import Home
from aivault.thin.client import Connection, connect_daemon

# How long a front end waits for the daemon's answer before saying it did not answer.
FRONT_END_RPC_TIMEOUT_S = 10.0


class Asker:
    """Asks one execution host (``host``; None is local) through the daemon or the index directly: a
    ``Connection`` (the one client) per request, closed after it."""

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
        """The method's answer, by the rules of ``Connection.call`` (an older peer's method-not-found is
        what docs/contract.md §7 says it stands for). A front end reaches remote hosts through a daemon
        only: without one, a remote host is host-unavailable."""
        conn = Connection(self.home, timeout_s=self.timeout_s if timeout_s is None else timeout_s)
        try:
            self.last_mode = conn.mode
            if conn.rpc is not None:
                return conn.call(method, params, self.host)
            if not self.is_local:
                raise remote_unavailable(parse_host(self.host))
            with self._direct_lock:
                try:
                    return conn.call(method, params)
                finally:
                    conn.close()  # inside the lock: the file is closed before the next request opens it
        finally:
            conn.close()
