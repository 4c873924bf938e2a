"""``aivault agent install|uninstall``: register the MCP server in an agent's config and add its instruction.

Per agent, two files (each agent's own layout, its environment override respected):

* Claude Code: ``mcpServers.aivault`` in ``~/.claude.json`` (user scope, what ``claude mcp add -s user``
  writes; ``$CLAUDE_CONFIG_DIR/.claude.json`` when set) and the skill ``~/.claude/skills/aivault/SKILL.md``
  (under ``$CLAUDE_CONFIG_DIR`` when set);
* Codex: ``[mcp_servers.aivault]`` in ``~/.codex/config.toml`` and a marked block in ``~/.codex/AGENTS.md``
  (both under ``$CODEX_HOME`` when set);
* Gemini CLI: ``mcpServers.aivault`` in ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME/.gemini``) and a
  marked block in ``GEMINI.md`` beside it.

Every edit is planned first as (file, old text, new text): running it twice changes nothing the
second time, a file whose meaning would not change keeps its bytes (no reformatting), a file that
changes is copied to a timestamped backup first and replaced atomically, and the exact unified diff
is printed -- with ``--dry-run`` only printed. The server is started as ``<aivault> --home <data dir>
mcp``: Codex starts MCP servers with a cleared environment, so the data directory travels as an
argument, not as ``AIVAULT_HOME``.

With ``--http 127.0.0.1:PORT`` the entry instead points the agent at ``aivault mcp --http`` on that
address, with the bearer token of ``mcp.token`` in the header field each agent reads: Claude Code
``{"type": "http", "url", "headers"}``, Gemini CLI ``{"httpUrl", "headers"}``, Codex ``url`` and
``http_headers``. A config file that then holds the token is written owner-only (0600).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aivault.agents import AGENTS, texts
from aivault.errors import ConfigInvalid

SERVER_NAME = "aivault"
_RESTART = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file's planned edit; ``None`` text means the file does not exist (before) or is removed (after)."""

    path: Path
    old: str | None
    new: str | None
    what: str
    # False when the old text is exactly what aivault writes (its own skill): nothing of the user's to keep.
    backup: bool = True
    # The new text holds a secret (the MCP bearer token): the file is written 0600 whatever its mode was.
    private: bool = False

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        a = (self.old or "").splitlines(keepends=True)
        b = (self.new or "").splitlines(keepends=True)
        lines = difflib.unified_diff(a, b, fromfile=str(self.path) if self.old is not None else "/dev/null",
                                     tofile=str(self.path) if self.new is not None else "/dev/null")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def server_command(data_dir: Path) -> tuple[str, list[str]]:
    """How an agent starts this aivault's MCP server: the console script beside this interpreter, else -m."""
    script = Path(sys.executable).parent / "aivault"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script), ["--home", str(data_dir), "mcp"]
    return sys.executable, ["-m", "aivault.cli", "--home", str(data_dir), "mcp"]


@dataclass(frozen=True, slots=True)
class HttpServer:
    """``aivault mcp --http`` as an agent reaches it: its URL and the bearer token."""

    url: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def http_server(data_dir: Path, address: str, *, dry_run: bool = False) -> HttpServer:
    """The URL for ``--http ADDRESS`` (a fixed loopback port) and the token of ``mcp.token`` (made if missing,
    unless this is a dry run)."""
    from aivault import tokens
    from aivault.home import Home
    from aivault.mcp.http_transport import parse_http_address, url_for

    host, port = parse_http_address(address)
    if port == 0:
        raise ConfigInvalid("--http needs the port `aivault mcp --http` listens on, not 0: start it on a fixed one "
                            "(`aivault mcp --http 127.0.0.1:8765`) and give the same address here")
    home = Home(data_dir)
    token = tokens.load(home, tokens.MCP_TOKEN) if dry_run else tokens.load_or_create(home, tokens.MCP_TOKEN)
    return HttpServer(url_for(host, port), token or "<a new token>")


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigInvalid(f"cannot read {path}: {exc}") from exc


