"""The shape of a hand-written incident and the tiny script language its sessions are written in.

A session script reads like a transcript, one step per marker at the start of a line:

    U: user text                 (following lines without a marker continue the text)
    A: assistant text
    T: assistant thinking        (Claude thinking block / Codex reasoning summary)
    $ shell command              (Claude ``Bash`` / Codex ``shell``)
    @ relative/file/path         (Claude ``Read`` / Codex ``sed -n`` through ``shell``)
    ~ relative/file/path         (Claude ``Edit`` / Codex ``apply_patch``)
    > output line                (tool output; for ``~`` the patch: ``> -old`` and ``> +new`` lines)

Writing sessions this way keeps the incidents readable as prose while the renderers in
``bench.quality.render`` turn every step into the records each agent really writes.

An incident is one text file (``bench/quality/incidents/<area>/<NN>-<key>.txt``): a TOML header
between ``+++`` lines holding the project and the three queries, the session script, and, when the
incident has one, a ``--- distractor ---`` line followed by the distractor's script:

    +++
    cwd = "/home/maya/src/ingest-worker"

    [queries]
    exact = "RuntimeError: Event loop is closed"
    paraphrase = "suite froze indefinitely once one reused web requester spanned several cases"
    mixed = "pytest-asyncio suite froze once one reused web requester spanned several cases"
    +++
    U: `pytest tests/test_fetcher.py` hangs after the second test ...
    ...
    --- distractor ---
    U: the `test_webhook_retry` test is slow ...
"""

from __future__ import annotations

import textwrap
import tomllib
from dataclasses import dataclass, field
from typing import Literal

StepKind = Literal["user", "assistant", "thinking", "shell", "read", "edit"]

_TEXT_MARKERS: dict[str, StepKind] = {"U: ": "user", "A: ": "assistant", "T: ": "thinking"}
_TOOL_MARKERS: dict[str, StepKind] = {"$ ": "shell", "@ ": "read", "~ ": "edit"}


@dataclass(frozen=True, slots=True)
class Step:
    """One transcript step. ``text`` is the message, the command or the file path."""

    kind: StepKind
    text: str
    output: str = ""  # tool output; for an edit, the patch body ("-old" / "+new" lines)


@dataclass(frozen=True, slots=True)
class Incident:
    """One remembered piece of coding-agent work and the three ways someone might look for it."""

    key: str  # stable slug; query ids derive from it
    cwd: str  # the project the session ran in
    script: str  # the session, in the script language above
    exact: str  # words or an identifier/error that literally occur in the session
    paraphrase: str  # the same problem described without any content word of the session
    mixed: str  # one distinctive session term plus paraphrased context
    distractor: str | None = None  # a similar-but-different session (overlapping vocabulary)
    branch: str = "main"
    steps: tuple[Step, ...] = field(init=False, repr=False)
    distractor_steps: tuple[Step, ...] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Parse once, eagerly: a malformed script should fail at import, not halfway through a run.
        object.__setattr__(self, "steps", parse_script(self.script))
        object.__setattr__(
            self, "distractor_steps", parse_script(self.distractor) if self.distractor is not None else None
        )


def parse_script(script: str) -> tuple[Step, ...]:
    """Steps of a session script; raises ValueError on output without a tool or an empty session."""
    steps: list[Step] = []
    kind: StepKind | None = None
    head = ""
    body: list[str] = []

    def flush() -> None:
        if kind is None:
            return
        if kind in ("user", "assistant", "thinking"):
            text = "\n".join([head, *body]).strip()
            if not text:
                raise ValueError(f"empty {kind} step in script")
            steps.append(Step(kind, text))
        else:
            steps.append(Step(kind, head.strip(), "\n".join(body)))

    for raw in textwrap.dedent(script).strip("\n").splitlines():
        line = raw.rstrip()
        marker = line[:2] if line[:2] in _TOOL_MARKERS else line[:3]
        if marker in _TEXT_MARKERS or marker in _TOOL_MARKERS:
            flush()
            kind = _TEXT_MARKERS.get(marker) or _TOOL_MARKERS[marker]
            head = line[len(marker) :]
            body = []
        elif line.startswith(">"):
            if kind not in ("shell", "read", "edit"):
                raise ValueError(f"tool output without a tool step: {line!r}")
            body.append(line[2:] if line.startswith("> ") else line[1:])
        else:
            if kind is None:
                raise ValueError(f"text before the first step marker: {line!r}")
            if kind in ("shell", "read", "edit"):
                raise ValueError(f"tool step lines must start with '>': {line!r}")
            body.append(line)
    flush()
    if not any(s.kind == "user" for s in steps):
        raise ValueError("a session script needs at least one user step")
    return tuple(steps)


FRONT_MATTER = "+++"
DISTRACTOR_SEPARATOR = "--- distractor ---"
_HEADER_KEYS = frozenset({"cwd", "branch", "queries"})
_QUERY_KINDS = ("exact", "paraphrase", "mixed")


def parse_incident(key: str, text: str) -> Incident:
    """The incident an incident file holds; raises ValueError naming what is malformed."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FRONT_MATTER:
        raise ValueError(f"an incident file starts with a {FRONT_MATTER!r} line")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() == FRONT_MATTER)
    except StopIteration:
        raise ValueError(f"the TOML header is not closed by a {FRONT_MATTER!r} line") from None
    try:
        header = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"bad TOML header: {exc}") from exc
    # Unknown keys are refused rather than ignored, so a misspelt "branch" cannot silently become "main".
    if unknown := sorted(header.keys() - _HEADER_KEYS):
        raise ValueError(f"unknown header keys {unknown}")
    queries = header.get("queries")
    if not isinstance(queries, dict) or sorted(queries) != sorted(_QUERY_KINDS):
        raise ValueError(f"[queries] must hold exactly {', '.join(_QUERY_KINDS)}")
    for kind in _QUERY_KINDS:
        if not isinstance(queries[kind], str) or not queries[kind].strip():
            raise ValueError(f"the {kind} query must be a non-empty string")
    cwd, branch = header.get("cwd"), header.get("branch", "main")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise ValueError("cwd must be an absolute path")
    if not isinstance(branch, str) or not branch:
        raise ValueError("branch must be a non-empty string")
    body = lines[end + 1 :]
    cuts = [i for i, line in enumerate(body) if line.rstrip() == DISTRACTOR_SEPARATOR]
    if len(cuts) > 1:
        raise ValueError(f"more than one {DISTRACTOR_SEPARATOR!r} line")
    script = "\n".join(body[: cuts[0]] if cuts else body)
    distractor = "\n".join(body[cuts[0] + 1 :]) if cuts else None
    return Incident(key=key, cwd=cwd, script=script, exact=queries["exact"], paraphrase=queries["paraphrase"],
                    mixed=queries["mixed"], distractor=distractor, branch=branch)
