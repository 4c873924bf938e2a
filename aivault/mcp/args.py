"""Tool arguments as agents send them: coerced leniently, refused with what is valid.

Agents send numbers as strings (``"5"``), booleans as ``"true"``, one string where a list is
asked for, and names in another case. Those are read as meant. Anything else -- an unknown
argument name, a word where a number goes -- is refused with a message naming the valid values:
silently dropping it would let the agent believe a filter applied that did not.

A whole number outside an argument's range is clamped into it with a note, unless it is past 64
bits (a digit string of any length, a JSON number, 1e300): no count, size or position is that big,
so it is refused. A refusal repeats at most ``RPC_ECHO_MAX_CHARS`` of a value or a name the agent
sent, and names at most three unknown arguments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aivault.errors import InvalidParams, clip

_INT = re.compile(r"^\s*[+-]?\d+\s*$")
# The largest magnitude of a number argument, and its digits (2**63 - 1 has 19).
_INT_MAX = 2**63 - 1
_INT_MAX_DIGITS = 19
# Unknown argument names quoted in the refusal; the others are counted.
_UNKNOWN_SHOWN = 3
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off", ""})


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument: its JSON-schema type, a one-line description, and the rule that reads it."""

    name: str
    kind: str  # string | integer | boolean | array | enum
    description: str
    required: bool = False
    low: int = 0
    high: int = 0
    default: Any = None
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.kind == "enum":
            out = {"type": "string", "enum": list(self.choices)}
        elif self.kind == "array":
            items: dict[str, Any] = {"type": "string"}
            if self.choices:
                items["enum"] = list(self.choices)
            out = {"type": "array", "items": items}
        elif self.kind == "integer":
            out = {"type": "integer", "minimum": self.low, "maximum": self.high}
        else:
            out = {"type": self.kind}
        if self.default is not None:
            out["default"] = self.default
        out["description"] = self.description
        return out


@dataclass(slots=True)
class Parsed:
    """The arguments read, and the notes an agent should see (a value clamped into range)."""

    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def input_schema(args: tuple[Arg, ...]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {a.name: a.schema() for a in args}}
    required = [a.name for a in args if a.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def parse_args(tool: str, args: tuple[Arg, ...], raw: dict[str, Any] | None) -> Parsed:
    """Read ``raw`` by ``args``; InvalidParams names the argument and what it accepts."""
    raw = dict(raw or {})
    known = {a.name: a for a in args}
    unknown = sorted(k for k in raw if k not in known)
    if unknown:
        names = [repr(clip(k)) for k in unknown[:_UNKNOWN_SHOWN]]
        if len(unknown) > _UNKNOWN_SHOWN:
            names.append(f"{len(unknown) - _UNKNOWN_SHOWN} more")
        raise InvalidParams(f"{tool} has no argument {', '.join(names)}; its arguments are {', '.join(known)}")
    out = Parsed()
    for a in args:
        value = raw.get(a.name)
        if value is None:
            if a.required:
                raise InvalidParams(f"{tool} needs {a.name}: {a.description}")
            if a.default is not None:
                out.values[a.name] = a.default
            continue
        out.values[a.name] = _read(tool, a, value, out.notes)
    return out


def _read(tool: str, a: Arg, value: Any, notes: list[str]) -> Any:
    where = f"{tool}: {a.name}"
    if a.kind == "integer":
        n = _integer(value)
        if n is None:
            raise InvalidParams(f"{where} must be a whole number from {a.low} to {a.high}, got {_show(value)}")
        if not a.low <= n <= a.high:
            clamped = max(a.low, min(a.high, n))
            notes.append(f"{a.name} {n} is outside {a.low}-{a.high}; used {clamped}")
            n = clamped
        return n
    if a.kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise InvalidParams(f"{where} must be true or false, got {_show(value)}")
    if a.kind == "enum":
        return _choice(where, a, value)
    if a.kind == "array":
        items = _list(value)
        if items is None:
            raise InvalidParams(f"{where} must be a list of strings (or one string), got {_show(value)}")
        return [_choice(where, a, v) for v in items] if a.choices else items
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise InvalidParams(f"{where} must be a string, got {_show(value)}")


def _integer(value: Any) -> int | None:
    """A whole number of at most 64 bits (a bigger one is no count, size or position: refused, not clamped)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and _INT.match(value):
        text = value.strip()
        if len(text.lstrip("+-")) > _INT_MAX_DIGITS:  # before int(): past 4,300 digits it raises
            return None
        value = int(text)
    if isinstance(value, int) and -_INT_MAX <= value <= _INT_MAX:
        return value
    return None


def _list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                return None
        else:
            return [p.strip() for p in text.split(",") if p.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return None


def _choice(where: str, a: Arg, value: Any) -> str:
    if isinstance(value, str):
        low = value.strip().lower()
        for c in a.choices:
            if c.lower() == low:
                return c
    raise InvalidParams(f"{where} must be one of {', '.join(a.choices)}, got {_show(value)}")


def _show(value: Any) -> str:
    """The value as the agent sent it, at most RPC_ECHO_MAX_CHARS of it."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"  # str() of it may be long, or refused past 4,300 digits
    return clip(json.dumps(value, ensure_ascii=False, default=str))
