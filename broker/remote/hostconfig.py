"""The remote hosts this machine searches (``hosts.json``) and how it reaches them.

    hosts.json   {"hosts": {"ssh:devbox": {"sshCommand": [...]?, "relayCommand": "..."?},
                            "runtime:ci-7": {"address": "tcp://10.0.0.7:7455", "serverKey": "<z85>",
                                             "pairedAt": 1767225600000}}}

How ssh is run is, most specific first: the host's own ``sshCommand`` / ``relayCommand``, then
``AIVAULT_SSH_COMMAND`` / ``AIVAULT_SSH_RELAY_COMMAND``, then ``config.json``'s
``{"ssh": {"command": ..., "relayCommand": ...}}``, then ``ssh -T -o BatchMode=yes`` and
``aivault relay --stdio``. The ssh command is a word list (or one string split like a shell would), so
``-i``, ``-p``, ``-J`` and aliases of ``~/.ssh/config`` all work; the relay command is the one line the
remote shell runs (``env AIVAULT_HOME=/data/aivault aivault relay --stdio``).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from aivault import config
from aivault.broker.remote.hosts import Host, parse_host
from aivault.errors import ConfigInvalid, InvalidParams
from aivault.home import Home, read_private, unusable, write_private
from aivault.protocol import HOST_CONNECT_TIMEOUT_S, HOST_IDLE_TIMEOUT_S, HOST_REQUEST_TIMEOUT_S, RPC_TIMEOUT_S

HOSTS_FILE = "hosts.json"
DEFAULT_SSH_COMMAND: tuple[str, ...] = ("ssh", "-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
                                        "-o", "ServerAliveCountMax=3")
DEFAULT_RELAY_COMMAND = "aivault relay --stdio"
SSH_COMMAND_ENV = "AIVAULT_SSH_COMMAND"
RELAY_COMMAND_ENV = "AIVAULT_SSH_RELAY_COMMAND"


@dataclass(frozen=True, slots=True)
class HostEntry:
    """One configured remote host."""

    id: str
    ssh_command: tuple[str, ...] | None = None
    relay_command: str | None = None
    address: str | None = None  # a runtime's tcp://host:port
    server_key: str | None = None  # a runtime's CurveZMQ public key, z85
    paired_at: int | None = None

    @property
    def kind(self) -> Literal["ssh", "runtime"]:
        return "ssh" if self.id.startswith("ssh:") else "runtime"

    @property
    def target(self) -> str:
        """The ssh destination (``user@host``, an alias) or the runtime's environment id."""
        return self.id.partition(":")[2]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.ssh_command is not None:
            out["sshCommand"] = list(self.ssh_command)
        if self.relay_command is not None:
            out["relayCommand"] = self.relay_command
        if self.address is not None:
            out["address"] = self.address
        if self.server_key is not None:
            out["serverKey"] = self.server_key
        if self.paired_at is not None:
            out["pairedAt"] = self.paired_at
        return out


def remote_host(value: str) -> Host:
    """A host id naming a remote host (ssh or runtime), or InvalidParams saying what is accepted."""
    host = parse_host(value)
    if host.is_local:
        raise InvalidParams("local is this machine: it needs no entry in the host list")
    if host.id.startswith("ssh:") and host.id[4:].startswith("-"):
        raise InvalidParams(f"invalid ssh target {host.id[4:]!r}: a target cannot start with '-'")
    return host


