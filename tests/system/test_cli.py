"""The aivault command line, run as a user runs it: subprocesses against a real data directory."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

from aivault import policy
from aivault.home import Home
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import REPO, pid_alive, run_cli, wait_until
from tests.support.daemons import DaemonProcess


def _index(home: Home, roots: dict[str, Path]) -> str:
    args = ["index", "--no-default-roots"]
    for agent, path in roots.items():
        args += ["--root", f"{agent}={path}"]
    out = run_cli(home.path, *args, check=True)
    return out.stdout


def _corpus(roots: dict[str, Path]) -> tuple[ClaudeWriter, CodexWriter]:
    c = ClaudeWriter(roots["claude"], cwd="/home/dev/vault", branch="fix/lock")
    c.user("the DuckDB lock error again").assistant("Stop the other writer; DuckDB allows one.")
    c.title("DuckDB lock saga")
    x = CodexWriter(roots["codex"], cwd="/home/dev/api")
    x.user("why is the lock file stale").assistant("A crashed process left the lock file behind.")
    return c, x


def test_index_then_search_in_direct_mode_prints_readable_highlighted_hits(home: Home, roots: dict[str, Path]) -> None:
    """Without a daemon, `index` prints a summary and `search` opens the index read-only."""
    c, _ = _corpus(roots)
    summary = _index(home, roots)
    assert "indexed 2 changed of 2 files, 4 messages" in summary
    out = run_cli(home.path, "search", "DuckDB lock", check=True).stdout
    assert "DuckDB lock saga" in out
    assert "[[DuckDB]] [[lock]]" in out  # piped output keeps the contract's marks
    assert f"claude --resume {c.session_id}" in out
    assert "/home/dev/vault (fix/lock)" in out


def test_search_json_is_exactly_the_contract_object_in_both_modes(home: Home, roots: dict[str, Path]) -> None:
    """`search --json` prints the searchSessions result itself, identical through daemon and direct mode."""
    _corpus(roots)
    _index(home, roots)
    direct = json.loads(run_cli(home.path, "search", "lock", "--json", "--limit", "5", check=True).stdout)
    rpc = json.loads(run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": "lock", "limit": 5}',
                             check=True).stdout)
    d = DaemonProcess(home, roots)
    try:
        via_daemon = json.loads(run_cli(home.path, "search", "lock", "--json", "--limit", "5", check=True).stdout)
    finally:
        d.stop()
    for r in (direct, rpc, via_daemon):
        assert r["kind"] == "results"
        assert set(r) == {"kind", "hits", "page", "generation", "truncated", "durationMs"}
        r.pop("durationMs")
    assert direct == rpc == via_daemon
    assert len(direct["hits"]) == 2


def test_rpc_exit_codes(home: Home, roots: dict[str, Path]) -> None:
    """rpc exits 0 for any contract value and non-zero with one stderr line for errors."""
    _corpus(roots)
    _index(home, roots)
    ok = run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": "lock", "cursor": "bogus"}')
    assert ok.returncode == 0 and json.loads(ok.stdout) == {"kind": "malformed-cursor"}
    bad = run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": 42}')
    assert bad.returncode != 0 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    nojson = run_cli(home.path, "rpc", "aiVault.searchSessions", "{nope")
    assert nojson.returncode != 0 and "not valid JSON" in nojson.stderr
    unknown = run_cli(home.path, "rpc", "aiVault.noSuchMethod", "{}")
    assert unknown.returncode != 0 and "unknown method" in unknown.stderr
    remote = run_cli(home.path, "rpc", "aiVault.searchStatus", "{}", "--host", "ssh:buildbox")
    assert remote.returncode != 0 and "never answers for a remote host" in remote.stderr
    status = run_cli(home.path, "rpc", "aiVault.searchStatus")
    assert status.returncode == 0 and json.loads(status.stdout)["filesIndexed"] == 2


def test_disabled_search_tells_the_user_how_to_enable_it(home: Home, roots: dict[str, Path]) -> None:
    """While consent is off the CLI explains how to turn it on; rpc returns unavailable/disabled."""
    _corpus(roots)
    _index(home, roots)
    policy.save(home, policy.Policy(False, None))
    out = run_cli(home.path, "search", "lock")
    assert out.returncode == 3 and "aivault enable" in out.stderr
    rpc = run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": "lock"}', check=True)
    assert json.loads(rpc.stdout) == {"kind": "unavailable", "reason": "disabled"}
    refused = run_cli(home.path, "index", "--no-default-roots")
    assert refused.returncode == 3 and "aivault enable" in refused.stderr


def test_before_the_first_index_answers_follow_the_contract_and_say_what_to_run(home: Home) -> None:
    """With no index yet: search is unavailable (disabled / not-ready), status has zeros, errors stay errors."""
    policy.save(home, policy.Policy(False, None))
    out = run_cli(home.path, "search", "lock")
    assert out.returncode == 3 and "`aivault enable`" in out.stderr and "`aivault index`" in out.stderr
    js = run_cli(home.path, "search", "lock", "--json", check=True)
    assert json.loads(js.stdout) == {"kind": "unavailable", "reason": "disabled"}
    policy.save(home, policy.Policy(True, None))
    out = run_cli(home.path, "search", "lock")
    assert out.returncode == 3 and "no index" in out.stderr and "`aivault index`" in out.stderr
    rpc = run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": "lock"}', check=True)
    assert json.loads(rpc.stdout) == {"kind": "unavailable", "reason": "not-ready"}
    status = json.loads(run_cli(home.path, "rpc", "aiVault.searchStatus", check=True).stdout)
    assert status == {"enabled": True, "phase": "idle", "filesIndexed": 0, "filesDue": 0, "filesFailed": 0,
                      "degradedRoots": [], "lastReconcileAt": None, "lastSweepCompletedAt": None, "generation": 0}
    human = run_cli(home.path, "status", check=True).stdout
    assert "last reconcile never" in human and "no index yet: run `aivault index`" in human
    bad = run_cli(home.path, "rpc", "aiVault.searchSessions", '{"query": 42}')
    assert bad.returncode != 0 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert not home.db_path.exists()  # answering never creates an index


def test_consent_and_retention_commands_persist_the_policy(home: Home) -> None:
    """enable / policy / disable write the policy file; policy prints it readably or as JSON."""
    policy.save(home, policy.Policy(False, None))
    assert "enabled" in run_cli(home.path, "enable", "--history-days", "30", check=True).stdout
    assert policy.load(home) == policy.Policy(True, 30)
    out = run_cli(home.path, "policy", check=True).stdout
    assert "session search enabled" in out and "keeping the last 30 days" in out
    run_cli(home.path, "policy", "--forever", check=True)
    assert json.loads(run_cli(home.path, "policy", "--json", check=True).stdout) == {"enabled": True,
                                                                                     "historyDays": None}
    assert "keeping all history" in run_cli(home.path, "policy", check=True).stdout
    bad = run_cli(home.path, "policy", "--history-days", "0")
    assert bad.returncode == 2 and "positive" in bad.stderr
    run_cli(home.path, "disable", check=True)
    assert policy.load(home) == policy.Policy(False, None)
    assert "disabled (`aivault enable` turns it on)" in run_cli(home.path, "policy", check=True).stdout


def test_a_held_database_lock_is_reported_clearly(home: Home, roots: dict[str, Path]) -> None:
    """If another process holds the index read-write and no daemon answers, the CLI says so."""
    _corpus(roots)
    _index(home, roots)
    holder = duckdb.connect(str(home.db_path))
    try:
        out = run_cli(home.path, "search", "lock")
    finally:
        holder.close()
    assert out.returncode == 1
    assert "held read-write by process" in out.stderr and str(os.getpid()) in out.stderr


def test_serve_shuts_down_cleanly_on_sigterm_and_sigint(home: Home, roots: dict[str, Path]) -> None:
    """SIGTERM and SIGINT stop the daemon with exit 0, no orphan scanner and no socket left behind."""
    _corpus(roots)
    for sig in (signal.SIGTERM, signal.SIGINT):
        d = DaemonProcess(home, roots)
        d.reconcile()
        assert wait_until(lambda: bool(d.scanner_pids()), timeout=10)  # noqa: B023
        children = d.scanner_pids()
        assert d.stop(sig) == 0
        assert wait_until(lambda: not any(pid_alive(p) for p in children), timeout=10)  # noqa: B023
        assert not (home.path / "daemon.sock").exists()
        assert not (home.path / "ingest.sock").exists()
    out = run_cli(home.path, "search", "lock", "--json", check=True)
    assert len(json.loads(out.stdout)["hits"]) == 2


def test_data_directory_is_private(home: Home, roots: dict[str, Path]) -> None:
    """The data directory is 0700 and everything aivault writes in it is 0600."""
    _corpus(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        names = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.path.iterdir() if p.name != "daemon.log"}
    finally:
        d.stop()
    assert stat.S_IMODE(home.path.stat().st_mode) == 0o700
    for name in ("index.duckdb", "key", "policy.json", "daemon.sock", "ingest.sock", "daemon.pid"):
        assert names.get(name) == 0o600, (name, oct(names.get(name, 0)))
    assert all(mode & 0o077 == 0 for mode in names.values()), names


def test_status_reports_every_contract_field(home: Home, roots: dict[str, Path]) -> None:
    """status --json has exactly docs/contract.md §4's fields, through the daemon and in direct mode."""
    _corpus(roots)
    fields = {"enabled", "phase", "filesIndexed", "filesDue", "filesFailed", "degradedRoots", "lastReconcileAt",
              "lastSweepCompletedAt", "generation"}
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        assert wait_until(lambda: d.status()["phase"] == "current", timeout=10)
        live = json.loads(run_cli(home.path, "status", "--json", check=True).stdout)
        human = run_cli(home.path, "status", check=True).stdout
    finally:
        d.stop()
    direct = json.loads(run_cli(home.path, "status", "--json", check=True).stdout)
    assert set(live) == set(direct) == fields
    assert live["phase"] == "current" and direct["phase"] == "idle"
    assert live["filesIndexed"] == direct["filesIndexed"] == 2
    assert live["generation"] == direct["generation"] > 0
    assert live["lastSweepCompletedAt"] == direct["lastSweepCompletedAt"] is not None
    assert "daemon mode" in human and "files indexed 2" in human
    assert time.time() * 1000 - live["lastReconcileAt"] < 120_000


