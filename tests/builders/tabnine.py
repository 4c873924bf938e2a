"""Tabnine CLI sessions (docs/formats.md §29): Gemini CLI's records under ``~/.tabnine/agent``.

Tabnine CLI writes Gemini CLI's chat log (tests/builders/gemini.py) with its own assistant type
(``tabnine``) and, as its bundle's recorder does, a tool call completed by a second record under a
new message id (``split_tool``). ``TabnineWriter`` lays a session out as under ``~/.tabnine/agent``
(``tmp/<slug>/chats/session-….jsonl``; the folder from ``directories`` when no ``projects.json``).
"""

from __future__ import annotations

from typing import Any, Self

from tests.builders.gemini import GeminiWriter, gemini_message

ASSISTANT_TYPE = "tabnine"
MODEL = "tabnine-agent"


def call(call_id: str, name: str, *, args: dict[str, Any] | None = None, result: str | None = None) -> dict[str, Any]:
    """A ``toolCalls[]`` entry as the fixture of the 0.25.1 bundle writes it: the arguments when the
    call is made, the result (a plain string) when it returns."""
    d: dict[str, Any] = {"id": call_id, "name": name}
    if args is not None:
        d["args"] = args
    if result is not None:
        d["result"] = result
    return d


class TabnineWriter(GeminiWriter):
    """A Gemini writer whose model turns are ``tabnine`` records (pass ``<home>/.tabnine/agent``)."""

    ASSISTANT_TYPE = ASSISTANT_TYPE
    MODEL = MODEL

    def split_tool(self, name: str, args: dict[str, Any], output: str) -> Self:
        """A call in one record and its result in the next, under another message id."""
        call_id = f"call-{self._n + 1}"
        self.write(gemini_message(self.next_id(), self._ts(), "", tool_calls=[call(call_id, name, args=args)],
                                  model=MODEL, kind=ASSISTANT_TYPE))
        self.write(gemini_message(self.next_id(), self._ts(), "", tool_calls=[call(call_id, name, result=output)],
                                  model=MODEL, kind=ASSISTANT_TYPE))
        return self
