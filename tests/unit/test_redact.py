"""The secret detector (aivault/redact.py) on the labelled set and on ordinary transcript texts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from aivault.redact import KINDS, Redactor, marker
from tests.builders.secrets import clean_texts, samples


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def test_recall_on_the_labelled_set_is_at_least_098_and_every_kind_is_named(redactor: Redactor) -> None:
    """Every kind has at least five samples; at least 98 % are replaced whole, each under its own kind, as
    written, JSON-escaped once (a tool call's input) and twice (JSON inside a JSON string)."""
    found = total = 0
    per_kind: dict[str, int] = {}
    for s in samples():
        per_kind[s.kind] = per_kind.get(s.kind, 0) + 1
        for text in (s.text, json.dumps({"command": s.text}), json.dumps(json.dumps({"x": s.text}))):
            total += 1
            out, counts = redactor.redact(text)
            found += counts is not None and s.kind in counts and s.secret not in out and marker(s.kind) in out
    assert set(per_kind) == set(KINDS) and min(per_kind.values()) >= 5, per_kind
    assert found / total >= 0.98, f"recall {found}/{total}"


def test_ordinary_transcript_texts_are_left_alone(redactor: Redactor) -> None:
    """Git hashes, UUIDs, base64 images, lockfile hashes, minified code, code naming tokens and passwords,
    placeholders and references: none is changed (the same object comes back)."""
    for text in clean_texts():
        out, counts = redactor.redact(text)
        assert counts is None and out is text, f"{text[:80]!r} -> {out[:80]!r}"


def test_what_surrounds_a_secret_stays_and_the_marker_names_it(redactor: Redactor) -> None:
    """Only the secret's characters go: the key name, 'Bearer', the URL's user and host stay, so the
    context is still searchable."""
    out, _ = redactor.redact("DATABASE_URL=postgres://app:Zq8vLm2Pw9xT@db.internal:5432/app")
    assert out == "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app"
    out, _ = redactor.redact('curl -H "Authorization: Bearer 4f9Qk2LmZx8Pw1Rt7Yv3Nb6Hc5Jd0Ks"')
    assert out == 'curl -H "Authorization: Bearer [REDACTED:bearer-token]"'
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 60 + "\n" + "b" * 64 + "\n-----END RSA PRIVATE KEY-----"
    out, counts = redactor.redact(f"the key:\n{pem}\nthen restart")
    assert out == "the key:\n[REDACTED:private-key]\nthen restart" and counts == {"private-key": 1}


def test_an_allow_listed_value_is_kept() -> None:
    """A user's own false positive, matched by an allow pattern, is not replaced; others still are."""
    r = Redactor([r"^AKIAIOSFODNN7EXAMPLE$"])
    out, counts = r.redact("AKIAIOSFODNN7EXAMPLE and AKIAZZZZZZZZZZZZZZZ7")
    assert out == "AKIAIOSFODNN7EXAMPLE and [REDACTED:aws-access-key]" and counts == {"aws-access-key": 1}


def test_a_broken_transcripts_lone_surrogates_do_not_stop_it(redactor: Redactor) -> None:
    """Text with a lone surrogate (a transcript cut mid-character) is scanned as well."""
    out, counts = redactor.redact("bad \udc80 byte then ghp_" + "a1B2" * 9)
    assert counts == {"github-token": 1} and out == "bad \udc80 byte then [REDACTED:github-token]"


def test_pathological_inputs_take_time_linear_in_their_size(redactor: Redactor) -> None:
    """Megabytes of base64, of one repeated keyword, of '=' signs and of nested PEM starts: scanning 4 MB
    costs at most about four times scanning 1 MB (RE2 has no backtracking), printed for bench/README."""
    import base64
    import random

    rnd = random.Random(1)
    shapes: dict[str, Callable[[int], str]] = {
        "base64": lambda n: base64.b64encode(rnd.randbytes(n * 3 // 4)).decode(),
        "keyword": lambda n: ("password=" * (n // 9 + 1))[:n],
        "pem starts": lambda n: ("-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32 + 1))[:n],
        "bearer": lambda n: ("Bearer " + "a" * 50 + " ") * (n // 58 + 1),
    }
    for name, make in shapes.items():
        small, big = make(1 << 20), make(4 << 20)
        t0 = time.perf_counter()
        redactor.redact(small)
        t1 = time.perf_counter()
        redactor.redact(big)
        t2 = time.perf_counter()
        print(f"{name}: 1 MB {1000 * (t1 - t0):.0f} ms, 4 MB {1000 * (t2 - t1):.0f} ms")
        assert t2 - t1 < 12 * (t1 - t0) + 0.5, f"{name}: {t1 - t0:.2f} s for 1 MB, {t2 - t1:.2f} s for 4 MB"
