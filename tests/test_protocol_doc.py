"""docs/protocol.md and the code must list the same methods, result kinds, errors and frames."""

from __future__ import annotations

import re
from pathlib import Path

from aivault import protocol as p
from aivault.codec import RpcRequest
from aivault.errors import MethodNotFound
from aivault.home import Home

DOC = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()
SRC = Path(__file__).resolve().parent.parent


def _section_after(marker: str) -> str:
    start = DOC.index(f"<!-- {marker}:")
    end = DOC.find("\n\n", DOC.index("\n", start) + 1)
    return DOC[start:end if end != -1 else None]


def _bullets(marker: str) -> list[str]:
    return re.findall(r"^- `([^`]+)`", _section_after(marker), re.M)


def test_methods_in_the_document_are_the_methods_in_the_code() -> None:
    """Every documented method exists in protocol.RPC_METHODS and the other way round."""
    assert sorted(_bullets("methods")) == sorted(p.RPC_METHODS)


def test_result_kinds_in_the_document_are_the_kinds_the_code_returns() -> None:
    """The documented result kinds equal RESULT_KINDS and every kind literal in the query code."""
    documented = sorted(_bullets("result-kinds"))
    assert documented == sorted(p.RESULT_KINDS)
    literals: set[str] = set()
    for path in [*(SRC / "query").glob("*.py"), *(SRC / "broker").glob("*.py")]:
        literals |= set(re.findall(r'"kind": "([a-z-]+)"', path.read_text()))
    assert sorted(literals) == documented


def test_error_codes_in_the_document_are_the_codes_in_the_code() -> None:
    """The error table lists exactly protocol.ERROR_CODES, with the same names."""
    rows = re.findall(r"^\| (-?\d+) \| `([a-z-]+)` \|", _section_after("errors"), re.M)
    assert {int(c): n for c, n in rows} == p.ERROR_CODES


def test_ingest_kinds_in_the_document_are_the_kinds_in_the_code() -> None:
    """Every ingest message kind is documented and every documented kind exists."""
    documented = sorted(k.encode() for k in _bullets("ingest-kinds"))
    assert documented == sorted({*p.SCANNER_KINDS, *p.INDEXER_KINDS})


def test_the_daemon_dispatches_every_documented_method_and_no_other(home: Home, roots: dict[str, Path]) -> None:
    """Each documented method reaches a handler; an undocumented one is method-not-found."""
    import pytest

    from aivault.broker.daemon import Daemon
    from tests.conftest import root_args

    d = Daemon(home, extra_roots=root_args(roots), default_roots=False, schedule=False)
    d.start()
    try:
        params = {p.METHOD_SEARCH: {"query": "x"}, p.METHOD_RECONCILE: {"full": False}}
        for method in p.RPC_METHODS:
            d.handle(RpcRequest("1", method, params.get(method, {})))
        with pytest.raises(MethodNotFound):
            d.handle(RpcRequest("1", "aiVault.clearEverything", {}))
    finally:
        d.close()


def test_the_document_states_the_protocol_version() -> None:
    """The version line matches PROTOCOL_VERSION."""
    assert f"**Protocol version: {p.PROTOCOL_VERSION}**" in DOC
