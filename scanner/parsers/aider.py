"""Aider chat histories (docs/formats.md §6): one markdown file per repo, many chats, each read whole.

``.aider.chat.history.md`` sits in each repo Aider ran in; there is no central store, so roots are
what the user names (``--root aider=~/code``, walked to a bounded depth) plus
``AIDER_CHAT_HISTORY_FILE`` as a single-file root. Every chat starts at a
``# aider chat started at YYYY-MM-DD HH:MM:SS`` line (local time) and is one unit keyed
``<file>#<byte offset of its header>``. Aider only appends, so a closed chat's bytes never change
and only the last chat grows: per file we remember the header offsets and how far the file was
scanned, so a pass over a grown file reads only its new bytes to find new headers.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aivault.errors import UnitChanged, UnitUnreadable
from aivault.scanner.model import Message, RoleName, SessionInfo
from aivault.scanner.parsers.base import count_skip
from aivault.scanner.reader import BLOCK_BYTES, HEAD_BYTES, MAX_LINE_BYTES
from aivault.scanner.sources import Found, Root, RootProblem, Unit, head_fingerprint, signature
from aivault.scanner.spec import AgentSpec

HISTORY_NAME = ".aider.chat.history.md"
HEADER = b"# aider chat started at "
_HEADER_LINE = re.compile(rb"# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[ \t\r]*$")
_HEADER_TEXT = re.compile(r"# aider chat started at \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\s*$")
# Repos sit a few levels under a projects folder; deeper trees are not where Aider writes.
MAX_DEPTH = 5
# Folders no repo root lives in, and whose size would make a walk slow.
PRUNED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "target"})
# One chat is read into memory whole; a larger one is reported rather than exhausting memory.
MAX_CHAT_BYTES = 256 << 20
# Keys of our directory mtimes in the scanner's shared ``dirs`` dict, apart from other agents'.
_DIR_KEY = "aider:"

# The Aider commands whose text is a prompt (the title is what follows them).
_PROMPT_COMMANDS = ("/ask", "/code", "/architect", "/context")
# The output of these user inputs is a tool result: a shell command and what it printed.
_SHELL_INPUTS = ("/run", "/test", "/lint", "/git", "/commit", "!")
_EDIT_LINES = ("Applied edit to", "Commit ", "Did not apply edit", "Failed to apply edit", "Running ",
               "Add command output", "Added ", "Removed ")
_TOKEN_LINE = re.compile(r"^Tokens: .*\bsent\b")


# --- finding the chats in a file ------------------------------------------------------------------
@dataclass(slots=True)
class HistoryFile:
    """What one pass learnt about a history file, so the next reads only what was appended."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    head_len: int
    head_hash: int
    scanned: int  # offset just after the last complete line scanned for headers
    headers: list[tuple[int, str]] = field(default_factory=list)  # (offset, local start time)


_FILES: dict[str, HistoryFile] = {}
_ROOT_FILES: dict[str, set[str]] = {}


def scan_headers(fd: int, start: int, end: int) -> tuple[list[tuple[int, str]], int]:
    """Chat headers in the complete lines of [start, end), streamed in blocks (``start`` is a line
    start); also the offset after the last complete line, where the next scan resumes."""
    found: list[tuple[int, str]] = []
    pos = start
    carry = b""  # the unfinished last line of what was read so far
    skipping = False  # inside a line too long to be a header: drop it until its newline
    scanned = start
    while pos < end:
        block = os.pread(fd, min(BLOCK_BYTES, end - pos), pos)
        if not block:
            break
        base = pos - len(carry)
        pos += len(block)
        data = carry + block
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            carry = b"" if skipping or len(data) > MAX_LINE_BYTES else data
            skipping = skipping or len(data) > MAX_LINE_BYTES
            continue
        region = data[: last_nl + 1]
        carry = data[last_nl + 1 :]
        lo = region.find(b"\n") + 1 if skipping else 0
        skipping = False
        scanned = base + len(region)
        hit = lo if region.startswith(HEADER, lo) else region.find(b"\n" + HEADER, lo)
        while hit >= 0:
            at = hit if region.startswith(HEADER, hit) else hit + 1
            line_end = region.find(b"\n", at)
            m = _HEADER_LINE.match(region, at, line_end)
            if m:
                found.append((base + at, m[1].decode()))
            hit = region.find(b"\n" + HEADER, line_end)
        if len(carry) > MAX_LINE_BYTES:
            carry, skipping = b"", True
    return found, scanned


