"""``aivault agent install|uninstall`` against a temporary HOME: each agent's files, idempotence, backups, undo."""

from __future__ import annotations

import json
import socket
import stat
import tomllib
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from aivault.agents import texts
from aivault.home import Home
from tests.support.common import cli_env, run_cli
from tests.support.mcphttp import McpHttpProcess

OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")


def agent(home: Home, user: Path, *args: str, **env: str) -> Any:
    e = cli_env(home.path, HOME=str(user), **env)
    for name in OVERRIDES:
        if name not in env:
            e.pop(name, None)
    return run_cli(home.path, "agent", *args, env=e)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    u = tmp_path / "user"
    u.mkdir()
    return u


def _backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.aivault-backup-*"))


def test_claude_code_install_is_idempotent_backed_up_and_undone(home: Home, user: Path) -> None:
    """~/.claude.json gets mcpServers.aivault (other keys kept) and a skill; twice changes nothing; undone."""
    original = {"numStartups": 7, "mcpServers": {"other": {"command": "x"}}, "projects": {"/w": {"a": 1}}}
    config = user / ".claude.json"
    config.write_text(json.dumps(original, indent=2) + "\n")
    r = agent(home, user, "install", "claude-code")
    assert r.returncode == 0, r.stderr
    data = json.loads(config.read_text())
    entry = data["mcpServers"]["aivault"]
    assert entry["type"] == "stdio" and entry["args"][-3:] == ["--home", str(home.path), "mcp"]
    assert data["mcpServers"]["other"] == {"command": "x"} and data["projects"] == original["projects"]
    skill = user / ".claude" / "skills" / "aivault" / "SKILL.md"
    assert skill.read_text() == texts.SKILL and skill.read_text().startswith("---\nname: aivault\n")
    assert '+    "aivault": {' in r.stdout and "backup" in r.stdout and "Restart Claude Code" in r.stdout
    assert json.loads(_backups(user)[0].read_text()) == original
    again = agent(home, user, "install", "claude-code")
    assert "Nothing to do." in again.stdout and len(_backups(user)) == 1
    undo = agent(home, user, "uninstall", "claude-code")
    assert undo.returncode == 0 and json.loads(config.read_text()) == {**original}
    assert not skill.exists() and not skill.parent.exists()


def test_dry_run_prints_the_diff_and_writes_nothing(home: Home, user: Path) -> None:
    """--dry-run shows what would change, file by file, and leaves every file as it was."""
    r = agent(home, user, "install", "gemini", "--dry-run")
    assert r.returncode == 0 and "dry run" in r.stdout and "would change" in r.stdout
    assert '+    "aivault": {' in r.stdout and "+## Past agent sessions (aivault)" in r.stdout
    assert not (user / ".gemini").exists()


def test_codex_keeps_the_config_as_written_and_restores_it(home: Home, user: Path, tmp_path: Path) -> None:
    """CODEX_HOME/config.toml keeps its comments and tables; the block goes into AGENTS.md; uninstall restores both."""
    codex = tmp_path / "codex-home"
    codex.mkdir()
    text = '# my settings\nmodel = "o3"  # the good one\n\n[mcp_servers.other]\ncommand = "x"\nargs = ["y"]\n'
    (codex / "config.toml").write_text(text)
    (codex / "AGENTS.md").write_text("# House rules\n\nRun the tests.\n")
    r = agent(home, user, "install", "codex", CODEX_HOME=str(codex))
    assert r.returncode == 0, r.stderr
    new = (codex / "config.toml").read_text()
    assert new.startswith(text) and "# the good one" in new
    cfg = tomllib.loads(new)
    assert cfg["mcp_servers"]["aivault"]["args"][-3:] == ["--home", str(home.path), "mcp"]
    assert cfg["mcp_servers"]["other"] == {"command": "x", "args": ["y"]}
    notes = (codex / "AGENTS.md").read_text()
    assert notes.startswith("# House rules\n\nRun the tests.\n\n") and texts.BEGIN in notes
    assert not (user / ".codex").exists()
    assert "Nothing to do." in agent(home, user, "install", "codex", CODEX_HOME=str(codex)).stdout
    agent(home, user, "uninstall", "codex", CODEX_HOME=str(codex))
    assert (codex / "config.toml").read_text() == text
    assert (codex / "AGENTS.md").read_text() == "# House rules\n\nRun the tests.\n"


