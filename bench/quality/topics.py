"""The hand-written incidents of the quality benchmark, gathered from the topic modules.

Each ``topics_*`` module holds incidents of one area of real coding-agent work (Python,
JavaScript/TypeScript, systems languages, data stores, infrastructure, cross-cutting bugs). An
incident is a session script plus three queries (exact, paraphrase, mixed) and, for about a
third, a distractor session on a similar-but-different problem; see ``bench.quality.incident``
for the script language and ``bench.quality.checks`` for the rules each query kind must pass.

    python -m bench.quality.topics      # check every query; list the rejected ones
"""

from __future__ import annotations

import sys

from bench.quality.incident import Incident
from bench.quality.topics_data import INCIDENTS as DATA
from bench.quality.topics_infra import INCIDENTS as INFRA
from bench.quality.topics_js import INCIDENTS as JS
from bench.quality.topics_misc import INCIDENTS as MISC
from bench.quality.topics_python import INCIDENTS as PYTHON
from bench.quality.topics_systems import INCIDENTS as SYSTEMS

INCIDENTS: tuple[Incident, ...] = (*PYTHON, *JS, *SYSTEMS, *DATA, *INFRA, *MISC)


def main() -> int:
    from bench.quality.corpus import label

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
