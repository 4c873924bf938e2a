"""``ssh:<target>``: the relay at the far end of ``ssh <target> aivault relay --stdio``.

The ssh command line comes from broker/remote/hostconfig.py. Its standard input and output carry the relay
stream (docs/protocol.md §5.1); its standard error is kept (the last 4 KiB) to say why a connection
failed -- a refused key, a host that does not resolve, ``aivault: command not found``. ssh runs in a
session of its own, so tearing the link down ends it and whatever it started (a ProxyJump) together.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

import zmq

from aivault.broker.remote.hostconfig import HostEntry, RemoteSettings
from aivault.broker.remote.link import Link, LinkFailed
from aivault.codec import StreamDecoder, encode_stream
from aivault.errors import AivaultError, HostUnavailable

_READ_BYTES = 256 * 1024
# Reads per turn of the link's loop, so that a flood of output cannot starve its timers.
_READS_PER_TURN = 64
_STDERR_TAIL_BYTES = 4096
# How long a torn-down ssh gets to exit after SIGTERM before SIGKILL.
_TERM_GRACE_S = 0.5


class SshLink(Link):
    transport = "relay"

    def __init__(self, entry: HostEntry, settings: RemoteSettings) -> None:
        super().__init__(entry.id, settings)
        self.entry = entry
        self.argv = settings.ssh_argv(entry)
        self._proc: subprocess.Popen[bytes] | None = None
        self._decoder = StreamDecoder(preamble=True)
        self._out = bytearray()
        self._err = b""
        self._fds: dict[str, int] = {}

    def _start_transport(self) -> None:
        self._decoder = StreamDecoder(preamble=True)
        self._out = bytearray()
        self._err = b""
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True)
        except OSError as exc:
            raise LinkFailed(HostUnavailable(
                f"cannot run the ssh command {self.argv[0]!r} for {self.host_id}: {exc.strerror or exc}. Set it with "
                "$AIVAULT_SSH_COMMAND or \"ssh\": {\"command\": ...} in config.json")) from exc
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._fds = {"in": proc.stdin.fileno(), "out": proc.stdout.fileno(), "err": proc.stderr.fileno()}
        for fd in self._fds.values():
            os.set_blocking(fd, False)

    def _poll_items(self) -> list[tuple[Any, int]]:
        items: list[tuple[Any, int]] = []
        if "out" in self._fds:
            items.append((self._fds["out"], zmq.POLLIN))
        if "err" in self._fds:
            items.append((self._fds["err"], zmq.POLLIN))
        if self._out and "in" in self._fds:
            items.append((self._fds["in"], zmq.POLLOUT))
        return items

    def _on_events(self, events: dict[Any, int]) -> list[list[bytes]]:
        err_fd = self._fds.get("err")
        if err_fd is not None and events.get(err_fd):
            self._read_stderr()
        messages: list[list[bytes]] = []
        out_fd = self._fds.get("out")
        if out_fd is not None and events.get(out_fd):
            for _ in range(_READS_PER_TURN):
                try:
                    data = os.read(out_fd, _READ_BYTES)
                except BlockingIOError:
                    break
                except OSError as exc:
                    raise LinkFailed(HostUnavailable(f"reading from ssh for {self.host_id} failed: {exc}")) from exc
                if not data:
                    raise LinkFailed(HostUnavailable(self._ended()))
                try:
                    messages += self._decoder.feed(data)
                except AivaultError as exc:
                    noise = self._noise()
                    raise LinkFailed(HostUnavailable(
                        f"{self.host_id} did not speak the relay stream ({exc}){noise}{self._failure_detail()}")) \
                        from exc
        in_fd = self._fds.get("in")
        if in_fd is not None and self._out and events.get(in_fd):
            self._flush()
        return messages

    def _transport_ready(self) -> bool:
        return self._decoder.started

    def _write(self, frames: list[bytes]) -> None:
        self._out += encode_stream(frames)
        self._flush()

    def _flush(self) -> None:
        fd = self._fds.get("in")
        if fd is None:
            return
        try:
            n = os.write(fd, self._out)
        except BlockingIOError:
            return
        except OSError as exc:  # EPIPE: ssh is gone; its exit is read from stdout next
            raise LinkFailed(HostUnavailable(
                f"{self.host_id}: ssh stopped reading ({exc.strerror}); {self._ended()}")) from exc
        del self._out[:n]

    def _read_stderr(self) -> None:
        fd = self._fds.get("err")
        if fd is None:
            return
        with contextlib.suppress(BlockingIOError):
            while True:
                data = os.read(fd, 65536)
                if not data:
                    self._fds.pop("err", None)
                    return
                self._err = (self._err + data)[-_STDERR_TAIL_BYTES:]

    def _ended(self) -> str:
        """Why the stream ended: ssh's exit status and the last lines it wrote on stderr."""
        self._read_stderr()
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(_TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                code = None
        started = self._decoder.started
        if code == 255:
            what = "ssh could not connect or log in (exit status 255)"
        elif code is not None:
            what = (f"the relay on {self.host_id} exited" if started else
                    "the remote command exited before starting the relay") + f" (exit status {code})"
        else:
            what = f"ssh closed the relay stream of {self.host_id}"
        hint = "" if started or code == 255 else (
            f". Is aivault installed on {self.entry.target} and on the PATH of a non-interactive shell? Otherwise "
            f"give its path: `aivault hosts add {self.host_id} --relay-command '/path/to/aivault relay --stdio'`")
        return f"{what}{self._failure_detail()}{self._noise()}{hint}"

    def _noise(self) -> str:
        noise = self._decoder.noise.decode("utf-8", "replace").strip()
        return f"; it printed: {noise[-300:]!r}" if noise else ""

    def _failure_detail(self) -> str:
        text = self._err.decode("utf-8", "replace").strip()
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("Warning: Permanently added",))]
        return f": {' / '.join(lines[-3:])[-500:]}" if lines else ""

    def _teardown(self) -> None:
        proc, self._proc = self._proc, None
        fds, self._fds = self._fds, {}
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(_TERM_GRACE_S)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(_TERM_GRACE_S * 4)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        del fds