# --- the edits, as text -> text ----------------------------------------------------------------------
def edit_json(path: Path, old: str | None, entry: dict[str, Any] | None) -> tuple[str | None, str]:
    """``mcpServers.aivault`` set to ``entry`` (None: removed); the text is kept when nothing changes."""
    try:
        data = json.loads(old) if old and old.strip() else {}
    except ValueError as exc:
        raise ConfigInvalid(f"{path} is not plain JSON ({exc}); add mcpServers.{SERVER_NAME} by hand or fix the "
                            "file first") from exc
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigInvalid(f"{path}: expected a JSON object whose mcpServers is an object")
    servers = data.get("mcpServers", {})
    if entry is None:
        if SERVER_NAME not in servers:
            return old, "no aivault server registered"
        del servers[SERVER_NAME]
        what = f"mcpServers.{SERVER_NAME} removed"
    else:
        if servers.get(SERVER_NAME) == entry:
            return old, "already registered"
        what = f"mcpServers.{SERVER_NAME} {'replaced' if SERVER_NAME in servers else 'added'}"
        data["mcpServers"] = {**servers, SERVER_NAME: entry}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n", what


def edit_toml(path: Path, old: str | None, entry: dict[str, Any] | None) -> tuple[str | None, str]:
    """``[mcp_servers.aivault]`` in Codex's config.toml set to ``entry`` (None: removed), everything else kept
    as written (tomlkit); a dict value of ``entry`` is written as an inline table."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(old or "")
    except TOMLKitError as exc:
        raise ConfigInvalid(f"{path} is not valid TOML ({exc}); fix it first") from exc
    servers: Any = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise ConfigInvalid(f"{path}: mcp_servers must be a table")
    current = servers.get(SERVER_NAME) if servers is not None else None
    if entry is None:
        if current is None or servers is None:
            return old, "no aivault server registered"
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
        # The blank line install put before the table goes with it.
        text = tomlkit.dumps(doc).rstrip("\n")
        return (text + "\n" if text else ""), f"[mcp_servers.{SERVER_NAME}] removed"
    if current is not None and _plain(current) == entry:
        return old, "already registered"
    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[key] = inline
        else:
            table[key] = value
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    what = f"[mcp_servers.{SERVER_NAME}] {'replaced' if current is not None else 'added'}"
    servers[SERVER_NAME] = table
    text = tomlkit.dumps(doc)
    return (text if text.endswith("\n") else text + "\n"), what


def _plain(value: Any) -> Any:
    """A tomlkit item as plain Python values (for comparing with what would be written)."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def edit_block(old: str | None, install: bool) -> tuple[str | None, str]:
    """The marked instruction block of AGENTS.md / GEMINI.md: added, replaced, or removed."""
    text = old or ""
    start, end = text.find(texts.BEGIN), text.find(texts.END)
    has = start != -1 and end > start
    rest = (text[:start].rstrip("\n") + "\n\n" + text[end + len(texts.END):].lstrip("\n")).strip("\n") if has else text
    if not install:
        if not has:
            return old, "no aivault instructions"
        return (rest + "\n" if rest.strip() else None), "aivault instructions removed"
    if has and text[start : end + len(texts.END)] + "\n" == texts.BLOCK:
        return old, "instructions already there"
    body = rest.rstrip("\n")
    new = (body + "\n\n" if body else "") + texts.BLOCK
    return new, "aivault instructions " + ("replaced" if has else "added")


# --- per agent -----------------------------------------------------------------------------------------
def _user_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home()).expanduser()


