"""What a short-lived command does before anything imports its heavy libraries.

``import duckdb`` runs ``duckdb/_version.py``, which imports ``importlib.metadata`` (and with it
``email``, ``zipfile``, ``csv``, ``inspect``...) and then walks ``sys.path`` for the distribution's
metadata, only to set ``duckdb.__version__``: ~40 ms of a ~300 ms direct search measured with 12
interleaved calls (``python -m bench.cli_latency`` has the whole call). A one-query process can
read that version from the name of the installed ``duckdb-<version>.dist-info`` directory beside
the package instead, so ``light_duckdb_version`` puts a module of the same three names in
``sys.modules`` first. Any other name a future DuckDB asks of that module is handed over from the
real one (PEP 562 ``__getattr__``), and where the dist-info directory is not found nothing is
replaced: the worst case is the old cost, never a failed import.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

SHIM = "duckdb._version"


def _dist_version(package_dir: str, name: str) -> str | None:
    """The version in ``<name>-<version>.dist-info`` beside ``package_dir``, if exactly one is there."""
    site = os.path.dirname(package_dir)
    prefix = f"{name}-"
    try:
        found = [e for e in os.listdir(site) if e.startswith(prefix) and e.endswith(".dist-info")]
    except OSError:
        return None
    if len(found) != 1:
        return None
    return found[0][len(prefix):-len(".dist-info")]


def _package_dir(name: str) -> str | None:
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), name)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return candidate
    return None


def light_duckdb_version() -> bool:
    """Stand in for ``duckdb._version`` unless DuckDB is imported already; True when it did."""
    if "duckdb" in sys.modules or SHIM in sys.modules:
        return False
    package = _package_dir("duckdb")
    version = _dist_version(package, "duckdb") if package else None
    if version is None:
        return False
    shim = types.ModuleType(SHIM, "duckdb's version, read from its dist-info directory's name (aivault)")

    def bundled() -> str:
        import _duckdb

        return str(_duckdb.__version__)

    def describe() -> str:
        return f"{version} (with duckdb {bundled()})"

    def rest(attr: str) -> Any:
        if attr == "__duckdb_version__":
            return bundled()
        if attr.startswith("__"):
            raise AttributeError(attr)  # the import system asking for __path__ and the like
        # A name this stand-in does not have: load the real module (the slow way) and take it from there.
        import importlib

        if sys.modules.get(SHIM) is shim:
            del sys.modules[SHIM]
        return getattr(importlib.import_module(SHIM), attr)

    for name, value in (("__version__", version), ("version", describe), ("__getattr__", rest)):
        setattr(shim, name, value)
    sys.modules[SHIM] = shim
    return True
