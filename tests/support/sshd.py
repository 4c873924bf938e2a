"""A real OpenSSH sshd on 127.0.0.1 for the tests that reach another machine over ssh: throw-away host and
user keys, key login for the current user only. ``sshd_server`` yields one, or skips with the reason when sshd
or ssh is missing or sshd cannot start (``./dev test`` installs Debian's openssh-server when it has the rights).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.common import wait_until

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    port: int
    key: Path  # the user's private key
    known_hosts: Path
    proc: subprocess.Popen[bytes]

    @property
    def target(self) -> str:
        return f"{getpass.getuser()}@127.0.0.1"

    @property
    def host_id(self) -> str:
        return f"ssh:{self.target}"

    def ssh_words(self) -> list[str]:
        """The ssh command line a user would configure for this machine (no ~/.ssh/config involved)."""
        return ["ssh", "-F", "/dev/null", "-T", "-p", str(self.port), "-i", str(self.key),
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=no",
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1 for the current user, with keys made for this test run only (a module
    fixture's body: ``yield from sshd_server(tmp_path_factory)``)."""
    for tool in (SSHD, "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: `./dev test` installs Debian's openssh-server (which brings ssh) "
                        "when it has the rights")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_bytes((d / "user_key.pub").read_bytes())
    os.chmod(d / "authorized_keys", 0o600)
    port = _free_port()
    config = d / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}", f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}", "StrictModes no", "UsePAM no",
        # Key login only; the tests may run as root, whom Debian's default admits by key alone anyway.
        "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes", "AllowTcpForwarding no", "X11Forwarding no", "PrintMotd no", "LogLevel ERROR",
    ]) + "\n")
    check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f"sshd refuses the test configuration: {check.stderr.strip()} (`./dev test` creates /run/sshd "
                    "where it may)")
    log = d / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), start_new_session=True)
    try:
        def listening() -> bool:
            if proc.poll() is not None:
                return True
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, timeout=10)
        if proc.poll() is not None:
            pytest.skip(f"sshd could not start (exit status {proc.returncode}): {log.read_text().strip()[-500:]}")
        server = Sshd(port, d / "user_key", d / "known_hosts", proc)
        probe = subprocess.run([*server.ssh_words(), "--", server.target, "echo ok"], capture_output=True,
                               text=True, timeout=30)
        if probe.stdout.strip() != "ok":
            pytest.skip(f"cannot log in to the test sshd as {server.target}: {probe.stderr.strip()[-500:]} "
                        f"{log.read_text().strip()[-500:]}")
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