def test_gemini_and_claude_follow_their_environment_overrides(home: Home, user: Path, tmp_path: Path) -> None:
    """GEMINI_CLI_HOME/.gemini and CLAUDE_CONFIG_DIR are where the files go when set."""
    g, c = tmp_path / "g", tmp_path / "c"
    assert agent(home, user, "install", "gemini", GEMINI_CLI_HOME=str(g)).returncode == 0
    settings = json.loads((g / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["aivault"]["args"][-1] == "mcp"
    assert texts.BEGIN in (g / ".gemini" / "GEMINI.md").read_text()
    assert agent(home, user, "install", "claude-code", CLAUDE_CONFIG_DIR=str(c)).returncode == 0
    assert "aivault" in json.loads((c / ".claude.json").read_text())["mcpServers"]
    assert (c / "skills" / "aivault" / "SKILL.md").is_file()
    assert sorted(p.name for p in user.iterdir()) == []


def test_a_config_that_is_not_json_is_refused_untouched(home: Home, user: Path) -> None:
    """A settings.json or config.toml aivault cannot parse is left as it is and the command says what to do."""
    (user / ".gemini").mkdir()
    bad = '{ "theme": "x", // a comment\n}'
    (user / ".gemini" / "settings.json").write_text(bad)
    r = agent(home, user, "install", "gemini")
    assert r.returncode != 0 and "not plain JSON" in r.stderr and "by hand" in r.stderr
    assert (user / ".gemini" / "settings.json").read_text() == bad and not _backups(user / ".gemini")
    (user / ".codex").mkdir()
    (user / ".codex" / "config.toml").write_text("[mcp_servers\nbroken")
    r = agent(home, user, "install", "codex")
    assert r.returncode != 0 and "not valid TOML" in r.stderr
    assert not (user / ".codex" / "AGENTS.md").exists()


def test_an_unknown_agent_is_a_usage_error(home: Home, user: Path) -> None:
    """The agent names are a closed list, named in the error."""
    r = agent(home, user, "install", "cursor")
    assert r.returncode == 2 and "'claude-code', 'codex', 'gemini'" in r.stderr


def test_the_registered_command_starts_a_working_mcp_server(home: Home, user: Path) -> None:
    """The command and args written for Codex start an MCP server that lists the three tools."""
    assert agent(home, user, "install", "codex").returncode == 0
    entry = tomllib.loads((user / ".codex" / "config.toml").read_text())["mcp_servers"]["aivault"]
    env = cli_env(home.path)
    env.pop("AIVAULT_HOME")  # the data directory travels in the args (Codex clears the environment)

    async def main() -> list[str]:
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
        async with Client(params) as c:
            return [t.name for t in (await c.list_tools()).tools]

    assert anyio.run(main) == ["search_sessions", "read_session", "index_status"]


def test_http_install_puts_the_bearer_token_where_each_agent_reads_headers(home: Home, user: Path) -> None:
    """--http 127.0.0.1:PORT registers `aivault mcp --http` with the token of mcp.token in the header field each
    agent reads (Claude Code headers, Gemini CLI httpUrl + headers, Codex http_headers), each file owner-only and
    the token masked in the printed diff; the entry written for Claude Code reaches the running server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = McpHttpProcess(home, f"127.0.0.1:{port}")
    try:
        claude = user / ".claude.json"
        claude.write_text('{"numStartups": 3}\n')
        claude.chmod(0o644)
        r = agent(home, user, "install", "claude-code", "--http", f"127.0.0.1:{port}")
        assert r.returncode == 0, r.stderr
        bearer = {"Authorization": f"Bearer {server.token}"}
        data = json.loads(claude.read_text())
        assert data["mcpServers"]["aivault"] == {"type": "http", "url": server.url, "headers": bearer}
        assert data["numStartups"] == 3 and stat.S_IMODE(claude.stat().st_mode) == 0o600
        assert server.token not in r.stdout and "<the token in mcp.token>" in r.stdout and "owner-only" in r.stdout
        assert f"mcp --http 127.0.0.1:{port}" in r.stdout
        entry = data["mcpServers"]["aivault"]

        async def main() -> list[str]:
            async with (httpx.AsyncClient(headers=entry["headers"]) as http,
                        Client(streamable_http_client(entry["url"], http_client=http)) as c):
                return [t.name for t in (await c.list_tools()).tools]

        assert anyio.run(main) == ["search_sessions", "read_session", "index_status"]
        assert "Nothing to do." in agent(home, user, "install", "claude-code", "--http", f"127.0.0.1:{port}").stdout
    finally:
        server.stop()
    assert agent(home, user, "install", "gemini", "--http", f"localhost:{port}").returncode == 0
    settings = user / ".gemini" / "settings.json"
    assert json.loads(settings.read_text())["mcpServers"]["aivault"] == {"httpUrl": server.url, "headers": bearer}
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert agent(home, user, "install", "codex", "--http", f"127.0.0.1:{port}").returncode == 0
    config = user / ".codex" / "config.toml"
    assert tomllib.loads(config.read_text())["mcp_servers"]["aivault"] == {"url": server.url, "http_headers": bearer}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert agent(home, user, "uninstall", "codex").returncode == 0
    assert "aivault" not in config.read_text()
    r = agent(home, user, "install", "codex", "--http", "127.0.0.1:0")
    assert r.returncode != 0 and "not 0" in r.stderr
