"""A CLI call that talks to a daemon loads a client's modules only, never the engine's.

Each command runs in a child Python through the real CLI entry (``aivault.cli.main``) against a real
daemon (``aivault serve``: DuckDB, ZeroMQ, the scanner); the child writes the names in ``sys.modules``
when the command is done, and the test reads them. Without a daemon the same probe sees DuckDB and the
query layer load, so an empty list is the client's doing, not the probe's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aivault import thin
from aivault.home import Home, write_private
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import cli_env, root_args, run_cli
from tests.support.daemons import DaemonProcess, InprocDaemon
from tests.support.semantic import PARAPHRASE, semantic_on, wait_vectors, write_topics

# Runs the command as the console script does, then lists what the process imported.
PROBE = """
import json, sys
from aivault.cli import main
code = main(sys.argv[2:])
sys.stdout.flush()
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""

# The engine and its libraries: none of them may load in a client-mode call (pyzmq neither: the CLI speaks
# ZMTP to the local daemon itself, aivault/thin/zmtp.py).
HEAVY = ("duckdb", "numpy", "pyarrow", "faiss", "llama_cpp", "orjson", "zstandard", "structlog", "mcp",
         "starlette", "uvicorn", "tomlkit", "zmq")
# The thin client's budget, as aivault/thin/__init__.py states it.
CLIENT_MODULES = thin.MODULES

# What direct mode adds before it reads the index: the endpoint table and what it imports (no engine, no vault).
ENDPOINT_TABLE = frozenset({"aivault.broker", "aivault.broker.endpoints", "aivault.broker.exposure",
                            "aivault.broker.remote", "aivault.broker.remote.hosts"})


