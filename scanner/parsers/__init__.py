"""The agents' readers, apart from the scanner engine (docs/formats.md §0, §13).

One module, or one package when its helpers deserve files of their own, per agent: each defines the
agent's ``SPEC`` (scanner/spec.py), which the registry (scanner/agents.py) imports by name. Beside
them the shared parts every reader may use: ``base`` (the line loop, and the parser-state base
every line parser's stored state derives from, the bounded skip counter), ``jsonutil`` (JSON and
time), ``textutil`` (titles, injected context, stable text hashes) and ``sqlite_units`` (sessions
kept in a SQLite database).

The engine (scan, sources, batch, watch, discover, ...) reaches a reader only through the registry,
and a reader imports nothing of the engine but the shapes it fills in (model, reader, sources,
spec): adding an agent touches its own module, the registry and its docs section, nothing else
(tests/unit/test_structure.py holds both directions).
"""
