"""``aivault web``: bind 127.0.0.1 (a given port or a free one), print the URL, serve the page with uvicorn."""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import Callable

from aivault import log
from aivault.home import Home
from aivault.web.app import build_app

_log = log.get("web")

BIND_HOST = "127.0.0.1"


def bind(port: int) -> socket.socket:
    """A listening socket on loopback; port 0 lets the kernel choose."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((BIND_HOST, port))
    # Listening before the URL is printed: a client that connects at once waits in the backlog
    # until uvicorn accepts, instead of being refused.
    sock.listen(128)
    return sock


def serve(home: Home, *, port: int = 0, host: str | None = None, open_browser: bool = False,
          announce: Callable[[str], None] | None = None) -> None:
    import uvicorn

    sock = bind(port)
    authority = f"{BIND_HOST}:{sock.getsockname()[1]}"
    app, page = build_app(home, authority=authority, host=host)
    url = f"http://{authority}/"
    _log.info("web page serving", url=url, host=page.asker.host or "local", home=str(home.path))
    if announce is not None:
        announce(url)
    if open_browser:
        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            # The guard refuses bigger bodies; uvicorn need not buffer past a little more.
                            h11_max_incomplete_event_size=16 * 1024)
    uvicorn.Server(config).run(sockets=[sock])
