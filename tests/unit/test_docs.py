"""Every document the code and the docs cite is in the repository, down to its section numbers.

Scanned: every .py and .md file of the repository (not .venv, build, bench/out, caches). Found:
a document name followed by section numbers (``docs/contract.md`` then a section sign and ``4``,
or a list or range of them), a document name followed by a quoted section title, a section sign
alone (in a Markdown file: a section of that file), any ``docs/<file>`` path, any path to a .md
file, and the names of the documents that used to live outside the repository. The section
numbers a document has are the numbers its headings start with.

The section sign is written as an escape in this file, so that the file can scan itself.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.support.common import REPO

ROOT = REPO
SIGN = "\u00a7"
_SKIP_DIRS = frozenset({".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache",
                        ".ruff_cache", "node_modules"})
_SKIP_PATHS = frozenset({"bench/out"})

_NUM = r"\d+(?:\.\d+)*"
_ONE = rf"\u00a7[ \t]?{_NUM}(?:[ \t]*(?:[-\u2013\u2014]|to)[ \t]*(?:\u00a7[ \t]?)?{_NUM})?"
# One or more section numbers: a list, ranges, written on one line or continued on the next.
_SECTIONS = re.compile(rf"{_ONE}(?:[ \t]*(?:,|and|or|&)[ \t]*(?:\n[ \t]*#?[ \t]*)?{_ONE})*")
# A document name: a path to a .md file, or the bare name the specification went by.
_DOC = re.compile(r"(?<![\w./-])(?P<doc>(?:\.\.?/)*(?:[\w.-]+/)*[\w-]+\.md\b|SP[E]C(?=[ \t]*\u00a7))")
# What may stand between a document's name and its section numbers: a closing backquote or quote,
# a comma, an opening parenthesis, a colon.
_GAP = re.compile(r"[`'\"]?[ \t]*[,(:]?[ \t]*")
# A quoted section title: docs/protocol.md, "Errors" (a name's own closing quote may not precede it).
_QUOTED = re.compile(r"`?[ \t]*[,(]?[ \t]*\"([A-Za-z][^\"\n]{0,59})\"")
_DOCS_PATH = re.compile(r"(?<![\w./-])docs/[\w-]+(?:[./][\w-]+)*")
# The specification, format notes, measurements and style guide lived beside the repository.
# (Spelled in pieces so that this file does not cite them itself.)
_OUTSIDE_NAMES = frozenset({"SP" "EC", "SP" "EC" ".md", "FORMATS" ".md", "MEASURED" ".md", "STYLE" ".md"})
_OUTSIDE_PATH = re.compile(r"\.\./shared/|\bseeds/")
_HEADING = re.compile(rf"^#{{1,6}}[ \t]+(?:\u00a7[ \t]?)?({_NUM})[.)]?(?:[ \t]|$)(.*)$", re.M)


@dataclass(frozen=True, slots=True)
class Ref:
    """One reference found in a file: the document it names and what of it."""

    source: Path
    line: int
    doc: str | None  # None: section numbers that follow no document name
    sections: tuple[str, ...] = ()
    title: str | None = None  # a quoted section title instead of numbers
    text: str = ""

    def where(self) -> str:
        """``path:line: text`` for failure messages."""
        return f"{self.source.relative_to(ROOT)}:{self.line}: {self.text}"


@dataclass(slots=True)
class Found:
    """Everything the finder collected from the scanned files."""

    refs: list[Ref] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


def scanned_files() -> list[Path]:
    """Every .py and .md file of the repository, symlinked folders not followed."""
    out: list[Path] = []
    for top, dirs, files in os.walk(ROOT):
        rel = Path(top).relative_to(ROOT).as_posix()
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                         and (f"{rel}/{d}" if rel != "." else d) not in _SKIP_PATHS
                         and not os.path.islink(os.path.join(top, d)))
        out += [Path(top) / f for f in sorted(files) if f.endswith((".py", ".md"))]
    return out


def expand(group: str) -> tuple[str, ...]:
    """The section numbers of one match: a list of numbers and ranges such as 2-4 (endpoints for dotted ones)."""
    out: list[str] = []
    for piece in re.split(r"\s*(?:,|and|or|&)\s*(?:#\s*)?", group.replace(SIGN, " ").strip()):
        ends = [e for e in re.split(r"\s*(?:[-\u2013\u2014]|to)\s*", piece.strip()) if e]
        if len(ends) == 2 and ends[0].isdigit() and ends[1].isdigit() and int(ends[0]) <= int(ends[1]):
            out += [str(n) for n in range(int(ends[0]), int(ends[1]) + 1)]
        else:
            out += ends
    return tuple(out)


def find_refs(source: Path, text: str) -> Found:
    """The references in one file's text (``source`` decides what a lone section sign refers to)."""
    found = Found()
    docs = list(_DOC.finditer(text))
    ends = [m.end() for m in docs]

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def snippet(start: int, end: int) -> str:
        return " ".join(text[start:end].split())[:100]

    attached: set[int] = set()
    for group in _SECTIONS.finditer(text):
        i = bisect.bisect_right(ends, group.start()) - 1
        doc: str | None = None
        start = group.start()
        if i >= 0 and _GAP.fullmatch(text, docs[i].end(), group.start()):
            doc, start = docs[i]["doc"], docs[i].start()
            attached.add(i)
        elif source.suffix == ".md":
            doc = str(source.relative_to(ROOT))
        found.refs.append(Ref(source, line_of(start), doc, expand(group[0]), None, snippet(start, group.end())))
    for i, m in enumerate(docs):
        if i in attached:
            continue
        quoted = _QUOTED.match(text, m.end())
        title = quoted[1] if quoted else None
        found.refs.append(Ref(source, line_of(m.start()), m["doc"], (), title,
                              snippet(m.start(), quoted.end() if quoted else m.end())))
    for m in _DOCS_PATH.finditer(text):
        path = m[0].rstrip(".-")
        if not path.endswith(".md"):
            found.refs.append(Ref(source, line_of(m.start()), path, (), None, path))
    for m in _OUTSIDE_PATH.finditer(text):
        found.outside.append(f"{source.relative_to(ROOT)}:{line_of(m.start())}: {snippet(m.start(), m.end() + 40)}")
    return found


