"""Paired runtimes (docs/protocol.md §5.3): CurveZMQ keys, pairing codes, and the ZAP gate.

On the runtime, ``aivault serve --listen tcp://ADDR:PORT`` adds a CurveZMQ listener whose ZAP handler
(``CurveGate``, answered by that listener's broker loop) admits a client key that is registered, or --
while a pairing secret is outstanding -- an unknown key that may then only pair. ``aivault pair``
issues a one-time code: the environment id, the address, the server's public key and a single-use
secret with its expiry. ``aivault hosts pair CODE`` on the client connects with its own key pair and
sends ``aiVault.pair {secret, name}``; the secret registers exactly the key that connection
authenticated with, once. The gate looks a client's registration up on every message, so a revoked
key (``aivault hosts revoke``) is refused from its next request on, on a connection already open too.

    $AIVAULT_HOME/curve/          0700
      server.key                  this runtime's key pair {publicKey, secretKey} (z85), 0600
      client.key                  this machine's key pair towards the runtimes it paired with, 0600
      environment                 this runtime's environment id
      clients/<fingerprint>.json  a registered client {name, publicKey, pairedAt}, 0600
      pairing/<id>.json           an outstanding pairing secret {secretSha256, expiresAt} (its hash only)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
import zmq.utils.z85

from aivault import log
from aivault.broker.exposure import Caller
from aivault.codec import RpcRequest
from aivault.errors import AuthenticationError, DataDirUnusable, InvalidParams, MethodNotFound
from aivault.home import Home, read_private, unusable, write_private
from aivault.protocol import METHOD_PAIR, METHOD_UNPAIR, PAIRING_TTL_S

_log = log.get("pairing")

CODE_PREFIX = "aivault-pair:"
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"aivault"
_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
_ADDRESS = re.compile(r"^tcp://[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


@dataclass(frozen=True, slots=True)
class ClientRecord:
    """A client key registered on this runtime."""

    fingerprint: str
    name: str
    public_key: str  # z85
    paired_at: int


@dataclass(frozen=True, slots=True)
class PairingCode:
    environment_id: str
    address: str
    server_key: str  # z85
    secret: str
    expires_at: int  # epoch ms

    def encode(self) -> str:
        body = json.dumps({"v": 1, "e": self.environment_id, "a": self.address, "k": self.server_key,
                           "s": self.secret, "x": self.expires_at}, separators=(",", ":"))
        return CODE_PREFIX + base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, code: str) -> PairingCode:
        text = code.strip()
        if not text.startswith(CODE_PREFIX):
            raise InvalidParams(f"a pairing code starts with {CODE_PREFIX!r}: copy the whole line `aivault pair` "
                                "printed")
        raw = text[len(CODE_PREFIX):]
        try:
            body = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        except (ValueError, binascii.Error) as exc:
            raise InvalidParams("that pairing code is damaged: copy the whole line `aivault pair` printed") from exc
        if not isinstance(body, dict) or body.get("v") != 1:
            raise InvalidParams("that pairing code is not one this aivault reads: run the same version on both ends")
        e, a, k, s, x = (body.get(f) for f in ("e", "a", "k", "s", "x"))
        if not (isinstance(e, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,128}", e) and isinstance(a, str)
                and _ADDRESS.match(a) and isinstance(k, str) and len(k) == 40 and isinstance(s, str)
                and isinstance(x, int)):
            raise InvalidParams("that pairing code is damaged: copy the whole line `aivault pair` printed")
        return cls(e, a, k, s, x)


# --- files -----------------------------------------------------------------------------------------
def curve_dir(home: Home, *parts: str) -> Path:
    """A private folder under ``curve/`` (created 0700)."""
    home.ensure()
    path = home.path.joinpath("curve", *parts)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise unusable(path, exc, "create") from exc
    return path


def keypair(home: Home, which: str) -> tuple[bytes, bytes]:
    """This machine's ``server`` or ``client`` CurveZMQ key pair (z85 public, z85 secret), made on first use."""
    path = curve_dir(home) / f"{which}.key"
    try:
        raw = json.loads(read_private(path))
        public, secret = raw["publicKey"].encode("ascii"), raw["secretKey"].encode("ascii")
        if len(public) == 40 and len(secret) == 40:
            return public, secret
    except FileNotFoundError:
        pass
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataDirUnusable(f"{path} is damaged: delete it to make a new key pair (then pair again)") from exc
    public, secret = zmq.curve_keypair()
    write_private(path, json.dumps({"publicKey": public.decode(), "secretKey": secret.decode()}).encode())
    return public, secret


