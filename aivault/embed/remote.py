"""Remote embeddings through an OpenAI-compatible ``/v1/embeddings`` endpoint; off by default.

Turned on only by config, and even then the config holds no secret: it names the environment
variables that hold the endpoint URL and the API key, e.g.

    {"remote": {"enabled": true, "url_env": "AIVAULT_EMBED_URL", "key_env": "AIVAULT_EMBED_KEY",
                "model": "text-embedding-3-small", "dims": 1536}}

The URL and key are read from the environment at each request and go nowhere else: not in
argv, not in a log line, not in ``repr``/``str``/``describe()`` of anything here, not in an
error message (any text that could echo them, such as a server's error body, is redacted).
The URL is kept out too, since it can carry credentials (``https://user:pass@host``).

Requests use urllib from the standard library with a bounded timeout, a bounded number of
texts per request, no proxies from the environment and no redirects (urllib would forward the
Authorization header to wherever a redirect points). Embedding is idempotent, so a 429 or 5xx
is retried a bounded number of times.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from aivault import log
from aivault.errors import RemoteEmbedError, RemoteNotConfigured

REQUEST_TIMEOUT_S = 30.0
MAX_TEXTS_PER_REQUEST = 256
DEFAULT_TEXTS_PER_REQUEST = 64
MAX_RESPONSE_BYTES = 64 << 20
# Long tool output is cut before sending; an 8k-token model never sees more than ~32k chars.
MAX_CHARS_PER_TEXT = 16_000
RETRIES = 2
RETRY_BACKOFF_S = 0.5
_ERROR_BODY_CHARS = 300
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_REDACTED = "[redacted]"

_log = log.get("aivault.embed.remote")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        raise RemoteEmbedError(f"the embedding endpoint answered a redirect ({code}); "
                               "set the final URL in the environment variable instead")


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


@dataclass(frozen=True, slots=True)
class RemoteConfig:
    """What the config may say about the remote embedder: names and sizes, never secrets."""

    url_env: str
    key_env: str | None
    model: str
    dims: int
    texts_per_request: int = DEFAULT_TEXTS_PER_REQUEST
    timeout_s: float = REQUEST_TIMEOUT_S

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RemoteConfig:
        url_env = raw.get("url_env")
        key_env = raw.get("key_env")
        if not isinstance(url_env, str) or not _ENV_NAME.match(url_env):
            # Never echo the value: a user may have pasted the URL itself here.
            raise RemoteNotConfigured("remote.url_env must be the NAME of an environment variable holding the "
                                      "endpoint URL (e.g. \"AIVAULT_EMBED_URL\"), not the URL")
        if key_env is not None and (not isinstance(key_env, str) or not _ENV_NAME.match(key_env)):
            raise RemoteNotConfigured("remote.key_env must be the NAME of an environment variable holding the "
                                      "API key (e.g. \"AIVAULT_EMBED_KEY\"), not the key")
        model = raw.get("model")
        if not isinstance(model, str) or not model or len(model) > 200:
            raise RemoteNotConfigured("remote.model must name the endpoint's embedding model")
        dims = raw.get("dims")
        if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 16384:
            raise RemoteNotConfigured("remote.dims must be the model's vector size (an integer), so that "
                                      "stored vectors can be checked against it")
        per_request = raw.get("texts_per_request", DEFAULT_TEXTS_PER_REQUEST)
        if not isinstance(per_request, int) or not 1 <= per_request <= MAX_TEXTS_PER_REQUEST:
            raise RemoteNotConfigured(f"remote.texts_per_request must be 1..{MAX_TEXTS_PER_REQUEST}")
        timeout = raw.get("timeout_s", REQUEST_TIMEOUT_S)
        if not isinstance(timeout, int | float) or not 0 < float(timeout) <= 300:
            raise RemoteNotConfigured("remote.timeout_s must be a number of seconds in (0, 300]")
        return cls(url_env=url_env, key_env=key_env, model=model, dims=dims, texts_per_request=per_request,
                   timeout_s=float(timeout))


def _endpoint(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteNotConfigured("the embedding endpoint URL must be an http:// or https:// URL")
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path = path + ("/embeddings" if path.endswith("/v1") else "/v1/embeddings")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class RemoteEmbedder:
    """Embeds through an OpenAI-compatible endpoint named only by environment variables."""

    __slots__ = ("_config",)

    def __init__(self, config: RemoteConfig) -> None:
        self._config = config

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> RemoteEmbedder:
        return cls(RemoteConfig.from_dict(raw))

    # --- the Embedder protocol ---
    @property
    def name(self) -> str:
        return f"remote:{self._config.model}"

    @property
    def dims(self) -> int:
        return self._config.dims

    @property
    def fingerprint(self) -> str:
        """Model and size only: the endpoint URL may carry credentials and never leaves the environment."""
        return f"remote:{self._config.model}:{self._config.dims}"

    def __repr__(self) -> str:
        return (f"RemoteEmbedder(model={self._config.model!r}, dims={self._config.dims}, "
                f"url_env={self._config.url_env!r}, key_env={self._config.key_env!r})")

    __str__ = __repr__

    def describe(self) -> dict[str, object]:
        """What status may show: the variables' names and whether they are set, never their values."""
        cfg = self._config
        return {"kind": "remote", "model": cfg.model, "dims": cfg.dims, "url_env": cfg.url_env,
                "url_set": bool(os.environ.get(cfg.url_env)), "key_env": cfg.key_env,
                "key_set": bool(cfg.key_env and os.environ.get(cfg.key_env))}

    def _secrets(self) -> tuple[str, str | None]:
        cfg = self._config
        url = os.environ.get(cfg.url_env, "")
        if not url:
            raise RemoteNotConfigured(f"remote embedding is on but ${cfg.url_env} is not set")
        key = os.environ.get(cfg.key_env) if cfg.key_env else None
        if cfg.key_env and not key:
            raise RemoteNotConfigured(f"remote embedding is on but ${cfg.key_env} is not set")
        return url, key

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One L2-normalised row per text, requested in bounded batches."""
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        url, key = self._secrets()
        endpoint = _endpoint(url)
        step = self._config.texts_per_request
        for start in range(0, len(texts), step):
            batch = [_clean(t) for t in texts[start:start + step]]
            out[start:start + len(batch)] = self._request(endpoint, key, url, batch)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, np.float32(1e-12))
        return out

    def _request(self, endpoint: str, key: str | None, url: str, batch: list[str]) -> npt.NDArray[np.float32]:
        cfg = self._config
        body = json.dumps({"model": cfg.model, "input": batch, "encoding_format": "float"}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        secrets = [s for s in (key, url, urllib.parse.urlsplit(url).password) if s]
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            request = urllib.request.Request(endpoint, data=body, headers=headers, method="POST")
            try:
                with _OPENER.open(request, timeout=cfg.timeout_s) as resp:
                    raw = resp.read(MAX_RESPONSE_BYTES + 1)
                    status = resp.status
                break
            except urllib.error.HTTPError as exc:
                detail = _redact(_read_excerpt(exc), secrets)
                retryable = exc.code == 429 or exc.code >= 500
                if retryable and attempt <= RETRIES:
                    time.sleep(RETRY_BACKOFF_S * attempt)
                    continue
                _log.warning("embed.remote_failed", model=cfg.model, texts=len(batch), status=exc.code,
                             attempts=attempt)
                raise RemoteEmbedError(f"the embedding endpoint (${cfg.url_env}) answered HTTP {exc.code}: "
                                       f"{detail}") from None
            except RemoteEmbedError:
                raise
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                if attempt <= RETRIES:
                    time.sleep(RETRY_BACKOFF_S * attempt)
                    continue
                _log.warning("embed.remote_failed", model=cfg.model, texts=len(batch), error=type(exc).__name__,
                             attempts=attempt)
                raise RemoteEmbedError(f"could not reach the embedding endpoint (${cfg.url_env}): "
                                       f"{_redact(str(reason), secrets)[:_ERROR_BODY_CHARS]}") from None
        if len(raw) > MAX_RESPONSE_BYTES:
            raise RemoteEmbedError(f"the embedding endpoint's answer exceeds {MAX_RESPONSE_BYTES} bytes")
        vectors = self._parse(raw, len(batch))
        _log.info("embed.remote_batch", model=cfg.model, texts=len(batch), status=status, attempts=attempt,
                  seconds=round(time.perf_counter() - started, 3))
        return vectors

    def _parse(self, raw: bytes, expected: int) -> npt.NDArray[np.float32]:
        try:
            doc = json.loads(raw)
            items = sorted(doc["data"], key=lambda item: int(item["index"]))
            rows = [item["embedding"] for item in items]
            arr = np.asarray(rows, dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteEmbedError(f"the embedding endpoint answered an unusable body ({type(exc).__name__})") from None
        if arr.shape != (expected, self.dims):
            raise RemoteEmbedError(f"the embedding endpoint answered {arr.shape[0] if arr.ndim else 0} vectors of "
                                   f"{arr.shape[1] if arr.ndim == 2 else '?'} dimensions; expected {expected} of "
                                   f"{self.dims} (remote.dims)")
        if not np.isfinite(arr).all():
            raise RemoteEmbedError("the embedding endpoint answered non-finite numbers")
        return arr


def _clean(text: object) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    s = str(text)[:MAX_CHARS_PER_TEXT]
    # Lone surrogates cannot be sent as JSON UTF-8; empty inputs are refused by OpenAI's API.
    s = s.encode("utf-8", errors="replace").decode("utf-8")
    return s if s.strip() else " "


def _read_excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(4096).decode("utf-8", errors="replace")
    except Exception:  # a broken error body must not hide the status code
        return ""
    body = " ".join(body.split())
    return body[:_ERROR_BODY_CHARS] if body else (exc.reason or "")


def _redact(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, _REDACTED)
    return text