@cache
def everything() -> Found:
    """The references of every scanned file."""
    out = Found()
    for path in scanned_files():
        found = find_refs(path, path.read_text("utf-8", errors="replace"))
        out.refs += found.refs
        out.outside += found.outside
    return out


def resolve(ref: Ref) -> Path | None:
    """The repository file a reference names, or None when there is none."""
    if ref.doc is None or ref.doc in _OUTSIDE_NAMES:
        return None
    bases = [ref.source.parent, ROOT] if "/" in ref.doc else [ref.source.parent, ROOT, ROOT / "docs"]
    for base in bases:
        target = (base / ref.doc).resolve()
        if target.is_relative_to(ROOT) and target.exists():
            return target
    return None


def checked(ref: Ref) -> bool:
    """Whether a reference must resolve: it names sections, a path, or a document from outside."""
    assert ref.doc is not None
    return bool(ref.sections) or ref.title is not None or "/" in ref.doc or ref.doc in _OUTSIDE_NAMES


@cache
def headings(doc: Path) -> tuple[frozenset[str], tuple[str, ...]]:
    """The section numbers (with their prefixes: 2.1 implies 2) and the heading texts of a Markdown file."""
    text = re.sub(r"^```.*?^```", "", doc.read_text("utf-8"), flags=re.M | re.S)
    numbers: set[str] = set()
    for m in _HEADING.finditer(text):
        parts = m[1].split(".")
        numbers |= {".".join(parts[: k + 1]) for k in range(len(parts))}
    titles = tuple(line.lstrip("#").strip().casefold() for line in text.splitlines() if line.startswith("#"))
    return frozenset(numbers), titles


def test_every_cited_document_is_in_the_repository() -> None:
    """Each document named with sections, a title, a path, or by an outside name exists in the repository."""
    dangling = [r.where() for r in everything().refs if r.doc is not None and checked(r) and resolve(r) is None]
    assert not dangling, f"{len(dangling)} reference(s) to documents not in the repository:\n" + "\n".join(dangling)


def test_every_cited_section_is_a_section_of_its_document() -> None:
    """Each section number cited exists as a numbered heading of the document it follows."""
    missing = []
    for ref in everything().refs:
        target = resolve(ref) if ref.doc is not None else None
        if target is None or target.suffix != ".md" or not (ref.sections or ref.title):
            continue
        numbers, titles = headings(target)
        absent = [s for s in ref.sections if s not in numbers]
        if ref.title is not None and not any(ref.title.casefold() in t for t in titles):
            absent.append(repr(ref.title))
        if absent:
            missing.append(f"{ref.where()}  (no {', '.join(absent)} in {target.relative_to(ROOT)})")
    assert not missing, f"{len(missing)} reference(s) to sections that do not exist:\n" + "\n".join(missing)


def test_section_numbers_in_code_follow_a_document_name() -> None:
    """Outside Markdown, a section number is always written after the name of the document it is in."""
    orphans = [r.where() for r in everything().refs if r.doc is None]
    assert not orphans, "section numbers that name no document:\n" + "\n".join(orphans)


def test_no_reference_leaves_the_repository() -> None:
    """No file points into the folders beside the repository (the shared notes and their seeds)."""
    assert not everything().outside, "\n".join(everything().outside)


def test_the_finder_reads_every_form_of_reference() -> None:
    """The finder sees lists, ranges, continued lines, quoted titles, paths and outside names."""
    s = SIGN
    text = (f"(SP" f"EC {s}2\u20133, {s}7) and docs/contract.md {s}4 or FORMATS" f".md {s}1-{s}2;\n"
            f"# `docs/protocol.md` {s}1.7, {s}2\n"
            f'see docs/protocol.md, "Errors" and docs/limits.md; the {s}0 rules\n')
    refs = find_refs(ROOT / "x.py", text).refs
    assert [(r.doc, r.sections) for r in refs if r.sections] == [
        ("SP" "EC", ("2", "3", "7")), ("docs/contract.md", ("4",)), ("FORMATS" ".md", ("1", "2")),
        ("docs/protocol.md", ("1.7", "2")), (None, ("0",)),
    ]
    assert ("docs/protocol.md", "Errors") in [(r.doc, r.title) for r in refs]
    assert "docs/limits.md" in [r.doc for r in refs]
    in_markdown = find_refs(ROOT / "docs" / "protocol.md", f"as {s}1.5 says").refs
    assert [(r.doc, r.sections) for r in in_markdown] == [("docs/protocol.md", ("1.5",))]
    assert find_refs(ROOT / "x.py", "../sha" "red/SP" "EC.md").outside


def test_the_contract_keeps_the_specification_numbering() -> None:
    """docs/contract.md has sections 1-9 (the specification's), docs/formats.md 0-2, docs/design.md 1 on."""
    contract, _ = headings(ROOT / "docs" / "contract.md")
    formats, _ = headings(ROOT / "docs" / "formats.md")
    design, _ = headings(ROOT / "docs" / "design.md")
    assert {str(n) for n in range(1, 10)} <= contract
    assert {"0", "1", "2"} <= formats
    assert "1" in design