def test_a_malformed_root_is_a_usage_error_before_any_child_starts(home: Home, roots: dict[str, Path]) -> None:
    """A bad --root (or config.json root) stops index/serve at once with the scanner's message, exit 2;
    no daemon or scanner is started (it used to restart the scanner for ever)."""
    for spec in ("gemini2=/tmp/x", "claude=", "nonsense"):
        for cmd in ("index", "serve"):
            t0 = time.monotonic()
            out = run_cli(home.path, cmd, "--no-default-roots", "--root", spec, timeout=30)
            assert out.returncode == 2, (cmd, spec, out.stderr)
            assert "must look like AGENT=PATH" in out.stderr
            assert time.monotonic() - t0 < 20
    (home.path / "config.json").write_text(json.dumps({"roots": ["codex"], "embed": {"enabled": False}}))
    out = run_cli(home.path, "index", "--no-default-roots", timeout=30)
    assert out.returncode == 2 and "must look like AGENT=PATH" in out.stderr
    assert not home.db_path.exists()


def test_a_closed_pipe_ends_output_quietly(home: Home, roots: dict[str, Path]) -> None:
    """`aivault status | head -1` prints one line and no 'internal error: BrokenPipeError'."""
    _corpus(roots)
    _index(home, roots)
    import subprocess
    import sys

    from tests.support.common import cli_env

    for args in (["status"], ["search", "lock"]):
        p = subprocess.run(f"{sys.executable} -m aivault.cli {' '.join(args)} | head -c 5", shell=True,
                           env=cli_env(home.path), capture_output=True, text=True, timeout=60)
        assert "BrokenPipe" not in p.stderr and "internal error" not in p.stderr, p.stderr
        assert len(p.stdout) == 5


