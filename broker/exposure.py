"""What crosses which transport (docs/contract.md §4, §6): ``redact_status`` and ``redact_for_transport``.

The transport is the *authenticated* kind of the client (never a locality flag the request
carries). Desktop IPC and same-machine runtime RPC see full diagnostics; relay and paired
clients see each degraded root's reason replaced by a fixed sentence (the array keeps its
length, so the count stays true), because a raw reason holds host paths. Hits keep their
metadata and snippets on every authenticated transport, except that a missing Codex home is omitted
from the resume command's environment, and that off this machine every title, snippet and message
text passes the secret detector (aivault/redact.py) whatever this machine's redaction settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

Transport = Literal["desktop-ipc", "same-machine-rpc", "relay", "paired"]
FULL_DIAGNOSTICS: frozenset[str] = frozenset({"desktop-ipc", "same-machine-rpc"})
UNVERIFIED_ROOT = "Source root could not be verified."


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, as the transport authenticated them: the socket or stream a request came in on, never a
    field of the request. ``client`` is a paired client's registered name (None on the same machine, and
    for a connection admitted only to pair); ``key`` the CurveZMQ public key it authenticated with."""

    transport: Transport
    client: str | None = None
    key: bytes | None = None


# The daemon's ipc socket: same machine, same user (the socket is 0600 in a 0700 directory).
LOCAL_CALLER: Final = Caller("desktop-ipc")


def redact_status(status: Mapping[str, Any], transport: Transport) -> dict[str, Any]:
    if transport in FULL_DIAGNOSTICS:
        return dict(status)
    return {**status, "degradedRoots": [{"root": r.get("root"), "reason": UNVERIFIED_ROOT}
                                        for r in status.get("degradedRoots") or []]}


def redact_for_transport(hit: Mapping[str, Any], transport: Transport) -> dict[str, Any]:
    """The hit as a client on ``transport`` may see it (applied by senders and receivers alike). Off this
    machine, the title and snippet pass the secret detector whatever this machine's redaction settings
    (aivault/redact.py): a relay or paired client never sees a secret, even from an index built raw."""
    out = dict(hit)
    if transport not in FULL_DIAGNOSTICS:
        from aivault.redact import for_remote

        if isinstance(out.get("title"), str):
            out["title"] = for_remote(out["title"])
        evidence = out.get("evidence")
        if isinstance(evidence, dict) and isinstance(evidence.get("snippet"), str):
            out["evidence"] = {**evidence, "snippet": for_remote(evidence["snippet"])}
    cmd = out.get("resumeCommand")
    if transport not in FULL_DIAGNOSTICS and isinstance(cmd, str) and "CODEX_HOME=" in cmd:
        # A Codex home that only exists on the remote machine means nothing to the client.
        out["resumeCommand"] = " ".join(part for part in cmd.split(" ") if not part.startswith("CODEX_HOME="))
    return out


def redact_search(result: Mapping[str, Any], transport: Transport) -> dict[str, Any]:
    """A search result with each hit as ``transport`` may see it (other kinds carry no hits)."""
    hits = result.get("hits")
    if transport in FULL_DIAGNOSTICS or not isinstance(hits, list):
        return dict(result)
    return {**result, "hits": [redact_for_transport(h, transport) if isinstance(h, dict) else h for h in hits]}


def redact_shard(answer: Mapping[str, Any], transport: Transport) -> dict[str, Any]:
    """A step of a merged search with each hit as ``transport`` may see it: a page's rows ``{..., hit}`` and a
    hybrid search's hits ``[session, hit]`` (the other steps carry none)."""
    if transport in FULL_DIAGNOSTICS:
        return dict(answer)
    out = dict(answer)
    rows, hits = answer.get("rows"), answer.get("hits")
    if isinstance(rows, list):
        out["rows"] = [{**r, "hit": redact_for_transport(r["hit"], transport)}
                       if isinstance(r, dict) and isinstance(r.get("hit"), dict) else r for r in rows]
    if isinstance(hits, list):
        out["hits"] = [[h[0], redact_for_transport(h[1], transport)]
                       if isinstance(h, list) and len(h) == 2 and isinstance(h[1], dict) else h for h in hits]
    return out


def redact_read(result: Mapping[str, Any], transport: Transport) -> dict[str, Any]:
    """A readSession result with its session record as ``transport`` may see it (the resume command)."""
    session = result.get("session")
    if transport in FULL_DIAGNOSTICS or not isinstance(session, dict):
        return dict(result)
    from aivault.redact import for_remote

    messages = [{**m, "text": for_remote(m["text"])} if isinstance(m, dict) and isinstance(m.get("text"), str)
                else m for m in result.get("messages") or []]
    return {**result, "session": redact_for_transport(session, transport), "messages": messages}
