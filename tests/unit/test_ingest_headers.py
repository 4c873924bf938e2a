"""Ingest headers are checked against their records (aivault/protocol.py) where they are decoded: a header
without a field, or with one of the wrong type, is a HeaderInvalid naming it, never a KeyError later."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from aivault.errors import HeaderInvalid, ProtocolError
from aivault.ingest import (
    INDEXER_KINDS,
    INGEST_HEADERS,
    K_BATCH,
    K_HELLO,
    K_NACK,
    K_RECONCILE,
    K_STATE,
    SCANNER_KINDS,
    FileState,
    Title,
    decode_ingest,
    encode_ingest,
)

SESSION = {"agent": "claude", "session_id": "s1", "title": None, "cwd": "/w", "branch": None, "started_at": 1,
           "updated_at": 2, "message_count": 3, "resume_command": None, "parent_session_id": None}
PART = {"path": "/t/a.jsonl", "agent": "claude", "mode": "lines", "reset": True, "renamed_from": None, "dev": 1,
        "ino": 2, "size": 10, "mtime_ns": 3, "start": 0, "end": 10, "head_len": 10, "head_hash": 99,
        "state": b"\x90", "session": SESSION, "malformed": 0, "oversized": 0, "skips": {"too-old": 1}}
BATCH = {"seq": 7, "epoch": 1, "files": [PART], "gone": ["/t/old.jsonl"], "titles": [["claude", "s1", "Fix it"]],
         "chunks": 0, "postings": 0, "messages": 0, "dropped_lines": 0}


def _round_trip(kind: bytes, header: dict[str, Any]) -> dict[str, Any]:
    allowed = SCANNER_KINDS if kind in SCANNER_KINDS else INDEXER_KINDS
    return decode_ingest(encode_ingest(kind, header), allowed).header


def test_headers_as_the_senders_build_them_are_accepted() -> None:
    """A full batch, a hello, a state page of FileState rows and a reconcile decode as they were sent."""
    assert _round_trip(K_BATCH, BATCH)["files"][0]["session"] == SESSION
    hello = {"req": 1, "protocol": 1, "pid": 5, "shard": 0, "shards": 1, "roots": [["claude", "/t"]], "token": "x"}
    assert _round_trip(K_HELLO, hello)["token"] == "x"
    row = FileState("/t/a.jsonl", "claude", 1, 2, 10, 3, 10, 10, 99, True, False, "lines")
    page = _round_trip(K_STATE, {"req": 1, "epoch": 1, "files": [row], "last": True})
    assert FileState(*page["files"][0]) == row
    assert _round_trip(K_RECONCILE, {"req": 2, "full": False, "cutoff_ms": None})["full"] is False


def test_named_records_travel_as_the_arrays_they_always_were() -> None:
    """A FileState or Title is encoded as the plain array the protocol names, byte for byte."""
    row = FileState("/t/a.jsonl", "claude", 1, 2, 10, 3, 10, 10, 99, True, False, "lines")
    assert msgpack.packb(row) == msgpack.packb(list(row))
    assert msgpack.packb(Title("claude", "s1", "x")) == msgpack.packb(["claude", "s1", "x"])


@pytest.mark.parametrize(("change", "named"), [
    (lambda b: b.pop("gone"), "lacks 'gone'"),
    (lambda b: b["files"][0].pop("end"), "header.files[0] lacks 'end'"),
    (lambda b: b["files"][0].update(dev="1"), "header.files[0].dev must be an integer, not str"),
    (lambda b: b["files"][0].update(reset=1), "header.files[0].reset must be bool, not int"),
    (lambda b: b["files"][0].update(size=True), "header.files[0].size must be an integer, not bool"),
    (lambda b: b["files"][0]["session"].pop("session_id"), "header.files[0].session lacks 'session_id'"),
    (lambda b: b["files"][0].update(skips={"too-old": "1"}), "header.files[0].skips['too-old'] must be an integer"),
    (lambda b: b["titles"].append(["claude", "s2"]), "header.titles[1] must be an array of 3"),
    (lambda b: b.update(files={}), "header.files must be an array, not dict"),
])
def test_a_batch_header_with_a_wrong_field_is_refused_by_name_with_its_seq(change: Any, named: str) -> None:
    """Each kind of fault (missing, wrong type, bool for a count, short row, nested) names its place; the
    batch's seq comes with the error so that only that batch's files are set aside."""
    import copy

    bad = copy.deepcopy(BATCH)
    change(bad)
    with pytest.raises(HeaderInvalid) as err:
        _round_trip(K_BATCH, bad)
    assert named in str(err.value) and str(err.value).startswith("BATCH ")
    assert err.value.seq == 7 and isinstance(err.value, ProtocolError)


def test_a_header_without_a_readable_seq_has_none_and_fields_it_does_not_know_pass() -> None:
    """No seq (or a boolean one) gives seq None; a field no record names is a newer peer's, left alone."""
    with pytest.raises(HeaderInvalid) as err:
        _round_trip(K_BATCH, {**BATCH, "seq": True})
    assert err.value.seq is None
    assert _round_trip(K_BATCH, {**BATCH, "newer_field": {"any": "thing"}})["newer_field"] == {"any": "thing"}
    assert _round_trip(K_NACK, {"seq": None, "reason": "x", "poison": True, "later": 1})["seq"] is None


def test_every_record_has_a_checker() -> None:
    """Each kind's record uses only types the checker knows (a new field type fails here, not in a daemon)."""
    from aivault.ingest import _checker

    for record in INGEST_HEADERS.values():
        _checker(record)
