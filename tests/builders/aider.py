"""Aider chat history markdown (docs/formats.md §6) and a writer that appends chats the way Aider does.

The record functions return the exact text Aider's ``InputOutput.append_chat_history`` writes: the
chat header, ``user_input`` (one ``#### `` line per input line, each ending in a two-space markdown
line break), ``tool_output`` (``> `` on the first line only, a two-space end on the last) and
``ai_output`` (the reply between blank lines).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

HISTORY_NAME = ".aider.chat.history.md"


def header(started: datetime) -> str:
    """A chat's first line: local wall-clock time, no zone (``started`` is taken as local)."""
    return f"\n# aider chat started at {started.strftime('%Y-%m-%d %H:%M:%S')}\n\n"


def user_input(text: str) -> str:
    return "\n#### " + "  \n#### ".join(text.splitlines()) + "  \n"


def tool_output(text: str) -> str:
    return "> " + text.strip() + "  \n"


def ai_output(text: str) -> str:
    return "\n" + text.strip() + "\n\n"


def banner(model: str = "anthropic/claude-sonnet-4-5", files: int = 42) -> str:
    return (tool_output("Aider v0.86.1") + tool_output(f"Main model: {model} with diff edit format")
            + tool_output(f"Git repo: .git with {files} files"))


def tokens(sent: str = "2.1k", received: int = 80) -> str:
    return tool_output(f"Tokens: {sent} sent, {received} received. Cost: $0.01 message, $0.01 session.")


class AiderWriter:
    """Appends chats to ``<repo>/.aider.chat.history.md``; ``offsets`` are the chats' header offsets."""

    def __init__(self, repo: Path, name: str = HISTORY_NAME) -> None:
        self.repo = repo
        self.path = repo / name
        self.offsets: list[int] = []
        repo.mkdir(parents=True, exist_ok=True)

    def _append(self, text: str) -> AiderWriter:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
        return self

    def start(self, started: datetime) -> AiderWriter:
        size = self.path.stat().st_size if self.path.exists() else 0
        self.offsets.append(size + 1)  # the header follows its leading newline
        return self._append(header(started) + banner())

    def user(self, text: str) -> AiderWriter:
        return self._append(user_input(text))

    def tool(self, text: str) -> AiderWriter:
        return self._append(tool_output(text))

    def reply(self, text: str) -> AiderWriter:
        return self._append(ai_output(text))
