"""config.json's "redact" section: on by default, turned off or given an allow-list, refused when malformed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aivault.config import redact_settings
from aivault.errors import ConfigInvalid
from aivault.home import Home, write_private
from aivault.redact import Policy


def _home(tmp_path: Path, redact: Any = None) -> Home:
    home = Home.resolve(tmp_path / "home").ensure()
    if redact is not None:
        write_private(home.config_path, json.dumps({"redact": redact}).encode())
    return home


def test_redaction_is_on_unless_turned_off(tmp_path: Path) -> None:
    """No file or no section: on with no allow-list; the section's values are read as given."""
    assert redact_settings(_home(tmp_path)) == Policy(True, ())
    assert redact_settings(_home(tmp_path / "b", {"enabled": False})) == Policy(False, ())
    assert redact_settings(_home(tmp_path / "c", {"allow": ["^AKIAIOSFODNN7EXAMPLE$"]})) == \
        Policy(True, ("^AKIAIOSFODNN7EXAMPLE$",))
    assert Policy(False).redactor() is None and Policy().redactor() is not None


@pytest.mark.parametrize(("redact", "says"), [
    ("off", "'redact' must be an object"),
    ({"enabled": "no"}, "redact.enabled must be true or false"),
    ({"allow": "x"}, "redact.allow must be a list"),
    ({"allow": ["(unclosed"]}, r"redact.allow\[0\] is not a regular expression"),
    ({"enable": False}, "'redact' must be an object with 'enabled'"),
])
def test_a_malformed_section_is_refused_naming_the_key(tmp_path: Path, redact: Any, says: str) -> None:
    """A wrong type, an unknown key or a pattern that does not compile is ConfigInvalid naming it."""
    with pytest.raises(ConfigInvalid, match=says):
        redact_settings(_home(tmp_path, redact))
