"""Tests for bench.gen_corpus: exact counts, determinism, layout and format fidelity."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import zstandard

from aivault import policy
from aivault.home import Home
from aivault.scanner.agents import SPECS
from aivault.scanner.model import Message
from aivault.scanner.reader import ReadStats
from aivault.scanner.sources import LineFile, Root, RootProblem
from bench.gen_corpus import LONG_LINE_MIN, generate, parse_mix
from bench.mix_compare import AGENT_FIGURES, root_args
from tests.builders.codex import INJECTED_PREFIXES
from tests.support.common import cli_env, lexical_only

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


# --- the default corpus is pinned; the agent mix --------------------------------------------------------
# The tree of generate(out, 2_000, seed=7) before the agent mix existed: the default corpus must not move.
DEFAULT_2K_SEED7_SHA256 = "e65f4d9df0392493986ae35106f5c34aece25fc4bc1bba4f4a255b52c7d6b037"
MIX = "claude=0.3,codex=0.3,gemini=0.15,opencode=0.15,copilot=0.1"


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for name, data in _tree_bytes(root).items():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def _parse_agents(root: Path, manifest: dict[str, Any]) -> tuple[dict[str, list[list[Message]]], list[RootProblem]]:
    """Per agent, the messages of each unit as the scanner reads it: the agent's own discovery under the
    roots the manifest names, then its line parser (lines, zst) or its whole-unit reader."""
    out: dict[str, list[list[Message]]] = {}
    problems: list[RootProblem] = []
    for agent, info in manifest["agents"].items():
        spec = SPECS[agent]
        units = out.setdefault(agent, [])
        for rel in info["roots"]:
            for found in spec.discover(Root(agent, str(root / rel), explicit=True), problems, None, True):
                if found.mode == "whole":
                    assert spec.read_unit is not None
                    units.append(spec.read_unit(found).messages)
                    continue
                assert spec.line_parser is not None
                parser = spec.line_parser(found.path, None)
                src = LineFile(found.path, found.mode)
                try:
                    msgs = [m for line, _ in src.lines(0, ReadStats()) if line is not None for m in parser.feed(line)]
                finally:
                    src.close()
                units.append(msgs)
    return out, problems


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("mixed")
    return out, generate(out, 6_000, seed=5, mix=parse_mix(MIX), codex_zst_share=0.4)


def test_default_corpus_is_unchanged(tmp_path: Path) -> None:
    """Without a mix the generator writes, byte for byte, the tree it wrote before the mix existed."""
    generate(tmp_path, 2_000, seed=7)
    assert _tree_hash(tmp_path) == DEFAULT_2K_SEED7_SHA256


def test_a_claude_codex_mix_writes_the_default_corpus(tmp_path: Path) -> None:
    """--mix claude=0.6,codex=0.4 writes the default corpus's files; its manifest only adds the per-agent figures."""
    plain = generate(tmp_path / "plain", 3_000, seed=2)
    mixed = generate(tmp_path / "mix", 3_000, seed=2, mix=parse_mix("claude=0.6,codex=0.4"))
    a, b = _tree_bytes(tmp_path / "plain"), _tree_bytes(tmp_path / "mix")
    assert a.pop("manifest.json") != b.pop("manifest.json") and a == b
    assert {k: v for k, v in mixed.items() if k not in ("mix", "codex_zst_share", "agents")} == plain
    agents = mixed["agents"]
    assert agents["claude"]["messages"] + agents["codex"]["messages"] == 3_000
    assert agents["claude"]["sessions"] == plain["claude_sessions"]
    assert sum(x["files"] for x in agents.values()) == plain["files"]
    assert sum(x["bytes"] for x in agents.values()) == plain["bytes"]


def test_mixed_manifest_counts_equal_the_real_parsers(mixed: tuple[Path, dict[str, Any]]) -> None:
    """Per agent, the manifest's messages and sessions are what our scanner's discovery and parsers find."""
    root, manifest = mixed
    parsed, problems = _parse_agents(root, manifest)
    assert not problems
    assert set(parsed) == {"claude", "codex", "gemini", "opencode", "copilot"}
    for agent, units in parsed.items():
        info = manifest["agents"][agent]
        assert (sum(map(len, units)), len(units)) == (info["messages"], info["sessions"]), agent
        assert info["messages"] > 300, agent
    msgs = [m for units in parsed.values() for unit in units for m in unit]
    assert len(msgs) == manifest["messages"] == 6_000
    kinds = Counter(m.kind for m in msgs)
    assert manifest["by_kind"] == {k: kinds[k] for k in ("text", "thinking", "tool_call", "tool_result")}
    assert Counter(m.role for m in msgs) == manifest["by_role"]