def environment_id(home: Home) -> str:
    """This runtime's environment id: its host name and a random suffix, chosen once."""
    path = curve_dir(home) / "environment"
    try:
        text = path.read_text("utf-8").strip()
        if re.fullmatch(r"[A-Za-z0-9._-]{1,128}", text):
            return text
    except FileNotFoundError:
        pass
    base = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:40].strip("-.") or "runtime"
    env = f"{base}-{secrets.token_hex(3)}"
    write_private(path, (env + "\n").encode())
    return env


def fingerprint(public_key: bytes) -> str:
    """A client key's short name on disk and in listings: SHA-256 of the raw key, 16 hex digits."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def _z85_raw(z85: bytes) -> bytes:
    raw: bytes = zmq.utils.z85.decode(z85)
    return raw


def list_clients(home: Home) -> list[ClientRecord]:
    out = []
    for path in sorted(curve_dir(home, "clients").glob("*.json")):
        rec = _read_client(path)
        if rec is not None:
            out.append(rec)
    return out


def _read_client(path: Path) -> ClientRecord | None:
    try:
        raw = json.loads(read_private(path))
        return ClientRecord(path.stem, str(raw["name"]), str(raw["publicKey"]), int(raw["pairedAt"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def register_client(home: Home, public_z85: bytes, name: str) -> ClientRecord:
    fp = fingerprint(_z85_raw(public_z85))
    rec = ClientRecord(fp, name, public_z85.decode("ascii"), int(time.time() * 1000))
    write_private(curve_dir(home, "clients") / f"{fp}.json",
                  json.dumps({"name": name, "publicKey": rec.public_key, "pairedAt": rec.paired_at}).encode())
    return rec


def revoke_clients(home: Home, which: str) -> list[ClientRecord]:
    """Remove the registrations named ``which`` (a client name or a fingerprint); the removed ones."""
    gone = [r for r in list_clients(home) if which in (r.name, r.fingerprint)]
    for rec in gone:
        (curve_dir(home, "clients") / f"{rec.fingerprint}.json").unlink(missing_ok=True)
    return gone


def issue_code(home: Home, address: str, ttl_s: float = PAIRING_TTL_S) -> PairingCode:
    """A new pairing code for this runtime; only the secret's hash is kept, until used or expired."""
    if not _ADDRESS.match(address):
        raise InvalidParams(f"the address in a pairing code is tcp://HOST:PORT, not {address!r}")
    secret = secrets.token_urlsafe(24)
    expires = int((time.time() + ttl_s) * 1000)
    write_private(curve_dir(home, "pairing") / f"{secrets.token_hex(8)}.json",
                  json.dumps({"secretSha256": hashlib.sha256(secret.encode()).hexdigest(),
                              "expiresAt": expires}).encode())
    public, _ = keypair(home, "server")
    return PairingCode(environment_id(home), address, public.decode("ascii"), secret, expires)


