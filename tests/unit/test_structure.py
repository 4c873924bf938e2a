"""The package's shape: one installed namespace, dependencies in one direction, no import cycle."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.support.common import REPO

ROLES = ("scanner", "indexer", "query", "broker")
# Lowest first: a module may import its own layer and the ones below it, never one above.
LAYERS = (("aivault.scanner", 1), ("aivault.indexer", 2), ("aivault.query", 3), ("aivault.vault", 4),
          ("aivault.broker", 5), ("aivault.thin", 5), ("aivault.cli", 6), ("aivault.mcp", 6), ("aivault.web", 6),
          ("aivault.agents", 6))


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


def _tree_modules(top: str) -> dict[str, Path]:
    """Every module under the repository's folder ``top`` (tests, bench), by its dotted name; generated data
    (bench/out, bench/corpus) and fixture files are not modules of it."""
    mods: dict[str, Path] = {}
    for path in sorted((REPO / top).rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[:2] in (("bench", "out"), ("bench", "corpus"), ("tests", "fixtures")):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one module (Tarjan)."""
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
    return cycles


def test_there_is_no_import_cycle() -> None:
    """The import graph of the package has no cycle (Tarjan's strongly connected components)."""
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The detector on a sample graph: a three-module cycle and a self-contained rest."""
    sample = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(sample) == [["a", "b", "c"]]


def _bench_graph() -> dict[str, set[str]]:
    mods = _tree_modules("bench")
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_bench_has_no_import_cycle() -> None:
    """bench/ has no import cycle either, counting imports inside functions: what two benchmarks share lives
    in a module both import (bench/common.py, bench/quality/labels.py), not in one of them."""
    graph = _bench_graph()
    assert "bench.run" in graph and "bench.common" in graph["bench.run"], "is the check blind?"
    assert _cycles(graph) == []


def _absolute_imports(path: Path) -> set[str]:
    """The absolute module names a file imports, at module level or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_bench_uses_only_the_builders_of_tests() -> None:
    """bench/ imports nothing of tests/ but the transcript builders (tests/builders), the one library both
    use; and the builders import neither bench nor the rest of tests/."""
    from_bench = [f"{m} -> {n}" for m, path in _tree_modules("bench").items() for n in sorted(_absolute_imports(path))
                  if _within(n, "tests") and not _within(n, "tests.builders")]
    builders = {m: p for m, p in _tree_modules("tests").items() if _within(m, "tests.builders")}
    from_builders = [f"{m} -> {n}" for m, path in builders.items() for n in sorted(_absolute_imports(path))
                     if (_within(n, "tests") and not _within(n, "tests.builders")) or _within(n, "bench")]
    assert from_bench == from_builders == []
    assert builders, "is the check blind?"


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


def _is_test_module(module: str) -> bool:
    """A module pytest collects (test_*.py) or loads for its fixtures (conftest.py)."""
    leaf = module.rpartition(".")[2]
    return leaf.startswith("test_") or leaf == "conftest"


def test_no_test_module_imports_another_test_module() -> None:
    """Tests share helpers through tests/support/ and fixtures through conftest.py: no module of tests/ or
    bench/ imports a test module (test_*.py) or conftest.py, whose helpers would then live in two places."""
    mods = {**_tree_modules("tests"), **_tree_modules("bench")}
    assert any(_is_test_module(m) for m in mods) and "tests.support" in mods, "is the check blind?"
    wrong = [f"{m} -> {d}" for m, path in mods.items() for d in sorted(_imports(m, path, mods)) if _is_test_module(d)]
    assert wrong == []


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


# --- the scanner: its engine and the agents' readers ----------------------------------------------
PARSERS = "aivault.scanner.parsers"
# What every reader may share, and the engine may use too (scan.py parses a settled last line).
PARSER_TOOLKIT = frozenset(f"{PARSERS}.{name}" for name in ("base", "jsonutil", "textutil", "sqlite_units"))
# The engine's modules a reader fills in or is called through; the rest (scan, batch, watch, discover,
# link, the registry) drive the readers and must stay out of them.
READER_FACING = frozenset(f"aivault.scanner.{name}" for name in ("model", "reader", "sources", "spec"))


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_scanner_engine_reaches_a_reader_only_through_the_registry() -> None:
    """Adding an agent touches its module, the registry (which imports it by name) and its docs
    section: no engine module imports an agent's module, and no agent's module imports the engine
    beyond the shapes it fills in."""
    graph = _graph()
    scanner = [m for m in graph if _in(m, "aivault.scanner")]
    engine = [m for m in scanner if not _in(m, PARSERS)]
    readers = [m for m in scanner if _in(m, PARSERS)]
    engine_to_reader = [f"{m} -> {d}" for m in engine for d in graph[m]
                        if _in(d, PARSERS) and d != PARSERS and d not in PARSER_TOOLKIT]
    reader_to_engine = [f"{m} -> {d}" for m in readers for d in graph[m]
                        if _in(d, "aivault.scanner") and not _in(d, PARSERS) and d not in READER_FACING]
    toolkit_to_agent = [f"{m} -> {d}" for m in PARSER_TOOLKIT for d in graph[m]
                        if _in(d, PARSERS) and d not in PARSER_TOOLKIT]
    assert engine_to_reader == reader_to_engine == toolkit_to_agent == []
    assert all(m in graph for m in PARSER_TOOLKIT)


