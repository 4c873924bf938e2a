"""The five-topic corpus of the hybrid-retrieval tests, embeddings turned on, and waiting for the vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aivault.home import Home, write_private
from tests.builders import ClaudeWriter, CodexWriter
from tests.support.common import wait_until

TOPICS = {
    "asyncio": "pytest hangs forever because the asyncio event loop was closed by an earlier fixture; "
               "we now create a fresh loop for every test and close it in teardown",
    "bread": "my sourdough bread comes out flat; the starter needs feeding twice a day and a longer "
             "proof in a warm kitchen before baking",
    "css": "the sidebar overlaps the footer on narrow screens; switching the layout to CSS grid with "
           "minmax columns fixed the overflow",
    "tax": "quarterly tax filing reminder for the accountant, receipts are in the shared folder",
    "k8s": "the pod keeps restarting with CrashLoopBackOff because the liveness probe hits /healthz "
           "before migrations finish",
}
PARAPHRASE = "spec runner freezes awaiting coroutine scheduler"


def semantic_on(home: Home) -> None:
    """Embeddings on for this data directory (the ``home`` fixture turns them off)."""
    write_private(home.config_path, json.dumps({"embed": {"enabled": True}}).encode())


def write_topics(roots: dict[str, Path]) -> dict[str, str]:
    """One session per topic, Claude Code and Codex in turn; their session ids by topic."""
    ids = {}
    for i, (name, text) in enumerate(TOPICS.items()):
        if i % 2:
            w = CodexWriter(roots["codex"], cwd=f"/home/dev/{name}")
            w.user(text).assistant("Understood, here is what I changed.")
        else:
            c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/{name}")
            c.user(text).assistant("Understood, here is what I changed.")
            w = c  # type: ignore[assignment]
        ids[name] = w.session_id
    return ids


def wait_vectors(stats: Any, timeout: float = 120) -> dict[str, Any]:
    """``stats()`` once every eligible message is embedded and the vector index holds them."""
    def done() -> bool:
        s = stats()
        return bool(s.get("semanticEligible")) and s["semanticEmbedded"] == s["semanticEligible"] \
            and s.get("vectorIndex") is not None and s["vectorIndex"]["count"] > 0
    assert wait_until(done, timeout=timeout, interval=0.1), stats()
    result: dict[str, Any] = stats()
    return result