def test_everyday_usage_mistakes_get_clear_messages(home: Home, roots: dict[str, Path]) -> None:
    """Unknown or capitalised agent names, non-numeric days and clamped limits are explained, not swallowed."""
    _corpus(roots)
    _index(home, roots)
    bad = run_cli(home.path, "search", "lock", "--agent", "Claude")
    assert bad.returncode == 2 and "lower-case" in bad.stderr and "--agent claude" in bad.stderr
    bad = run_cli(home.path, "search", "lock", "--agent", "gemini2")
    assert bad.returncode == 2 and "unknown agent 'gemini2'" in bad.stderr and "claude" in bad.stderr
    days = run_cli(home.path, "policy", "--history-days", "abc")
    assert days.returncode == 2 and "whole number of days" in days.stderr and "_positive" not in days.stderr
    for limit, note in (("0", "below 1"), ("-5", "below 1"), ("500", "maximum of 100")):
        out = run_cli(home.path, "search", "lock", "--limit", limit)
        assert out.returncode == 0 and note in out.stderr and out.stderr.count("--limit") == 1
    quiet = run_cli(home.path, "search", "lock", "--limit", "5")
    assert quiet.stderr == ""
    rec = run_cli(home.path, "rpc", "aiVault.reconcile", "{}")
    assert rec.returncode != 0 and "aivault index" in rec.stderr and "clear" not in rec.stderr


