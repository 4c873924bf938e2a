"""``aivault doctor``: for every agent, where aivault looked, what it found, and what it left out.

The bug users of session-search tools report most is "it indexed zero sessions of agent X and said
it was healthy". So each root is checked here for real: does it exist, can it be listed, how many
units does the agent's discovery find, how many files merely *look* like its transcripts, and how
many sessions (with at least one message) the index holds from it, with every skip by reason. A
root that holds transcript-shaped files and yields no session is a warning with the path and what
was expected there, and makes the command exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from aivault import config
from aivault.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, Subcommands, add_roots
from aivault.errors import InvalidRoot
from aivault.home import Home
from aivault.protocol import METHOD_ROOTS, METHOD_STATS


def register(sub: Subcommands) -> None:
    """``doctor``."""
    p = sub.add_parser("doctor", help="per agent: where aivault looks, what it finds and what it leaves out")
    add_roots(p)
    p.add_argument("--json", action="store_true", help="the same report as data")
    p.set_defaults(fn=cmd_doctor)


def _roots(home: Home, args: argparse.Namespace) -> list[Any]:
    from aivault.scanner.discover import default_roots, parse_root_spec

    try:
        extra = [parse_root_spec(spec) for spec in config.roots(home, list(args.root or []))]
    except InvalidRoot as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    return ([] if args.no_default_roots else default_roots()) + extra


def _state(path: str) -> tuple[str, str | None]:
    if not os.path.exists(path):
        return "absent", None
    if not os.path.isdir(path):
        return "unreadable", "not a directory"
    try:
        with os.scandir(path) as it:
            next(it, None)
    except OSError as exc:
        return "unreadable", exc.strerror or str(exc)
    return "found", None


def examine(home: Home, args: argparse.Namespace) -> dict[str, Any]:
    """The report as data (what ``--json`` prints)."""
    from aivault.scanner.agents import SPECS
    from aivault.scanner.sources import RootProblem, census
    from aivault.thin.client import Connection

    roots = _roots(home, args)
    rows: list[dict[str, Any]] = []
    for root in roots:
        spec = SPECS[root.agent]
        state, reason = _state(root.path)
        row: dict[str, Any] = {"agent": root.agent, "path": root.path, "explicit": root.explicit, "state": state,
                               "reason": reason, "units": 0, "shaped": 0, "problems": [], "expects": spec.expects}
        if state == "found":
            problems: list[RootProblem] = []
            row["units"] = sum(1 for _ in spec.discover(root, problems, None, True))
            row["problems"] = [{"root": p.root, "reason": p.reason} for p in problems]
            row["shaped"] = census(root.path, spec.shaped)
        elif root.explicit:
            row["problems"] = [{"root": root.path, "reason": reason or "root does not exist"}]
        rows.append(row)
    conn = Connection(home)
    report: dict[str, dict[str, Any]] = conn.call(METHOD_ROOTS, {"roots": [r["path"] for r in rows]}) or {}
    warnings: list[str] = []
    for row in rows:
        held = report.get(row["path"]) or {"units": 0, "sessions": 0, "skipped": {}}
        row["indexed"] = {"units": held["units"], "sessions": held["sessions"]}
        row["skipped"] = held["skipped"]
        if row["state"] == "found" and row["shaped"] > 0 and held["sessions"] == 0:
            warnings.append(f"{row['agent']}: {row['path']} holds {row['shaped']} file(s) that look like its "
                            f"transcripts but no session was indexed from them (expected: {row['expects']}). Run "
                            "`aivault index`; if it stays at zero, the format has changed: please report it.")
        elif row["state"] == "found" and row["units"] > held["units"]:
            warnings.append(f"{row['agent']}: {row['path']}: {row['units'] - held['units']} of {row['units']} unit(s) "
                            "not indexed yet (run `aivault index`, or wait for the daemon)")
        if row["problems"]:
            warnings += [f"{row['agent']}: {p['root']}: {p['reason']}" for p in row["problems"]]
        if row["state"] == "unreadable":
            warnings.append(f"{row['agent']}: {row['path']} cannot be read: {row['reason']}")
    agents: list[dict[str, Any]] = []
    for name, spec in SPECS.items():
        mine = [r for r in rows if r["agent"] == name]
        agents.append({"agent": name, "label": spec.label, "roots": mine,
                       "sessions": sum(r["indexed"]["sessions"] for r in mine)})
    silent = any("no session was indexed" in w for w in warnings)
    # What a writer repaired in the index file after a crash (indexer/integrity.py): nothing was lost,
    # but a user asking "is my index sound?" should see it here as in `aivault status`.
    stats = conn.call(METHOD_STATS, {}) if conn.mode == "daemon" else conn.direct_counts()
    repairs = (stats or {}).get("repairs") or {"count": 0, "latest": []}
    from aivault.config import redact_settings

    # Stores of agents aivault cannot read (encrypted at rest, docs/formats.md §36): present, and why not.
    from aivault.scanner.encrypted import present

    unreadable = [] if args.no_default_roots else present()
    return {"mode": conn.mode, "home": str(home.path), "agents": agents, "warnings": warnings, "repairs": repairs,
            "redaction": {"enabled": redact_settings(home).enabled, "counts": (stats or {}).get("redactions") or {}},
            "unreadable": unreadable, "ok": not silent}


def cmd_doctor(args: argparse.Namespace, home: Home) -> int:
    from aivault.thin.render import Style, redaction_line, repair_lines, skip_lines

    result = examine(home, args)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK if result["ok"] else EXIT_ERROR
    print(f"aivault doctor · {result['mode']} mode · {result['home']}")
    for agent in result["agents"]:
        print(f"\n{agent['agent']} ({agent['label']}): {agent['sessions']:,} session(s) indexed")
        for r in agent["roots"]:
            where = f"  {r['path']}"
            if r["state"] != "found":
                print(f"{where}  {r['state']}" + (f": {r['reason']}" if r["reason"] else ""))
                continue
            print(f"{where}  found · {r['units']:,} unit(s) · {r['shaped']:,} transcript-shaped file(s) · "
                  f"{r['indexed']['sessions']:,} session(s) indexed")
            for line in skip_lines({agent["agent"]: r["skipped"]} if r["skipped"] else {}):
                print(f"    not indexed: {line.partition(': ')[2]}")
    for store in result["unreadable"]:
        print(f"\n{store['label']}: present but not readable: {store['path']} ({store['files']:,} file(s)): "
              f"{store['reason']}")
    print()
    if not result["redaction"]["enabled"]:
        print("warning: secret redaction is off (config.json redact.enabled false): secrets are indexed as written")
    print(redaction_line(result["redaction"]["counts"]) or "secrets redacted: none found")
    if result["repairs"]["count"]:
        print()
        repair_lines(result["repairs"], Style(sys.stdout), sys.stdout)
    if result["warnings"]:
        print()
        for w in result["warnings"]:
            print(f"warning: {w}")
    return EXIT_OK if result["ok"] else EXIT_ERROR
