"""Deterministic generator of realistic coding-agent transcript trees for benchmarks.

    python -m bench.gen_corpus --out DIR --messages N [--seed 1] [--codex-share 0.4]
    python -m bench.gen_corpus --out DIR --messages N --mix claude=0.3,codex=0.3,gemini=0.15,opencode=0.15,copilot=0.1
                               [--codex-zst-share 0.3]

The layout and record shapes follow docs/formats.md §1 (Claude Code) and docs/formats.md §2 (Codex) so the output can
be fed both to our scanner and to peer tools; the records come from ``tests.builders.claude`` and
``tests.builders.codex``, the functions the tests and the quality benchmark write with too.
``manifest.json`` reports the exact number of normalized messages (docs/formats.md §0: one per content
block; bookkeeping, injected context and the duplicate Codex ``event_msg`` stream do not count), which is
what the benchmark divides timings by.

``--mix`` splits the sessions across agents: Gemini CLI, OpenCode and GitHub Copilot CLI sessions
(``bench.corpus_formats``) get their content from the same text machinery as Claude Code's, so a
message costs the same to index whatever agent wrote it; ``--codex-zst-share`` writes that fraction
of Codex rollouts compressed, as Codex 0.137+ does for idle sessions. With ``--mix`` the manifest also
has, per agent, the exact message count and the layout of its root (``agents``). A mix of only
``claude`` and ``codex`` writes the same files as ``--codex-share`` with Codex's weight.

Speed comes from doing the expensive text work once: every kind of content (prose, thinking, code,
test logs, diffs, errors...) is pre-rendered into a large string with unit offsets, and a message is a
random contiguous window of it, i.e. one slice. Per message the hot loop only draws a few random numbers,
builds a dict with those (pure) record functions and calls ``orjson.dumps``; each session file is
written with a single ``write``.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import contextlib
import itertools
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

from bench import corpus_formats as fmt
from tests.builders import claude, codex
from tests.builders.common import iso_ms, uuid4, uuid7
from tests.builders.gemini import slugify

__all__ = ["AGENTS", "LONG_LINE_MIN", "RARE_PHRASES", "generate", "main", "parse_mix"]

AGENTS = fmt.AGENTS

# A tool output line longer than this is "long" (the indexer's line-length guard is tuned on it).
LONG_LINE_MIN = 3072

_YEAR_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_DAY_MS = 86_400_000
# Newer Codex turn contexts spell the whole sandbox policy out.
_SANDBOX_POLICY = {"type": "workspace-write", "network_access": False, "exclude_tmpdir_env_var": False,
                   "exclude_slash_tmp": False}

# ---------------------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------------------

# Ranked by rough frequency in real coding-session prose; a Zipf law over this rank makes "the" or
# "to" hit most messages while the tail stays selective.
_COMMON = """
the to a of and in is it that for this we i on with be not as test file from are so now can you
function error if but at should then by an or code need will use let me which when there have has all
run check fix change new value case return call data first type just also more same here into does
because only what module update instead than line tests config path before after each other still make
add remove build failing passes output input list string number object field method class instance
variable loop query index cache session message user request response handler server client looks like
seems probably actually correct wrong missing empty null none true false default option flag argument
parameter result results issue bug problem reason way time two three next last old current existing
previous expected actual both any some few many every without again already right work works working
read write load save parse handle create delete set get keep move rename split merge commit branch
review look see find found show shows know think want try tried added changed fixed updated removed
moved renamed step part version release dependency package import export schema table column row
migration database api endpoint route service worker job queue thread lock timeout retry log logs
warning trace stack frame memory disk cpu performance slow fast large small big simple clean safe async
await sync batch stream buffer chunk offset limit page sort filter search match pattern regex token key
hash id name title text content block lines width length size count total max min sum average ratio
rate directory folder repo project workspace environment variable shell command script runner ci
pipeline job step cli flag help usage docs readme comment note todo plan approach idea option instead
probably maybe likely clearly simply directly correctly properly quickly safely
"""

_MORPHEMES = """
user account session token cache index query parse build config handler manager request response client
server worker queue job task event message stream buffer reader writer file path dir store db table row
column schema migration record batch chunk page cursor offset limit filter sort search rank score vector
embed model agent tool call result error retry timeout lock mutex pool thread process signal hook plugin
route router view component state props render layout style theme auth login permission role policy rule
validator serializer encoder decoder codec format transcript scanner indexer watcher ingest snapshot
checkpoint metric counter gauge histogram trace span logger level settings env flag option arg param
payload header body status stats report summary title branch commit diff patch merge repo project
workspace module package crate dependency version release deploy artifact image container node cluster
shard replica leader follower wal segment compaction bloom trie heap tree graph edge link ref handle slot
frame tick clock timer deadline budget quota throttle backoff jitter seed sample shuffle
"""

_NON_ASCII = [
    "café",
    "naïve",
    "résumé",
    "Zürich",
    "São Paulo",
    "façade",
    "coöperate",
    "jalapeño",
    "修復",
    "修復済み",
    "バグを修正しました",
    "日本語のコメント",
    "测试失败",
    "请检查配置",
    "안녕하세요",
    "테스트 통과",
    "Привет, мир",
    "ошибка компиляции",
    "Ελληνικά",
    "emoji 🚀",
    "✅ all green",
    "🐛 fixed",
    "🔥 hot path",
    "⚠️ flaky",
    "≈ 3× faster",
    "µs → ms",
    "naïve Bayes baseline",
    "straße",
    "smörgåsbord",
    "über-config",
]

_RARE_HANDWRITTEN = [
    "Could not set lock on file",
    "database disk image is malformed",
    "Too many open files",
    "Broken pipe while flushing stdout",
    "certificate has expired or is not yet valid",
    "ENOSPC: no space left on device",
    "deadlock detected while waiting for ShareLock",
    "Segmentation fault (core dumped)",
    "maximum recursion depth exceeded while calling a Python object",
    "borrowed value does not live long enough",
    "Ineffective mark-compacts near heap limit",
    "SSL: WRONG_VERSION_NUMBER",
    "Connection reset by peer",
    "Stale file handle",
    "checksum mismatch in WAL segment",
    "inode exhaustion on the build runner",
    "clock skew detected between nodes",
    "zombie process left behind by the watcher",
    "unexpected EOF while parsing frontmatter",
    "Text file busy",
    "Resource temporarily unavailable",
    "Operation not permitted on mounted volume",
    "invalid byte sequence for encoding UTF8",
    "phantom read under snapshot isolation",
    "flaky only on Tuesdays",
    "cursor invalidated by a concurrent vacuum",
    "lockfile is out of date with package.json",
    "mmap failed with EINVAL on tmpfs",
    "msgpack ExtraData while unpacking trailing bytes",
    "orphaned WAL after power loss",
    "split brain after the leader election",
    "integer overflow in the offset arithmetic",
    "double free or corruption (fasttop)",
    "stack smashing detected",
    "Illegal instruction (core dumped)",
    "Bus error (core dumped)",
    "inotify watch limit reached",
    "fs.inotify.max_user_watches",
    "EMFILE: too many open files, watch",
    "the trailing newline was eaten by the heredoc",
    "tz database is missing Europe/Kyiv",
    "leap second smeared twice",
    "the rebase dropped the fixup commit",
    "detached HEAD after bisect",
    "submodule pointer went backwards",
    "git lfs smudge filter failed",
    "shallow clone lacks the tag",
    "pre-commit hook rewrote the lockfile",
    "dependabot bumped the wrong major",
    "WASM memory grew past four gigabytes",
    "SIGPIPE killed the pager",
    "OOMKilled by the kubelet",
    "CrashLoopBackOff on the migrator pod",
    "readiness probe flapped",
    "ImagePullBackOff for the sidecar",
    "the HAProxy health check timed out",
    "nginx upstream prematurely closed connection",
    "HTTP 418 from the staging teapot",
    "gRPC status RESOURCE_EXHAUSTED",
    "protobuf field number reused",
    "Avro schema fingerprint mismatch",
    "Parquet footer is corrupt",
    "Arrow buffer misaligned by eight bytes",
    "ZeroMQ high water mark reached",
    "msgpack nesting limit exceeded",
    "orjson rejected a lone surrogate",
    "UTF-16 surrogate pair split",
    "BOM at the start of the JSONL file",
    "CRLF line endings from the Windows runner",
    "the fixture was generated on a leap day",
    "daylight saving jump skipped the cron",
    "NaN sorted before negative infinity",
    "float32 rounding in the embedding norm",
    "bloom filter false positive storm",
    "trigram index exploded on minified bundles",
    "posting list exceeded sixteen megabytes",
    "tokenizer split the emoji ZWJ sequence",
    "case folding of the Turkish dotless i",
    "Unicode normalization NFC versus NFD",
    "the watcher missed a rename across devices",
    "atomic rename is not atomic on SMB",
    "fsync lied on the overlay filesystem",
    "page cache eviction under cgroup pressure",
    "madvise DONTNEED zeroed the arena",
    "transparent huge pages stalled compaction",
    "CPU frequency scaling skewed the benchmark",
    "noisy neighbour on the shared runner",
]

_RARE_ADJ = """obsidian quixotic marzipan halcyon vermilion cobalt saffron gossamer tamarind brambly zircon
juniper wistful basalt periwinkle nebular ochre lilac tungsten mercurial"""
_RARE_NOUN = "ledger beacon sluice lantern quiver trellis gantry kiln spindle bellows conduit cistern"
_RARE_SUFFIX = "rebalancer reconciler backfill handshake watchdog"


def _rare_phrases() -> list[str]:
    adjs, nouns, sufs = _RARE_ADJ.split(), _RARE_NOUN.split(), _RARE_SUFFIX.split()
    made = [
        f"{a} {n} {sufs[(i * 7 + j) % len(sufs)]}" for i, a in enumerate(adjs) for j, n in enumerate(nouns)
    ]
    # A fixed permutation keeps the set stable across seeds, so benchmark query lists stay valid.
    random.Random(20260101).shuffle(made)
    return _RARE_HANDWRITTEN + made[: 300 - len(_RARE_HANDWRITTEN)]


RARE_PHRASES: list[str] = _rare_phrases()

_PROJECT_A = """billing auth search web mobile data ml infra payments ledger notify chat docs media geo
recs inventory orders metrics events identity admin cms crm etl stream edge vault atlas pulse orbit
nimbus harbor forge relay beacon"""
_PROJECT_B = """service api dashboard pipeline engine worker gateway portal sdk cli core server client
indexer scheduler agent bot tools infra"""
_SUBDIRS = [
    "backend",
    "frontend",
    "packages/api",
    "packages/web",
    "services/worker",
    "crates/core",
    "apps/admin",
    "libs/shared",
    "cmd/server",
    "python",
]

_LANGS = ["python", "typescript", "rust", "go"]
_EXT = {"python": ".py", "typescript": ".ts", "rust": ".rs", "go": ".go"}
_SRC_DIRS = {
    "python": ["src/{p}", "src/{p}/core", "src/{p}/api", "src/{p}/storage", "{p}", "scripts"],
    "typescript": ["src", "src/components", "src/lib", "src/routes", "src/hooks", "packages/web/src"],
    "rust": ["src", "src/bin", "crates/core/src", "crates/cli/src", "src/storage"],
    "go": ["internal/server", "internal/store", "pkg/api", "cmd/server", "internal/worker"],
}

_CLAUDE_MODELS = [
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-5-20251101",
    "claude-haiku-4-5-20251001",
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-6",
]
_CLAUDE_VERSIONS = ["2.0.76", "2.1.3", "2.1.14", "2.1.29", "2.1.39", "2.1.40", "2.1.52", "2.1.61"]
_CODEX_MODELS = ["gpt-5-codex", "gpt-5.1-codex", "gpt-5.1-codex-max", "gpt-5.2-codex", "gpt-5.2"]
_CODEX_VERSIONS = ["0.58.0", "0.63.0", "0.71.0", "0.77.0", "0.88.0", "0.98.0", "0.104.0"]

# ---------------------------------------------------------------------------------------------------
# Templates. Slots are filled once at pool-build time, never per message.
# ---------------------------------------------------------------------------------------------------

_PROSE_T = [
    "I updated `{f}` so that `{fn}` no longer returns None when the {w} is empty.",
    "The failing test was `{test}`; it expected {n} rows but the query returned {n2}.",
    "Now the {w} is passed through `{cls}.{fn}` instead of being rebuilt on every call.",
    "This should fix the {w} regression introduced in {h}.",
    "I ran `{cmd}` and all {n} tests pass.",
    "The root cause is that `{id}` is read before `{fn}` has finished writing it.",
    "Let me know if you want me to also update `{f}`.",
    "There are {n} call sites of `{fn}` across the repo, mostly in `{mod}`.",
    "See {url} for the upstream discussion.",
    "The change is behind the `{const}` flag, so the old path still works.",
    "I kept the public API of `{cls}` the same and only changed the internals.",
    "`{f}` now imports `{cls}` from `{mod}` rather than the deprecated module.",
    "It turns out the {w} cache was keyed by `{id}`, which is not unique per {w2}.",
    "I also added a regression test in `{tf}`.",
    "The benchmark went from {ms} ms to {ms2} ms on the {n}-row fixture.",
    "The error comes from `{fn}` at `{f}:{line}`.",
    "I'm not sure the {w} handling in `{cls}` is right, so I left a TODO.",
    "We should probably move `{fn}` into `{mod}` later, but that is out of scope here.",
    "The {w} is now validated up front, which turns the confusing {exc} into a clear message.",
    "Both `{fn}` and `{fn2}` share the same {w} logic, so I pulled it into a helper.",
    "The migration adds a `{col}` column to `{tbl}` with a default of {n}.",
    "After the change, `{cmd}` reports {n} passed and {n2} skipped.",
    "The previous implementation allocated a new {w} for every {w2}; now it reuses one buffer.",
    "I could not reproduce the {w} issue locally, so I added logging around `{fn}`.",
    "The {exc} happened because `{id}` was a string, not a list.",
    "In short: the {w} was stale, the fix is to invalidate it when `{fn}` runs.",
    "Commit {h} touches `{f}` and `{f2}` only.",
    "The default for `{flag}` is now {n} instead of {n2}.",
    "I replaced the manual loop with `{fn}`, which is both shorter and faster.",
    "Here is what changed:\n\n- `{f}`: {w} handling in `{fn}`\n- `{f2}`: new test for the {w2} case\n",
    "The fix is a one-line change in `{f}`:\n\n```\n{code}\n```\n",
    "All checks pass on `{br}`; the CI run is at {url}.",
    "The {w} path was never exercised by the tests, which is why this slipped through.",
    "`{cls}` holds a reference to the old {w}, so the update is not visible until restart.",
    "I checked the other call sites and none of them depend on the old ordering.",
    "The test now covers the empty {w}, the single {w}, and the {n}-item case.",
    "This is safe to merge; the only behaviour change is in how `{fn}` reports errors.",
    "I reverted the change to `{f}` because it broke `{test}`.",
    "The slow part is the `{fn}` call inside the loop, which does a full scan of `{tbl}`.",
    "Adding an index on `{tbl}({col})` brings the query down to {ms} ms.",
    "The {w} was being parsed twice: once in `{fn}` and again in `{fn2}`.",
    "I added a guard so that `{fn}` returns early when the {w} is missing.",
    "The warning about `{id}` is harmless, but I silenced it to keep the output clean.",
    "You can reproduce it with `{cmd}` on a clean checkout of `{br}`.",
    "I left the old `{fn}` in place as a thin wrapper so existing callers keep working.",
    "The type checker was right: `{id}` can be None when the {w} has not been loaded yet.",
    "Next, I'll run the full test suite to make sure nothing else regressed.",
    "The CI failure is unrelated to this change; it is the known flaky {w} test.",
    "I updated the docs in `{f}` to mention the new `{flag}` option.",
    "With this change the {w} is written atomically, so a crash can no longer leave a partial file.",
    "The diff is small: {n} lines added and {n2} removed across two files.",
    "Let me check the {w} handling in `{f}` next.",
    "Everything passes locally, including the slow integration tests.",
]

_THINK_T = [
    "The user wants me to {task}.",
    "Let me look at `{f}` first to see how `{fn}` is used.",
    "I should check whether `{id}` can be None here.",
    "The traceback points at `{f}` line {line}, so the bug is probably in `{fn}`.",
    "Maybe the {w} is stale because `{cls}` caches it; I need to confirm that.",
    "Running the tests again should tell me whether the fix worked.",
    "I'll grep for `{fn}` to find the other callers.",
    "The test expects {n} but we get {n2}; an off-by-one somewhere in the {w} loop.",
    "Plan: read `{f}`, update `{fn}`, then run `{cmd}`.",
    "That {exc} means the {w} was never initialised on this path.",
    "The simplest fix is to pass the {w} explicitly instead of reading it from `{mod}`.",
    "I need to be careful not to break `{fn2}`, which relies on the old behaviour.",
    "Let me check the git log to see when `{fn}` changed.",
    "Good, the tests pass now. I should also update the docs for `{flag}`.",
    "Hmm, `{cmd}` still fails, but with a different error this time.",
    "The schema has `{col}` as TEXT, so the comparison with {n} is lexicographic.",
    "I wonder if the {w} is shared between threads; that would explain the flaky failure.",
    "The config is loaded in `{f}`, and `{const}` overrides it.",
    "The user asked for a minimal change, so I should not refactor `{cls}` now.",
    "Let me read the test first to understand what behaviour is expected.",
    "The diff touches `{f}`; I should run the tests for that module only.",
    "There might be a race between `{fn}` and the background {w} worker.",
    "I need the exact error message, so I'll run `{cmd}` again with more output.",
    "This looks like the same {exc} as before, just from a different call site.",
    "Before editing, I want to know who else imports `{mod}`.",
    "OK, the fix works. Now I should clean up the debug logging I added.",
    "The {w} comes from `{f}`; if that is wrong, everything downstream is wrong too.",
    "It is probably easier to add a new `{fn}` than to change the existing one.",
]

_PROMPT_T = [
    "fix the failing test in {tf}",
    "why does `{fn}` return {n} for an empty {w}?",
    "can you add {feature} to {f}",
    "Refactor {cls} so it doesn't depend on {mod}",
    "the build is broken on {br}, can you take a look",
    "run the tests and fix whatever fails",
    "add a --{flagname} option to the cli",
    "{fn} is really slow on large inputs, can you profile it",
    "please review {f} and suggest improvements",
    "update the README to describe the new {w} flow",
    "write tests for {fn}",
    "What does {id} do?",
    "continue",
    "yes, go ahead",
    "commit this with a sensible message",
    "looks good, now do the same for {f}",
    "the {w} page shows stale data after a refresh, any idea why?",
    "can you explain how {cls} and {cls2} interact?",
    "rename {fn} to {fn2} everywhere",
    "make {fn} async",
    "add type hints to {f}",
    "the ci job {job} keeps timing out",
    "bump {pkg} to the latest version and fix the breakage",
    "remove the dead code in {mod}",
    "there's a memory leak somewhere in the {w} worker",
    "add logging around {fn}",
    "implement pagination for the {w} endpoint",
    "why is {col} null for some rows in {tbl}?",
    "migrate {tbl} to the new schema",
    "set up a github action that runs the tests on push",
]

_TITLE_T = [
    "Fix {w} handling in {cls}",
    "Add {feature}",
    "Debug {exc} in {fn}",
    "Refactor {mod}",
    "Speed up {fn}",
    "Tests for {fn}",
    "Migrate {tbl} schema",
    "CI timeout on {br}",
    "Investigate flaky {w} test",
    "Pagination for {w} endpoint",
    "Review {f}",
]

_REASON_HEAD_T = [
    "Inspecting `{f}`",
    "Checking `{fn}` usage",
    "Planning the {w} fix",
    "Running the {w} tests",
    "Reviewing `{cls}`",
    "Investigating the {exc}",
    "Updating `{f}`",
    "Searching for `{fn}` callers",
    "Verifying the fix",
    "Considering edge cases",
    "Examining test failure",
    "Tracing the {w} flow",
]

_FEATURES = [
    "retry with backoff",
    "a health endpoint",
    "rate limiting",
    "dark mode",
    "CSV export",
    "pagination",
    "structured logging",
    "a dry-run mode",
    "caching",
    "input validation",
    "a progress bar",
    "fuzzy search",
    "webhooks",
    "an audit log",
    "soft deletes",
]

_EXCS = [
    "ValueError",
    "KeyError",
    "TypeError",
    "AttributeError",
    "RuntimeError",
    "AssertionError",
    "FileNotFoundError",
    "IndexError",
    "PermissionError",
    "TimeoutError",
    "ConnectionRefusedError",
    "json.decoder.JSONDecodeError",
    "sqlite3.OperationalError",
    "duckdb.BinderException",
    "ModuleNotFoundError",
    "UnicodeDecodeError",
    "OSError",
]

_EXC_MSG = [
    "'NoneType' object has no attribute '{fn}'",
    "No module named '{mod}'",
    "list index out of range",
    "Expecting value: line 1 column {n} (char {n2})",
    "[Errno 2] No such file or directory: '{f}'",
    "'{id}'",
    "invalid literal for int() with base 10: '{w}'",
    "{fn}() missing 1 required positional argument: '{id}'",
    "unsupported operand type(s) for +: 'int' and 'str'",
    "timed out after {n}s",
    "expected {n} rows, got {n2}",
    "database is locked",
    'Referenced column "{col}" not found',
    "'utf-8' codec can't decode byte 0x{hx} in position {n}: invalid start byte",
]

_PY_CODE = [
    "def {snake}({a}, {b}):",
    "    return {snake}({a})",
    "    {a} = {mod}.{snake}({b}, timeout={n})",
    "class {cls}({cls2}):",
    "    # {phrase}",
    "from {mod} import {cls}, {snake}",
    "import {mod}",
    '        raise {exc}(f"{phrase}: {{{a}!r}}")',
    "    if {a} is None:",
    "        {a}.{snake}()",
    "    for {a} in {b}:",
    '@pytest.mark.parametrize("{a}", [{n}, {n2}])',
    "    assert {a} == {n}",
    '    """{Phrase}."""',
    "        self.{snake} = {snake2}",
    "    {a}: dict[str, {cls}] = {{}}",
    '    with open({a}, "rb") as fh:',
    "            {b} = orjson.loads(line)",
    "",
    '    logger.info("{phrase}", extra={{"{a}": {a}}})',
    "{CONST} = {n}",
    "    async def {snake}(self, {a}: str) -> {cls} | None:",
    "        await self.{snake}({a})",
    "        except {exc} as exc:",
    "    return [{a} for {a} in {b} if {a}.{snake}]",
]

_TS_CODE = [
    "export function {camel}({a}: {cls}): Promise<{cls2}> {{",
    "  const {camel} = await {camel2}({a});",
    "  if (!{a}) throw new Error(`{phrase}`);",
    "import {{ {cls} }} from './{kebab}';",
    "  return {a}.map(({b}) => {b}.{camel});",
    "}}",
    "  // {phrase}",
    "interface {cls} {{",
    "  {camel}?: string;",
    "export const {CONST} = {n};",
    "  useEffect(() => {{",
    "  }}, [{a}]);",
    "    console.error('{phrase}', err);",
    "  const [{a}, set{cls}] = useState<{cls2} | null>(null);",
    "describe('{cls}', () => {{",
    "  it('{phrase}', async () => {{",
    "    expect({a}).toBe({n});",
    "",
    "export default {cls};",
    "type {cls} = {{ {camel}: number; {camel2}: string }};",
]

_RS_CODE = [
    "pub fn {snake}(&self, {a}: &{cls}) -> Result<{cls2}, Error> {{",
    "    let {a} = self.{snake}.get(&{b})?;",
    "    // {phrase}",
    "impl {cls} for {cls2} {{",
    "use crate::{snake}::{cls};",
    '        .map_err(|e| anyhow!("{phrase}: {{e}}"))?;',
    "#[derive(Debug, Clone, Serialize, Deserialize)]",
    "}}",
    "",
    "    Ok({cls}::new({a}))",
    "    for {a} in {b}.iter() {{",
    "        if {a}.is_empty() {{ continue; }}",
    "#[test]",
    "fn {snake}() {{",
    "    assert_eq!({a}.len(), {n});",
    "pub struct {cls} {{",
    "    pub {snake}: Vec<{cls2}>,",
    "    match {a} {{",
    "        Some(v) => v,",
    "        None => return Err(Error::{cls}),",
    "const {CONST}: usize = {n};",
]

_GO_CODE = [
    "func (s *{cls}) {cls2}(ctx context.Context, {a} string) error {{",
    "\tif err != nil {{",
    '\t\treturn fmt.Errorf("{phrase}: %w", err)',
    "\t}}",
    "}}",
    "",
    "\t// {phrase}",
    "\t{a}, err := s.{camel}(ctx, {b})",
    "type {cls} struct {{",
    '\t{cls2} string `json:"{snake}"`',
    "\tfor _, {a} := range {b} {{",
    "func Test{cls}(t *testing.T) {{",
    '\t\tt.Fatalf("{phrase}: %v", err)',
    "import (",
    '\t"context"',
    '\t"{modslash}"',
    ")",
    "const {cls} = {n}",
]

_CODE_T = {"python": _PY_CODE, "typescript": _TS_CODE, "rust": _RS_CODE, "go": _GO_CODE}

_BASH_DESC = {
    "test": [
        "Run the test suite",
        "Run the failing test",
        "Run tests for the changed module",
        "Re-run tests after the fix",
    ],
    "build": ["Build the project", "Type-check the project", "Install dependencies", "Compile"],
    "git": ["Check git status", "Show the diff", "Show recent commits"],
    "rg": ["Search for usages", "Find callers", "Search the codebase"],
    "ls": ["List files", "Find source files"],
    "run": ["Run the app", "Tail the service logs", "Hit the health endpoint"],
    "db": ["Query the database", "Inspect the table"],
    "cat": ["Show the file", "Print the file"],
}

_INJECT_AGENTS_MD = [
    "## Build & test\n- Use `{cmd}` before committing.\n- Keep functions small; prefer pure helpers.\n"
    "## Style\n- Type hints everywhere.\n- Comments explain why, not what.\n",
    "# Repository guidelines\n\nRun `{cmd}`. Do not edit generated files under `{f}`.\n"
    "Prefer small, reviewable commits with conventional messages.\n",
]

_CODEX_INSTRUCTIONS = (
    "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a user's "
    "computer.\n\n## General\n\n- When searching for text or files, prefer using `rg` or `rg --files` "
    "respectively because `rg` is much faster than alternatives like `grep`.\n\n## Editing constraints\n\n"
    "- Default to ASCII when editing or creating files.\n- Add succinct code comments that explain what is "
    "going on if code is not self-explanatory.\n- You may be in a dirty git worktree. NEVER revert existing "
    "changes you did not make unless explicitly requested.\n\n## Plan tool\n\nWhen using the planning tool:"
    "\n- Skip using the planning tool for straightforward tasks (roughly the easiest 25%).\n"
)

_CAVEAT = (
    "<local-command-caveat>Caveat: The messages below were generated by the user while running local "
    "commands. DO NOT respond to these messages or otherwise consider them in your response unless "
    "the user explicitly asks you to.</local-command-caveat>"
)
_READ_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be "
    "considered malware. You CAN and SHOULD provide analysis of malware, what it is doing. But "
    "you MUST refuse to improve or augment the code.\n</system-reminder>\n"
)
_TODO_OK = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to track "
    "your progress. Please proceed with the current tasks if applicable"
)

# ---------------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------------

class _Corpus:
    """Units (sentences or lines) rendered into one string; a window of k units is a single slice."""

    __slots__ = ("ends", "n", "starts", "text")

    def __init__(self, units: Sequence[str], seps: Sequence[str] | None = None, sep: str = "\n") -> None:
        starts: list[int] = []
        ends: list[int] = []
        parts: list[str] = []
        pos = 0
        for i, u in enumerate(units):
            starts.append(pos)
            pos += len(u)
            ends.append(pos)
            s = seps[i] if seps is not None else sep
            parts.append(u)
            parts.append(s)
            pos += len(s)
        self.text = "".join(parts)
        self.starts = starts
        self.ends = ends
        self.n = len(units)

    def window(self, r: random.Random, k: int) -> str:
        k = max(1, min(k, self.n))
        a = int(r.random() * (self.n - k + 1))
        return self.text[self.starts[a] : self.ends[a + k - 1]]

    def span(self, a: int, k: int) -> str:
        return self.text[self.starts[a] : self.ends[a + k - 1]]


class _Zipf:
    """Zipf-weighted picker over a list; bisect on cumulative weights is ~0.3 µs per draw."""

    __slots__ = ("cum", "items", "r", "total")

    def __init__(self, items: Sequence[str], r: random.Random, s: float = 1.0, q: float = 2.0) -> None:
        self.items = list(items)
        self.cum = list(itertools.accumulate(1.0 / (i + q) ** s for i in range(len(self.items))))
        self.total = self.cum[-1]
        self.r = r

    def __call__(self) -> str:
        return self.items[bisect.bisect(self.cum, self.r.random() * self.total)]


class _Slots:
    """Mapping for str.format_map whose values are drawn fresh on every lookup."""

    __slots__ = ("fns",)

    def __init__(self, fns: dict[str, Callable[[], str]]) -> None:
        self.fns = fns

    def __getitem__(self, key: str) -> str:
        return self.fns[key]()


@dataclass(slots=True)
class _VFile:
    rel: str
    n: int
    raw: _Corpus
    numbered: _Corpus


@dataclass(slots=True)
class _Project:
    name: str
    root: str
    lang: str
    branches: list[str]
    repo_url: str
    subdirs: list[str]


_Thunk = Callable[[bool], tuple[Any, bool, Any]]


class _Where(Protocol):
    """What a tool call is drawn from: the session's project and working directory."""

    project: _Project
    cwd: str


