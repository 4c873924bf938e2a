"""Helpers for the remote-host tests: a fake ssh, a second data directory, a relay spoken to directly.

The fake ssh is the part that is not ssh: it runs the remote command on this machine, as
``ssh <target> <command>`` would on the target (tests/system/test_ssh.py uses a real sshd instead). Everything
behind it is real: ``aivault relay --stdio`` as a child process, its stream, its data directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aivault import policy
from aivault.broker.remote.hostconfig import HostEntry, load_hosts, save_hosts
from aivault.codec import RpcReply, RpcRequest, StreamDecoder, decode_reply, encode_request, encode_stream
from aivault.home import Home, write_private
from aivault.protocol import REMOTE_FRAME_KEY
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import REPO, cli_env, lexical_only, run_cli

# The venv's own console script, by absolute path: what a remote shell would find on its PATH.
AIVAULT = str(Path(sys.executable).with_name("aivault"))
FAKE_RELAY = str(REPO / "tests" / "support" / "fake_relay.py")
# How long a test waits for one reply read straight off a relay stream.
_RECV_TIMEOUT_S = 30.0


def fake_ssh(tmp: Path) -> str:
    """A stand-in for ssh: drops its options up to ``--``, then the target, and runs the command with sh."""
    path = tmp / "fake-ssh"
    path.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift; shift\n'
                    'exec sh -c "$1"\n')
    path.chmod(0o755)
    return str(path)


@dataclass(frozen=True)
class Remote:
    """The far side of a remote-host test: its data directory, its user's HOME and its Claude root."""

    home: Home
    user: Path  # the remote user's HOME: no default root of this machine's own user is read there
    claude: Path

    def env(self) -> dict[str, str]:
        """The environment of a process on the remote side (the CLI, the relay)."""
        return cli_env(self.home.path, HOME=str(self.user))

    def command(self, *, aivault: str = AIVAULT) -> str:
        """The remote command line running the real relay on this data directory."""
        return shlex.join(["env", f"AIVAULT_HOME={self.home.path}", f"HOME={self.user}",
                           "AIVAULT_LOG_LEVEL=warning", aivault, "relay", "--stdio"])

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``aivault ARGS`` run on the remote side."""
        return run_cli(self.home.path, *args, env=self.env(), check=check)


def fake_relay_command(mode: str, marker: Path | None = None) -> str:
    """The remote command line running tests/support/fake_relay.py in ``mode``."""
    args = [sys.executable, FAKE_RELAY, mode, *([str(marker)] if marker else [])]
    return shlex.join(["env", f"PYTHONPATH={REPO}", *args])


def indexed_machine(home_dir: Path, user: Path, claude: Path, roots: list[str], *, relay: bool,
                    config: dict[str, Any] | None = None) -> Remote:
    """Another machine's side: a data directory at ``home_dir`` (consent on, lexical only, and ``config``'s
    keys in its config.json) indexed over ``roots`` (AGENT=PATH), its user's HOME ``user``; relay consent as
    asked."""
    home = Home.resolve(home_dir).ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    cfg = {**json.loads(home.config_path.read_text()), **(config or {})}
    cfg["roots"] = roots
    write_private(home.config_path, json.dumps(cfg).encode())
    remote = Remote(home, user, claude)
    remote.cli("index", "--no-default-roots")
    if relay:
        remote.cli("policy", "--relay", "on")
    return remote


def make_remote(base: Path, *, sessions: int = 3, relay: bool = True, word: str = "quokka") -> Remote:
    """A second data directory with an index of ``sessions`` Claude sessions (and a missing codex root,
    so that its status has a degraded root), relay consent as asked."""
    root = base / "remote-claude"
    root.mkdir(parents=True, exist_ok=True)
    user = base / "remote-user"
    user.mkdir(parents=True, exist_ok=True)
    for i in range(sessions):
        ClaudeWriter(root, cwd=f"/srv/remote/p{i}").user(f"the remote {word} number{i} digs a burrow")
    return indexed_machine(base / "remote-home", user, root,
                           [f"claude={root}", f"codex={base / 'absent-codex' / 'sessions'}"], relay=relay)


def remote_with(base: Path, writes: list[tuple[str, str]], *, relay: bool = True,
                config: dict[str, Any] | None = None) -> Remote:
    """A data directory indexed over its own Claude and Codex roots, one session per (agent, text) of
    ``writes``; relay consent as asked; ``config``: more of its config.json."""
    claude, codex, user = base / "claude", base / "codex", base / "user"
    for d in (claude, codex, user):
        d.mkdir(parents=True, exist_ok=True)
    for agent, text in writes:
        w = ClaudeWriter(claude, cwd=f"{base}/w") if agent == "claude" else CodexWriter(codex, cwd=f"{base}/w")
        w.user(text)
    return indexed_machine(base / "home", user, claude, [f"claude={claude}", f"codex={codex}"], relay=relay,
                           config=config)


def make_client(base: Path) -> Home:
    """The client's data directory: consent on, lexical only, no index of its own."""
    home = Home.resolve(base / "client-home").ensure()
    policy.save(home, policy.Policy(True, None))
    lexical_only(home)
    return home