def test_debug_prints_the_planner_report_in_human_output(home: Home, roots: dict[str, Path]) -> None:
    """--debug shows the route, repaired words and each hit's ranks, not just the hits."""
    _corpus(roots)
    _index(home, roots)
    out = run_cli(home.path, "search", "DuckDB lcok", "--debug", check=True).stdout
    assert "debug: route typo" in out
    assert "repaired: lcok -> lock" in out
    assert "lexical rank 1" in out


def test_index_with_no_transcripts_says_where_it_looked(home: Home, tmp_path: Path) -> None:
    """With no agent folders, `index` names each place it looked and whether it exists."""
    empty = tmp_path / "nothing-here"
    out = run_cli(home.path, "index", "--no-default-roots", "--root", f"claude={empty}", check=True).stdout
    assert "no transcripts found" in out and f"claude {empty} (absent)" in out


def test_status_counts_sessions_not_ids_handed_out(home: Home, roots: dict[str, Path]) -> None:
    """After retention changes re-read files, status still says how many sessions there are."""
    _corpus(roots)
    d = DaemonProcess(home, roots)
    try:
        d.reconcile()
        for days in ("90", None, "30", None):
            run_cli(home.path, "policy", *(["--history-days", days] if days else ["--forever"]), check=True)
            time.sleep(1.5)
            d.reconcile()
        human = run_cli(home.path, "status", check=True).stdout
    finally:
        d.stop()
    assert "sessions 2 ·" in human
    direct = run_cli(home.path, "status", check=True).stdout
    assert "sessions 2" in direct


