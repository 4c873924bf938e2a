"""Reading ``config.json`` in the data directory: extra transcript roots and the embedding setup.

    {"roots": ["claude=/mnt/old/.claude/projects", ...],
     "embed": {"enabled": false} | {"model": ..., "remote": ...},
     "redact": {"enabled": true, "allow": ["regex", ...]}}

Every reader of the file is here, next to the data-directory code (``aivault.home``). A file that
cannot be read or holds the wrong shapes is a ``ConfigInvalid`` error naming the file and the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aivault.errors import ConfigInvalid
from aivault.home import Home, models_dir

if TYPE_CHECKING:
    from aivault.embed import Embedder
    from aivault.redact import Policy


def load(home: Home) -> dict[str, Any]:
    """The whole file as a JSON object ({} when there is none)."""
    path = home.config_path
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigInvalid(f"cannot read {path}: {exc}; fix or delete the file") from exc
    if not isinstance(raw, dict):
        raise ConfigInvalid(f"{path} must hold a JSON object")
    return raw


def roots(home: Home, extra: list[str]) -> list[str]:
    """The ``AGENT=PATH`` root specs from config.json, then ``extra`` (the command line's)."""
    configured = load(home).get("roots") or []
    if not isinstance(configured, list) or not all(isinstance(r, str) for r in configured):
        raise ConfigInvalid(f"{home.config_path}: 'roots' must be a list of AGENT=PATH strings")
    return [*configured, *extra]


def embed_config(home: Home) -> dict[str, Any] | None:
    """The ``embed`` section; ``{"enabled": false}`` turns semantic search off."""
    cfg = load(home).get("embed")
    return cfg if isinstance(cfg, dict) else None


def embedder_factory(home: Home) -> Callable[[], Embedder] | None:
    """How to make the configured embedder (loaded only when called), or None when it is off."""
    cfg = embed_config(home)
    if cfg is not None and cfg.get("enabled") is False:
        return None

    def make() -> Embedder:
        from aivault.embed import make_embedder

        embedder: Embedder = make_embedder(cfg, models_dir())
        return embedder

    return make


def redact_settings(home: Home) -> Policy:
    """``"redact": {"enabled": true, "allow": [regex, ...]}``: secret redaction (on unless turned off) and the
    patterns of a user's own false positives (a found value any of them matches is kept)."""
    from aivault.redact import Policy

    raw = load(home).get("redact")
    if raw is None:
        return Policy()
    if not isinstance(raw, dict) or set(raw) - {"enabled", "allow"}:
        raise ConfigInvalid(f"{home.config_path}: 'redact' must be an object with 'enabled' (true or false) and "
                            "'allow' (a list of regular expressions)")
    enabled = raw.get("enabled", True)
    allow = raw.get("allow", [])
    if not isinstance(enabled, bool):
        raise ConfigInvalid(f"{home.config_path}: redact.enabled must be true or false, not {enabled!r:.40}")
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise ConfigInvalid(f"{home.config_path}: redact.allow must be a list of regular expressions")
    for i, pattern in enumerate(allow):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigInvalid(f"{home.config_path}: redact.allow[{i}] is not a regular expression: {exc}") from exc
    return Policy(enabled, tuple(allow))
