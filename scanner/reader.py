"""Reading the complete lines appended to a file since a byte offset, in bounded memory.

Only lines that end with a newline are returned: a writer may be in the middle of the last
line, so it is left for the next pass (its bytes are not consumed; scanner.scan takes a settled
one). A line longer than ``MAX_LINE_BYTES`` is skipped by streaming over it, never held whole;
its end is still reported (as ``None``), so the offset moves past it and it is counted once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

BLOCK_BYTES = 1 << 20
# Large enough for any real transcript record (a 10 MB pasted log parses), small enough that
# a runaway line cannot exhaust memory.
MAX_LINE_BYTES = 64 << 20
# How much of a file's beginning identifies it: a file rewritten in place with other content
# changes its first bytes even when its inode and size do not betray it (sources.head_fingerprint).
HEAD_BYTES = 4096


@dataclass(slots=True)
class ReadStats:
    oversized: int = 0  # lines skipped for exceeding MAX_LINE_BYTES


def iter_lines(fd: int, start: int, end: int, stats: ReadStats) -> Iterator[tuple[bytes | None, int]]:
    """(line without its newline, offset just after the newline) for complete lines in [start, end).

    An oversized line (counted in ``stats``) comes as ``(None, offset after its newline)``.
    """
    pos = start
    buf = bytearray()
    skipping = False
    while pos < end:
        want = min(BLOCK_BYTES, end - pos)
        block = os.pread(fd, want, pos)
        if not block:
            break
        pos += len(block)
        lo = 0
        while True:
            nl = block.find(b"\n", lo)
            if nl == -1:
                if skipping:
                    break
                buf += block[lo:]
                if len(buf) > MAX_LINE_BYTES:
                    skipping = True
                    buf.clear()
                break
            line_end = pos - len(block) + nl + 1
            if skipping:
                # Counted when it ends: an unfinished one is seen again by every pass until then.
                skipping = False
                stats.oversized += 1
                yield None, line_end
            elif buf:
                if len(buf) + nl - lo > MAX_LINE_BYTES:
                    stats.oversized += 1
                    buf.clear()
                    yield None, line_end
                else:
                    buf += block[lo:nl]
                    yield bytes(buf), line_end
                    buf.clear()
            else:
                yield block[lo:nl], line_end
            lo = nl + 1
