"""``aivault web``: bind 127.0.0.1 (a given port or a free one), print the URL, serve the page with uvicorn.

The printed URL carries the token of ``web.token`` (``aivault.tokens``); the page trades it for a
session cookie (``aivault.web.guard``). ``--open`` hands the browser a 0600 file of the data
directory that moves on to that URL, not the URL itself: a browser started with the URL as an
argument would show the token to every local user in the process list.
"""

from __future__ import annotations

import html
import socket
import webbrowser
from collections.abc import Callable
from pathlib import Path

from aivault import httpserve, log, tokens
from aivault.home import Home, write_private
from aivault.web.app import build_app

_log = log.get("web")

BIND_HOST = "127.0.0.1"
OPEN_FILE = "web-open.html"
# Request bodies are at most 4 KiB (the guard refuses more): uvicorn need not buffer past a little more.
MAX_INCOMPLETE_EVENT_BYTES = 16 * 1024


def bind(port: int) -> socket.socket:
    """A listening socket on loopback; port 0 lets the kernel choose."""
    return httpserve.listening_socket(BIND_HOST, port)


def open_file(home: Home, url: str) -> Path:
    """The owner-only page ``--open`` gives the browser: it moves on to ``url`` (token included)."""
    path = home.path / OPEN_FILE
    quoted = html.escape(url, quote=True)
    write_private(path, ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                         f"<meta http-equiv=\"refresh\" content=\"0; url={quoted}\"><title>aivault</title></head>\n"
                         f"<body><p><a href=\"{quoted}\">Open aivault</a></p></body></html>\n").encode())
    return path


def serve(home: Home, *, port: int = 0, host: str | None = None, open_browser: bool = False,
          announce: Callable[[str], None] | None = None) -> None:
    token = tokens.load_or_create(home, tokens.WEB_TOKEN)
    sock = bind(port)
    authority = f"{BIND_HOST}:{sock.getsockname()[1]}"
    app, page = build_app(home, authority=authority, sign_in_token=token, host=host)
    url = f"http://{authority}/"
    _log.info("web page serving", url=url, host=page.asker.host or "local", home=str(home.path))
    signed = f"{url}?token={token}"
    if announce is not None:
        announce(signed)
    if open_browser:
        webbrowser.open(open_file(home, signed).as_uri())
    httpserve.run(app, sock, lifespan="off", h11_max_incomplete_event_size=MAX_INCOMPLETE_EVENT_BYTES)