class _Stop(Exception):
    """Raised the moment the message budget is spent; unwinds to the session writers, which flush."""


# ---------------------------------------------------------------------------------------------------
# Pools
# ---------------------------------------------------------------------------------------------------


class _Pools:
    def __init__(self, seed: int) -> None:
        self.np = np.random.default_rng(seed)
        # The Zipf pickers below keep drawing from this stream during generation too; it is separate from
        # the generator's own stream but equally seeded, so the output stays a pure function of the seed.
        r = self.pr = random.Random(seed * 7919 + 17)
        common = list(dict.fromkeys(_COMMON.split()))
        self.common = common
        morph = list(dict.fromkeys(_MORPHEMES.split()))
        self._build_identifiers(morph)
        self._build_projects()
        self.slots = self._make_slots()
        self.phrase_corpus = self._salad_corpus(6000, 3, 9)
        self.slots.fns["phrase"] = lambda: self.phrase_corpus.window(r, 1)
        self.slots.fns["Phrase"] = lambda: self.phrase_corpus.window(r, 1).capitalize()
        self.errors = self._build_errors()
        # Later slots depend on earlier pools (code lines embed phrases, prose embeds code lines), hence
        # the build order; the lambda resolves code_lines lazily, after it exists.
        self.slots.fns["code"] = lambda: r.choice(self.code_lines["python"])
        self.code_lines = {lang: self._fill_many(_CODE_T[lang], 6000) for lang in _LANGS}
        self.prose = self._sentence_corpus(_PROSE_T, 36000, salad_share=0.25)
        self.thinking = self._sentence_corpus(_THINK_T, 18000, salad_share=0.2)
        self.prompts = self._fill_many(_PROMPT_T, 6000)
        self.titles = self._fill_many(_TITLE_T, 3000)
        self.reason_heads = self._fill_many(_REASON_HEAD_T, 3000)
        self.agents_md = self._fill_many(_INJECT_AGENTS_MD, 40)
        self.vfiles = {lang: self._build_vfiles(lang, 260) for lang in _LANGS}
        self._build_tool_corpora()
        self._build_blobs()

    # -- identifiers and projects -------------------------------------------------------------------

    def _build_identifiers(self, morph: list[str]) -> None:
        r = self.pr
        idx = self.np.integers(0, len(morph), size=(6000, 3)).tolist()
        nparts = self.np.integers(2, 4, size=6000).tolist()
        snakes, camels, pascals = [], [], []
        for row, k in zip(idx, nparts, strict=True):
            parts = [morph[i] for i in row[:k]]
            snakes.append("_".join(parts))
            camels.append(parts[0] + "".join(p.capitalize() for p in parts[1:]))
            pascals.append("".join(p.capitalize() for p in parts))
        self.snake = _Zipf(list(dict.fromkeys(snakes)), r, 0.9)
        self.camel = _Zipf(list(dict.fromkeys(camels)), r, 0.9)
        self.pascal = _Zipf(list(dict.fromkeys(pascals)), r, 0.9)
        self.const = _Zipf([s.upper() for s in list(dict.fromkeys(snakes))[:600]], r, 0.9)
        self.morph = morph

    def _build_projects(self) -> None:
        r = self.pr
        a_words, b_words = _PROJECT_A.split(), _PROJECT_B.split()
        names = [f"{a}-{b}" for a in a_words for b in b_words]
        r.shuffle(names)
        names = ["aivault", "dotfiles", "homelab", *names[:297]]
        projects: list[_Project] = []
        for i, name in enumerate(names):
            lang = _LANGS[int(r.random() ** 1.3 * 4)]
            root = (
                f"/home/dev/{name}"
                if i % 9
                else f"/home/dev/work/{r.choice(['acme', 'oss', 'client'])}/{name}"
            )
            nb = 1 + int(r.random() * 5)
            branches = ["main" if r.random() < 0.85 else "master"]
            for _ in range(nb):
                kind = r.choice(["feat", "feat", "fix", "fix", "chore", "refactor", "perf"])
                branches.append(f"{kind}/{self.snake().replace('_', '-')}")
            if r.random() < 0.2:
                branches.append("develop")
            org = r.choice(["acme", "octo-labs", "devtools", "dev", "kite-systems", "northwind"])
            subdirs = r.sample(_SUBDIRS, 2)
            projects.append(_Project(name, root, lang, branches, f"git@github.com:{org}/{name}.git", subdirs))
        self.projects = projects
        self.project_pick = list(itertools.accumulate(1.0 / (i + 3) ** 0.85 for i in range(len(projects))))
        self.mods = {lang: self._module_paths(lang, names) for lang in _LANGS}
        self.files = {lang: self._file_paths(lang, names) for lang in _LANGS}

    def _module_paths(self, lang: str, names: list[str]) -> _Zipf:
        r = self.pr
        out = []
        for _ in range(1200):
            pkg = r.choice(names).split("-")[0]
            parts = [pkg] + [r.choice(self.morph) for _ in range(1 + int(r.random() * 3))]
            if lang == "go":
                out.append("github.com/acme/" + "/".join(parts))
            elif lang == "rust":
                out.append("::".join(["crate", *parts[1:]]))
            else:
                out.append(".".join(parts))
        return _Zipf(list(dict.fromkeys(out)), r, 0.95)

    def _file_paths(self, lang: str, names: list[str]) -> _Zipf:
        r = self.pr
        ext = _EXT[lang]
        out = []
        for _ in range(2400):
            d = r.choice(_SRC_DIRS[lang]).replace("{p}", r.choice(names).split("-")[0])
            stem = self.snake()
            if lang == "typescript" and r.random() < 0.5:
                stem = self.camel()
            if r.random() < 0.2:
                d = "tests" if lang == "python" else d
                stem = f"test_{stem}" if lang == "python" else f"{stem}_test" if lang == "go" else stem
            out.append(f"{d}/{stem}{ext}")
        return _Zipf(list(dict.fromkeys(out)), r, 0.9)

    # -- slot filling --------------------------------------------------------------------------------

    def _make_slots(self) -> _Slots:
        r = self.pr
        words = self.common
        w_zipf = _Zipf(words[40:], r, 0.8)

        def lang_of() -> str:
            return _LANGS[int(r.random() ** 1.3 * 4)]

        def num() -> str:
            x = r.random()
            return str(int(10 ** (x * 4)))

        def fn() -> str:
            return self.snake() if r.random() < 0.6 else self.camel()

        def f() -> str:
            return self.files[lang_of()]()

        def tf() -> str:
            return f"tests/test_{self.snake()}.py"

        def test() -> str:
            return f"tests/test_{self.snake()}.py::test_{self.snake()}"

        def hexs(n: int) -> Callable[[], str]:
            return lambda: f"{r.getrandbits(n * 4):0{n}x}"

        def url() -> str:
            p = r.choice(self.projects)
            k = r.random()
            if k < 0.4:
                return f"https://github.com/{p.repo_url.split(':')[1][:-4]}/pull/{int(r.random() * 900) + 1}"
            if k < 0.6:
                return (
                    f"https://github.com/{p.repo_url.split(':')[1][:-4]}/issues/{int(r.random() * 900) + 1}"
                )
            if k < 0.8:
                return f"https://docs.python.org/3/library/{r.choice(self.morph)}.html"
            return f"https://{p.name}.internal.example.com/api/v1/{r.choice(self.morph)}s?limit={num()}"

        def cmd() -> str:
            return r.choice(
                [
                    "pytest -q",
                    "cargo test",
                    "npm test",
                    "go test ./...",
                    "make lint",
                    f"pytest tests/test_{self.snake()}.py -x",
                    "ruff check .",
                    "mypy --strict src",
                    "cargo clippy -- -D warnings",
                    "npm run build",
                    "uv run pytest -k " + self.snake(),
                ]
            )

        fns: dict[str, Callable[[], str]] = {
            "f": f,
            "f2": f,
            "fn": fn,
            "fn2": fn,
            "cls": self.pascal,
            "cls2": self.pascal,
            "id": lambda: self.snake() if r.random() < 0.5 else self.camel(),
            "mod": lambda: self.mods["python"](),
            "modslash": lambda: self.mods["go"](),
            "n": num,
            "n2": num,
            "line": lambda: str(1 + int(r.random() * 900)),
            "h": hexs(7),
            "H": hexs(40),
            "hx": hexs(2),
            "url": url,
            "w": w_zipf,
            "w2": w_zipf,
            "const": self.const,
            "CONST": self.const,
            "cmd": cmd,
            "ms": num,
            "ms2": num,
            "feature": lambda: r.choice(_FEATURES),
            "exc": lambda: r.choice(_EXCS),
            "test": test,
            "tf": tf,
            "col": self.snake,
            "tbl": lambda: self.snake() + "s",
            "flag": lambda: "--" + self.snake().replace("_", "-"),
            "flagname": lambda: self.snake().replace("_", "-"),
            "br": lambda: r.choice(r.choice(self.projects).branches),
            "snake": self.snake,
            "snake2": self.snake,
            "camel": self.camel,
            "camel2": self.camel,
            "a": lambda: r.choice(
                ["x", "item", "row", "path", "value", "ctx", "req", "data", "entry", "cfg"]
            ),
            "b": lambda: r.choice(
                ["items", "rows", "paths", "values", "batch", "entries", "records", "opts"]
            ),
            "kebab": lambda: self.snake().replace("_", "-"),
            "job": lambda: r.choice(["test", "lint", "build", "e2e"]),
            "pkg": lambda: r.choice(
                [
                    "pydantic",
                    "react",
                    "tokio",
                    "serde",
                    "duckdb",
                    "numpy",
                    "vite",
                    "axum",
                    "sqlalchemy",
                    "express",
                    "zod",
                    "clap",
                    "httpx",
                    "fastapi",
                ]
            ),
            "task": lambda: r.choice(_PROMPT_T).format_map(self.slots),
        }
        return _Slots(fns)

    def _fill_many(self, templates: Sequence[str], n: int) -> list[str]:
        r = self.pr
        slots = self.slots
        return [r.choice(templates).format_map(slots) for _ in range(n)]

    def _salad(self, n: int, lo: int, hi: int, s: float = 1.07) -> list[str]:
        """Zipf word salad with identifiers mixed in; this is what gives the index realistic term stats."""
        words = self.common
        p = 1.0 / np.power(np.arange(len(words), dtype=np.float64) + 2.7, s)
        p /= p.sum()
        lens = self.np.integers(lo, hi + 1, size=n)
        toks: list[int] = self.np.choice(len(words), size=int(lens.sum()), p=p).tolist()
        mix: list[float] = self.np.random(size=int(lens.sum())).tolist()
        out: list[str] = []
        pos = 0
        snake, camel, mod = self.snake, self.camel, self.mods["python"]
        for k in lens.tolist():
            ws = []
            for j in range(pos, pos + k):
                m = mix[j]
                if m < 0.06:
                    ws.append(f"`{snake()}`" if m < 0.03 else camel())
                elif m < 0.075:
                    ws.append(mod())
                elif m < 0.09:
                    ws.append(str(int(10 ** (m * 40))))
                else:
                    ws.append(words[toks[j]])
            pos += k
            out.append(" ".join(ws))
        return out

    def _salad_corpus(self, n: int, lo: int, hi: int) -> _Corpus:
        # Steeper than prose: these short phrases become code comments and log messages, and they are
        # what lets a one-word query on a top term ("the") hit most tool outputs as well.
        return _Corpus(self._salad(n, lo, hi, s=1.3), sep="\n")

    def _sentence_corpus(self, templates: Sequence[str], n: int, salad_share: float) -> _Corpus:
        r = self.pr
        n_salad = int(n * salad_share)
        salad = [s[0].upper() + s[1:] + "." for s in self._salad(n_salad, 6, 22)]
        templ = self._fill_many(templates, n - n_salad)
        units = salad + templ
        r.shuffle(units)
        # Paragraph breaks make windows of several sentences look like real multi-paragraph replies; the
        # cap keeps every paragraph far below LONG_LINE_MIN so only deliberate long lines are long.
        seps: list[str] = []
        run = 0
        for _ in units:
            run += 1
            brk = run >= 8 or r.random() < 0.22
            seps.append("\n\n" if brk else " ")
            run = 0 if brk else run
        return _Corpus(units, seps)

    # -- code, errors and tool output corpora --------------------------------------------------------

    def _build_vfiles(self, lang: str, n: int) -> list[_VFile]:
        lines = self.code_lines[lang]
        sizes = np.clip(self.np.lognormal(np.log(36), 0.8, size=n), 6, 900).astype(np.int64).tolist()
        out = []
        for sz in sizes:
            picks: list[int] = self.np.integers(0, len(lines), size=sz).tolist()
            body = [lines[i] for i in picks]
            numbered = [f"{i + 1:>6}→{ln}" for i, ln in enumerate(body)]
            out.append(_VFile(self.files[lang](), sz, _Corpus(body), _Corpus(numbered)))
        return out

    def _build_errors(self) -> dict[str, list[str]]:
        r = self.pr
        s = self.slots

        def py() -> str:
            frames = "".join(
                f'  File "/home/dev/{r.choice(self.projects).name}/{self.files["python"]()}", line '
                f"{1 + int(r.random() * 600)}, in {self.snake()}\n    {self.snake()}({self.snake()})\n"
                for _ in range(1 + int(r.random() * 5))
            )
            return (
                "Traceback (most recent call last):\n"
                + frames
                + f"{r.choice(_EXCS)}: "
                + r.choice(_EXC_MSG).format_map(s)
            )

        def rs() -> str:
            code, msg = r.choice(
                [
                    ("E0308", "mismatched types"),
                    ("E0382", "borrow of moved value: `{id}`"),
                    ("E0499", "cannot borrow `{id}` as mutable more than once at a time"),
                    ("E0433", "failed to resolve: use of undeclared type `{cls}`"),
                    ("E0432", "unresolved import `crate::{snake}`"),
                    ("E0277", "the trait bound `{cls}: Serialize` is not satisfied"),
                    ("E0599", "no method named `{snake}` found for struct `{cls}` in the current scope"),
                    ("E0597", "`{id}` does not live long enough"),
                ]
            )
            ln = 1 + int(r.random() * 400)
            return (
                f"error[{code}]: {msg.format_map(s)}\n"
                f"  --> {self.files['rust']()}:{ln}:{1 + int(r.random() * 40)}\n"
                f"   |\n{ln:>3} |     let {self.snake()} = {self.snake()}(&{self.snake()});\n"
                f"   |         ^^^^^^^^ expected `{self.pascal()}`, found `{self.pascal()}`\n\n"
                f"error: could not compile `{self.snake().replace('_', '-')}` (lib) due to "
                f"{1 + int(r.random() * 6)} previous errors"
            )

        def ts() -> str:
            k = r.random()
            if k < 0.35:
                return "\n".join(
                    f"{self.files['typescript']()}({1 + int(r.random() * 300)},{1 + int(r.random() * 60)}): "
                    f"error TS2339: Property '{self.camel()}' does not exist on type '{self.pascal()}'."
                    for _ in range(1 + int(r.random() * 4))
                )
            if k < 0.65:
                return (
                    f"TypeError: Cannot read properties of undefined (reading '{self.camel()}')\n"
                    f"    at {self.pascal()}.{self.camel()} (/home/dev/{r.choice(self.projects).name}/"
                    f"{self.files['typescript']()}:{1 + int(r.random() * 300)}:{1 + int(r.random() * 40)})\n"
                    "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)"
                )
            return (
                "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR!\n"
                f"npm ERR! While resolving: {r.choice(self.projects).name}@0.{int(r.random() * 20)}.0\n"
                "npm ERR! Found: react@18.3.1\nnpm ERR! node_modules/react\n"
                'npm ERR! Could not resolve dependency:\nnpm ERR! peer react@"^19.0.0" from '
                f"@{self.snake().replace('_', '-')}/ui@2.{int(r.random() * 9)}.0\n"
                "npm ERR! Fix the upstream dependency conflict, or retry\n"
                "npm ERR! this command with --force or --legacy-peer-deps"
            )

        def go() -> str:
            if r.random() < 0.5:
                return (
                    "panic: runtime error: invalid memory address or nil pointer dereference\n"
                    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 "
                    f"pc=0x{r.getrandbits(24):x}]\n\n"
                    f"goroutine {1 + int(r.random() * 90)} [running]:\n"
                    f"{self.mods['go']()}.(*{self.pascal()}).{self.pascal()}(...)\n"
                    f"\t/home/dev/{r.choice(self.projects).name}/{self.files['go']()}:"
                    f"{1 + int(r.random() * 500)} +0x{r.getrandbits(12):x}"
                )
            return "\n".join(
                f"./{self.files['go']()}:{1 + int(r.random() * 300)}:{1 + int(r.random() * 30)}: "
                f"undefined: {self.pascal()}"
                for _ in range(1 + int(r.random() * 3))
            )

        def db() -> str:
            t, c = self.snake() + "s", self.snake()
            return r.choice(
                [
                    f'Binder Error: Referenced column "{c}" not found in FROM clause!\nCandidate bindings: '
                    f'"{t}.{self.snake()}"\n\n'
                    f"LINE 1: SELECT {c}, count(*) FROM {t} GROUP BY 1\n               ^",
                    f'Catalog Error: Table with name {t} does not exist!\nDid you mean "{self.snake()}s"?',
                    f"Conversion Error: Could not convert string '{self.camel()}' to INT32",
                    f'ERROR:  duplicate key value violates unique constraint "{t}_pkey"\n'
                    f"DETAIL:  Key (id)=({int(r.random() * 99999)}) already exists.",
                    f'ERROR:  relation "{t}" does not exist\n'
                    f"LINE 1: SELECT * FROM {t}\n                      ^",
                    f'ERROR:  column "{c}" of relation "{t}" does not exist',
                    'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: '
                    "Connection refused\n"
                    "\tIs the server running on that host and accepting TCP/IP connections?",
                ]
            )

        gens = {"python": py, "rust": rs, "typescript": ts, "go": go, "db": db}
        return {k: [g() for _ in range(500)] for k, g in gens.items()}

    def _build_tool_corpora(self) -> None:
        r = self.pr
        sn, ca, pa = self.snake, self.camel, self.pascal
        pct = itertools.cycle(range(1, 101))
        self.test_lines = {
            "python": _Corpus(
                [
                    f"{self.files['python']()}::test_{sn()} "
                    f"{'PASSED' if r.random() < 0.93 else 'FAILED' if r.random() < 0.7 else 'SKIPPED'}"
                    f" [{next(pct):>3}%]"
                    for _ in range(12000)
                ]
            ),
            "rust": _Corpus(
                [
                    f"test {sn()}::tests::{sn()} ... {'ok' if r.random() < 0.94 else 'FAILED'}"
                    for _ in range(12000)
                ]
            ),
            "typescript": _Corpus(
                [
                    f"  {'PASS' if r.random() < 0.93 else 'FAIL'} {self.files['typescript']()} "
                    f"({1 + int(r.random() * 40)} tests) {int(r.random() * 900)}ms"
                    for _ in range(12000)
                ]
            ),
            "go": _Corpus(
                [
                    x
                    for _ in range(6000)
                    for x in (
                        f"=== RUN   Test{pa()}",
                        f"--- {'PASS' if r.random() < 0.94 else 'FAIL'}: Test{pa()} ({r.random():.2f}s)",
                    )
                ]
            ),
        }
        grep = []
        for lang in _LANGS:
            for vf in self.vfiles[lang][:120]:
                for i in range(0, vf.n, max(1, vf.n // 12)):
                    line = vf.raw.span(i, 1)
                    if line.strip():
                        grep.append(f"{vf.rel}:{i + 1}:{line}")
        r.shuffle(grep)
        self.grep = _Corpus(grep)
        exts = [".py", ".ts", ".rs", ".md", ".json", ".toml", "", ".lock"]
        months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        self.ls = _Corpus(
            [
                f"{'drwxr-xr-x' if r.random() < 0.2 else '-rw-r--r--'}  1 dev dev "
                f"{int(r.random() ** 3 * 90000):>6} {r.choice(months)} {1 + int(r.random() * 28):>2} "
                f"{int(r.random() * 24):02d}:{int(r.random() * 60):02d} "
                f"{sn() + r.choice(exts) if r.random() < 0.85 else ca()}"
                for _ in range(8000)
            ]
        )
        kinds = ["feat", "fix", "chore", "refactor", "test", "docs", "perf"]
        self.gitlog = _Corpus(
            [
                f"{r.getrandbits(28):07x} {r.choice(kinds)}: {self.phrase_corpus.window(r, 1)}"
                for _ in range(8000)
            ]
        )
        diff: list[str] = []
        for _ in range(1500):
            lang = _LANGS[int(r.random() ** 1.3 * 4)]
            f = self.files[lang]()
            a = 1 + int(r.random() * 400)
            diff += [
                f"diff --git a/{f} b/{f}",
                f"index {r.getrandbits(28):07x}..{r.getrandbits(28):07x} 100644",
                f"--- a/{f}",
                f"+++ b/{f}",
                f"@@ -{a},7 +{a},8 @@ {r.choice(self.code_lines[lang])}",
            ]
            for _ in range(4 + int(r.random() * 10)):
                m = r.random()
                diff.append(("-" if m < 0.25 else "+" if m < 0.55 else " ") + r.choice(self.code_lines[lang]))
        self.diff = _Corpus(diff)
        levels = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
        self.logs = _Corpus(
            [
                f"2026-{1 + int(r.random() * 12):02d}-{1 + int(r.random() * 28):02d}"
                f"T{int(r.random() * 24):02d}:"
                f"{int(r.random() * 60):02d}:{int(r.random() * 60):02d}.{int(r.random() * 1000):03d}Z "
                f"{r.choice(levels):<5} {self.mods['python']()}: {self.phrase_corpus.window(r, 1)} "
                f"{sn()}={r.getrandbits(32):08x} elapsed_ms={int(r.random() ** 2 * 5000)}"
                for _ in range(16000)
            ]
        )
        build: list[str] = []
        for _ in range(10000):
            k = r.random()
            if k < 0.3:
                build.append(
                    f"   Compiling {sn().replace('_', '-')} v0.{int(r.random() * 30)}.{int(r.random() * 9)}"
                )
            elif k < 0.45:
                build.append(f"warning: unused variable: `{sn()}`")
            elif k < 0.6:
                build.append(
                    f"Collecting {r.choice(['httpx', 'pydantic', 'numpy', 'orjson', 'rich'])}>="
                    f"{int(r.random() * 3)}.{int(r.random() * 20)}"
                )
            elif k < 0.75:
                build.append(
                    f"dist/assets/{ca()}-{r.getrandbits(32):08x}.js  {r.random() * 400:.2f} kB | gzip: "
                    f"{r.random() * 90:.2f} kB"
                )
            elif k < 0.9:
                build.append(
                    f"added {int(r.random() * 900)} packages, and audited {int(r.random() * 1500)} "
                    f"packages in {int(r.random() * 40)}s"
                )
            else:
                build.append(f"  {self.phrase_corpus.window(r, 1)}")
        self.build = _Corpus(build)
        table = []
        for _ in range(6000):
            table.append(
                f" {int(r.random() * 99999):>5} | {sn():<28} | {r.random() * 1000:>9.3f} | "
                f"2026-{1 + int(r.random() * 12):02d}-{1 + int(r.random() * 28):02d}"
            )
        self.table = _Corpus(table)

    def _build_blobs(self) -> None:
        raw = self.np.integers(0, 256, size=400_000, dtype=np.uint8).tobytes()
        self.b64 = base64.b64encode(raw).decode()
        r = self.pr
        js_parts: list[str] = []
        total = 0
        while total < 300_000:
            a, b = self.camel(), self.camel()
            js_parts.append(
                r.choice(
                    [
                        f"function {a}(e,t){{return e&&e.{b}?t({a}(e.{b})):null}}",
                        f'var {a}=Object.freeze({{{b}:{int(r.random() * 999)},kind:"{self.snake()}"}});',
                        f"export const {a}=(n)=>n.map(x=>x.{b}).filter(Boolean);",
                        f'if(!{a}){{throw new TypeError("{self.phrase_corpus.window(r, 1)}")}}',
                    ]
                )
            )
            total += len(js_parts[-1])
        self.minjs = "".join(js_parts)
        items = [
            f'{{"id":{i},"{self.snake()}":"{self.camel()}","ok":{str(r.random() < 0.9).lower()}}}'
            for i in range(6000)
        ]
        self.longjson = ",".join(items)


# ---------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------

# Indexes into _Gen.kind_counts.
_K_USER, _K_ATEXT, _K_THINK, _K_CALL, _K_RESULT = range(5)


@dataclass(slots=True)
class _CSess:
    """Running state of one Claude Code transcript (main session or subagent)."""

    lines: list[bytes]
    sid: str
    cwd: str
    branch: str
    version: str
    model: str
    slug: str
    project: _Project
    t: int
    parent: str | None = None
    agent_id: str | None = None
    msgs: int = 0
    msg_id: str = ""
    req_id: str = ""
    fields: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        # The envelope fields that never change within a transcript, built once rather than per record.
        self.fields = claude.session_fields(self.sid, self.cwd, self.branch, version=self.version,
                                            agent_id=self.agent_id, slug=self.slug)


@dataclass(slots=True)
class _XSess:
    """Running state of one Codex rollout."""

    lines: list[bytes]
    sid: str
    cwd: str
    model: str
    project: _Project
    t: int
    turn_id: str = ""
    msgs: int = 0
    tok_in: int = 0
    tok_out: int = 0


@dataclass(slots=True)
class _NSess:
    """Running state of one Gemini, OpenCode or Copilot session while its content is drawn."""

    project: _Project
    cwd: str
    t: int
    rec: fmt.Session
    msgs: int = 0
    thoughts: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _AgentTotals:
    messages: int = 0
    files: int = 0
    bytes: int = 0


# Of Gemini sessions, the share written as pre-0.40 ``session-*.json`` documents.
_GEMINI_LEGACY_SHARE = 0.15
_ZSTD_LEVEL = 3  # zstd's default, and what Codex's compressor uses


class _Gen:
    def __init__(
        self, out: Path, messages: int, seed: int, codex_share: float, long_line_rate: float,
        mix: Mapping[str, float] | None = None, zst_share: float = 0.0,
    ) -> None:
        self.out = out
        self.left = messages
        self.seed = seed
        self.codex_share = codex_share
        self.mix = dict(mix) if mix is not None else None
        self.zst_share = zst_share
        # The .zst choices come from a stream of their own, so the content of a mixed corpus does not
        # depend on how much of it is compressed.
        self.zr = random.Random(seed * 104_729 + 3)
        self.codex_zst = 0
        self.codex_plain_bytes = 0  # Codex rollouts before compression
        self.totals = {a: _AgentTotals() for a in AGENTS}
        self.other_sessions = dict.fromkeys(AGENTS, 0)  # Gemini, OpenCode, Copilot
        self.gemini_slugs: dict[str, str] = {}
        self.gemini_legacy = 0
        self.opencode: fmt.OpenCodeStore | None = None
        self.long_rate = long_line_rate
        self.pools = _Pools(seed)
        self.r = random.Random(seed)
        self.kind_counts = [0, 0, 0, 0, 0]
        self.files = 0
        self.bytes = 0
        self.claude_sessions = 0
        self.claude_subagents = 0
        self.codex_sessions = 0
        self.codex_archived = 0
        self.long_results = 0
        self.long_debt = 0
        self.rare_counts = [0] * len(RARE_PHRASES)
        self.nonascii_msgs = 0
        self.projects_used: dict[str, None] = {}
        self.codex_index: list[tuple[str, str, str]] = []
        self.made_dirs: set[Path] = set()

    # -- bookkeeping --------------------------------------------------------------------------------

    def _count(self, kind: int) -> None:
        self.kind_counts[kind] += 1
        self.left -= 1
        if self.left <= 0:
            raise _Stop

    def _write(self, path: Path, data: bytes, mtime_ms: int | None = None) -> None:
        d = path.parent
        if d not in self.made_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self.made_dirs.add(d)
        with open(path, "wb") as fh:
            fh.write(data)
        if mtime_ms is not None:
            # A real transcript's mtime is its last write; scanners use it to tell recent files
            # from old ones, so a corpus written "now" would look entirely recent.
            os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        self.files += 1
        self.bytes += len(data)

    def _rid(self, n: int) -> str:
        bits = n * 6 + 6
        b = self.r.getrandbits(bits).to_bytes((bits + 7) // 8, "little")
        return base64.b64encode(b, altchars=b"Ab").decode()[:n]

    def _blob(self, lo: int, hi: int) -> str:
        r = self.r
        n = lo + int(r.random() * (hi - lo))
        a = int(r.random() * (len(self.pools.b64) - n))
        return self.pools.b64[a : a + n]

    # -- text ----------------------------------------------------------------------------------------

    def _spice(self, text: str) -> str:
        """Rarely append a rare phrase or a non-ASCII snippet so those queries have a few answers."""
        r = self.r
        x = r.random()
        if x < 0.005:
            i = int(r.random() * len(RARE_PHRASES))
            self.rare_counts[i] += 1
            return f"{text}\n{RARE_PHRASES[i]}"
        if x < 0.022:
            self.nonascii_msgs += 1
            return f"{text} ({r.choice(_NON_ASCII)})"
        return text

    def _sentences(self, corpus: _Corpus, mean: float) -> str:
        k = 1 + int(self.r.expovariate(1.0 / mean))
        return self._spice(corpus.window(self.r, k))

    def _prompt(self) -> str:
        r = self.r
        p = self.pools
        text = r.choice(p.prompts)
        x = r.random()
        if x < 0.15:
            fam = r.choice(["python", "rust", "typescript", "go", "db"])
            text = f"{text}\n\n```\n{r.choice(p.errors[fam])}\n```"
        elif x < 0.45:
            text = f"{text}. {p.prose.window(r, 1 + int(r.random() * 2))}"
        return self._spice(text)

    def _long_line(self) -> str:
        r = self.r
        p = self.pools
        n = LONG_LINE_MIN + 200 + int(r.random() ** 2 * 14000)
        k = r.random()
        if k < 0.4:
            a = int(r.random() * (len(p.minjs) - n))
            return p.minjs[a : a + n]
        if k < 0.7:
            return "data:image/png;base64," + self._blob(n, n + 1)
        a = int(r.random() * (len(p.longjson) - n))
        return '{"level":"debug","msg":"response body","body":[' + p.longjson[a : a + n] + "]}"

    def _long_due(self, capable: bool) -> bool:
        """Decide per tool result; a draw that lands on a tool that cannot hold a long line (TodoWrite,
        apply_patch...) is carried to the next one that can, so the rate holds over all tool outputs."""
        if self.r.random() < self.long_rate:
            self.long_debt += 1
        if capable and self.long_debt:
            self.long_debt -= 1
            self.long_results += 1
            return True
        return False

    def _lines(self, mean: float, cap: int = 400) -> int:
        return min(cap, 1 + int(self.r.expovariate(1.0 / mean)))

    def _test_output(self, proj: _Project, cwd: str) -> tuple[str, bool]:
        r = self.r
        p = self.pools
        lang = proj.lang
        body = p.test_lines[lang].window(r, self._lines(12))
        failed = r.random() < 0.3
        npass = 5 + int(r.random() * 400)
        secs = r.random() * 40
        if lang == "python":
            head = (
                f"============================= test session starts ==============================\n"
                f"platform linux -- Python 3.12.{int(r.random() * 9)}, pytest-8.3.{int(r.random() * 5)}, "
                f"pluggy-1.5.0\nrootdir: {cwd}\nconfigfile: pyproject.toml\ncollected {npass} items\n\n"
            )
            if failed:
                err = r.choice(p.errors["python"])
                tail = (
                    f"\n\n{'=' * 35} FAILURES {'=' * 35}\n"
                    f"{err}\n{'=' * 27} short test summary info {'=' * 28}\n"
                    f"FAILED {p.slots['test']} - {err.rsplit(chr(10), 1)[-1]}\n"
                    f"==================== 1 failed, {npass} passed in {secs:.2f}s ===================="
                )
            else:
                tail = f"\n\n{'=' * 30} {npass} passed in {secs:.2f}s {'=' * 30}"
            return head + body + tail, failed
        if lang == "rust":
            head = (
                f"   Compiling {proj.name} v0.{int(r.random() * 9)}.0 ({cwd})\n    Finished `test` profile "
                f"[unoptimized + debuginfo] target(s) in {secs:.2f}s\n     Running unittests src/lib.rs "
                f"(target/debug/deps/{proj.name.replace('-', '_')}-{r.getrandbits(64):016x})\n\n"
                f"running {npass} tests\n"
            )
            if failed:
                tail = (
                    f"\n\nfailures:\n\n---- {p.snake()}::tests::{p.snake()} stdout ----\n"
                    f"thread '{p.snake()}' panicked at {p.files['rust']()}:{1 + int(r.random() * 300)}:5:\n"
                    "assertion `left == right` "
                    f"failed\n  left: {int(r.random() * 99)}\n right: {int(r.random() * 99)}\n\n"
                    f"test result: FAILED. {npass} passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; "
                    f"finished in {secs:.2f}s"
                )
            else:
                tail = (
                    f"\n\ntest result: ok. {npass} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
                    f"finished in {secs:.2f}s"
                )
            return head + body + tail, failed
        if lang == "typescript":
            head = f"\n> {proj.name}@0.{int(r.random() * 20)}.0 test\n> vitest run\n\n RUN  v2.1.8 {cwd}\n\n"
            if failed:
                tail = (
                    f"\n\n FAIL  {p.files['typescript']()} > {p.phrase_corpus.window(r, 1)}\n"
                    f"{r.choice(p.errors['typescript'])}\n\n Test Files  1 failed | {npass // 10} passed\n"
                    f"      Tests  1 failed | {npass} passed\n   Duration  {secs:.2f}s"
                )
            else:
                tail = (
                    f"\n\n Test Files  {npass // 10} passed\n      Tests  {npass} passed\n"
                    f"   Duration  {secs:.2f}s"
                )
            return head + body + tail, failed
        mod = p.mods["go"]()
        tail = (
            f"\nFAIL\n{r.choice(p.errors['go'])}\nFAIL\t{mod}\t{secs:.3f}s"
            if failed
            else f"\nPASS\nok  \t{mod}\t{secs:.3f}s"
        )
        return body + tail, failed

    def _command(self, proj: _Project, cwd: str) -> tuple[str, str, str, bool]:
        """A shell command, its Claude-style description, its output and whether it failed."""
        r = self.r
        p = self.pools
        lang = proj.lang
        x = r.random()
        if x < 0.28:
            cmd = {
                "python": f"uv run pytest -q {r.choice(['', 'tests/', p.files['python']()])}".rstrip(),
                "rust": r.choice(["cargo test", "cargo test --workspace", f"cargo test {p.snake()}"]),
                "typescript": r.choice(
                    ["npm test", "npx vitest run", f"pnpm test -- {p.files['typescript']()}"]
                ),
                "go": r.choice(
                    ["go test ./...", "go test -race ./internal/...", "go test -run TestFoo ./pkg/..."]
                ),
            }[lang]
            out, failed = self._test_output(proj, cwd)
            return cmd, "test", out, failed
        if x < 0.40:
            cmd = {
                "python": "uv pip install -e '.[test]'",
                "rust": "cargo build --release",
                "typescript": r.choice(["npm run build", "npx tsc --noEmit", "npm install"]),
                "go": "go build ./...",
            }[lang]
            out = p.build.window(r, self._lines(10))
            failed = r.random() < 0.35
            if failed:
                fam = lang if r.random() < 0.8 else "db"
                out = f"{out}\n{r.choice(p.errors[fam])}"
            return cmd, "build", out, failed
        if x < 0.55:
            y = r.random()
            if y < 0.4:
                files = "\n".join(f"\tmodified:   {p.files[lang]()}" for _ in range(1 + int(r.random() * 5)))
                out = (
                    f'On branch {r.choice(proj.branches)}\nChanges not staged for commit:\n  (use "git add '
                    f'<file>..." to update what will be committed)\n{files}\n\nno changes added to commit'
                )
                return "git status", "git", out, False
            if y < 0.75:
                return "git diff", "git", p.diff.window(r, self._lines(24)), False
            return "git log --oneline -20", "git", p.gitlog.window(r, 20), False
        if x < 0.65:
            return (
                f"rg -n '{p.snake()}' {r.choice(['src', '.', 'tests'])}",
                "rg",
                p.grep.window(r, self._lines(12)),
                False,
            )
        if x < 0.72:
            if r.random() < 0.5:
                return (
                    f"ls -la {r.choice(['', 'src', 'tests', 'docs'])}".rstrip(),
                    "ls",
                    p.ls.window(r, self._lines(15)),
                    False,
                )
            out = "\n".join("./" + p.files[lang]() for _ in range(self._lines(10, 60)))
            return f"find . -name '*{_EXT[lang]}' | head -60", "ls", out, False
        if x < 0.82:
            cmd = r.choice(
                [
                    f"python -m {p.mods['python']()}",
                    "curl -s localhost:8080/healthz",
                    "docker compose logs --tail=80 api",
                    "journalctl -u worker -n 60 --no-pager",
                    f"./target/debug/{proj.name} --verbose",
                ]
            )
            out = p.logs.window(r, self._lines(16))
            failed = r.random() < 0.2
            if failed:
                out = f"{out}\n{r.choice(p.errors[lang])}"
            return cmd, "run", out, failed
        if x < 0.88:
            t = p.snake() + "s"
            cmd = r.choice(
                [
                    f'duckdb data/app.duckdb -c "SELECT * FROM {t} LIMIT 20"',
                    f"psql -c 'SELECT id, {p.snake()} FROM {t} ORDER BY id DESC LIMIT 20'",
                ]
            )
            if r.random() < 0.3:
                return cmd, "db", r.choice(p.errors["db"]), True
            rows = p.table.window(r, self._lines(12, 50))
            nrows = rows.count("\n") + 1
            out = f"   id  | {'name':<28} |   score   | created\n{'-' * 68}\n{rows}\n({nrows} rows)"
            return cmd, "db", out, False
        vf = r.choice(p.vfiles[lang])
        k = self._lines(60, vf.n)
        a = int(r.random() * (vf.n - k + 1))
        return f"sed -n '{a + 1},{a + k}p' {vf.rel}", "cat", vf.raw.span(a, k), False

    # -- Claude Code --------------------------------------------------------------------------------

    def _c_link(self, s: _CSess) -> tuple[str, str | None]:
        """A new record's uuid and its parent's; the new record is the parent of the next one."""
        u = uuid4(self.r)
        parent = s.parent
        s.parent = u
        return u, parent

    def _c_user_text(self, s: _CSess, text: str) -> None:
        u, parent = self._c_link(s)
        content = text if self.r.random() < 0.8 else [claude.text_block(text)]
        d = claude.user_prompt(s.fields, u, parent, iso_ms(s.t), content, prompt_id=uuid4(self.r))
        s.lines.append(orjson.dumps(d) + b"\n")
        s.msgs += 1
        self._count(_K_USER)

    def _c_meta(self, s: _CSess, text: str) -> None:
        u, parent = self._c_link(s)
        s.lines.append(orjson.dumps(claude.meta_user(s.fields, u, parent, iso_ms(s.t), text)) + b"\n")

    def _c_new_response(self, s: _CSess) -> None:
        s.msg_id = "msg_01" + self._rid(22)
        s.req_id = "req_011C" + self._rid(20)

    def _c_asst(self, s: _CSess, block: dict[str, Any], kind: int) -> None:
        r = self.r
        s.t += 300 + int(r.random() * 6000)
        u, parent = self._c_link(s)
        # Drawn in the order the record lists them, so a seed's corpus does not depend on the call below.
        tokens_in = 1 + int(r.random() * 30)
        cache_creation = int(r.random() * 4000)
        cache_read = int(r.random() * 90000)
        tokens_out = 1 + int(r.random() * 900)
        usage = claude.token_usage(tokens_in, tokens_out, cache_creation, cache_read, "standard")
        d = claude.assistant(s.fields, u, parent, iso_ms(s.t), block, message_id=s.msg_id, request_id=s.req_id,
                             model=s.model, stop_reason="tool_use" if kind == _K_CALL else None, usage=usage)
        s.lines.append(orjson.dumps(d) + b"\n")
        s.msgs += 1
        self._count(kind)

    def _c_result(self, s: _CSess, tool_id: str, content: Any, is_error: bool, tur: Any, source: str) -> None:
        r = self.r
        s.t += 100 + int(r.random() ** 3 * 30000)
        u, parent = self._c_link(s)
        d = claude.tool_result(s.fields, u, parent, iso_ms(s.t), tool_id, content, is_error=is_error, result=tur,
                               source=source)
        s.lines.append(orjson.dumps(d) + b"\n")
        s.msgs += 1
        self._count(_K_RESULT)

    def _c_tool(self, s: _Where, allow_write: bool) -> tuple[str, dict[str, Any], bool, _Thunk]:
        """Pick a tool call: name, input, whether its output can carry a long line, and a thunk that
        renders (content, is_error, toolUseResult) once the caller has decided about the long line."""
        r = self.r
        p = self.pools
        proj = s.project
        lang = proj.lang if r.random() < 0.85 else r.choice(_LANGS)
        x = r.random()
        if not allow_write and (0.45 <= x < 0.62 or x >= 0.90):
            # Explore subagents only look around; they do not edit files or keep todos.
            x = 0.7
        if x < 0.30:
            vf = r.choice(p.vfiles[lang])
            path = f"{proj.root}/{vf.rel}"
            if vf.n > 120 or r.random() < 0.35:
                k = self._lines(40, min(vf.n, 200))
                a = int(r.random() * (vf.n - k + 1))
                inp: dict[str, Any] = {"file_path": path, "offset": a + 1, "limit": k}
            else:
                a, k = 0, vf.n
                inp = {"file_path": path}

            def read(long: bool) -> tuple[Any, bool, Any]:
                text = vf.numbered.span(a, k)
                if long:
                    text = f"{text}\n{k + a + 1:>6}→{self._long_line()}"
                if r.random() < 0.5:
                    text += _READ_REMINDER
                return (
                    text,
                    False,
                    {
                        "type": "text",
                        "file": {"filePath": path, "numLines": k, "startLine": a + 1, "totalLines": vf.n},
                    },
                )

            return "Read", inp, True, read
        if x < 0.45:
            cmd, cat, out, failed = self._command(proj, s.cwd)
            inp = {"command": cmd, "description": r.choice(_BASH_DESC[cat])}
            if r.random() < 0.1:
                inp["timeout"] = 600000

            def bash(long: bool) -> tuple[Any, bool, Any]:
                o = self._spice(f"{out}\n{self._long_line()}" if long else out)
                if failed:
                    return f"Exit code 1\n{o}", True, f"Error: Exit code 1\n{o}"
                return o, False, {"stdout": o, "stderr": "", "interrupted": False, "isImage": False}

            return "Bash", inp, True, bash
        if x < 0.62:
            vf = r.choice(p.vfiles[lang])
            path = f"{proj.root}/{vf.rel}"
            k = min(vf.n, 2 + int(r.random() * 6))
            a = int(r.random() * (vf.n - k + 1))
            old = vf.raw.span(a, k)
            new = p.code_lines[lang][int(r.random() * len(p.code_lines[lang]))] + "\n" + old
            inp = {"file_path": path, "old_string": old, "new_string": new}

            def edit(long: bool) -> tuple[Any, bool, Any]:
                if r.random() < 0.06:
                    msg = (
                        "<tool_use_error>String to replace not found in file.\n"
                        f"String: {old}</tool_use_error>"
                    )
                    return msg, True, "Error: String to replace not found in file."
                lo = max(0, a - 4)
                snippet = vf.numbered.span(lo, min(vf.n - lo, k + 8))
                text = (
                    f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet "
                    f"of the edited file:\n{snippet}"
                )
                return (
                    text,
                    False,
                    {
                        "filePath": path,
                        "oldString": old,
                        "newString": new,
                        "replaceAll": False,
                        "userModified": False,
                        "structuredPatch": [],
                    },
                )

            return "Edit", inp, False, edit
        if x < 0.82:
            pat = r.choice([p.snake(), p.camel(), p.pascal(), f"def {p.snake()}", f"{p.snake()}\\("])
            if r.random() < 0.5:
                inp = {"pattern": pat, "path": proj.root, "output_mode": "content", "-n": True}

                def grep(long: bool) -> tuple[Any, bool, Any]:
                    text = p.grep.window(r, self._lines(14))
                    if long:
                        text = f"{text}\n{vf_min()}:1:{self._long_line()}"
                    text = self._spice(text)
                    return (
                        text,
                        False,
                        {
                            "mode": "content",
                            "numFiles": 0,
                            "filenames": [],
                            "content": text,
                            "numLines": text.count("\n") + 1,
                        },
                    )

                def vf_min() -> str:
                    return f"dist/assets/{p.camel()}-{r.getrandbits(32):08x}.min.js"

                return "Grep", inp, True, grep
            inp = {"pattern": pat, "path": proj.root}

            def grep_files(long: bool) -> tuple[Any, bool, Any]:
                names = [p.files[lang]() for _ in range(self._lines(6, 40))]
                return (
                    f"Found {len(names)} files\n" + "\n".join(names),
                    False,
                    {"mode": "files_with_matches", "filenames": names, "numFiles": len(names)},
                )

            return "Grep", inp, False, grep_files
        if x < 0.90:
            inp = {"pattern": f"**/*{_EXT[lang]}"}

            def glob(long: bool) -> tuple[Any, bool, Any]:
                names = [f"{proj.root}/{p.files[lang]()}" for _ in range(self._lines(12, 100))]
                return (
                    "\n".join(names),
                    False,
                    {
                        "filenames": names,
                        "durationMs": int(r.random() * 90),
                        "numFiles": len(names),
                        "truncated": False,
                    },
                )

            return "Glob", inp, False, glob
        if x < 0.95:
            vf = r.choice(p.vfiles[lang])
            path = f"{proj.root}/{p.files[lang]()}"
            body = vf.raw.span(0, min(vf.n, 40))
            inp = {"file_path": path, "content": body}

            def write(long: bool) -> tuple[Any, bool, Any]:
                return (
                    f"File created successfully at: {path}",
                    False,
                    {"type": "create", "filePath": path, "content": body},
                )

            return "Write", inp, False, write
        todos = [
            {
                "content": p.phrase_corpus.window(r, 1).capitalize(),
                "status": st,
                "activeForm": p.phrase_corpus.window(r, 1).capitalize(),
            }
            for st in r.sample(["completed", "in_progress", "pending", "pending", "pending"], 3)
        ]

        def todo(long: bool) -> tuple[Any, bool, Any]:
            return _TODO_OK, False, {"oldTodos": [], "newTodos": todos}

        return "TodoWrite", {"todos": todos}, False, todo

    def _c_turn(self, s: _CSess, first: bool, spawn: bool, sub: bool, prompt: str | None = None) -> None:
        r = self.r
        p = self.pools
        s.t += (5_000 if first else 20_000) + int(r.random() ** 2 * 900_000)
        if not sub:
            s.lines.append(orjson.dumps(claude.file_history_snapshot(uuid4(self.r), iso_ms(s.t))) + b"\n")
            if r.random() < 0.05:
                self._c_meta(s, f"<system-reminder>\n{p.prose.window(r, 2)}\n</system-reminder>")
        self._c_user_text(s, prompt if prompt is not None else self._prompt())
        rounds = 1 + min(12, int(r.expovariate(1 / 2.6)))
        for i in range(rounds):
            self._c_new_response(s)
            if r.random() < (0.75 if i == 0 else 0.3):
                thinking = self._sentences(p.thinking, 2.5)
                self._c_asst(s, claude.thinking_block(thinking, self._blob(150, 600)), _K_THINK)
            if r.random() < (0.55 if i == 0 else 0.3):
                self._c_asst(s, claude.text_block(self._sentences(p.prose, 1.2)), _K_ATEXT)
            if spawn and i == 0:
                self._c_spawn(s)
                continue
            ntools = 1 if r.random() < 0.8 else 2 + int(r.random() * 2)
            calls: list[tuple[str, str, bool, _Thunk, str | None]] = []
            for _ in range(ntools):
                name, inp, capable, thunk = self._c_tool(s, not sub)
                tid = "toolu_01" + self._rid(22)
                self._c_asst(s, claude.tool_use_block(tid, name, inp), _K_CALL)
                calls.append((tid, name, capable, thunk, s.parent))
            for tid, name, capable, thunk, src in calls:
                content, is_err, tur = thunk(self._long_due(capable))
                if name == "Bash" and r.random() < 0.3:
                    u, parent = self._c_link(s)
                    d = claude.bash_progress(s.fields, u, parent, iso_ms(s.t), tid, int(r.random() * 30))
                    s.lines.append(orjson.dumps(d) + b"\n")
                self._c_result(s, tid, content, is_err, tur, src or "")
        self._c_new_response(s)
        if r.random() < 0.2:
            thinking = self._sentences(p.thinking, 1.5)
            self._c_asst(s, claude.thinking_block(thinking, self._blob(150, 500)), _K_THINK)
        self._c_asst(s, claude.text_block(self._sentences(p.prose, 4.0)), _K_ATEXT)
        if not sub and r.random() < 0.4:
            u, parent = self._c_link(s)
            d = claude.turn_duration(s.fields, u, parent, iso_ms(s.t), int(r.random() * 300_000))
            s.lines.append(orjson.dumps(d) + b"\n")

    def _c_spawn(self, s: _CSess) -> None:
        """A Task tool call whose work lands in <session>/subagents/agent-<id>.jsonl."""
        r = self.r
        p = self.pools
        tid = "toolu_01" + self._rid(22)
        prompt = f"{r.choice(p.prompts)}. Report the relevant files and line numbers."
        desc = p.phrase_corpus.window(r, 1)[:60]
        task = {"description": desc, "prompt": prompt, "subagent_type": "Explore"}
        self._c_asst(s, claude.tool_use_block(tid, "Task", task), _K_CALL)
        src = s.parent or ""
        agent_id = f"a{self.r.getrandbits(64):016x}"
        sub = _CSess(
            lines=[],
            sid=s.sid,
            cwd=s.cwd,
            branch=s.branch,
            version=s.version,
            model=s.model,
            slug=s.slug,
            project=s.project,
            t=s.t + 200,
            agent_id=agent_id,
        )
        base = claude.subagent_dir(self.out / "claude" / "projects", s.cwd, s.sid)
        target = 8 + int(r.random() * 50)
        self.claude_subagents += 1
        try:
            self._c_turn(sub, True, False, True, prompt=prompt)
            while sub.msgs < target:
                self._c_turn(sub, False, False, True, prompt="continue")
        finally:
            self._write(base / f"agent-{agent_id}.jsonl", b"".join(sub.lines), sub.t)
            self._write(base / f"agent-{agent_id}.meta.json", orjson.dumps(claude.subagent_meta("Explore")))
        s.t = sub.t + 500
        summary = self._sentences(p.prose, 5.0)
        self._long_due(False)
        self._c_result(
            s,
            tid,
            [claude.text_block(summary)],
            False,
            {
                "status": "completed",
                "prompt": prompt,
                "agentId": agent_id,
                "content": [claude.text_block(summary)],
                "totalDurationMs": sub.t - s.t + 60_000,
                "totalTokens": int(r.random() * 90_000),
                "totalToolUseCount": sub.msgs // 3,
            },
            src,
        )

    def _claude_session(self, proj: _Project, cwd: str, start: int, target: int) -> None:
        r = self.r
        p = self.pools
        sid = uuid4(self.r)
        words = p.common[60:]
        s = _CSess(
            lines=[],
            sid=sid,
            cwd=cwd,
            branch=r.choice(proj.branches[:1] * 2 + proj.branches),
            version=r.choice(_CLAUDE_VERSIONS),
            model=r.choice(_CLAUDE_MODELS),
            slug=f"{r.choice(words)}-{r.choice(words)}-{r.choice(p.morph)}",
            project=proj,
            t=start,
        )
        path = claude.session_path(self.out / "claude" / "projects", cwd, sid)
        self.claude_sessions += 1
        stopped = False
        try:
            if s.version.startswith("2.0") and r.random() < 0.3:
                title = r.choice(p.titles)
                s.lines.append(orjson.dumps(claude.summary(title, uuid4(self.r))) + b"\n")
            if r.random() < 0.15:
                s.lines.append(orjson.dumps(claude.permission_mode("acceptEdits", sid)) + b"\n")
            if r.random() < 0.08:
                self._c_meta(s, _CAVEAT)
            spawn_turn = int(r.random() * 3) if r.random() < 0.05 else -1
            turn = 0
            while s.msgs < target:
                self._c_turn(s, turn == 0, turn == spawn_turn, False)
                turn += 1
        except _Stop:
            stopped = True
        if not stopped:
            if r.random() < 0.1:
                s.lines.append(orjson.dumps(claude.custom_title(r.choice(p.titles), sid)) + b"\n")
            if r.random() < 0.5:
                s.lines.append(orjson.dumps(claude.ai_title(r.choice(p.titles), sid)) + b"\n")
            s.lines.append(orjson.dumps(claude.last_prompt(r.choice(p.prompts)[:200], s.parent, sid)) + b"\n")
        self._write(path, b"".join(s.lines), s.t)
        if stopped:
            raise _Stop

    # -- Codex --------------------------------------------------------------------------------------

    def _x_line(self, s: _XSess, typ: str, payload: dict[str, Any]) -> None:
        s.lines.append(orjson.dumps(codex.line(iso_ms(s.t), typ, payload)) + b"\n")

    def _x_env_ctx(self, s: _XSess) -> None:
        self._x_line(s, "response_item", codex.user_item(codex.environment_context(s.cwd, shell="zsh")))

    def _x_tokens(self, s: _XSess) -> None:
        r = self.r
        last_in = 2000 + int(r.random() * 30000)
        last_out = 20 + int(r.random() * 2000)
        s.tok_in += last_in
        s.tok_out += last_out
        total = {
            "input_tokens": s.tok_in,
            "cached_input_tokens": int(s.tok_in * 0.8),
            "output_tokens": s.tok_out,
            "reasoning_output_tokens": s.tok_out // 3,
            "total_tokens": s.tok_in + s.tok_out,
        }
        last = {
            "input_tokens": last_in,
            "cached_input_tokens": int(last_in * 0.8),
            "output_tokens": last_out,
            "reasoning_output_tokens": last_out // 3,
            "total_tokens": last_in + last_out,
        }
        limits = {
            "primary": {
                "used_percent": float(int(r.random() * 100)),
                "window_minutes": 300,
                "resets_at": s.t // 1000 + 3600,
            },
            "secondary": {
                "used_percent": float(int(r.random() * 60)),
                "window_minutes": 10080,
                "resets_at": s.t // 1000 + 400_000,
            },
        }
        payload = codex.token_count(total, last=last, context_window=codex.CONTEXT_WINDOW, rate_limits=limits)
        self._x_line(s, "event_msg", payload)

    def _x_message(self, s: _XSess, role: str, text: str) -> None:
        if role == "user":
            self._x_line(s, "response_item", codex.user_item(text))
            self._x_line(s, "event_msg", codex.user_event(text))
            s.msgs += 1
            self._count(_K_USER)
        else:
            self._x_line(s, "event_msg", codex.agent_event(text))
            self._x_line(s, "response_item", codex.assistant_item(text))
            s.msgs += 1
            self._count(_K_ATEXT)

    def _x_reasoning(self, s: _XSess, mean: float) -> None:
        p = self.pools
        r = self.r
        s.t += 500 + int(r.random() * 8000)
        text = f"**{r.choice(p.reason_heads)}**\n\n{self._sentences(p.thinking, mean)}"
        self._x_line(s, "event_msg", codex.reasoning_event(text))
        self._x_line(s, "response_item", codex.reasoning_item(text, "gAAAAAB" + self._blob(300, 1200)))
        s.msgs += 1
        self._count(_K_THINK)

    def _x_tool(self, s: _XSess) -> None:
        r = self.r
        p = self.pools
        proj = s.project
        call_id = "call_" + self._rid(24)
        s.t += 300 + int(r.random() * 5000)
        if r.random() < 0.2:
            lang = proj.lang
            vf = r.choice(p.vfiles[lang])
            k = min(vf.n, 2 + int(r.random() * 5))
            a = int(r.random() * (vf.n - k + 1))
            old = vf.raw.span(a, k).split("\n")
            new = r.choice(p.code_lines[lang])
            hunk = "".join(f" {ln}\n" for ln in old[:1]) + "".join(f"-{ln}\n" for ln in old[1:]) + f"+{new}\n"
            patch = codex.update_patch(vf.rel, hunk)
            self._x_line(s, "response_item", codex.custom_tool_call(call_id, "apply_patch", patch))
            s.msgs += 1
            self._count(_K_CALL)
            s.t += 50 + int(r.random() * 900)
            if r.random() < 0.05:
                out = orjson.dumps(
                    {
                        "output": f"apply_patch verification failed: Failed to find expected lines in "
                        f"{s.cwd}/{vf.rel}:\n{old[-1]}",
                        "metadata": {"exit_code": 1, "duration_seconds": 0.0},
                    }
                ).decode()
            else:
                out = orjson.dumps(
                    {
                        "output": codex.patch_applied(vf.rel),
                        "metadata": {"exit_code": 0, "duration_seconds": round(r.random() * 0.1, 1)},
                    }
                ).decode()
            self._long_due(False)
            self._x_line(s, "response_item", codex.custom_tool_call_output(call_id, out))
            s.msgs += 1
            self._count(_K_RESULT)
            return
        cmd, _cat, out, failed = self._command(proj, s.cwd)
        secs = r.random() ** 2 * 60
        code = 1 if failed else 0
        if r.random() < 0.65:
            args = orjson.dumps(
                {"cmd": cmd, "workdir": s.cwd, "yield_time_ms": 10000, "max_output_tokens": 6000}
            ).decode()
            name = "exec_command"
        else:
            args = orjson.dumps(
                {"command": ["bash", "-lc", cmd], "workdir": s.cwd, "timeout_ms": 120000}
            ).decode()
            name = "shell"
        self._x_line(s, "response_item", codex.function_call(name, args, call_id))
        s.msgs += 1
        self._count(_K_CALL)
        s.t += 100 + int(secs * 1000)
        body = self._spice(f"{out}\n{self._long_line()}" if self._long_due(True) else out)
        if name == "exec_command":
            text = (
                f"Chunk ID: {r.getrandbits(24):06x}\nWall time: {secs:.4f} seconds\nProcess exited with code "
                f"{code}\nOriginal token count: {len(body) // 4}\nOutput:\n{body}"
            )
        else:
            text = f"Exit code: {code}\nWall time: {secs:.1f} seconds\nOutput:\n{body}"
        self._x_line(s, "response_item", codex.function_call_output(call_id, text))
        s.msgs += 1
        self._count(_K_RESULT)

    def _x_turn(self, s: _XSess, first: bool) -> None:
        r = self.r
        p = self.pools
        s.t += (3_000 if first else 20_000) + int(r.random() ** 2 * 900_000)
        s.turn_id = uuid7(s.t, self.r)
        self._x_line(s, "event_msg", codex.task_started(s.turn_id))
        if not first and r.random() < 0.04:
            proj = s.project
            s.cwd = f"{proj.root}/{r.choice(proj.subdirs)}" if s.cwd == proj.root else proj.root
            self._x_env_ctx(s)
        context = codex.turn_context(s.cwd, s.model, turn_id=s.turn_id, sandbox_policy=_SANDBOX_POLICY)
        self._x_line(s, "turn_context", context)
        self._x_message(s, "user", self._prompt())
        rounds = 1 + min(14, int(r.expovariate(1 / 2.8)))
        for i in range(rounds):
            if r.random() < (0.85 if i == 0 else 0.5):
                self._x_reasoning(s, 2.0)
            if r.random() < 0.2:
                self._x_message(s, "assistant", self._sentences(p.prose, 1.2))
            for _ in range(1 if r.random() < 0.85 else 2):
                self._x_tool(s)
            self._x_tokens(s)
        if r.random() < 0.3:
            self._x_reasoning(s, 1.2)
        final = self._sentences(p.prose, 4.0)
        self._x_message(s, "assistant", final)
        self._x_tokens(s)
        self._x_line(s, "event_msg", codex.task_complete(final, s.turn_id))

    def _codex_session(self, proj: _Project, cwd: str, start: int, target: int) -> None:
        r = self.r
        p = self.pools
        sid = uuid7(start, self.r)
        s = _XSess(lines=[], sid=sid, cwd=cwd, model=r.choice(_CODEX_MODELS), project=proj, t=start)
        ts = iso_ms(start)
        archived = r.random() < 0.03
        if archived:
            path = self.out / "codex" / "archived_sessions" / codex.rollout_name(ts, sid)
            self.codex_archived += 1
        else:
            path = codex.rollout_path(self.out / "codex" / "sessions", ts, sid)
        self.codex_sessions += 1
        branch = r.choice(proj.branches[:1] * 2 + proj.branches)
        vscode = r.random() < 0.3
        version = r.choice(_CODEX_VERSIONS)
        meta = codex.session_meta(
            sid, ts, cwd, branch=branch, commit_hash=f"{r.getrandbits(160):040x}", repository_url=proj.repo_url,
            originator="codex_vscode" if vscode else "codex_cli_rs", cli_version=version,
            source="vscode" if vscode else "cli", base_instructions=_CODEX_INSTRUCTIONS)
        self._x_line(s, "session_meta", meta)
        if r.random() < 0.6:
            md = r.choice(p.agents_md)
            agents = f"# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n{md}\n</INSTRUCTIONS>"
            self._x_line(s, "response_item", codex.user_item(agents))
        self._x_env_ctx(s)
        stopped = False
        try:
            turn = 0
            while s.msgs < target:
                self._x_turn(s, turn == 0)
                turn += 1
        except _Stop:
            stopped = True
        if r.random() < 0.3:
            name = r.choice(p.titles)
            self._x_line(s, "event_msg", codex.thread_name_updated(sid, name))
            self.codex_index.append((iso_ms(s.t)[:19] + "Z", sid, name))
            if r.random() < 0.05:
                self.codex_index.append((iso_ms(s.t + 3_600_000)[:19] + "Z", sid, r.choice(p.titles)))
        self._write_rollout(path, b"".join(s.lines), s.t)
        if stopped:
            raise _Stop

    def _write_rollout(self, path: Path, data: bytes, mtime_ms: int) -> None:
        self.codex_plain_bytes += len(data)
        if self.zst_share and self.zr.random() < self.zst_share:
            import zstandard  # only compressed rollouts need it

            # Codex compresses a rollout idle for a week and deletes the plain file.
            self.codex_zst += 1
            packed = zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
            self._write(path.with_name(path.name + ".zst"), packed, mtime_ms)
            return
        self._write(path, data, mtime_ms)

    # -- Gemini CLI, OpenCode, Copilot CLI: Claude's content in their formats ----------------------------

    def _n_count(self, s: _NSess, kind: int) -> None:
        s.msgs += 1
        self._count(kind)

    def _n_thinking(self, s: _NSess, step: fmt.Step, mean: float) -> None:
        text = self._sentences(self.pools.thinking, mean)
        # Copilot drops a reasoning text it saw lately (it logs each one twice): within a session
        # every one is new, so that each is one message in every format.
        while text in s.thoughts:
            text = self._sentences(self.pools.thinking, mean)
        s.thoughts.add(text)
        s.t += 300 + int(self.r.random() * 6000)
        step.thinking = text
        self._n_count(s, _K_THINK)

    def _n_step(self, s: _NSess, turn: fmt.Turn, first: bool, final: bool) -> None:
        """One model response, drawn as ``_c_turn`` draws Claude's (one block per record there)."""
        r = self.r
        p = self.pools
        step = fmt.Step(s.t)
        turn.steps.append(step)
        if r.random() < (0.2 if final else 0.75 if first else 0.3):
            self._n_thinking(s, step, 1.5 if final else 2.5)
        if final or r.random() < (0.55 if first else 0.3):
            s.t += 300 + int(r.random() * 6000)
            step.text = self._sentences(p.prose, 4.0 if final else 1.2)
            self._n_count(s, _K_ATEXT)
        if final:
            return
        thunks: list[tuple[fmt.Tool, bool, _Thunk]] = []
        for _ in range(1 if r.random() < 0.8 else 2 + int(r.random() * 2)):
            name, inp, capable, thunk = self._c_tool(s, True)
            s.t += 300 + int(r.random() * 6000)
            tool = fmt.Tool("call_" + self._rid(24), name, inp, s.t)
            step.tools.append(tool)
            thunks.append((tool, capable, thunk))
            self._n_count(s, _K_CALL)
        for tool, capable, thunk in thunks:
            content, failed, _ = thunk(self._long_due(capable))
            s.t += 100 + int(r.random() ** 3 * 30000)
            tool.output, tool.failed, tool.t_end = content, failed, s.t
            self._n_count(s, _K_RESULT)

    def _n_turn(self, s: _NSess, first: bool) -> None:
        r = self.r
        s.t += (5_000 if first else 20_000) + int(r.random() ** 2 * 900_000)
        turn = fmt.Turn(s.t, self._prompt())
        s.rec.turns.append(turn)
        self._n_count(s, _K_USER)
        rounds = 1 + min(12, int(r.expovariate(1 / 2.6)))
        for i in range(rounds):
            self._n_step(s, turn, i == 0, False)
        self._n_step(s, turn, False, True)

    def _other_session(self, agent: str, proj: _Project, cwd: str, start: int, target: int) -> None:
        r = self.r
        p = self.pools
        sid = fmt.opencode_session_id(start, r) if agent == "opencode" else uuid4(r)
        rec = fmt.Session(agent, sid, cwd, r.choice(proj.branches[:1] * 2 + proj.branches), r.choice(fmt.MODELS[agent]),
                          start, proj.repo_url)
        s = _NSess(proj, cwd, start, rec)
        self.other_sessions[agent] += 1
        stopped = False
        try:
            turn = 0
            while s.msgs < target:
                self._n_turn(s, turn == 0)
                turn += 1
        except _Stop:
            stopped = True
        rec.end = s.t + 1000
        rec.complete = not stopped
        rec.title = r.choice(p.titles) if r.random() < 0.6 else None
        if agent == "gemini":
            self._gemini_write(rec)
        elif agent == "opencode":
            if self.opencode is None:
                self.opencode = fmt.OpenCodeStore(self._agent_dir("opencode") / "opencode.db")
            words = p.common[60:]
            self.opencode.add(rec, proj.root, f"{r.choice(words)}-{r.choice(p.morph)}")
        else:
            for rel, data in fmt.copilot_files(rec, r):
                self._write(self._agent_dir("copilot") / rel, data, rec.end)
        if stopped:
            raise _Stop

    def _agent_dir(self, agent: str) -> Path:
        return self.out / fmt.LAYOUT[agent].roots[0]

    def _gemini_write(self, rec: fmt.Session) -> None:
        tmp = self._agent_dir("gemini")
        slug = self.gemini_slugs.get(rec.cwd)
        if slug is None:
            # Gemini CLI's project registry: the folder's name, numbered when another project has it.
            base = slug = slugify(rec.cwd)
            taken = set(self.gemini_slugs.values())
            n = 0
            while slug in taken:
                n += 1
                slug = f"{base}-{n}"
            self.gemini_slugs[rec.cwd] = slug
            self._write(tmp / slug / ".project_root", rec.cwd.encode())
        legacy = self.r.random() < _GEMINI_LEGACY_SHARE
        self.gemini_legacy += legacy
        name, data = fmt.gemini_file(rec, self.r, str(tmp / slug), legacy=legacy)
        self._write(tmp / slug / "chats" / name, data, rec.end)

    # -- driver -------------------------------------------------------------------------------------

    def _session_target(self) -> int:
        r = self.r
        if r.random() < 0.012:
            return 300 + int(r.random() * 700)
        return max(4, min(1000, int(r.lognormvariate(3.8, 0.75))))

    def run(self) -> dict[str, Any]:
        r = self.r
        p = self.pools
        try:
            while self.left > 0:
                proj = p.projects[bisect.bisect(p.project_pick, r.random() * p.project_pick[-1])]
                self.projects_used[proj.name] = None
                cwd = proj.root if r.random() < 0.75 else f"{proj.root}/{r.choice(proj.subdirs)}"
                day = int(r.random() * 362)
                hour = min(23, max(0, int(r.gauss(14, 3.5))))
                start = _YEAR_START_MS + day * _DAY_MS + hour * 3_600_000 + int(r.random() * 3_600_000)
                target = self._session_target()
                self._session(self._pick_agent(), proj, cwd, start, target)
        except _Stop:
            pass
        if self.codex_sessions:
            self.codex_index.sort()
            idx = b"".join(
                orjson.dumps(codex.session_index_entry(sid, name, upd)) + b"\n"
                for upd, sid, name in self.codex_index
            )
            with self._counted("codex", messages=False):
                self._write(self.out / "codex" / "session_index.jsonl", idx)
        if self.gemini_slugs:
            with self._counted("gemini", messages=False):
                registry = fmt.gemini_registry(self.gemini_slugs)
                self._write(self._agent_dir("gemini").parent / "projects.json", registry)
        if self.opencode is not None:
            size = self.opencode.close()
            self.files += 1
            self.bytes += size
            self.totals["opencode"].files += 1
            self.totals["opencode"].bytes += size
        k = self.kind_counts
        manifest: dict[str, Any] = {
            "messages": sum(k),
            "sessions": self.claude_sessions + self.claude_subagents + self.codex_sessions
            + sum(self.other_sessions.values()),
            "files": self.files,
            "bytes": self.bytes,
            "seed": self.seed,
            "claude_sessions": self.claude_sessions + self.claude_subagents,
            "claude_main_sessions": self.claude_sessions,
            "claude_subagents": self.claude_subagents,
            "codex_sessions": self.codex_sessions,
            "codex_archived": self.codex_archived,
            "codex_named_threads": len({sid for _, sid, _ in self.codex_index}),
            "projects": len(self.projects_used),
            "by_kind": {
                "text": k[_K_USER] + k[_K_ATEXT],
                "thinking": k[_K_THINK],
                "tool_call": k[_K_CALL],
                "tool_result": k[_K_RESULT],
            },
            "by_role": {
                "user": k[_K_USER],
                "assistant": k[_K_ATEXT] + k[_K_THINK] + k[_K_CALL],
                "tool": k[_K_RESULT],
            },
            "long_line_tool_results": self.long_results,
            "non_ascii_messages": self.nonascii_msgs,
            "rare_phrases": dict(zip(RARE_PHRASES, self.rare_counts, strict=True)),
        }
        if self.mix is not None:
            manifest.update(self._mix_manifest())
        return manifest

    def _pick_agent(self) -> str:
        """The next session's agent: one draw, cumulative over AGENTS (Codex first, as ``--codex-share``)."""
        x = self.r.random()
        if self.mix is None:
            return "codex" if x < self.codex_share else "claude"
        acc = 0.0
        last = "claude"
        for agent in AGENTS:
            w = self.mix.get(agent, 0.0)
            if w <= 0:
                continue
            acc += w
            last = agent
            if x < acc:
                return agent
        return last  # x above a sum that rounding left just below 1

    def _session(self, agent: str, proj: _Project, cwd: str, start: int, target: int) -> None:
        with self._counted(agent):
            if agent == "codex":
                self._codex_session(proj, cwd, start, target)
            elif agent == "claude":
                self._claude_session(proj, cwd, start, target)
            else:
                self._other_session(agent, proj, cwd, start, target)

    @contextlib.contextmanager
    def _counted(self, agent: str, *, messages: bool = True) -> Iterator[None]:
        """Adds what the block wrote (messages, files, bytes) to ``agent``'s totals, also when it stops."""
        m0, f0, b0 = sum(self.kind_counts), self.files, self.bytes
        try:
            yield
        finally:
            t = self.totals[agent]
            if messages:
                t.messages += sum(self.kind_counts) - m0
            t.files += self.files - f0
            t.bytes += self.bytes - b0

    def _mix_manifest(self) -> dict[str, Any]:
        assert self.mix is not None
        sessions = {"claude": self.claude_sessions + self.claude_subagents, "codex": self.codex_sessions,
                    **{a: n for a, n in self.other_sessions.items() if a not in ("claude", "codex")}}
        agents: dict[str, Any] = {}
        for agent in AGENTS:
            if self.mix.get(agent, 0.0) <= 0:
                continue
            t = self.totals[agent]
            layout = fmt.LAYOUT[agent]
            d: dict[str, Any] = {"messages": t.messages, "sessions": sessions[agent], "files": t.files,
                                 "bytes": t.bytes, "roots": list(layout.roots), "env": dict([layout.env])}
            if agent == "codex":
                d["zst_sessions"] = self.codex_zst
                d["uncompressed_bytes"] = self.codex_plain_bytes
            elif agent == "gemini":
                d["legacy_json_sessions"] = self.gemini_legacy
            agents[agent] = d
        return {"mix": {a: self.mix[a] for a in AGENTS if self.mix.get(a, 0.0) > 0},
                "codex_zst_share": self.zst_share, "agents": agents}


def parse_mix(text: str) -> dict[str, float]:
    """``claude=0.3,codex=0.3,gemini=0.4`` as session shares per agent, scaled to sum to 1."""
    weights: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        agent, sep, value = item.partition("=")
        if not sep or agent not in AGENTS:
            raise ValueError(f"--mix wants AGENT=SHARE items with AGENT one of {', '.join(AGENTS)}, got {item!r}")
        weights[agent] = float(value)
    total = sum(weights.values())
    if any(w < 0 for w in weights.values()) or total <= 0:
        raise ValueError("--mix shares must be >= 0 and not all 0")
    return {a: w / total for a, w in weights.items()}


def generate(
    out: Path,
    messages: int,
    seed: int = 1,
    codex_share: float = 0.4,
    long_line_rate: float = 0.01,
    overwrite: bool = False,
    mix: Mapping[str, float] | None = None,
    codex_zst_share: float = 0.0,
) -> dict[str, Any]:
    """Write a corpus of exactly ``messages`` normalized messages under ``out`` and return the manifest.

    ``out/claude`` is a stand-in for ``~/.claude`` and ``out/codex`` for ``$CODEX_HOME``; with a ``mix``
    (session shares per agent, see ``parse_mix``) the other agents' trees sit where
    ``corpus_formats.LAYOUT`` says. Existing trees there are refused unless ``overwrite`` is set,
    because mixing two runs would corrupt the counts.
    """
    if messages < 0:
        raise ValueError("messages must be >= 0")
    if not 0.0 <= codex_share <= 1.0:
        raise ValueError("codex_share must be within [0, 1]")
    if not 0.0 <= codex_zst_share <= 1.0:
        raise ValueError("codex_zst_share must be within [0, 1]")
    out = Path(out)
    for sub in ("claude", "codex", *(a for a in AGENTS if a not in ("claude", "codex"))):
        if (out / sub).exists():
            if not overwrite:
                raise FileExistsError(f"{out / sub} already exists (pass overwrite=True / --force)")
            shutil.rmtree(out / sub)
    out.mkdir(parents=True, exist_ok=True)
    gen = _Gen(out, messages, seed, codex_share, long_line_rate, mix, codex_zst_share)
    manifest = gen.run()
    (out / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gen_corpus", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, required=True, help="output directory (gets claude/, codex/, manifest.json)"
    )
    ap.add_argument(
        "--messages", type=int, required=True, help="exact number of normalized messages to write"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--codex-share", type=float, default=None,
                    help="fraction of sessions written as Codex, the rest as Claude Code (default 0.4)")
    ap.add_argument("--mix", type=parse_mix, default=None, metavar="AGENT=SHARE,...",
                    help=f"session shares per agent ({', '.join(AGENTS)}), instead of --codex-share")
    ap.add_argument("--codex-zst-share", type=float, default=0.0, metavar="F",
                    help="fraction of Codex rollouts written as rollout-*.jsonl.zst (the plain file absent)")
    ap.add_argument(
        "--long-line-rate",
        type=float,
        default=0.01,
        help=f"fraction of tool outputs holding one line longer than {LONG_LINE_MIN} chars",
    )
    ap.add_argument("--force", action="store_true", help="replace existing agent trees (claude/, codex/, ...) in --out")
    args = ap.parse_args(argv)
    if args.mix is not None and args.codex_share is not None:
        ap.error("--mix and --codex-share both set the agents' shares: give one")
    t0 = time.perf_counter()
    m = generate(args.out, args.messages, args.seed, 0.4 if args.codex_share is None else args.codex_share,
                 args.long_line_rate, args.force, args.mix, args.codex_zst_share)
    dt = time.perf_counter() - t0
    rate = m["messages"] / dt if dt > 0 else 0.0
    print(
        f"wrote {m['messages']:,} messages in {m['sessions']:,} sessions, {m['files']:,} files, "
        f"{m['bytes'] / 1e6:,.1f} MB in {dt:.1f}s ({rate:,.0f} msg/s, {m['bytes'] / 1e6 / dt:,.1f} MB/s)",
        file=sys.stderr,
    )
    for agent, a in m.get("agents", {}).items():
        print(f"  {agent:8} {a['messages']:>9,} messages {a['sessions']:>6,} sessions {a['bytes'] / 1e6:8.1f} MB",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
