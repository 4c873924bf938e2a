"""The thin client: what a command run through a daemon loads, and nothing more.

`aivault search`, `status` and `rpc` with a daemon serving the data directory parse their arguments,
send one request over the daemon's Unix socket and print the answer; a few tens of milliseconds is the
whole call, so every module imported is a visible share of it (docs/design.md §12). The code that runs
then lives here:

* ``client``: ``Connection``, the one client (a daemon's socket; direct mode and remote hosts are
  imported only when used), and ``RpcClient`` speaking to a daemon;
* ``zmtp``: ZMTP 3.0 over a Unix socket by hand, so that the call never imports pyzmq;
* ``render``: human output (highlighted, local time) and the progress line;
* ``light_imports``: DuckDB's version read without ``importlib.metadata`` for a one-query process.

Beyond this package a client-mode call loads only the lean core it shares with every process (the
protocol's constants, records and method table, the RPC codec, the typed errors, the data directory,
the log front end) and the CLI's parsing and search command. Those are ``MODULES``; the libraries it
may load beyond an empty interpreter's are ``LIBRARIES``. This is the budget: a client-mode call that
needs anything else (``asyncio``, ``dataclasses``, ``inspect``, ``email``, ``shutil``, ``subprocess``,
pyzmq, DuckDB...) says so here first, and tests/system/test_thin_client.py holds the calls to it.
Everywhere else the code may use ordinary idioms: only these modules, and the core ones they import,
are written to the budget (aivault/protocol.py says how).
"""

from __future__ import annotations

# The aivault modules a client-mode call may load.
MODULES = frozenset({
    # this package
    "aivault.thin", "aivault.thin.client", "aivault.thin.zmtp", "aivault.thin.render", "aivault.thin.light_imports",
    # the CLI's parsing and the command that asks
    "aivault.cli", "aivault.cli.common", "aivault.cli.search",
    # the lean core every process shares
    "aivault", "aivault.codec", "aivault.protocol", "aivault.errors", "aivault.home", "aivault.config", "aivault.log",
})

# The top-level names of the libraries a client-mode call may load beyond an empty interpreter's: a few
# of the standard library's, and msgpack with its Cython runtime.
LIBRARIES = frozenset({
    "__future__", "_blake2", "_collections", "_datetime", "_functools", "_hashlib", "_json", "_locale", "_operator",
    "_socket", "_sre", "_struct", "_typing", "_weakrefset", "argparse", "collections", "contextlib", "copyreg",
    "cython_runtime", "datetime", "enum", "errno", "fcntl", "fnmatch", "functools", "gc", "gettext", "hashlib", "hmac",
    "importlib", "ipaddress", "itertools", "json", "keyword", "locale", "math", "msgpack", "ntpath", "operator",
    "pathlib", "re", "reprlib", "signal", "struct", "threading", "types", "typing", "urllib", "warnings",
})