def index_file(path: str, st: os.stat_result) -> HistoryFile:
    """The file's chat headers, re-using what an earlier pass found when the file only grew."""
    rec = _FILES.get(path)
    if rec is not None and (rec.dev, rec.ino) == (st.st_dev, st.st_ino) \
            and (rec.size, rec.mtime_ns) == (st.st_size, st.st_mtime_ns):
        return rec
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        grown = rec is not None and (rec.dev, rec.ino) == (st.st_dev, st.st_ino) and st.st_size >= rec.size \
            and head_fingerprint(os.pread(fd, rec.head_len, 0)) == rec.head_hash
        if rec is None or not grown:
            rec = HistoryFile(st.st_dev, st.st_ino, 0, 0, 0, 0, 0)
        new, rec.scanned = scan_headers(fd, rec.scanned, st.st_size)
        rec.headers.extend(new)
        rec.size, rec.mtime_ns = st.st_size, st.st_mtime_ns
        rec.head_len = min(st.st_size, HEAD_BYTES)
        rec.head_hash = head_fingerprint(os.pread(fd, rec.head_len, 0))
    finally:
        os.close(fd)
    _FILES[path] = rec
    return rec


def chats(path: str, agent: str, rec: HistoryFile) -> Iterator[Found]:
    """One unit per chat; a file written without headers is one chat from its first byte."""
    headers = rec.headers or ([(0, "")] if rec.size else [])
    seen: dict[str, int] = {}
    for k, (start, started) in enumerate(headers):
        closed = k + 1 < len(headers)
        end = headers[k + 1][0] if closed else rec.size
        sid = f"{os.path.dirname(path)}#{started or 'start'}"
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:  # two chats started in the same second: keep their ids apart
            sid = f"{sid}#{seen[sid]}"
        # A closed chat's bytes are fixed; the last one is read again whenever the file changes.
        sig = signature(rec.ino, start, end) if closed else signature(rec.ino, start, end, rec.mtime_ns)
        yield Found(f"{path}#{start}", agent, rec.dev, rec.ino, end - start, sig, "whole",
                    (path, str(start), str(end), sid, started, "closed" if closed else "open"))


def _wanted(name: str) -> bool:
    return name == HISTORY_NAME or name.endswith(HISTORY_NAME)


def _walk(root: Root, path: str, depth: int, dirs: dict[str, int] | None, files: set[str],
          problems: list[RootProblem], recurse_known: bool) -> None:
    try:
        mtime = os.stat(path).st_mtime_ns
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot list {path}: {exc.strerror or exc}"))
        return
    if dirs is not None:
        dirs[_DIR_KEY + path] = mtime
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                # Symlinked folders are not followed: a link back up the tree cannot loop the walk.
                if depth < MAX_DEPTH and not entry.name.startswith(".") and entry.name not in PRUNED_DIRS \
                        and (recurse_known or dirs is None or _DIR_KEY + entry.path not in dirs):
                    _walk(root, entry.path, depth + 1, dirs, files, problems, recurse_known)
            elif _wanted(entry.name) and entry.is_file(follow_symlinks=True):
                files.add(entry.path)
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot stat {entry.path}: {exc.strerror or exc}"))


def discover(root: Root, problems: list[RootProblem], dirs: dict[str, int] | None, full: bool) -> Iterator[Found]:
    """A full pass walks the root; a recent pass re-lists only folders whose mtime changed (a new
    history file changes its folder's), then every known file is stat-ed and re-scanned if it grew."""
    try:
        st = os.stat(root.path)
    except FileNotFoundError:
        if root.explicit:
            problems.append(RootProblem(root.path, "root does not exist"))
        return
    except OSError as exc:
        problems.append(RootProblem(root.path, f"cannot stat root: {exc.strerror or exc}"))
        return
    if stat.S_ISREG(st.st_mode):
        files = {root.path}
    else:
        known = _ROOT_FILES.get(root.path)
        if full or dirs is None or known is None or _DIR_KEY + root.path not in dirs:
            known = set()
            _walk(root, root.path, 0, dirs, known, problems, recurse_known=True)
        else:
            for key, mtime in list(dirs.items()):
                if not key.startswith(_DIR_KEY):
                    continue
                path = key[len(_DIR_KEY):]
                if path != root.path and not path.startswith(root.path + os.sep):
                    continue
                try:
                    now = os.stat(path).st_mtime_ns
                except OSError:
                    dirs.pop(key, None)
                    continue
                if now != mtime:
                    depth = 0 if path == root.path else path[len(root.path) + 1:].count(os.sep) + 1
                    _walk(root, path, depth, dirs, known, problems, recurse_known=False)
        _ROOT_FILES[root.path] = known
        files = known
    for path in sorted(files):
        try:
            fst = os.stat(path)
            rec = index_file(path, fst)
        except FileNotFoundError:
            files.discard(path)
            _FILES.pop(path, None)
            continue
        except OSError as exc:
            problems.append(RootProblem(root.path, f"cannot read {path}: {exc.strerror or exc}"))
            continue
        yield from chats(path, root.agent, rec)


