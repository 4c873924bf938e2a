"""Routing to remote execution hosts (docs/contract.md §6, §7): ``HostConnections``.

One component for both places a request can leave this machine: the daemon (so that every client of
its socket, the CLI or a desktop app, gets remote hosts) and a client process with no daemon. It holds
one link per configured host (broker/remote/ssh_link.py, broker/remote/runtime_link.py), made on first use, and
turns what a host answers into what the contract promises:

* the reply is parsed where it arrives: a search, status or read result of the wrong shape is a
  ``ProtocolError`` naming the host, never passed on;
* every hit is stamped ``executionHostId`` = the host addressed, whatever the host wrote there, and
  the exposure rules are applied again (the sender applied them already);
* a host too old to know a method (-32601) answers ``unavailable/no-service`` for search and read,
  the status sentinel for status; transport and authentication failures stay errors;
* a cursor leaves this machine bound to its host (signed with this machine's key): sent to any other
  host, or a local cursor sent to a host, it is ``malformed-cursor`` there.

A request to the local host never comes here. Requests are Futures resolved on the link's thread, so
a slow host holds no query worker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from aivault.broker.exposure import Transport, redact_read, redact_search, redact_shard, redact_status
from aivault.broker.remote.hostconfig import HostEntry, RemoteSettings, hosts_stamp, load_hosts, remote_settings
from aivault.broker.remote.hosts import Host
from aivault.broker.remote.link import Link
from aivault.errors import AivaultError, HostUnavailable, NotPermitted, ProtocolError, old_peer_answer
from aivault.home import Home
from aivault.protocol import (
    METHOD_PING,
    METHOD_READ,
    METHOD_SEARCH,
    METHOD_SHARD,
    METHOD_STATUS,
    REMOTE_CLIENT_METHODS,
    RESULT_KINDS,
    STATUS_PHASES,
    UNAVAILABLE_REASONS,
    DegradedRoot,
    Status,
    Unavailable,
    status,
    unavailable,
)

_CURSOR_DOMAIN = b"aivault-host-cursor\0"
_CURSOR_TAG_BYTES = 12
# Sent instead of a cursor that was not minted for the addressed host: the host itself then answers
# malformed-cursor after checking the rest of the request (so invalid params stay invalid-params).
FOREIGN_CURSOR = "!not-this-host"


class HostConnections:
    """The links to every configured remote host, by host id, and the contract rules on their answers."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._links: dict[str, Link] = {}
        self._entries: dict[str, HostEntry] = {}
        self._settings = RemoteSettings()
        self._stamp: object = ("unread",)
        self._key: bytes | None = None
        self._closed = False

    # --- configuration ------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Re-read hosts.json and config.json when either changed; links of changed hosts are replaced."""
        cfg = self.home.config_path
        try:
            st = cfg.stat()
            cfg_stamp: object = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            cfg_stamp = None
        stamp = (hosts_stamp(self.home), cfg_stamp)
        if stamp == self._stamp:
            return
        entries, settings = load_hosts(self.home), remote_settings(self.home)
        stale = []
        with self._lock:
            for hid in list(self._links):
                if entries.get(hid) != self._entries.get(hid) or settings != self._settings:
                    stale.append(self._links.pop(hid))
            self._entries, self._settings, self._stamp = entries, settings, stamp
        for link in stale:
            link.close()

    def entries(self) -> dict[str, HostEntry]:
        self._refresh()
        return dict(self._entries)

    def _link(self, host: Host) -> Link:
        self._refresh()
        with self._lock:
            if self._closed:
                raise HostUnavailable(f"no connection to {host.id}: aivault is shutting down")
            link = self._links.get(host.id)
            if link is not None:
                return link
            entry = self._entries.get(host.id)
            if entry is None:
                how = (f"add it with `aivault hosts add {host.id}`" if host.id.startswith("ssh:") else
                       "pair it with `aivault hosts pair CODE` (the code comes from `aivault pair` on the runtime)")
                raise HostUnavailable(f"no connection to execution host {host.id}: it is not a configured host; {how}. "
                                      "aivault never answers for a remote host from the local index.")
            link = self._make_link(entry)
            self._links[host.id] = link
            return link

    def _make_link(self, entry: HostEntry) -> Link:
        if entry.kind == "ssh":
            from aivault.broker.remote.ssh_link import SshLink

            return SshLink(entry, self._settings)
        from aivault.broker.remote.pairing import keypair
        from aivault.broker.remote.runtime_link import RuntimeLink

        return RuntimeLink(entry, self._settings, keypair(self.home, "client"))

    # --- requests -------------------------------------------------------------------------------
    def request(self, host: Host, method: str, params: Any) -> Future[Any]:
        """``method`` asked of ``host``; the Future holds the contract value or the typed error."""
        if method not in REMOTE_CLIENT_METHODS:
            raise NotPermitted(f"{method} is local control: it is refused for any host but local. Run it on "
                               f"{host.id} itself.")
        link = self._link(host)
        raw = link.submit(method, self._outgoing(host, method, params))
        out: Future[Any] = Future()

        def settle(done: Future[Any]) -> None:
            try:
                out.set_result(self._incoming(host, link.transport, method, done))
            except Exception as exc:  # the typed error of the host, or ours about its reply
                out.set_exception(exc)

        raw.add_done_callback(settle)
        return out

    def call(self, host: Host, method: str, params: Any) -> Any:
        """``request`` waited for (a client process without a daemon). The link answers within its
        request timeout; the margin here only guards against a bug leaving the Future unresolved."""
        fut = self.request(host, method, params)
        try:
            return fut.result(self._settings.request_timeout_s + self._settings.connect_timeout_s + 5)
        except TimeoutError as exc:
            raise HostUnavailable(f"no answer from {host.id}") from exc

    def states(self, check: bool = False) -> Future[dict[str, Any]]:
        """``{hosts: [...]}`` for ``aivault hosts``; with ``check``, after pinging every host."""
        entries = self.entries()
        pings: list[Future[Any]] = []
        if check:
            for hid in entries:
                try:
                    pings.append(self.request(Host(hid), METHOD_PING, {}))
                except AivaultError:
                    continue
        out: Future[dict[str, Any]] = Future()
        left = [len(pings)]
        lock = threading.Lock()

        def finish() -> None:
            rows = []
            for hid, entry in sorted(entries.items()):
                link = self._links.get(hid)
                row: dict[str, Any] = {"id": hid, "kind": entry.kind}
                if entry.address:
                    row["address"] = entry.address
                row.update(link.snapshot() if link is not None else
                           {"connected": False, "state": "closed", "lastError": None, "protocol": None,
                            "version": None, "lastSeenAt": None, "connectedSince": None})
                rows.append(row)
            out.set_result({"hosts": rows})

        def one_done(_: Future[Any]) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                finish()

        if not pings:
            finish()
        for p in pings:
            p.add_done_callback(one_done)
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links, self._links = list(self._links.values()), {}
        for link in links:
            link.close()

    # --- what goes out and what comes back ------------------------------------------------------
    def _cursor_key(self) -> bytes:
        if self._key is None:
            self._key = self.home.key()
        return self._key

    def _tag(self, host: Host, cursor: str) -> str:
        mac = hmac.new(self._cursor_key(), _CURSOR_DOMAIN + host.id.encode() + b"\0" + cursor.encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:_CURSOR_TAG_BYTES]).decode().rstrip("=")

    def wrap_cursor(self, host: Host, cursor: str) -> str:
        return f"@{self._tag(host, cursor)}.{cursor}"

    def unwrap_cursor(self, host: Host, cursor: str) -> str | None:
        """The host's own cursor inside ``cursor``, or None when it was not minted here for ``host``."""
        if not cursor.startswith("@"):
            return None
        tag, sep, inner = cursor[1:].partition(".")
        if not sep or not hmac.compare_digest(tag, self._tag(host, inner)):
            return None
        return inner

    def _outgoing(self, host: Host, method: str, params: Any) -> Any:
        if method == METHOD_SEARCH and isinstance(params, dict) and isinstance(params.get("cursor"), str) \
                and params["cursor"]:
            inner = self.unwrap_cursor(host, params["cursor"])
            return {**params, "cursor": inner if inner is not None else FOREIGN_CURSOR}
        return params

    def _incoming(self, host: Host, transport: Transport, method: str, done: Future[Any]) -> Any:
        exc = done.exception()
        if exc is not None:
            return old_peer_answer(method, exc)
        value = done.result()
        if method == METHOD_SEARCH:
            return self._search_result(host, transport, value)
        if method == METHOD_STATUS:
            return redact_status(_status(host, value), transport)
        if method == METHOD_READ:
            return self._read_result(host, transport, value)
        if method == METHOD_SHARD:  # a step of a merged search: rows' hits as this transport may see them
            if not isinstance(value, dict):
                raise ProtocolError(f"{host.id} answered searchShard with something that is not a map: {value!r:.200}")
            return redact_shard(value, transport)
        if not isinstance(value, dict):
            raise ProtocolError(f"{host.id} answered {method} with something that is not a map: {value!r:.200}")
        return {**value, "host": host.id}

    def _search_result(self, host: Host, transport: Transport, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, dict) or value.get("kind") not in RESULT_KINDS:
            raise ProtocolError(f"{host.id} answered searchSessions with something that is not a result: "
                                f"{value!r:.200}")
        kind = value["kind"]
        if kind == "unavailable":
            return _unavailable(host, value)
        if kind != "results":
            return {**value}
        hits, page = value.get("hits"), value.get("page")
        if not isinstance(hits, list) or not all(isinstance(h, dict) for h in hits) or not isinstance(page, dict):
            raise ProtocolError(f"{host.id} answered searchSessions with hits or a page of the wrong shape")
        # The host addressed, whatever the host wrote: a remote cannot claim its hits are another's.
        stamped = [{**h, "executionHostId": host.id} for h in hits]
        cursor = page.get("cursor")
        page = {**page, "cursor": self.wrap_cursor(host, cursor) if isinstance(cursor, str) and cursor else None}
        return redact_search({**value, "hits": stamped, "page": page}, transport)

    def _read_result(self, host: Host, transport: Transport, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise ProtocolError(f"{host.id} answered readSession with something that is not a map: {value!r:.200}")
        if value.get("kind") == "unavailable":
            return _unavailable(host, value)
        session = value.get("session")
        if not isinstance(session, dict) or not isinstance(value.get("messages"), list):
            raise ProtocolError(f"{host.id} answered readSession without a session and its messages")
        return redact_read({**value, "session": {**session, "executionHostId": host.id}}, transport)


def _unavailable(host: Host, value: dict[str, Any]) -> Unavailable:
    if value.get("reason") not in UNAVAILABLE_REASONS:
        raise ProtocolError(f"{host.id} answered unavailable with an unknown reason {value.get('reason')!r:.80}")
    return unavailable(value["reason"])


def _status(host: Host, value: Any) -> Status:
    """A remote status, checked field by field and cut to the contract's fields."""
    def bad(field: str) -> ProtocolError:
        return ProtocolError(f"{host.id} answered searchStatus with a bad {field!r}: {value!r:.200}")

    if not isinstance(value, dict):
        raise bad("status")
    out: dict[str, Any] = {}
    for field in ("filesIndexed", "filesDue", "filesFailed", "generation"):
        v = value.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(field)
        out[field] = v
    for field in ("lastReconcileAt", "lastSweepCompletedAt"):
        v = value.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad(field)
        out[field] = v
    if not isinstance(value.get("enabled"), bool):
        raise bad("enabled")
    if value.get("phase") not in STATUS_PHASES:
        raise bad("phase")
    roots = value.get("degradedRoots")
    if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("root"), str)
                                              and isinstance(r.get("reason"), str) for r in roots):
        raise bad("degradedRoots")
    return status(enabled=value["enabled"], phase=value["phase"], files_indexed=out["filesIndexed"],
                  files_due=out["filesDue"], files_failed=out["filesFailed"],
                  degraded_roots=[DegradedRoot(root=r["root"], reason=r["reason"]) for r in roots],
                  last_reconcile_at=out["lastReconcileAt"], last_sweep_completed_at=out["lastSweepCompletedAt"],
                  generation=out["generation"])