def _outstanding(home: Home) -> list[tuple[Path, str, int]]:
    """Unexpired pairing secrets (path, hash, expiry); expired ones are deleted on the way."""
    now = int(time.time() * 1000)
    out = []
    for path in curve_dir(home, "pairing").glob("*.json"):
        try:
            raw = json.loads(read_private(path))
            digest, expires = str(raw["secretSha256"]), int(raw["expiresAt"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if expires <= now:
            path.unlink(missing_ok=True)
            continue
        out.append((path, digest, expires))
    return out


# --- the runtime's gate --------------------------------------------------------------------------
class CurveGate:
    """The paired listener's security: CurveZMQ server keys, the ZAP handler, and who each message is from."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.public, self.secret = keypair(home, "server")
        self.environment = environment_id(home)
        self._names: dict[str, tuple[tuple[int, int], str]] = {}
        self._pair_lock = threading.Lock()

    def secure(self, sock: zmq.Socket[bytes]) -> None:
        """Make ``sock`` a CurveZMQ server whose handshakes go through our ZAP handler."""
        sock.curve_server = True
        sock.curve_secretkey = self.secret
        sock.zap_domain = ZAP_DOMAIN

    def bind_zap(self, ctx: zmq.Context[Any]) -> zmq.Socket[bytes]:
        """The ZAP handler's socket. ``ctx`` must be the listener's own context: a context has one ZAP
        endpoint, and a handler in a shared one would also judge the daemon's ipc connections."""
        zap: zmq.Socket[bytes] = ctx.socket(zmq.ROUTER)
        zap.setsockopt(zmq.LINGER, 0)
        zap.bind(ZAP_ENDPOINT)
        return zap

    def answer(self, zap: zmq.Socket[bytes]) -> None:
        """Answer every waiting ZAP request (RFC 27): 200 for a registered key, or an unknown one while a
        pairing secret is outstanding; 400 otherwise. The user id is the client's public key (z85)."""
        while True:
            try:
                frames = zap.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) < 8:
                continue  # not a ZAP request; only libzmq itself reaches this inproc endpoint
            ident, _, version, request_id, _domain, address, _routing, mechanism, *creds = frames
            status, text, user = b"400", b"unknown client key", b""
            key = creds[0] if mechanism == b"CURVE" and creds and len(creds[0]) == 32 else None
            if version != b"1.0":
                text = b"unsupported ZAP version"
            elif key is None:
                text = b"CurveZMQ required"
            else:
                public = zmq.utils.z85.encode(key)
                name = self._registered(public)
                if name is not None or _outstanding(self.home):
                    status, text, user = b"200", b"OK", public
                _log.info("zap", peer=address.decode("ascii", "replace"), client=name or "(pairing only)"
                          if status == b"200" else "(refused)", fingerprint=fingerprint(key))
            zap.send_multipart([ident, b"", b"1.0", request_id, status, text, user, b""])

    def _registered(self, public_z85: bytes) -> str | None:
        """The registered name of a client key, read from its file on every call (stat-cached), so that
        a revocation counts from the very next message."""
        fp = fingerprint(_z85_raw(public_z85))
        path = curve_dir(self.home, "clients") / f"{fp}.json"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._names.pop(fp, None)
            return None
        stamp = (st.st_ino, st.st_mtime_ns)
        cached = self._names.get(fp)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        rec = _read_client(path)
        if rec is None or rec.public_key.encode("ascii") != public_z85:
            return None
        self._names[fp] = (stamp, rec.name)
        return rec.name

    def caller(self, user_id: str | None) -> Caller | None:
        """Who sent a message whose connection authenticated as ``user_id``; None: refuse it (revoked)."""
        if not user_id or len(user_id) != 40:
            return None
        public = user_id.encode("ascii")
        name = self._registered(public)
        if name is not None:
            return Caller("paired", client=name, key=public)
        if _outstanding(self.home):
            return Caller("paired", client=None, key=public)
        return None

    # --- aiVault.pair / aiVault.unpair ----------------------------------------------------------
    def handle(self, req: RpcRequest, caller: Caller) -> Any:
        if req.method == METHOD_PAIR:
            return self._pair(req.params, caller)
        if req.method == METHOD_UNPAIR:
            if caller.client is None or caller.key is None:
                raise AuthenticationError("this client is not paired here: there is nothing to revoke")
            gone = revoke_clients(self.home, fingerprint(_z85_raw(caller.key)))
            _log.info("client unpaired itself", client=caller.client)
            return {"revoked": bool(gone)}
        raise MethodNotFound(f"unknown pairing method {req.method[:64]!r}")

    def _pair(self, params: Any, caller: Caller) -> dict[str, Any]:
        if not isinstance(params, dict) or not isinstance(params.get("secret"), str) \
                or not isinstance(params.get("name"), str) or not _NAME.match(params["name"]):
            raise InvalidParams("aiVault.pair takes {secret: str, name: [A-Za-z0-9._@-]{1,64}}")
        if caller.key is None:
            raise AuthenticationError("pairing needs a CurveZMQ connection")
        digest = hashlib.sha256(params["secret"].encode()).hexdigest()
        with self._pair_lock:
            for path, stored, _expires in _outstanding(self.home):
                if not hmac.compare_digest(stored, digest):
                    continue
                try:
                    path.unlink()  # single use: whoever unlinks it first registers
                except FileNotFoundError:
                    break
                rec = register_client(self.home, caller.key, params["name"])
                _log.info("client paired", client=rec.name, fingerprint=rec.fingerprint)
                return {"environmentId": self.environment, "client": rec.name, "fingerprint": rec.fingerprint}
        raise AuthenticationError("that pairing secret is not valid here: it was used already, it expired, or it was "
                                  "never issued. Run `aivault pair` on the runtime for a new code")