def plan(agent: str, install: bool, data_dir: Path, env: Mapping[str, str] | None = None,
         http: HttpServer | None = None) -> list[FileChange]:
    """The edits for one agent, computed without writing anything; ``http``: register the HTTP server."""
    env = os.environ if env is None else env
    home = _user_home(env)
    command, args = server_command(data_dir)
    private = install and http is not None
    changes = []
    if agent == "claude-code":
        base = Path(env["CLAUDE_CONFIG_DIR"]).expanduser() if env.get("CLAUDE_CONFIG_DIR") else None
        config = (base / ".claude.json") if base else home / ".claude.json"
        entry: dict[str, Any] = {"type": "stdio", "command": command, "args": args, "env": {}}
        if http is not None:
            entry = {"type": "http", "url": http.url, "headers": http.headers}
        old = _read(config)
        changes.append(FileChange(config, old, *edit_json(config, old, entry if install else None), private=private))
        skill = (base or home / ".claude") / "skills" / SERVER_NAME / "SKILL.md"
        old = _read(skill)
        ours = old == texts.SKILL
        if install:
            changes.append(FileChange(skill, old, texts.SKILL, "skill already there" if ours else "skill written",
                                      backup=not ours))
        else:
            changes.append(FileChange(skill, old, None, "skill removed" if old is not None else "no skill",
                                      backup=not ours))
    elif agent == "codex":
        base = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home / ".codex"
        config = base / "config.toml"
        old = _read(config)
        table: dict[str, Any] = {"command": command, "args": args}
        if http is not None:
            table = {"url": http.url, "http_headers": http.headers}
        changes.append(FileChange(config, old, *edit_toml(config, old, table if install else None), private=private))
        notes = base / "AGENTS.md"
        old = _read(notes)
        changes.append(FileChange(notes, old, *edit_block(old, install)))
    elif agent == "gemini":
        base = (Path(env["GEMINI_CLI_HOME"]).expanduser() if env.get("GEMINI_CLI_HOME") else home) / ".gemini"
        config = base / "settings.json"
        old = _read(config)
        entry = {"command": command, "args": args}
        if http is not None:
            entry = {"httpUrl": http.url, "headers": http.headers}
        changes.append(FileChange(config, old, *edit_json(config, old, entry if install else None), private=private))
        notes = base / "GEMINI.md"
        old = _read(notes)
        changes.append(FileChange(notes, old, *edit_block(old, install)))
    else:
        raise ConfigInvalid(f"unknown agent {agent!r}: aivault agent install knows {', '.join(AGENTS)}")
    return changes


def apply(changes: list[FileChange], now: datetime | None = None) -> dict[Path, Path]:
    """Write the changed files (backup first, then an atomic replace keeping the file's mode); backups by file."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    backups: dict[Path, Path] = {}
    for c in changes:
        if not c.changed:
            continue
        if c.old is not None and c.backup:
            backup = c.path.with_name(f"{c.path.name}.aivault-backup-{stamp}")
            n = 1
            while backup.exists():  # never over an earlier backup (two runs in one second)
                backup = c.path.with_name(f"{c.path.name}.aivault-backup-{stamp}-{n}")
                n += 1
            shutil.copy2(c.path, backup)
            backups[c.path] = backup
        if c.new is None:
            c.path.unlink()
            if c.path.name == "SKILL.md" and c.path.parent.name == SERVER_NAME and not any(c.path.parent.iterdir()):
                c.path.parent.rmdir()
            continue
        c.path.parent.mkdir(parents=True, exist_ok=True)
        mode = c.path.stat().st_mode & 0o777 if c.path.exists() else 0o600
        if c.private:
            mode &= 0o600
        fd, tmp = tempfile.mkstemp(prefix=f".{c.path.name}.", suffix=".tmp", dir=c.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(c.new)
            os.chmod(tmp, mode)
            os.replace(tmp, c.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return backups


def report(agent: str, install: bool, changes: list[FileChange], backups: dict[Path, Path], dry_run: bool,
           http: HttpServer | None = None, data_dir: Path | None = None) -> str:
    """What changed (or would), file by file, with each file's exact diff (the bearer token masked)."""
    verb = "install" if install else "uninstall"
    out = [f"{agent}: {verb}" + (" (dry run: nothing written)" if dry_run else "")]
    for c in changes:
        if not c.changed:
            out.append(f"  {c.path}: unchanged ({c.what})")
            continue
        action = "would change" if dry_run else ("created" if c.old is None else "removed" if c.new is None
                                                  else "changed")
        note = f"; backup {backups[c.path]}" if c.path in backups else ""
        if c.private:
            note += "; owner-only (0600): it holds the bearer token"
        out.append(f"  {c.path}: {action}: {c.what}{note}")
        diff = c.diff()
        if http is not None:
            diff = diff.replace(http.token, "<the token in mcp.token>")
        out.append("".join("    " + line for line in diff.splitlines(keepends=True)).rstrip("\n"))
    if install and http is not None:
        address = http.url.split("/")[2]
        home = f" --home {data_dir}" if data_dir is not None else ""
        out.append(f"The agent reaches aivault at {http.url}: keep `aivault{home} mcp --http {address}` running "
                   "while it works (a user service, or a terminal).")
    if any(c.changed for c in changes) and not dry_run:
        out.append(f"Restart {_RESTART[agent]} to {'load' if install else 'drop'} the aivault tools.")
    elif not any(c.changed for c in changes):
        out.append("Nothing to do.")
    return "\n".join(out)