# --- SQL by purpose -------------------------------------------------------------------------------
# The index's SQL is written in four modules, one per purpose; a statement literal anywhere else in the
# package fails test_sql_is_written_only_in_its_modules.
SQL_MODULES = {
    "aivault.indexer.schema": "the tables: DDL, migrations, the meta row, a segment's table",
    "aivault.indexer.sql_write": "the indexer's writes, and the reads a write decides on",
    "aivault.indexer.sql_maint": "maintenance: merges, reclaim, checkpoints, integrity, engine settings",
    "aivault.query.sql": "the read side: searches, reading a session, status",
}
# The one other place SQL may be written: any module of the scanner role (scanner/**, whatever its
# sub-packages). Its statements read the agents' own SQLite databases -- another program's schema --
# and stay beside the parser that interprets their rows; the scanner never opens the index (no module
# of it imports duckdb: test_the_scanners_sql_is_only_the_agents_databases).
SQL_ELSEWHERE = "aivault.scanner"
# A string literal is an SQL statement when it begins (after whitespace, -- and /* */ comments and
# opening parentheses) with one of these keywords, upper case as this code writes SQL, followed by
# whitespace; those of SQL_ALONE only when they stand alone (at most one word after them:
# "BEGIN TRANSACTION", "CHECKPOINT db"), so that "BEGIN ... COMMIT" in a message is prose. An f-string
# is judged by its text with each placeholder as "{}". Docstrings and other bare string statements are
# prose and never judged.
SQL_ALONE = ("BEGIN", "CHECKPOINT", "COMMIT", "ROLLBACK", "ABORT", "VACUUM", "ANALYZE")
SQL_KEYWORDS = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "COPY", "ATTACH", "DETACH",
                "PRAGMA", "SET", "EXPLAIN", "USE", "INSTALL", "LOAD", "CALL", "DESCRIBE", "SHOW", "SUMMARIZE",
                "TRUNCATE", "EXPORT", "IMPORT", "RESET", "MERGE", "PIVOT", "UNPIVOT", "VALUES", "FORCE")
_SQL_STATEMENT = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*"
                            rf"(?:(?:{'|'.join(SQL_KEYWORDS)})\s|(?:{'|'.join(SQL_ALONE)})(?:\s+\w+)?\s*;?\s*$)",
                            re.S)


def _sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in ``source`` that is an SQL statement (see SQL_KEYWORDS)."""
    tree = ast.parse(source)
    prose: set[int] = set()  # docstrings, and the parts of an f-string (judged whole)
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prose.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            prose.update(id(v) for v in node.values)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if _SQL_STATEMENT.match(text):
            found.append((node.lineno, text))
    return sorted(found)


def _in_scanner(module: str) -> bool:
    return module == SQL_ELSEWHERE or module.startswith(SQL_ELSEWHERE + ".")


def test_sql_is_written_only_in_its_modules() -> None:
    """Every module of the package is parsed; an SQL statement outside SQL_MODULES and the scanner fails.
    (tests/, bench/ and dev/ read databases to check them and are not judged.)"""
    modules = _modules()
    assert sorted(set(SQL_MODULES) - set(modules)) == [], "an SQL module was moved: update SQL_MODULES"
    stray = [f"{path.relative_to(REPO)}:{line}: {text.strip()[:80]!r}"
             for name, path in sorted(modules.items()) if name not in SQL_MODULES and not _in_scanner(name)
             for line, text in _sql_literals(path.read_text("utf-8"))]
    assert stray == [], "SQL belongs in one of " + ", ".join(f"{m} ({why})" for m, why in SQL_MODULES.items())
    for name in SQL_MODULES:
        assert _sql_literals(modules[name].read_text("utf-8")), f"{name} holds no statement: is the check blind?"


def test_the_scanners_sql_is_only_the_agents_databases() -> None:
    """The scanner may write SQL because it is only ever SQLite of the agents' own databases: none of its
    modules imports duckdb, the index's engine."""
    using = []
    for name, path in _modules().items():
        if _in_scanner(name):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                using += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "duckdb"]
    assert using == []


def test_the_sql_check_finds_statements_and_passes_prose() -> None:
    """The detector on a sample: each kind of statement literal is found, prose and docstrings are not."""
    sample = '''
"""A module's docstring: SELECT the rows, then BEGIN ... COMMIT."""
a = "SELECT 1"
b = f"SET threads = {n}"
c = "CHECKPOINT"
d = """
    -- a comment first
    (SELECT x FROM t)"""
e = "INSERT INTO t " + rest
f = "BEGIN TRANSACTION"
g = 'DROP INDEX "' + name + '"'
h = "DELETE"
i = "Select the newest session"
j = "BEGIN ... COMMIT, or ROLLBACK if anything raises"
k = f"{n} rows: SELECT them again"
l = "WITHOUT a doubt"


def fn() -> None:
    """BEGIN ... COMMIT, or ROLLBACK if anything in the block raises."""
'''
    assert [line for line, _ in _sql_literals(sample)] == [3, 4, 5, 6, 9, 10, 11]
