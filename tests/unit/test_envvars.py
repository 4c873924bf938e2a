"""Tuning variables from the environment: a bad value is a clear error naming it, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from aivault import policy
from aivault.envvars import env_int
from aivault.errors import ConfigInvalid
from aivault.home import Home
from tests.support.common import cli_env, lexical_only, run_cli


def test_env_int_reads_a_whole_number_and_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset or empty gives the default; a whole number at or above the minimum is taken as it is."""
    monkeypatch.delenv("AIVAULT_TEST_KNOB", raising=False)
    assert env_int("AIVAULT_TEST_KNOB", 7) == 7
    monkeypatch.setenv("AIVAULT_TEST_KNOB", " ")
    assert env_int("AIVAULT_TEST_KNOB", 7) == 7
    monkeypatch.setenv("AIVAULT_TEST_KNOB", " 3 ")
    assert env_int("AIVAULT_TEST_KNOB", 7) == 3
    monkeypatch.setenv("AIVAULT_TEST_KNOB", "0")
    assert env_int("AIVAULT_TEST_KNOB", 7, minimum=0) == 0
    with pytest.raises(ConfigInvalid, match=r"AIVAULT_TEST_KNOB=0 is below its minimum of 1"):
        env_int("AIVAULT_TEST_KNOB", 7)
    monkeypatch.setenv("AIVAULT_TEST_KNOB", "two")
    with pytest.raises(ConfigInvalid, match=r"AIVAULT_TEST_KNOB='two' is not a whole number"):
        env_int("AIVAULT_TEST_KNOB", 7)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("AIVAULT_DUCKDB_BULK_THREADS", "x", "AIVAULT_DUCKDB_BULK_THREADS='x' is not a whole number"),
    ("AIVAULT_DUCKDB_THREADS", "0", "AIVAULT_DUCKDB_THREADS=0 is below its minimum of 1"),
])
def test_a_bad_tuning_variable_stops_the_cli_with_its_name(tmp_path: Path, name: str, value: str,
                                                           says: str) -> None:
    """`aivault index` with a malformed tuning variable exits with a message naming it, not an internal error."""
    h = Home.resolve(tmp_path / "home").ensure()
    policy.save(h, policy.Policy(True, None))
    lexical_only(h)
    res = run_cli(h.path, "index", "--no-default-roots", env=cli_env(h.path, **{name: value}))
    assert res.returncode != 0
    assert says in res.stderr and "internal error" not in res.stderr, res.stderr
