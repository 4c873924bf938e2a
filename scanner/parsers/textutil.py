"""Text helpers the agents' readers share: titles, injected context, and stable text hashes.

Like jsonutil, everything here runs on text another program wrote and must never raise on it.
"""

from __future__ import annotations

import zlib


def first_line_title(text: str, limit: int = 80) -> str | None:
    """The first non-blank line of ``text``, stripped and cut to ``limit`` characters."""
    start = 0
    end = len(text)
    while start < end:
        newline = text.find("\n", start)
        stop = end if newline < 0 else newline
        # Only the head of a line can end up in the title; avoid stripping a huge pasted line.
        line = text[start : min(stop, start + limit * 4)].strip()
        if line:
            if len(line) > limit:
                return line[: limit - 1].rstrip() + "…"
            return line
        start = stop + 1
    return None


def nonblank(value: object) -> str | None:
    """``value`` stripped when it is a string with something in it; None otherwise (a database
    column or JSON field of an unexpected type or only white space)."""
    return value.strip() if isinstance(value, str) and value.strip() else None


def opens_with(text: str, prefixes: tuple[str, ...], head: int = 128) -> bool:
    """True when ``text``, past its leading white space, starts with one of ``prefixes``: how the
    agents' own context (instructions, reminders, command echoes) is told from what the user typed
    in a "user" message. Only the first ``head`` characters are looked at (a message may be huge)."""
    start = text[:head]
    if start[:1].isspace():
        start = start.lstrip()
    return start.startswith(prefixes)


def text_crc(text: str) -> int:
    """A 32-bit hash of ``text`` that every process computes alike (unlike ``hash()``), cheap
    enough for every id and block a parser remembers in its state."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def sized_hash(text: str, seed: int = 0) -> int:
    """:func:`text_crc` (continued from ``seed``) with the UTF-8 length in the bits above 32: two
    different texts of one response practically never collide."""
    data = text.encode("utf-8", "surrogatepass")
    return zlib.crc32(data, seed) | (len(data) << 32)


def strip_leading_blocks(text: str, tags: tuple[str, ...]) -> str:
    """``text`` without the complete ``<tag>…</tag>`` blocks of ``tags`` it opens with (context an
    agent puts in front of what the user typed: reminders, git context), and the white space
    around them. An unclosed block is left in place: it may be the user's own text."""
    rest = text
    while True:
        head = rest.lstrip()
        for tag in tags:
            opening = f"<{tag}>"
            if head.startswith(opening):
                end = head.find(f"</{tag}>", len(opening))
                if end >= 0:
                    rest = head[end + len(tag) + 3:]
                    break
        else:
            return rest if rest is text else rest.lstrip()
