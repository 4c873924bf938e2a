"""docs/protocol.md and the code must list the same methods, result kinds, errors and frames."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from aivault import ingest
from aivault import protocol as p
from aivault.codec import RpcRequest
from aivault.errors import AivaultError, MethodNotFound
from aivault.home import Home
from tests.support.common import REPO

DOC = (REPO / "docs" / "protocol.md").read_text()
SRC = REPO


def _section_after(marker: str) -> str:
    start = DOC.index(f"<!-- {marker}:")
    end = DOC.find("\n\n", DOC.index("\n", start) + 1)
    return DOC[start:end if end != -1 else None]


def _bullets(marker: str) -> list[str]:
    return re.findall(r"^- `([^`]+)`", _section_after(marker), re.M)


def test_methods_in_the_document_are_the_methods_in_the_code() -> None:
    """Every documented method exists in protocol.RPC_METHODS and the other way round."""
    assert sorted(_bullets("methods")) == sorted(p.RPC_METHODS)


# A result kind written as a value: a dict literal's ``"kind": "..."`` or a record's ``kind="..."``.
_KIND_WRITTEN = r'"kind": "({kinds})"|\bkind="({kinds})"'


def test_result_kinds_in_the_document_are_the_kinds_the_code_returns() -> None:
    """The documented result kinds equal RESULT_KINDS and the kinds of the result records, each made by its
    constructor in aivault/protocol.py."""
    documented = sorted(_bullets("result-kinds"))
    assert documented == sorted(p.RESULT_KINDS)
    written = re.findall(_KIND_WRITTEN.format(kinds="[a-z-]+"), (SRC / "aivault" / "protocol.py").read_text())
    assert sorted({a or b for a, b in written}) == documented
    records = (p.Results, p.Unavailable, p.StaleCursor, p.MalformedCursor)
    assert sorted(typing.get_args(typing.get_type_hints(r)["kind"])[0] for r in records) == documented


def test_the_contracts_values_are_written_once() -> None:
    """The result kinds and status are made by their constructors in aivault/protocol.py only: no other module of
    the product writes a result kind or a status field as a literal."""
    kinds = "|".join(re.escape(k) for k in p.RESULT_KINDS)
    pattern = re.compile(_KIND_WRITTEN.format(kinds=kinds) + r'|"filesIndexed":|\bfilesIndexed=')
    writers = []
    for folder in ("aivault", "scanner", "indexer", "query", "broker"):
        for path in (SRC / folder).rglob("*.py"):
            if pattern.search(path.read_text()):
                writers.append(str(path.relative_to(SRC)))
    assert writers == ["aivault/protocol.py"]


def test_the_method_sets_are_read_off_the_one_table() -> None:
    """RPC_METHODS, IDEMPOTENT_METHODS and REMOTE_CLIENT_METHODS are views of protocol.METHODS."""
    assert tuple(p.METHODS) == p.RPC_METHODS and all(name == m.name for name, m in p.METHODS.items())
    assert {m.name for m in p.METHODS.values() if m.idempotent} == p.IDEMPOTENT_METHODS
    assert {m.name for m in p.METHODS.values() if m.remote} == p.REMOTE_CLIENT_METHODS
    assert not set(p.PAIRING_METHODS) & set(p.METHODS)
    # An old peer's method-not-found stands for an answer only where a remote host may be asked.
    assert {m.name for m in p.METHODS.values() if m.old_peer} <= p.REMOTE_CLIENT_METHODS
    assert p.METHODS[p.METHOD_SEARCH].old_peer_answer() == {"kind": "unavailable", "reason": "no-service"}
    assert p.METHODS[p.METHOD_STATUS].old_peer_answer() == p.STATUS_SENTINEL
    assert p.METHODS[p.METHOD_PING].old_peer_answer() is None


def test_error_codes_in_the_document_are_the_codes_in_the_code() -> None:
    """The error table lists exactly protocol.ERROR_CODES, with the same names."""
    rows = re.findall(r"^\| (-?\d+) \| `([a-z-]+)` \|", _section_after("errors"), re.M)
    assert {int(c): n for c, n in rows} == p.ERROR_CODES


def test_ingest_kinds_in_the_document_are_the_kinds_in_the_code() -> None:
    """Every ingest message kind is documented and every documented kind exists."""
    documented = sorted(k.encode() for k in _bullets("ingest-kinds"))
    assert documented == sorted({*ingest.SCANNER_KINDS, *ingest.INDEXER_KINDS})


def test_the_daemon_dispatches_every_documented_method_and_no_other(home: Home, roots: dict[str, Path]) -> None:
    """Each documented method reaches a handler; an undocumented one is method-not-found."""
    import pytest

    from tests.support.daemons import InprocDaemon

    with InprocDaemon(home, roots) as d:
        params = {p.METHOD_SEARCH: {"query": "x"}, p.METHOD_RECONCILE: {"full": False}, p.METHOD_ROOTS: {"roots": []}}
        for method in p.RPC_METHODS:
            try:
                d.daemon.handle(RpcRequest("1", method, params.get(method, {})))
            except MethodNotFound:
                raise
            except AivaultError:
                pass  # its handler was reached and refused these params (readSession without a session id)
        with pytest.raises(MethodNotFound):
            d.daemon.handle(RpcRequest("1", "aiVault.clearEverything", {}))


def test_the_document_states_the_protocol_version() -> None:
    """The version line matches PROTOCOL_VERSION."""
    assert f"**Protocol version: {p.PROTOCOL_VERSION}**" in DOC


def _fields(braces: str) -> set[str]:
    """The top-level field names of a ``{a, b: type, c: [[x, y]], d: {k: v}}`` list in the document."""
    depth, top = 0, []
    for ch in braces.strip()[1:-1]:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif depth == 0:
            top.append(ch)
    return {f.split(":")[0].strip() for f in "".join(top).split(",") if f.strip()}


def test_ingest_message_fields_in_the_document_are_the_typed_records() -> None:
    """Each ingest message's documented fields are exactly its typed record's (all its {…} forms together)."""
    section = _section_after("ingest-kinds")
    for line in re.findall(r"^- `([A-Z_]+)` \([^)]*\) (.*)$", section, re.M):
        kind, rest = line
        documented: set[str] = set()
        for braces in re.findall(r"`(\{[^`]*\})`", rest):
            documented |= _fields(braces)
        record = ingest.INGEST_HEADERS[kind.encode()]
        assert documented == set(record.__annotations__), kind


def test_the_batch_file_part_and_rpc_headers_are_documented_field_by_field() -> None:
    """A BATCH file part, the RPC request and reply headers and the error body list the records' fields."""
    part = re.search(r"`BATCH` header, `files`: one entry per \*file part\* — `(\{[^`]*\})`", DOC, re.S)
    assert part is not None and _fields(part.group(1).replace("\n", " ")) == set(ingest.FilePart.__annotations__)
    request = re.search(r"\| 2 \| header \| msgpack map `(\{[^`]*\})`", DOC)
    assert request is not None and _fields(request.group(1)) == set(p.RequestHeader.__annotations__)
    reply = re.search(r"its header is `(\{[^`]*\})`", DOC)
    assert reply is not None and _fields(reply.group(1)) == set(p.ReplyHeader.__annotations__)
    error = re.search(r"an error map `(\{[^`]*\})`", DOC)
    assert error is not None and _fields(error.group(1)) == set(p.ErrorBody.__annotations__)