def probe(home: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``aivault ARGS`` in a child Python; its output and the modules it had loaded at the end."""
    out = tmp_path / f"modules-{len(list(tmp_path.glob('modules-*')))}.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], env=cli_env(home),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"aivault {' '.join(args)} failed ({proc.returncode}): {proc.stderr}"
    return proc, json.loads(out.read_text())


def engine_modules(modules: list[str]) -> list[str]:
    """The loaded modules a client must not need: the heavy libraries and any aivault module outside the client."""
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    ours = [m for m in modules if (m == "aivault" or m.startswith("aivault.")) and m not in CLIENT_MODULES]
    return heavy + ours


@pytest.fixture
def indexed(home: Home, roots: dict[str, Path]) -> Home:
    ClaudeWriter(roots["claude"], cwd="/home/dev/vault").user("the DuckDB lock error again") \
        .assistant("Stop the other writer; DuckDB allows one.").title("DuckDB lock saga")
    CodexWriter(roots["codex"], cwd="/home/dev/api").user("why is the lock file stale") \
        .assistant("A crashed process left the lock file behind.")
    args = ["index", "--no-default-roots"]
    for spec in root_args(roots):
        args += ["--root", spec]
    run_cli(home.path, *args, check=True)
    return home


@pytest.fixture
def daemon(indexed: Home, roots: dict[str, Path]) -> Iterator[DaemonProcess]:
    d = DaemonProcess(indexed, roots)
    try:
        yield d
    finally:
        d.stop()


def test_client_mode_search_loads_no_engine(daemon: DaemonProcess, tmp_path: Path) -> None:
    """`aivault search` through a daemon finds its hits loading no DuckDB, NumPy, FAISS, llama.cpp or query layer."""
    proc, modules = probe(daemon.home.path, tmp_path, "search", "lock")
    assert "DuckDB lock saga" in proc.stdout
    assert "aivault.thin.zmtp" in modules  # it did talk to the daemon (without pyzmq: see HEAVY)
    assert engine_modules(modules) == []


def test_client_mode_search_json_loads_no_engine(daemon: DaemonProcess, tmp_path: Path) -> None:
    """`aivault search --json` through a daemon prints the contract's result with only client modules loaded."""
    proc, modules = probe(daemon.home.path, tmp_path, "search", "lock", "--json")
    result = json.loads(proc.stdout)
    assert result["kind"] == "results" and len(result["hits"]) == 2
    assert engine_modules(modules) == []


def test_client_mode_ping_and_status_load_no_engine(daemon: DaemonProcess, tmp_path: Path) -> None:
    """`aivault rpc aiVault.ping`, `status` and `status --json` answer from the daemon with only client modules."""
    proc, modules = probe(daemon.home.path, tmp_path, "rpc", "aiVault.ping")
    assert json.loads(proc.stdout)["pid"] == daemon.proc.pid  # the daemon answered, not this process
    assert engine_modules(modules) == []
    assert "shutil" not in modules  # argparse is told the width (cli._Formatter), so it does not import it
    proc, modules = probe(daemon.home.path, tmp_path, "status")
    assert "daemon mode" in proc.stdout
    assert engine_modules(modules) == []
    proc, modules = probe(daemon.home.path, tmp_path, "status", "--json")
    assert json.loads(proc.stdout)["enabled"] is True
    assert engine_modules(modules) == []


# The thin client's import budget: what a call through a daemon may add to an empty interpreter's modules --
# aivault's thin.MODULES and the libraries of thin.LIBRARIES (aivault/thin/__init__.py says why).
CLIENT_LIBRARIES = thin.LIBRARIES


def over_budget(modules: list[str], empty: set[str]) -> list[str]:
    """The modules a client-mode call loaded beyond an empty interpreter's and outside the thin client's budget."""
    extra = set(modules) - empty
    ours = {m for m in extra if m == "aivault" or m.startswith("aivault.")}
    libraries = {m for m in extra - ours if m.split(".")[0] in CLIENT_LIBRARIES or m.startswith("_cython_")}
    return sorted((ours - CLIENT_MODULES) | (extra - ours - libraries))


def test_client_mode_calls_stay_within_the_thin_clients_import_budget(daemon: DaemonProcess, tmp_path: Path) -> None:
    """`aivault search` and `status` through a daemon load, beyond what an empty interpreter has, only the thin
    client's modules and the libraries of its stated budget (CLIENT_LIBRARIES); a library outside it is caught."""
    shown = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                           env=cli_env(daemon.home.path), capture_output=True, text=True, timeout=60, check=True)
    empty = set(shown.stdout.split())
    for args in (["search", "lock"], ["status"], ["rpc", "aiVault.ping"]):
        _, modules = probe(daemon.home.path, tmp_path, *args)
        assert "aivault.thin.zmtp" in modules and over_budget(modules, empty) == [], args
    assert over_budget([*modules, "asyncio.events", "aivault.vault"], empty) == ["aivault.vault", "asyncio.events"]


def test_without_a_daemon_the_probe_sees_the_engine_load(indexed: Home, tmp_path: Path) -> None:
    """The same probe in direct mode lists DuckDB and the query layer, so the client's empty list is real."""
    proc, modules = probe(indexed.path, tmp_path, "search", "lock", "--json")
    assert json.loads(proc.stdout)["kind"] == "results"
    found = engine_modules(modules)
    assert "duckdb" in found and "aivault.query.engine" in found and "aivault.indexer.store" in found
    _, modules = probe(indexed.path, tmp_path, "rpc", "aiVault.ping")
    # A direct ping reads no index: it is answered through the endpoint table, which loads nothing of the engine.
    assert sorted(engine_modules(modules)) == sorted(ENDPOINT_TABLE)


def test_a_direct_lexical_search_loads_no_vector_code(indexed: Home, tmp_path: Path) -> None:
    """With embeddings on, a direct search the planner answers lexically loads no FAISS, llama.cpp, NumPy or pyarrow."""
    write_private(indexed.config_path, b'{"embed": {"enabled": true}}')
    proc, modules = probe(indexed.path, tmp_path, "search", '"lock file"', "--json")
    assert json.loads(proc.stdout)["kind"] == "results"
    vector_libraries = {m.split(".")[0] for m in modules} & {"faiss", "llama_cpp", "numpy", "pyarrow"}
    assert not vector_libraries, vector_libraries
    assert "aivault.indexer.vector_service" not in modules and "aivault.embed.local" not in modules


