"""The package's shape: one installed namespace, dependencies in one direction, no import cycle."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROLES = ("scanner", "indexer", "query", "broker")
# Lowest first: a module may import its own layer and the ones below it, never one above.
LAYERS = (("aivault.scanner", 1), ("aivault.indexer", 2), ("aivault.query", 3), ("aivault.broker", 4),
          ("aivault.cli", 5), ("aivault.render", 5), ("aivault.mcp", 5), ("aivault.web", 5), ("aivault.agents", 5))


def _modules() -> dict[str, Path]:
    """Every module of the installed namespace, by its dotted name (roles are mapped, not nested)."""
    mods: dict[str, Path] = {}
    sources = [("aivault", REPO / "aivault"), *((f"aivault.{r}", REPO / r) for r in ROLES)]
    for package, folder in sources:
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder)
            if package == "aivault" and rel.parts[0] in ROLES:
                continue  # the symlinks to the role folders
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([package, *parts])] = path
    return mods


def _layer(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return 0  # aivault's core: codec, protocol, errors, config, home, text, embed, ...


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, at module level or inside functions alike."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module, *(f"{module}.{a.name}" for a in node.names)]
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_no_module_imports_a_layer_above_its_own() -> None:
    """scanner -> indexer -> query -> broker -> CLI: every import points down (or sideways), never up."""
    upward = [f"{m} -> {d}" for m, deps in _graph().items() for d in deps if _layer(d) > _layer(m)]
    assert upward == []


def test_there_is_no_import_cycle() -> None:
    """The import graph of the package has no cycle (Tarjan's strongly connected components)."""
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_nothing_imports_the_role_folders_by_their_bare_names() -> None:
    """Code imports aivault.scanner, never `scanner` (that name would load the same files twice)."""
    bare = []
    for path in [*REPO.glob("aivault/*.py"), *REPO.glob("aivault/embed/*.py"),
                 *(p for r in ROLES for p in (REPO / r).rglob("*.py")), *REPO.glob("tests/**/*.py"),
                 *REPO.glob("bench/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bare += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in ROLES]
    assert bare == []


def test_the_built_wheel_installs_only_the_aivault_namespace(tmp_path: Path) -> None:
    """A wheel of the project has one top-level name, aivault, with the roles inside it."""
    # From a copy of the tracked files: setuptools leaves a build/ folder next to what it builds.
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    [wheel] = tmp_path.glob("aivault-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"aivault"}
    for role in ROLES:
        assert f"aivault/{role}/__init__.py" in names
    assert "aivault/scanner/__main__.py" in names


def test_every_package_is_listed_in_pyproject() -> None:
    """pyproject.toml names its packages one by one (an editable install stays one plain path): a
    package folder missing there would be missing from a built wheel, and nothing else would say so."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"])
    packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert sorted(packages - listed) == []
