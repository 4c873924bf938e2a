"""Tool arguments as agents send them: coerced leniently, refused with what is valid.

Agents send numbers as strings (``"5"``), booleans as ``"true"``, one string where a list is
asked for, and names in another case. Those are read as meant. Anything else -- an unknown
argument name, a word where a number goes -- is refused with a message naming the valid values:
silently dropping it would let the agent believe a filter applied that did not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aivault.errors import InvalidParams

_INT = re.compile(r"^\s*[+-]?\d+\s*$")
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
        raise InvalidParams(f"{tool} has no argument {', '.join(map(repr, unknown))}; its arguments are "
                            f"{', '.join(known)}")
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
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT.match(value):
        return int(value)
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
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