def add_ssh(client: Home, host_id: str, command: str, ssh: str | list[str]) -> None:
    """Configure ``host_id`` in the client's hosts.json with its own ssh and relay command lines."""
    hosts = load_hosts(client)
    words = tuple(ssh) if isinstance(ssh, list) else (ssh,)
    hosts[host_id] = HostEntry(host_id, ssh_command=words, relay_command=command)
    save_hosts(client, hosts)


def host_timeouts(client: Home, **seconds: float) -> None:
    """Set config.json's ``hosts`` timeouts (connectTimeoutS, requestTimeoutS, idleTimeoutS)."""
    cfg = json.loads(client.config_path.read_text()) if client.config_path.exists() else {}
    cfg["hosts"] = {**cfg.get("hosts", {}), **seconds}
    write_private(client.config_path, json.dumps(cfg).encode())


class RelayProcess:
    """A relay stream spoken to frame by frame (no client code involved): ``aivault relay --stdio`` on
    ``remote`` as a child process, or whatever ``argv`` runs (ssh to a relay)."""

    def __init__(self, remote: Remote, argv: list[str] | None = None) -> None:
        self.stderr_path = remote.home.path / f"relay-{time.monotonic_ns()}.err"
        self._err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(argv or [sys.executable, "-m", "aivault.cli", "relay", "--stdio"],
                                     env=remote.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err)
        self.decoder = StreamDecoder(preamble=True)
        self.pending: list[list[bytes]] = []
        self._read_until(lambda: self.decoder.started)

    def _read_until(self, done: Any) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + _RECV_TIMEOUT_S
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"the relay sent nothing for {_RECV_TIMEOUT_S:g} s: {self.stderr()}")
            data = os.read(fd, 65536)
            if not data:
                raise EOFError(f"the relay closed its output: {self.stderr()}")
            self.pending += self.decoder.feed(data)

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, rid: str, method: str, params: Any, host: str | None = None) -> None:
        self.send_raw(encode_stream(encode_request(REMOTE_FRAME_KEY, RpcRequest(rid, method, params, host))))

    def recv(self) -> RpcReply:
        self._read_until(lambda: bool(self.pending))
        return decode_reply(REMOTE_FRAME_KEY, self.pending.pop(0))

    def call(self, method: str, params: Any = None, host: str | None = None) -> RpcReply:
        self.send("r", method, params if params is not None else {}, host)
        return self.recv()

    def at_eof(self) -> bool:
        """Whether the relay closed its output (after any replies still pending were read)."""
        try:
            self._read_until(lambda: False)
        except EOFError:
            return True
        return False

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._err.close()


def distinct_lengths(*machines: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The machines' (agent, text) lists with every text padded to a word count no other text has (12, 13, ...
    in order), so that no two sessions of all machines tie on a BM25 score: one index breaks a tie by its
    internal session ids, which depend on the order its scanners commit in, a merged search by the hosts'
    order (query/federated.py), and a test comparing the two must not meet one."""
    out: list[list[tuple[str, str]]] = []
    n = 0
    for texts in machines:
        padded = []
        for agent, text in texts:
            words = text.split()
            target = max(12 + n, len(words))
            padded.append((agent, " ".join(words + ["ok"] * (target - len(words)))))
            n = max(n + 1, target - 11)
        out.append(padded)
    return out
