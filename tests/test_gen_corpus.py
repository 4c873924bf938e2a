"""Tests for bench.gen_corpus: exact counts, determinism, layout and format fidelity."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.gen_corpus import LONG_LINE_MIN, generate
from tests.builders.codex import INJECTED_PREFIXES

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
CLAUDE_MAIN = re.compile(rf"claude/projects/(?P<dir>[A-Za-z0-9-]+)/(?P<sid>{UUID})\.jsonl")
CLAUDE_SUB = re.compile(
    rf"claude/projects/(?P<dir>[A-Za-z0-9-]+)/(?P<sid>{UUID})/subagents/agent-(?P<aid>[0-9a-f]{{17}})"
    r"\.(?P<ext>jsonl|meta\.json)"
)
CODEX_LIVE = re.compile(
    rf"codex/sessions/(?P<y>\d{{4}})/(?P<m>\d\d)/(?P<d>\d\d)/rollout-(?P<ts>\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d)-"
    rf"(?P<id>{UUID})\.jsonl"
)
CODEX_ARCHIVED = re.compile(
    rf"codex/archived_sessions/rollout-\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d-{UUID}\.jsonl"
)


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for line in fh:
            yield json.loads(line)


def _session_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl") if p.name != "session_index.jsonl")


def _normalized(root: Path, only: Path | None = None) -> list[tuple[str, str]]:
    """Re-derive the normalized (kind, text) messages with plain json and the docs/formats.md §0 rules."""
    out: list[tuple[str, str]] = []
    for path in [only] if only is not None else _session_files(root):
        is_claude = path.relative_to(root).parts[0] == "claude"
        for rec in _jsonl(path):
            if is_claude:
                typ = rec.get("type")
                if typ == "user" and not rec.get("isMeta"):
                    content = rec["message"]["content"]
                    if isinstance(content, str):
                        out.append(("text", content))
                        continue
                    for block in content:
                        if block["type"] == "text":
                            out.append(("text", block["text"]))
                        elif block["type"] == "tool_result":
                            c = block["content"]
                            out.append(
                                ("tool_result", c if isinstance(c, str) else "\n".join(b["text"] for b in c))
                            )
                elif typ == "assistant":
                    for block in rec["message"]["content"]:
                        if block["type"] == "text":
                            out.append(("text", block["text"]))
                        elif block["type"] == "thinking":
                            out.append(("thinking", block["thinking"]))
                        elif block["type"] == "tool_use":
                            args = json.dumps(block["input"], separators=(",", ":"))
                            out.append(("tool_call", f"{block['name']} {args}"))
                continue
            if rec["type"] != "response_item":
                continue  # event_msg duplicates, token counts, turn_context and session_meta
            p = rec["payload"]
            kind = p["type"]
            if kind == "message":
                text = "".join(c["text"] for c in p["content"])
                if p["role"] == "user" and text.startswith(INJECTED_PREFIXES):
                    continue
                out.append(("text", text))
            elif kind == "reasoning":
                out.extend(("thinking", s["text"]) for s in p["summary"])
            elif kind == "function_call":
                out.append(("tool_call", f"{p['name']} {p['arguments']}"))
            elif kind == "custom_tool_call":
                out.append(("tool_call", f"{p['name']} {p['input']}"))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                out.append(("tool_result", p["output"]))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("corpus10k")
    return out, generate(out, 10_000, seed=3)


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_is_byte_identical_and_other_seed_differs(tmp_path: Path) -> None:
    """The same seed reproduces every file byte for byte; a different seed yields a different corpus."""
    generate(tmp_path / "a", 3_000, seed=11)
    generate(tmp_path / "b", 3_000, seed=11)
    generate(tmp_path / "c", 3_000, seed=12)
    a, b, c = (_tree_bytes(tmp_path / x) for x in "abc")
    assert a == b
    assert a != c
    assert set(a) != set(c)  # session ids come from the rng, so even the file names move


def test_manifest_count_equals_independent_recount(corpus: tuple[Path, dict[str, Any]]) -> None:
    """manifest.messages (and by_kind) equal a recount made with json and the docs/formats.md §0 normalization rules."""
    root, manifest = corpus
    msgs = _normalized(root)
    assert manifest["messages"] == 10_000 == len(msgs)
    kinds = Counter(k for k, _ in msgs)
    assert manifest["by_kind"] == {k: kinds[k] for k in ("text", "thinking", "tool_call", "tool_result")}
    assert json.loads((root / "manifest.json").read_text()) == manifest


@pytest.mark.parametrize("n", [0, 1, 2, 57, 1_001])
@pytest.mark.parametrize("share", [0.0, 0.4, 1.0])
def test_exact_count_at_any_cut_point(tmp_path: Path, n: int, share: float) -> None:
    """Generation stops at exactly N messages wherever the cut falls: Claude-only, mixed, Codex-only."""
    manifest = generate(tmp_path, n, seed=5, codex_share=share)
    assert manifest["messages"] == n == len(_normalized(tmp_path))
    if n and share == 0.0:
        assert manifest["codex_sessions"] == 0
    if n and share == 1.0:
        assert manifest["claude_sessions"] == 0


def test_every_line_is_json_and_newline_terminated(corpus: tuple[Path, dict[str, Any]]) -> None:
    """Every line of every written file parses as JSON and ends with a newline; byte totals match."""
    root, manifest = corpus
    total = files = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name == "manifest.json":
            continue
        data = path.read_bytes()
        files += 1
        total += len(data)
        if path.suffix == ".jsonl":
            assert data.endswith(b"\n"), path
            for line in data.split(b"\n")[:-1]:
                json.loads(line)
        else:
            json.loads(data)
    assert (files, total) == (manifest["files"], manifest["bytes"])


def test_layout_matches_discovery_paths(corpus: tuple[Path, dict[str, Any]]) -> None:
    """Files sit where Claude Code and Codex discovery looks, named consistently with their records."""
    root, manifest = corpus
    main = subs = metas = live = archived = 0
    codex_ids: set[str] = set()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in ("manifest.json", "codex/session_index.jsonl"):
            continue
        if m := CLAUDE_MAIN.fullmatch(rel):
            main += 1
            recs = [r for r in _jsonl(path) if "cwd" in r]
            assert recs and all(r["sessionId"] == m["sid"] for r in recs)
            assert m["dir"] == re.sub(r"[^A-Za-z0-9]", "-", recs[0]["cwd"])
        elif m := CLAUDE_SUB.fullmatch(rel):
            if m["ext"] == "meta.json":
                metas += 1
                assert json.loads(path.read_bytes()) == {"agentType": "Explore"}
                continue
            subs += 1
            assert (path.parent.parent.parent / f"{m['sid']}.jsonl").is_file()
            recs = list(_jsonl(path))
            assert all(
                r["isSidechain"] and r["agentId"] == m["aid"] and r["sessionId"] == m["sid"] for r in recs
            )
        elif m := CODEX_LIVE.fullmatch(rel):
            live += 1
            meta = next(_jsonl(path))
            assert meta["type"] == "session_meta" and meta["payload"]["id"] == m["id"]
            assert meta["payload"]["timestamp"][:19].replace(":", "-") == m["ts"]
            assert m["ts"].startswith(f"{m['y']}-{m['m']}-{m['d']}")
            assert meta["payload"]["git"]["branch"]
            codex_ids.add(m["id"])
        elif CODEX_ARCHIVED.fullmatch(rel):
            archived += 1
            codex_ids.add(next(_jsonl(path))["payload"]["id"])
        else:
            pytest.fail(f"unexpected file {rel}")
    assert main == manifest["claude_main_sessions"] and subs == metas == manifest["claude_subagents"] > 0
    assert live + archived == manifest["codex_sessions"] and archived == manifest["codex_archived"]
    assert 0.0 < archived / (live + archived) < 0.15
    index = list(_jsonl(root / "codex" / "session_index.jsonl"))
    named = {r["id"] for r in index}
    assert all(set(r) == {"id", "thread_name", "updated_at"} for r in index)
    assert named <= codex_ids and 0.15 < len(named) / len(codex_ids) < 0.45
    assert manifest["sessions"] == main + subs + live + archived


def test_long_tool_output_lines_at_requested_rate(corpus: tuple[Path, dict[str, Any]]) -> None:
    """About 1% of tool outputs carry one line over LONG_LINE_MIN chars, and no other message does."""
    root, manifest = corpus
    msgs = _normalized(root)

    def is_long(text: str) -> bool:
        return any(len(line) > LONG_LINE_MIN for line in text.split("\n"))

    results = [t for k, t in msgs if k == "tool_result"]
    long_results = sum(map(is_long, results))
    assert long_results == manifest["long_line_tool_results"]
    assert 0.005 < long_results / len(results) < 0.02
    assert not any(is_long(t) for k, t in msgs if k != "tool_result")


def test_long_line_rate_parameter_is_honoured(tmp_path: Path) -> None:
    """A higher requested long-line rate shows up proportionally in the tool outputs."""
    manifest = generate(tmp_path, 4_000, seed=9, long_line_rate=0.1)
    assert 0.07 < manifest["long_line_tool_results"] / manifest["by_kind"]["tool_result"] < 0.13


def test_format_quirks_are_present(corpus: tuple[Path, dict[str, Any]]) -> None:
    """The corpus exercises the parser gotchas of docs/formats.md §1-§2 rather than an idealized format."""
    root, _ = corpus
    seen: Counter[str] = Counter()
    for path in _session_files(root):
        recs = list(_jsonl(path))
        if path.relative_to(root).parts[0] == "claude":
            uuids: set[str] = set()
            prev_id = None
            for r in recs:
                seen[r["type"]] += 1
                if r.get("isMeta"):
                    seen["isMeta"] += 1
                if "uuid" in r and "parentUuid" in r:
                    assert r["parentUuid"] is None or r["parentUuid"] in uuids
                    uuids.add(r["uuid"])
                if r["type"] == "assistant":
                    assert len(r["message"]["content"]) == 1
                    if r["message"]["id"] == prev_id:
                        seen["shared message.id"] += 1
                    prev_id = r["message"]["id"]
        else:
            cwds = {r["payload"]["cwd"] for r in recs if r["type"] == "turn_context"}
            seen["cwd change"] += len(cwds) > 1
            by_type = Counter(
                (r["type"], r["payload"]["type"]) for r in recs if r["type"] in ("event_msg", "response_item")
            )
            seen.update(f"{a}/{b}" for a, b in by_type.elements())
            for r in recs:
                p = r["payload"]
                if r["type"] == "response_item" and p["type"] == "function_call":
                    assert isinstance(json.loads(p["arguments"]), dict)
                if r["type"] == "response_item" and p["type"] == "reasoning":
                    assert p["summary"][0]["type"] == "summary_text" and p["encrypted_content"]
            # Every assistant reply and reasoning summary is mirrored in the event_msg stream.
            assert by_type["event_msg", "agent_message"] == by_type["response_item", "message"] - sum(
                1
                for r in recs
                if r["type"] == "response_item"
                and r["payload"]["type"] == "message"
                and r["payload"]["role"] == "user"
            )
            assert by_type["event_msg", "agent_reasoning"] == by_type["response_item", "reasoning"]
    for key in (
        "isMeta",
        "shared message.id",
        "custom-title",
        "ai-title",
        "file-history-snapshot",
        "system",
        "progress",
        "cwd change",
        "event_msg/token_count",
        "event_msg/user_message",
        "response_item/custom_tool_call",
        "response_item/function_call_output",
    ):
        assert seen[key] > 0, key


def test_content_mix_is_realistic(corpus: tuple[Path, dict[str, Any]]) -> None:
    """Common terms hit most messages, rare phrases and non-ASCII text are rare, sessions vary in length."""
    root, manifest = corpus
    msgs = _normalized(root)
    the = sum(1 for _, t in msgs if re.search(r"\bthe\b", t, re.I))
    assert the / len(msgs) > 0.5
    rare = manifest["rare_phrases"]
    assert len(rare) >= 250 and 0 < sum(rare.values()) < len(msgs) * 0.02
    hits = sum(1 for _, t in msgs if "Could not set lock on file" in t)
    assert hits == rare["Could not set lock on file"]
    assert 0.002 < manifest["non_ascii_messages"] / len(msgs) < 0.03
    lengths = sorted(len(_normalized(root, p)) for p in _session_files(root) if "subagents" not in p.parts)
    median = lengths[len(lengths) // 2]
    # The last session is cut short by the budget, so the minimum is not meaningful; the bulk and tail are.
    assert 20 <= median <= 120 and lengths[-1] > 150
    assert sum(10 <= n <= 150 for n in lengths) / len(lengths) > 0.75
    assert manifest["projects"] > 50


def test_ten_thousand_messages_generate_and_parse_to_the_manifest_count(tmp_path: Path) -> None:
    """A 10k-message corpus generates in-process, and our parsers find exactly the messages its manifest counts."""
    manifest = generate(tmp_path, 10_000, seed=1)
    assert manifest["messages"] == 10_000 == len(_normalized(tmp_path))


def test_existing_output_is_refused_unless_overwrite(tmp_path: Path) -> None:
    """A second run into the same directory fails instead of silently mixing two corpora."""
    generate(tmp_path, 50, seed=1)
    with pytest.raises(FileExistsError):
        generate(tmp_path, 50, seed=1)
    assert generate(tmp_path, 60, seed=2, overwrite=True)["messages"] == len(_normalized(tmp_path)) == 60