def test_a_peer_of_another_protocol_version_is_refused_clearly() -> None:
    """An ingest or RPC header whose `v` is not ours is a protocol-version error naming both versions."""
    import pytest

    from aivault.codec import decode_request, encode_request, packb
    from aivault.errors import ProtocolVersionError
    from aivault.ingest import decode_ingest

    with pytest.raises(ProtocolVersionError, match="version 99"):
        decode_ingest([ingest.INGEST_MAGIC, ingest.K_PING, packb({"v": 99})], ingest.INDEXER_KINDS)
    key = b"k" * 32
    frames = encode_request(key, RpcRequest("1", p.METHOD_PING, {}))
    from aivault.codec import _sign

    header = packb({"v": 0, "id": "1", "method": p.METHOD_PING, "host": None})
    with pytest.raises(ProtocolVersionError) as err:
        decode_request(key, [frames[0], _sign(key, header, frames[3]), header, frames[3]])
    assert err.value.code == p.ERR_PROTOCOL_VERSION


def test_pairing_methods_in_the_document_are_the_pairing_methods_in_the_code() -> None:
    """The paired listener's own methods (docs/protocol.md §5.3) are exactly protocol.PAIRING_METHODS."""
    assert sorted(_bullets("pairing-methods")) == sorted(p.PAIRING_METHODS)


def test_host_timeouts_in_the_document_are_the_constants() -> None:
    """The remote-host liveness table (docs/protocol.md §5.2) states the values the code uses."""
    rows = re.findall(r"^\| `([A-Z_]+)`(?: … `([A-Z_]+)`)? \| ([\d.]+) s(?: … ([\d.]+) s)? \|", _section_after(
        "host-timeouts"), re.M)
    found = {}
    for first, second, v1, v2 in rows:
        found[first] = float(v1)
        if second:
            found[second] = float(v2)
    assert found == {name: float(getattr(p, name)) for name in (
        "HOST_CONNECT_TIMEOUT_S", "HOST_REQUEST_TIMEOUT_S", "HOST_HEARTBEAT_INTERVAL_S", "HOST_HEARTBEAT_TIMEOUT_S",
        "HOST_IDLE_TIMEOUT_S", "HOST_BACKOFF_S", "HOST_BACKOFF_MAX_S")}