def test_a_symlinked_project_folder_is_indexed_and_a_loop_is_not_followed(home: Home, roots: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    """A project folder that is a symlink is followed (once, loops guarded) instead of skipped in silence."""
    real = tmp_path / "elsewhere" / "-home-dev-linked"
    c = ClaudeWriter(real.parent, cwd="/home/dev/linked")
    c.user("a session behind a symlink about capybaras")
    os.symlink(real, roots["claude"] / "-home-dev-linked")
    os.symlink(roots["claude"], real / "loop")  # a cycle back to the root
    _index(home, roots)
    hits = json.loads(run_cli(home.path, "search", "capybaras", "--json", check=True).stdout)["hits"]
    assert len(hits) == 1


def test_ctrl_c_during_index_exits_130_without_a_libzmq_assertion(home: Home, roots: dict[str, Path]) -> None:
    """Ctrl-C at several moments of `index` ends with exit 130 and no "Bad address (src/tcp.cpp…)" from a
    scanner whose zero-copy frames outlived its socket (a race: several moments are tried)."""
    import subprocess
    import sys

    from tests.support.common import cli_env

    for s in range(12):
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/p{s}")
        for i in range(800):
            c.user(f"message {i} of session {s} about quolls and their dens " * 3)
    args = [sys.executable, "-m", "aivault.cli", "index", "--no-default-roots", "--root", f"claude={roots['claude']}"]
    for delay in (0.8, 1.1, 1.4, 1.7, 2.0, 2.3):
        for p in home.path.glob("index.duckdb*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        proc = subprocess.Popen(args, env=cli_env(home.path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Bad address" not in err and "Assertion" not in err and "Traceback" not in err, err
        assert "Exception ignored" not in err, err  # a KeyboardInterrupt swallowed mid-import (a hang)
        assert not (home.path / "index.duckdb.postings").exists()  # a one-shot load builds no sidecars
        # 130, or -SIGINT when the signal lands while the interpreter is still starting (a shell shows 130).
        assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)


def test_version_prints_the_package_version(home: Home) -> None:
    """`aivault --version` (with or without --home) prints aivault.__version__, the version pyproject.toml declares."""
    import tomllib

    import aivault

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert aivault.__version__ == declared["project"]["version"]
    for args in (["--version"], ["--home", str(home.path), "--version"]):
        out = run_cli(home.path, *args)
        assert (out.returncode, out.stdout, out.stderr) == (0, f"aivault {aivault.__version__}\n", "")


def _parsers(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command line, nested subcommands included, each with the words that reach it."""
    path = path or parser.prog
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def undocumented(parser: argparse.ArgumentParser, unlisted: frozenset[str] = frozenset()) -> list[str]:
    """The options, arguments and subcommands of the whole command line that have no help line (argparse's -h
    aside; an option hidden on purpose says so with argparse.SUPPRESS, a subcommand by being in ``unlisted``)."""
    missing: list[str] = []
    for path, p in _parsers(parser):
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                listed = {choice.dest: choice.help for choice in action._choices_actions}
                missing += [f"{path} {name}" for name in action.choices
                            if not listed.get(name) and f"{path} {name}" not in unlisted]
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_has_a_help_line() -> None:
    """Walking the whole parser, every subcommand (nested ones too) and every option and argument has a help line."""
    from aivault.cli import OLDER_SPELLINGS, build_parser

    parser = build_parser()
    assert undocumented(parser, frozenset(f"aivault {old}" for old in OLDER_SPELLINGS)) == []
    commands = [path for path, _ in _parsers(parser)]
    assert "aivault hosts add" in commands and "aivault agent install" in commands  # the walk reaches nested ones
    bare = argparse.ArgumentParser(prog="t")
    bare.add_argument("--quiet", action="store_true")
    bare.add_subparsers(dest="verb").add_parser("go").add_argument("target")
    assert undocumented(bare) == ["t --quiet", "t go", "t go target"]


def test_every_command_module_registers_the_commands_the_table_gives_it() -> None:
    """Each module named in cli.COMMANDS registers, through its own register(sub), exactly the command words the
    table maps to it; the parser built for one word holds that module's commands and no other's."""
    import importlib

    from aivault.cli import COMMANDS, build_parser

    def words(parser: argparse.ArgumentParser) -> set[str]:
        return {w for a in parser._actions if isinstance(a, argparse._SubParsersAction) for w in a.choices}

    everything: set[str] = set()
    for module in set(COMMANDS.values()):
        mine = {word for word, m in COMMANDS.items() if m == module}
        fresh = argparse.ArgumentParser()
        importlib.import_module(f"aivault.cli.{module}").register(fresh.add_subparsers())
        assert words(fresh) == mine, module
        assert all(words(build_parser(word)) == mine for word in mine), module
        everything |= mine
    assert words(build_parser()) == everything == set(COMMANDS)


def test_every_older_spelling_runs_its_noun_and_is_named_once_below_the_commands() -> None:
    """Each of cli.OLDER_SPELLINGS parses to the same command as its new spelling and says so in its own help; the
    list of commands leaves exactly these out, and names each of them with its new spelling below the list."""
    from aivault.cli import OLDER_SPELLINGS, build_parser

    parser = build_parser()
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(top.choices) - {choice.dest for choice in top._choices_actions} == set(OLDER_SPELLINGS)
    listing = " ".join(parser.format_help().split())
    for old, new in OLDER_SPELLINGS.items():
        extra = ["--stdio"] if old == "relay" else []
        assert parser.parse_args([old, *extra]).fn is parser.parse_args([*new.split(), *extra]).fn, old
        assert f"`aivault {new}`" in (top.choices[old].description or ""), old
        assert f"{old} ({new})" in listing, old


def test_the_policy_noun_shows_and_changes_consent_retention_and_the_relay(home: Home) -> None:
    """`policy enable|retention|relay|show|disable` change and show what enable, policy's options and disable do;
    `policy --json show` keeps the noun's --json, and each verb refuses another --host."""
    policy.save(home, policy.Policy(False, None))
    out = run_cli(home.path, "policy", "enable", "--history-days", "30", check=True).stdout
    assert "session search enabled" in out and "keeping the last 30 days" in out
    assert policy.load(home) == policy.Policy(True, 30)
    run_cli(home.path, "policy", "retention", "forever", check=True)
    assert policy.load(home) == policy.Policy(True, None)
    out = run_cli(home.path, "policy", "retention", "7", check=True).stdout
    assert "keeping the last 7 days" in out and "a running daemon applies this now" in out
    for bad, says in (("0", "positive"), ("soon", "whole number of days")):
        refused = run_cli(home.path, "policy", "retention", bad)
        assert refused.returncode == 2 and says in refused.stderr
    run_cli(home.path, "policy", "relay", "on", check=True)
    assert policy.relay_allowed(home)
    shown = run_cli(home.path, "policy", "show", check=True).stdout
    assert "session search enabled" in shown and "keeping the last 7 days" in shown and "ssh relay: on" in shown
    for args in (["show", "--json"], ["--json", "show"], ["retention", "7", "--json"]):
        assert json.loads(run_cli(home.path, "policy", *args, check=True).stdout) == {"enabled": True,
                                                                                      "historyDays": 7}
    run_cli(home.path, "policy", "relay", "off", check=True)
    assert not policy.relay_allowed(home)
    for args in (["retention", "30"], ["enable"], ["relay", "on"]):
        refused = run_cli(home.path, "policy", *args, "--host", "ssh:devbox")
        assert refused.returncode == 2 and "each machine's own" in refused.stderr, args
    assert "disabled" in run_cli(home.path, "policy", "disable", check=True).stdout
    assert policy.load(home) == policy.Policy(False, 7) and not policy.relay_allowed(home)
