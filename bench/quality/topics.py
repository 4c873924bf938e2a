"""The hand-written incidents of the quality benchmark, read from ``bench/quality/incidents/``.

Each area directory holds incidents of one kind of real coding-agent work, one file per incident
(``NN-<key>.txt``; see ``bench.quality.incident`` for the file format and the script language). An
incident is a session script plus three queries (exact, paraphrase, mixed) and, for about a third,
a distractor session on a similar-but-different problem; ``bench.quality.checks`` holds the rules
each query kind must pass.

    python -m bench.quality.topics      # check every query; list the rejected ones
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench.quality.incident import Incident, parse_incident
from bench.quality.labels import label

INCIDENTS_DIR = Path(__file__).with_name("incidents")

# The order is part of the corpus: an incident's position picks its agent and its draws from the
# seeded generator, so areas are read in this order and files by their number.
AREAS: dict[str, str] = {
    "python": "Python work: asyncio, pytest, packaging, Django, SQLAlchemy, Celery, typing",
    "js": "JavaScript and TypeScript work: Node, React, Next.js, bundlers, test runners",
    "systems": "systems work: Rust, Go, C and C++, the JVM, mobile, concurrency and memory",
    "data": "data work: embedded and server databases, migrations, queues, search and analytics",
    "infra": "infrastructure work: containers, Kubernetes, CI, Terraform, proxies, TLS, auth, cloud",
    "misc": "cross-cutting: git mishaps, Unicode, regular expressions, time, dependencies, shell, formats",
}

_FILE_NAME = re.compile(r"(?P<number>\d+)-(?P<key>[a-z0-9]+(?:-[a-z0-9]+)*)\.txt")


def incident_files(root: Path = INCIDENTS_DIR) -> list[Path]:
    """Every incident file under ``root`` in corpus order; raises ValueError on a stray file or directory."""
    # A file the loader skipped would silently drop its queries from every report, so refuse it instead.
    if stray := sorted(p.name for p in root.iterdir() if p.name not in AREAS and p.name != "README.md"):
        raise ValueError(f"{root}: not an area of bench.quality.topics.AREAS: {stray}")
    files: list[Path] = []
    for area in AREAS:
        if not (root / area).is_dir():
            continue
        numbered: dict[int, Path] = {}
        for path in sorted((root / area).iterdir()):
            m = _FILE_NAME.fullmatch(path.name)
            if m is None or not path.is_file():
                raise ValueError(f"{path}: incident files are named NN-<key>.txt")
            if (n := int(m["number"])) in numbered:
                raise ValueError(f"{path}: number {n} is also {numbered[n].name}")
            numbered[n] = path
        files += [numbered[n] for n in sorted(numbered)]
    return files


def load_incident(path: Path) -> Incident:
    """The incident in one file; its key is the file name without the number."""
    m = _FILE_NAME.fullmatch(path.name)
    if m is None:
        raise ValueError(f"{path}: incident files are named NN-<key>.txt")
    try:
        return parse_incident(m["key"], path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc


def load_incidents(root: Path = INCIDENTS_DIR) -> tuple[Incident, ...]:
    """All incidents under ``root`` in corpus order; raises ValueError on a malformed file or a repeated key."""
    incidents = tuple(load_incident(p) for p in incident_files(root))
    seen: set[str] = set()
    for inc in incidents:
        if inc.key in seen:
            raise ValueError(f"{root}: incident key {inc.key!r} appears twice")
        seen.add(inc.key)
    return incidents


# Loaded at import, as the literals were: a malformed file fails the first thing that uses the set.
INCIDENTS: tuple[Incident, ...] = load_incidents()


def main() -> int:
    bad = 0
    counts: dict[str, int] = {}
    for inc in INCIDENTS:
        for q in label(inc, ["-"]):
            counts[q.kind] = counts.get(q.kind, 0) + q.accepted
            if not q.accepted:
                bad += 1
                print(f"{q.id}: {q.reason}\n    {q.query}")
    distractors = sum(1 for i in INCIDENTS if i.distractor is not None)
    print(f"{len(INCIDENTS)} incidents, {distractors} distractors; accepted {counts}; rejected {bad}",
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
