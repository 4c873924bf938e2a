"""Messages in OpenAI's chat-completions shape, as several agents store them (docs/formats.md §19, §23).

Hermes Agent's ``state.db`` rows and Devin CLI's ``message_nodes`` both keep a conversation as
``{role, content, tool_calls?, tool_call_id?}`` records: ``content`` is a string or a list of parts
(``{"type": "text", "text": …}``, images, …) and each tool call is
``{id, type: "function", function: {name, arguments}}`` whose ``arguments`` is the model's JSON text
(or, in some writers, an object, or the call is flattened to ``{id, name, arguments|input}``). What
this module owns is turning those into the normalized texts; which record becomes which message is
each agent's reader's business.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from aivault.scanner.parsers.base import count_skip
from aivault.scanner.parsers.jsonutil import as_object, compact_json, loads_line

TEXT_PART_TYPES: Final = frozenset({"text", "input_text", "output_text"})
ATTACHMENT_PART_TYPES: Final = frozenset({"image_url", "image", "input_image", "input_audio", "audio", "file",
                                          "input_file", "document"})
THINKING_PART_TYPES: Final = frozenset({"thinking", "reasoning"})


def arguments_text(arguments: object) -> str:
    """Tool arguments as compact JSON: an object, or a JSON string of one; a string that does not
    parse is the model's own text and kept as it is."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        if not arguments.strip():
            return "{}"
        parsed = loads_line(arguments.encode("utf-8", "surrogatepass"))
        return compact_json(parsed) if parsed is not None else arguments
    return compact_json(arguments)


def tool_call_text(call: object) -> str | None:
    """``"<name> <arguments>"`` of one tool call (nested ``function`` or flattened), None when the
    call names no tool."""
    obj = as_object(call)
    function = as_object(obj.get("function"))
    name = function.get("name") if isinstance(function.get("name"), str) else obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    if "arguments" in function:
        args: object = function.get("arguments")
    elif "arguments" in obj:
        args = obj.get("arguments")
    else:
        args = obj.get("input")
    return f"{name} {arguments_text(args)}"


def tool_calls(value: object, skips: dict[str, int]) -> Iterator[str]:
    """The texts of a ``tool_calls`` value: a list, or a JSON string of one (how SQLite stores it);
    a call without a name, or a value of another shape, is counted ``malformed-tool-call``."""
    if value is None or value == "":
        return
    if isinstance(value, str | bytes):
        value = loads_line(value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass"))
    if not isinstance(value, list):
        count_skip(skips, "malformed-tool-call")
        return
    for call in value:
        text = tool_call_text(call)
        if text is None:
            count_skip(skips, "malformed-tool-call")
        else:
            yield text


def content_texts(content: object, skips: dict[str, int]) -> tuple[list[str], list[str]]:
    """(text parts, thinking parts) of a ``content`` value: a string, or a list of parts. Images and
    other attachments are counted ``attachment:<type>``, unknown parts ``unknown_part:<type>``."""
    if isinstance(content, str):
        return ([content] if content.strip() else []), []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return [], []
    texts: list[str] = []
    thinking: list[str] = []
    for part in content:
        if isinstance(part, str):
            if part.strip():
                texts.append(part)
            continue
        obj = as_object(part)
        ptype = obj.get("type")
        if ptype in TEXT_PART_TYPES or (ptype is None and isinstance(obj.get("text"), str)):
            text = obj.get("text")
            if isinstance(text, str) and text.strip():
                texts.append(text)
        elif ptype in THINKING_PART_TYPES:
            text = obj.get("thinking") if isinstance(obj.get("thinking"), str) else obj.get("text")
            if isinstance(text, str) and text.strip():
                thinking.append(text)
        elif isinstance(ptype, str) and ptype in ATTACHMENT_PART_TYPES:
            count_skip(skips, "attachment", ptype)
        else:
            count_skip(skips, "unknown_part", str(ptype) if ptype is not None else "(none)")
    return texts, thinking


def joined(parts: list[str]) -> str:
    """Text parts of one message as one text (each part is a paragraph)."""
    return "\n\n".join(parts) if len(parts) > 1 else (parts[0] if parts else "")
