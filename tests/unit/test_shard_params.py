"""aiVault.searchShard's parameters: every malformed step is invalid-params naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from aivault.errors import InvalidParams
from aivault.protocol import SEARCH_MAX_LIMIT
from aivault.vault.endpoints import parse_shard

PLAN = {"generations": {"abc": 3}}


@pytest.mark.parametrize(("params", "names"), [
    ("stats", "takes {step"),
    ({"step": "pages", "request": {"query": "x"}}, "step must be one of"),
    ({"step": "stats", "request": {"query": "x", "cursor": "c"}}, "without a cursor"),
    ({"step": "page", "request": {"query": "x"}}, "needs the coordinator's plan"),
    ({"step": "page", "request": {"query": "x"}, "plan": PLAN, "offset": -1}, "offset >= 0"),
    ({"step": "page", "request": {"query": "x"}, "plan": PLAN, "count": 0}, "count 1.."),
    ({"step": "stats", "request": {"query": "x"}, "waitS": 60}, "waitS"),
    ({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": "1,2"}, "hits needs rows"),
    ({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": [[1, 0.5]]}, "hits needs rows"),
    ({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": [["1", 0.5, None]]}, "hits needs rows"),
    ({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": [[1, True, None]]}, "hits needs rows"),
    ({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": [[1, 0.5, 2]] * (SEARCH_MAX_LIMIT + 2)},
     "at most"),
])
def test_a_malformed_step_is_invalid_params(params: Any, names: str) -> None:
    """Each malformed request is refused before any index is read, and the message names the fault."""
    with pytest.raises(InvalidParams, match=names.replace("{", r"\{").replace(".", r"\.")):
        parse_shard(params)


def test_well_formed_steps_parse() -> None:
    """A hybrid search's hits step keeps its rows; a page keeps its offset and count."""
    ask = parse_shard({"step": "hits", "request": {"query": "x"}, "plan": PLAN, "rows": [[4, 0.25, None], [9, 1, 7]]})
    assert ask.step == "hits" and ask.rows == [[4, 0.25, None], [9, 1, 7]]
    ask = parse_shard({"step": "page", "request": {"query": "x", "limit": 5}, "plan": PLAN, "offset": 3, "count": 6})
    assert (ask.offset, ask.count, ask.request.limit) == (3, 6, 5)
