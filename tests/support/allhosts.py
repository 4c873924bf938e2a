"""Machines for the front ends' search over every host (the MCP tool's and the web page's ``all``): this
machine with its own index, and a relay host behind the stand-in ssh (tests/support/remotes.py), both real.

One session is on both machines (a synced home): a merged search finds it once, naming both hosts. Every
other session says "burrow" (the shared one does not): five sessions, three here and two on ssh:devbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aivault.broker.remote.hostconfig import load_hosts, save_hosts
from aivault.home import Home
from tests.builders import ClaudeWriter
from tests.support.remotes import Remote, add_ssh, fake_relay_command, fake_ssh, host_timeouts, indexed_machine

DEVBOX = "ssh:devbox"
HUNG = "ssh:hung"
# The session both machines hold, written identically on each.
SHARED_ID = "0b6a1f4e-2c3d-4e5f-8a9b-5a4e3c2b1d0f"
SHARED_TEXT = "the shared wombat notes about the porch"
LOCAL_TEXTS = ("the local wombat digs a burrow", "a wombat burrow under the porch", "the wombat left the burrow again")
DEVBOX_TEXTS = ("the remote quokka digs a burrow", "a quokka burrow by the sea")


def _machine(base: Path, texts: tuple[str, ...], *, relay: bool) -> Remote:
    """A data directory indexing its own Claude root: one session per text and the shared session."""
    claude, user = base / "claude", base / "user"
    claude.mkdir(parents=True, exist_ok=True)
    user.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(texts):
        ClaudeWriter(claude, cwd=f"/srv/{base.name}/p{i}").user(text + " now" * i).assistant("noted")
    ClaudeWriter(claude, session_id=SHARED_ID, cwd="/srv/shared").user(SHARED_TEXT).assistant("noted")
    return indexed_machine(base / "home", user, claude, [f"claude={claude}", f"codex={base / 'no-codex'}"],
                           relay=relay)


@dataclass(frozen=True)
class Machines:
    local: Remote  # the machine the user sits at: its home is the client's
    devbox: Remote
    ssh: str  # the stand-in ssh

    @property
    def client(self) -> Home:
        return self.local.home


def make_machines(base: Path) -> Machines:
    """This machine (indexed, its own sessions) and ssh:devbox, a real relay on its own indexed data directory."""
    local = _machine(base / "local", LOCAL_TEXTS, relay=False)
    devbox = _machine(base / "devbox", DEVBOX_TEXTS, relay=True)
    ssh = fake_ssh(base)
    add_ssh(local.home, DEVBOX, devbox.command(), ssh)
    host_timeouts(local.home, connectTimeoutS=10, requestTimeoutS=10)
    return Machines(local, devbox, ssh)


def add_hung(m: Machines) -> None:
    """Configure ssh:hung, a relay that answers its greeting and then nothing."""
    add_ssh(m.client, HUNG, fake_relay_command("hang"), m.ssh)


def remove_hung(m: Machines) -> None:
    hosts = load_hosts(m.client)
    hosts.pop(HUNG, None)
    save_hosts(m.client, hosts)