def test_a_direct_hybrid_search_loads_the_vectors_it_needs(home: Home, roots: dict[str, Path], tmp_path: Path) -> None:
    """Without a daemon, a description is still answered hybrid from the saved vectors (loaded on that first ask)."""
    semantic_on(home)
    ids = write_topics(roots)
    with InprocDaemon(home, roots) as d:  # its close saves the sidecar
        d.reconcile()
        wait_vectors(d.service.stats)
    proc, modules = probe(home.path, tmp_path, "rpc", "aiVault.searchSessions",
                          json.dumps({"query": PARAPHRASE, "debug": True}))
    result = json.loads(proc.stdout)
    assert result["debug"]["route"] == "hybrid"
    assert result["hits"][0]["sessionId"] == ids["asyncio"]
    assert "faiss" in modules and "aivault.indexer.vector_service" in modules


def test_the_interpreter_start_loads_no_install_import_hook() -> None:
    """An empty interpreter of this install imports no editable-install finder and no pathlib at start
    (a package-dir mapping in pyproject.toml makes setuptools install such a hook: 15-30 ms of every CLI call)."""
    code = "import sys; print(sorted(m for m in sys.modules if 'editable' in m or m in ('pathlib', 'importlib.util')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(proc.stdout.replace("'", '"')) == []


# Runs the command as the console script does, also where argparse ends it (--help, --version), then lists
# what the process imported.
EXIT_PROBE = """
import json, sys
from aivault.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
sys.stdout.flush()
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def parse_probe(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """Run ``aivault ARGS`` in a child Python; its output and the modules it had loaded when argparse exited."""
    out = tmp_path / f"exit-{len(list(tmp_path.glob('exit-*')))}.json"
    proc = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(out), *args], env=cli_env(tmp_path / "home"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, set(json.loads(out.read_text()))


def test_version_loads_no_command_module(tmp_path: Path) -> None:
    """`aivault --version` builds no subcommand: it loads nothing `--help` does not, and no command's module."""
    shown, version = parse_probe(tmp_path, "--version")
    listed, helped = parse_probe(tmp_path, "--help")
    assert shown.startswith("aivault ") and "COMMAND" in listed
    assert version <= helped, sorted(version - helped)
    assert not [m for m in version if m.startswith("aivault.cli.") and m != "aivault.cli.common"]


# What building the whole parser (`aivault --help`) may load of aivault: every command module registers its
# commands, and imports at its top only what that needs (aivault/cli/__init__.py, COMMANDS).
PARSER_MODULES = frozenset({"aivault", "aivault.cli", "aivault.cli.common", "aivault.errors", "aivault.protocol",
                            "aivault.home", "aivault.log", "aivault.config", "aivault.agents"})


def test_the_whole_parser_loads_the_command_modules_and_nothing_they_run(tmp_path: Path) -> None:
    """`aivault --help` imports every command module to list its commands, and none of what those commands run:
    no client, renderer, policy store, scanner or engine, nor msgpack, socket or dataclasses."""
    from aivault.cli import COMMANDS

    listed, modules = parse_probe(tmp_path, "--help")
    commands = {f"aivault.cli.{m}" for m in COMMANDS.values()}
    assert commands <= modules and all(f"    {word} " in listed for word in ("search", "hosts", "web"))
    ours = {m for m in modules if m == "aivault" or m.startswith("aivault.")}
    assert ours - commands - PARSER_MODULES == set()
    assert not {m.split(".")[0] for m in modules} & {*HEAVY, "msgpack", "socket", "dataclasses", "datetime"}


GC_PROBE = """
import gc, json, os, sys
import aivault.cli as cli
import aivault.cli.policy as policy_mod
import aivault.cli.search as search_mod
seen = {}
def record(name):
    def run(args, home):
        seen[name] = gc.isenabled()
        seen[name + " blas threads"] = os.environ.get("OPENBLAS_NUM_THREADS")
        return 0
    return run
search_mod.cmd_status = record("status")
policy_mod.cmd_policy = record("policy")
for command in ("policy", "status"):
    gc.enable()
    sys.argv = ["aivault", command]
    cli.main()
    seen[command + " frozen after"] = gc.get_freeze_count() > 0
    gc.unfreeze()
search_mod.cmd_status = record("in-process")
gc.enable()
cli.main(["status"])  # an in-process caller passes argv: its collector is left alone
seen["after in-process"] = gc.isenabled() and gc.get_freeze_count() == 0
print(json.dumps(seen))
"""