# --- reading one chat ----------------------------------------------------------------------------------
def local_ms(started: str) -> int | None:
    """The header's local wall-clock time as epoch ms, in this machine's time zone."""
    try:
        return int(time.mktime(time.strptime(started, "%Y-%m-%d %H:%M:%S")) * 1000)
    except (ValueError, OverflowError):
        return None


def read_chat(found: Found) -> Unit:
    path, start_s, end_s, sid, started, state = found.locator
    closed = state == "closed"
    start, end = int(start_s), int(end_s)
    if end - start > MAX_CHAT_BYTES:
        raise UnitUnreadable(f"the chat is {end - start} bytes, over the {MAX_CHAT_BYTES}-byte limit")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise UnitChanged("the history file is gone") from exc
    except OSError as exc:
        raise UnitUnreadable(f"cannot open: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    # Aider only appends: the same file at least as long, with the header still at its offset,
    # holds the same chat; anything else is a rewrite that the next pass lists again.
    if (st.st_dev, st.st_ino) != (found.dev, found.ino) or st.st_size < end or len(data) != end - start \
            or (started and not data.startswith(HEADER)):
        raise UnitChanged("the history file was rewritten")
    skips: dict[str, int] = {}
    ms = local_ms(started) if started else None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        count_skip(skips, "invalid-utf8")  # Aider writes with errors="ignore"; a hand edit may not
        text = data.decode("utf-8", "replace")
    messages, title = parse_chat(text, ms, skips)
    updated = ms if closed or ms is None else max(ms, st.st_mtime_ns // 1_000_000)
    directory = os.path.dirname(path)
    resume = f"cd {shlex.quote(directory)} && aider --restore-chat-history"
    if os.path.basename(path) != HISTORY_NAME:
        resume += f" --chat-history-file {shlex.quote(path)}"
    session = SessionInfo(agent=found.agent, session_id=sid, title=title, cwd=directory, started_at=ms,
                          updated_at=updated, message_count=len(messages), resume_command=resume)
    return Unit(session, messages, found.mtime_ns, skips)


def _is_marker(lines: list[str], i: int, strict_user: bool, strict_tool: bool) -> bool:
    line = lines[i]
    return _is_user(line, strict_user) or _tool_start(lines, i, strict_user, strict_tool) \
        or bool(_HEADER_TEXT.match(line))


def _tool_start(lines: list[str], i: int, strict_user: bool, strict_tool: bool) -> bool:
    """Aider's own output starts "> " (a reply's ``>>>>>>> REPLACE`` fence does not). Where the chat
    shows Aider's two-space line ends, a quote line without one starts a tool message only if the
    unprefixed continuation lines of a multi-line message end with one."""
    line = lines[i]
    if not (line.startswith("> ") or line.rstrip() == ">"):
        return False
    return not strict_tool or line.endswith("  ") or _terminator(lines, i + 1, strict_user) is not None


def _terminator(lines: list[str], j: int, strict_user: bool) -> int | None:
    while j < len(lines):
        line = lines[j]
        if _is_user(line, strict_user) or line.startswith("> ") or _HEADER_TEXT.match(line):
            return None
        if line.endswith("  "):
            return j
        j += 1
    return None


def _is_user(line: str, strict: bool) -> bool:
    # Aider ends every line it writes for the user with two spaces (a markdown line break); where a
    # chat shows that, a "####" heading inside a reply is not taken for user input.
    return (line.startswith("#### ") or line.rstrip() == "####") and (not strict or line.endswith("  "))


def parse_chat(text: str, ms: int | None, skips: dict[str, int]) -> tuple[list[Message], str | None]:
    """The messages of one chat and its title: ``####`` lines are the user (consecutive ones one
    message), ``>`` runs Aider's own output, everything else the model's replies."""
    lines = text.replace("\r\n", "\n").split("\n")  # a history edited on Windows
    strict_user = any(line.startswith("#### ") and line.endswith("  ") for line in lines)
    strict_tool = any(line.startswith("> ") and line.endswith("  ") for line in lines)
    out: list[Message] = []
    title: str | None = None
    last_user = ""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if _HEADER_TEXT.match(line):
            i += 1
        elif _is_user(line, strict_user):
            buf = []
            while i < n and _is_user(lines[i], strict_user):
                buf.append(lines[i][4:].strip())
                i += 1
            last_user = "\n".join(buf).strip()
            if last_user:
                out.append(Message("user", "text", last_user, ms))
                title = title or _title(last_user)
        elif _tool_start(lines, i, strict_user, strict_tool):
            run, i = _tool_run(lines, i, strict_user, strict_tool)
            _emit_run(out, run, last_user, ms, skips)
        else:
            buf = []
            while i < n and not _is_marker(lines, i, strict_user, strict_tool):
                buf.append(lines[i])
                i += 1
            reply = "\n".join(buf).strip()
            if reply:
                out.append(Message("assistant", "text", reply, ms))
    return out, title


def _tool_run(lines: list[str], i: int, strict_user: bool, strict_tool: bool) -> tuple[list[str], int]:
    """Consecutive ``>`` messages (blank lines between them allowed), each with the unprefixed
    continuation lines Aider writes for a multi-line message up to its two-space line end."""
    run: list[str] = []
    n = len(lines)
    while i < n:
        if _tool_start(lines, i, strict_user, strict_tool):
            line = lines[i]
            run.append(line[1:].strip())
            i += 1
            if strict_tool and not line.endswith("  "):
                end = _terminator(lines, i, strict_user)
                if end is not None:
                    run.extend(x.rstrip() for x in lines[i : end + 1])
                    i = end + 1
        elif not lines[i].strip():
            j = i
            while j < n and not lines[j].strip():
                j += 1
            if j < n and _tool_start(lines, j, strict_user, strict_tool):
                i = j
            else:
                break
        else:
            break
    return run, i


def _emit_run(out: list[Message], run: list[str], last_user: str, ms: int | None, skips: dict[str, int]) -> None:
    kept = []
    for line in run:
        if _TOKEN_LINE.match(line):
            count_skip(skips, "token-report")  # usage bookkeeping, not conversation
        else:
            kept.append(line)
    text = "\n".join(kept).strip()
    if not text:
        return
    # Output of a shell command or of applying an edit is a tool result; the banner, warnings and
    # confirmations are Aider speaking for itself.
    is_result = last_user.startswith(_SHELL_INPUTS) or any(line.startswith(_EDIT_LINES) for line in kept)
    role: RoleName = "tool" if is_result else "system"
    out.append(Message(role, "tool_result" if is_result else "text", text, ms))


def _title(prompt: str) -> str | None:
    """A prompt's title: a ``/command`` line is not one, except the prompt ``/ask``-style commands carry."""
    first = prompt.splitlines()[0].strip()
    for cmd in _PROMPT_COMMANDS:
        if first == cmd or first.startswith(cmd + " "):
            first = first[len(cmd):].strip()
            break
    else:
        if first.startswith(("/", "!")):
            return None
    if not first:
        return None
    return first if len(first) <= 80 else first[:79].rstrip() + "…"


# --- roots -------------------------------------------------------------------------------------------------
def default_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """None of its own (Aider writes into each repo); ``AIDER_CHAT_HISTORY_FILE``, when absolute, is
    one history file to read."""
    value = env.get("AIDER_CHAT_HISTORY_FILE", "")
    path = Path(value).expanduser() if value else None
    return [Root("aider", str(path))] if path is not None and path.is_absolute() else []


SPEC = AgentSpec(
    name="aider", label="Aider", default_roots=default_roots, discover=discover, read_unit=read_chat,
    expects=f"<repo>/{HISTORY_NAME} (markdown, one '# aider chat started at' header per chat)",
    shaped=_wanted)