def _words(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ConfigInvalid(f"{where}: {exc}") from exc
    elif isinstance(value, list) and all(isinstance(w, str) for w in value):
        words = list(value)
    else:
        raise ConfigInvalid(f"{where} must be a command line: a string or a list of strings")
    if not words:
        raise ConfigInvalid(f"{where} is empty")
    return tuple(words)


def _line(value: Any, where: str) -> str:
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return shlex.join(value)
    if isinstance(value, str) and value.strip():
        return value
    raise ConfigInvalid(f"{where} must be a command line: a string or a list of strings")


def _hosts_path(home: Home) -> Any:
    return home.path / HOSTS_FILE


def load_hosts(home: Home) -> dict[str, HostEntry]:
    """The configured hosts by id ({} when there is no hosts.json)."""
    path = _hosts_path(home)
    try:
        raw = json.loads(read_private(path).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise unusable(path, exc, "read") from exc
    except ValueError as exc:
        raise ConfigInvalid(f"cannot read {path}: {exc}; fix it or remove the hosts with `aivault hosts remove`") \
            from exc
    hosts = raw.get("hosts") if isinstance(raw, dict) else None
    if not isinstance(hosts, dict):
        raise ConfigInvalid(f"{path} must hold {{\"hosts\": {{id: {{...}}}}}}")
    out: dict[str, HostEntry] = {}
    for hid, spec in hosts.items():
        where = f"{path}: hosts[{hid!r}]"
        try:
            host = remote_host(hid)
        except InvalidParams as exc:
            raise ConfigInvalid(f"{where}: {exc}") from exc
        if not isinstance(spec, dict):
            raise ConfigInvalid(f"{where} must be an object")
        entry = HostEntry(
            host.id,
            ssh_command=_words(spec["sshCommand"], f"{where}.sshCommand") if "sshCommand" in spec else None,
            relay_command=_line(spec["relayCommand"], f"{where}.relayCommand") if "relayCommand" in spec else None,
            address=spec.get("address") if isinstance(spec.get("address"), str) else None,
            server_key=spec.get("serverKey") if isinstance(spec.get("serverKey"), str) else None,
            paired_at=spec.get("pairedAt") if isinstance(spec.get("pairedAt"), int) else None,
        )
        if entry.kind == "runtime" and (entry.address is None or entry.server_key is None):
            raise ConfigInvalid(f"{where} needs an address and a serverKey: pair it again with `aivault hosts pair`")
        out[host.id] = entry
    return out


def save_hosts(home: Home, hosts: dict[str, HostEntry]) -> None:
    home.ensure()
    body = {"hosts": {hid: hosts[hid].to_json() for hid in sorted(hosts)}}
    path = _hosts_path(home)
    try:
        write_private(path, (json.dumps(body, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise unusable(path, exc, "write") from exc


def hosts_stamp(home: Home) -> tuple[int, int, int] | None:
    """What changes when hosts.json is rewritten (it is replaced by a rename: a new inode)."""
    try:
        st = os.stat(_hosts_path(home))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """How connections to remote hosts are made and how long they may take."""

    ssh_command: tuple[str, ...] = DEFAULT_SSH_COMMAND
    relay_command: str = DEFAULT_RELAY_COMMAND
    connect_timeout_s: float = HOST_CONNECT_TIMEOUT_S
    request_timeout_s: float = HOST_REQUEST_TIMEOUT_S
    idle_timeout_s: float = HOST_IDLE_TIMEOUT_S

    def ssh_argv(self, entry: HostEntry) -> list[str]:
        """The ssh command line reaching ``entry``'s relay; ``--`` keeps the target from being read as an option."""
        command = entry.ssh_command or self.ssh_command
        return [*command, "--", entry.target, entry.relay_command or self.relay_command]


def _seconds(section: dict[str, Any], key: str, default: float, where: str, most: float | None = None) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or (most and value > most):
        limit = f" and at most {most:g}" if most else ""
        raise ConfigInvalid(f"{where}.{key} must be a number of seconds above 0{limit}, not {value!r}")
    return float(value)


def remote_settings(home: Home) -> RemoteSettings:
    """The ssh command lines and the timeouts, from the environment and config.json."""
    cfg = config.load(home)
    ssh = cfg.get("ssh") or {}
    hosts = cfg.get("hosts") or {}
    where = str(home.config_path)
    if not isinstance(ssh, dict) or not isinstance(hosts, dict):
        raise ConfigInvalid(f"{where}: 'ssh' and 'hosts' must be objects")
    command = DEFAULT_SSH_COMMAND
    relay = DEFAULT_RELAY_COMMAND
    if "command" in ssh:
        command = _words(ssh["command"], f"{where}: ssh.command")
    if "relayCommand" in ssh:
        relay = _line(ssh["relayCommand"], f"{where}: ssh.relayCommand")
    if os.environ.get(SSH_COMMAND_ENV):
        command = _words(os.environ[SSH_COMMAND_ENV], f"${SSH_COMMAND_ENV}")
    if os.environ.get(RELAY_COMMAND_ENV):
        relay = os.environ[RELAY_COMMAND_ENV]
    # A daemon routing to a host must answer its own client before that client's RPC timeout.
    return RemoteSettings(
        ssh_command=command, relay_command=relay,
        connect_timeout_s=_seconds(hosts, "connectTimeoutS", HOST_CONNECT_TIMEOUT_S, f"{where}: hosts",
                                   RPC_TIMEOUT_S - 5),
        request_timeout_s=_seconds(hosts, "requestTimeoutS", HOST_REQUEST_TIMEOUT_S, f"{where}: hosts",
                                   RPC_TIMEOUT_S - 5),
        idle_timeout_s=_seconds(hosts, "idleTimeoutS", HOST_IDLE_TIMEOUT_S, f"{where}: hosts"),
    )