def test_short_commands_run_without_the_cyclic_collector_and_long_lived_ones_with_it(tmp_path: Path) -> None:
    """From the console script, status/search/rpc run with the cyclic GC off (and frozen for the exit) and one
    OpenBLAS thread, while every other command (a daemon, the web page) collects as usual and keeps its BLAS
    threads; an in-process main(argv) changes nothing."""
    proc = subprocess.run([sys.executable, "-c", GC_PROBE], env=cli_env(tmp_path / "home"), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"status": False, "status frozen after": True, "status blas threads": "1",
                                       "policy": True, "policy frozen after": True, "policy blas threads": None,
                                       "in-process": True, "in-process blas threads": "1",
                                       "after in-process": True}


# Runs the command exactly as the console script does (main() reading sys.argv, so it is a one-shot call),
# then reports the modules and the version DuckDB says it is.
CONSOLE_PROBE = """
import json, sys
out = sys.argv[1]
sys.argv = ["aivault", *sys.argv[2:]]
from aivault.cli import main
code = main()
sys.stdout.flush()
import duckdb
with open(out, "w") as f:
    json.dump({"modules": sorted(sys.modules), "version": duckdb.__version__,
               "bundled": duckdb.__duckdb_version__, "text": duckdb.version()}, f)
sys.exit(code)
"""


def test_a_one_shot_direct_search_reads_duckdbs_version_without_importlib_metadata(
        indexed: Home, tmp_path: Path) -> None:
    """The console script's direct search loads no importlib.metadata, and DuckDB still reports its true versions."""
    import importlib.metadata

    import duckdb

    out = tmp_path / "console.json"
    proc = subprocess.run([sys.executable, "-c", CONSOLE_PROBE, str(out), "search", "lock", "--json"],
                          env=cli_env(indexed.path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kind"] == "results"
    seen = json.loads(out.read_text())
    assert "duckdb" in seen["modules"] and "importlib.metadata" not in seen["modules"]
    assert seen["version"] == importlib.metadata.version("duckdb")
    assert seen["bundled"] == getattr(duckdb, "__duckdb_version__")  # noqa: B009 (not in duckdb's stubs)
    assert seen["text"] == getattr(duckdb, "version")()  # noqa: B009


def test_the_duckdb_version_stand_in_hands_other_names_to_the_real_module() -> None:
    """A name the stand-in lacks loads the real duckdb._version; with DuckDB imported already nothing is replaced."""
    code = """
import sys
from aivault.thin.light_imports import SHIM, light_duckdb_version
assert light_duckdb_version() is True
import duckdb
assert "importlib.metadata" not in sys.modules
stand_in = sys.modules[SHIM]
fetched = stand_in._dist_version  # only the real module has it
import importlib.metadata
assert fetched is importlib.metadata.version
assert sys.modules[SHIM] is not stand_in and sys.modules[SHIM].__version__ == duckdb.__version__
assert light_duckdb_version() is False
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_version_is_read_only_from_exactly_one_dist_info_directory(tmp_path: Path) -> None:
    """One duckdb-X.dist-info beside the package gives X; none, or two (a broken install), give nothing."""
    from aivault.thin.light_imports import _dist_version

    package = tmp_path / "duckdb"
    package.mkdir()
    assert _dist_version(str(package), "duckdb") is None
    (tmp_path / "duckdb-1.5.5.dist-info").mkdir()
    (tmp_path / "duckdb_extra-2.0.dist-info").mkdir()
    assert _dist_version(str(package), "duckdb") == "1.5.5"
    (tmp_path / "duckdb-1.4.0.dist-info").mkdir()
    assert _dist_version(str(package), "duckdb") is None