@pytest.mark.parametrize("n", [0, 1, 57, 1_001])
@pytest.mark.parametrize("agent", ["gemini", "opencode", "copilot"])
def test_exact_count_at_any_cut_point_for_each_new_format(tmp_path: Path, agent: str, n: int) -> None:
    """A Gemini, OpenCode or Copilot corpus stops at exactly N messages wherever the cut falls (a call
    whose result the budget left out is written as still running)."""
    manifest = generate(tmp_path, n, seed=6, mix={agent: 1.0})
    if n == 0:
        assert manifest["messages"] == 0 and manifest["agents"][agent]["sessions"] == 0
        return
    parsed, problems = _parse_agents(tmp_path, manifest)
    assert not problems
    assert sum(map(len, parsed[agent])) == manifest["agents"][agent]["messages"] == manifest["messages"] == n


def test_mixed_layout_is_where_each_agent_keeps_it(mixed: tuple[Path, dict[str, Any]]) -> None:
    """Each agent's tree is laid out as the agent writes it: zst rollouts without their plain file, Gemini
    logs and legacy documents in registered project folders, one OpenCode database, Copilot session folders."""
    root, manifest = mixed
    codex = manifest["agents"]["codex"]
    zst = sorted((root / "codex").rglob("rollout-*.jsonl.zst"))
    assert len(zst) == codex["zst_sessions"] > 0
    assert not any(p.with_suffix("").exists() for p in zst)
    plain = zstandard.ZstdDecompressor().decompressobj().decompress(zst[0].read_bytes())
    assert json.loads(plain.split(b"\n", 1)[0])["type"] == "session_meta" and plain.endswith(b"\n")
    tmp = root / "gemini" / ".gemini" / "tmp"
    registry = json.loads((root / "gemini" / ".gemini" / "projects.json").read_bytes())["projects"]
    assert {(tmp / slug / ".project_root").read_text() for slug in registry.values()} == set(registry)
    logs, docs = sorted(tmp.glob("*/chats/session-*.jsonl")), sorted(tmp.glob("*/chats/session-*.json"))
    assert len(docs) == manifest["agents"]["gemini"]["legacy_json_sessions"] > 0
    assert len(logs) + len(docs) == manifest["agents"]["gemini"]["sessions"]
    # Readers of the database (the tests above) may have left its -wal and -shm files beside it.
    written = [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(("-wal", "-shm"))]
    assert [p.name for p in written if "opencode" in p.parts] == ["opencode.db"]
    folders = sorted((root / "copilot" / "session-state").iterdir())
    assert len(folders) == manifest["agents"]["copilot"]["sessions"]
    assert all(sorted(p.name for p in f.iterdir()) == ["events.jsonl", "workspace.yaml"] for f in folders)
    assert manifest["files"] == sum(a["files"] for a in manifest["agents"].values())
    on_disk = sum(p.stat().st_size for p in written if p.name != "manifest.json")
    assert manifest["bytes"] == sum(a["bytes"] for a in manifest["agents"].values()) == on_disk


def test_new_formats_carry_the_same_text_sizes(mixed: tuple[Path, dict[str, Any]]) -> None:
    """Gemini, OpenCode and Copilot messages are as long as Claude Code's, kind by kind (apples to apples)."""
    root, manifest = mixed
    parsed, _ = _parse_agents(root, manifest)

    def sizes(agent: str, kind: str) -> list[int]:
        return [len(m.text.encode()) for unit in parsed[agent] for m in unit if m.kind == kind]

    for kind in ("text", "thinking", "tool_call", "tool_result"):
        ref = statistics.median(sizes("claude", kind))
        for agent in ("gemini", "opencode", "copilot"):
            assert 0.75 < statistics.median(sizes(agent, kind)) / ref < 1.33, (agent, kind)
    ref_mean = statistics.mean(len(m.text.encode()) for unit in parsed["claude"] for m in unit)
    for agent in ("gemini", "opencode", "copilot"):
        mean = statistics.mean(len(m.text.encode()) for unit in parsed[agent] for m in unit)
        assert 0.8 < mean / ref_mean < 1.25, agent


def test_mixed_corpus_indexes_to_the_manifest_counts(mixed: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """`aivault index` over the manifest's roots (as bench.run --mix-compare passes them) indexes exactly the
    manifest's sessions and messages per agent."""
    root, manifest = mixed
    h = Home.resolve(tmp_path / "home").ensure()
    policy.save(h, policy.Policy(True, None))
    lexical_only(h)
    proc = subprocess.run([sys.executable, "-m", "aivault.cli", "index", "--json", *root_args(root, manifest)],
                          env=cli_env(h.path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["messages"] == 6_000
    con = duckdb.connect(str(h.db_path), read_only=True)
    try:
        rows = con.execute(AGENT_FIGURES).fetchall()
    finally:
        con.close()
    assert {a: (s, m) for a, s, m, _ in rows} == {
        a: (info["sessions"], info["messages"]) for a, info in manifest["agents"].items()}
