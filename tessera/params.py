"""Block parameters: declared once per exportable block, validated with clear errors.

A :class:`Param` describes one constructor argument (type, default, range or
choices, help).  :func:`parse_assignments` turns ``NAME=VALUE`` strings from the
command line into typed values; every failure raises :class:`ParamError`, whose
message is one line naming the parameter and what is allowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


class ParamError(ValueError):
    """An illegal parameter value.  ``str(err)`` is one line: ``NAME: what is allowed``."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"parameter {name!r}: {message}")


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    help: str = ""
    kind: type = int                     # int, bool or str
    min: int | None = None
    max: int | None = None
    choices: Sequence[Any] | None = None
    power_of_two: bool = False

    def parse(self, text: str):
        if self.kind is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                value = True
            elif low in ("0", "false", "no", "off"):
                value = False
            else:
                raise ParamError(self.name, f"expected a boolean (0/1/true/false), got {text!r}")
        elif self.kind is int:
            try:
                value = int(text, 0)
            except ValueError:
                raise ParamError(self.name, f"expected an integer, got {text!r}") from None
        else:
            value = text
        self.check(value)
        return value

    def check(self, value):
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ParamError(self.name, f"expected an integer, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ParamError(self.name, f"must be one of {list(self.choices)}, got {value!r}")
        if self.min is not None and value < self.min:
            raise ParamError(self.name, f"must be >= {self.min}{self._range()}, got {value}")
        if self.max is not None and value > self.max:
            raise ParamError(self.name, f"must be <= {self.max}{self._range()}, got {value}")
        if self.power_of_two and (value <= 0 or value & (value - 1)):
            raise ParamError(self.name, f"must be a power of two, got {value}")

    def _range(self):
        if self.min is not None and self.max is not None:
            return f" (allowed {self.min}..{self.max})"
        return ""

    def describe(self) -> str:
        allowed = ""
        if self.choices is not None:
            allowed = f" one of {list(self.choices)}"
        elif self.min is not None or self.max is not None:
            allowed = f" in [{'' if self.min is None else self.min}, {'' if self.max is None else self.max}]"
        if self.power_of_two:
            allowed += " power of two"
        return f"{self.name}={self.default!r}{allowed}  {self.help}".rstrip()


def parse_assignments(params: Sequence[Param], assignments: Sequence[str]) -> dict:
    """``["K0=8", "C0=4"]`` -> typed dict merged over the defaults."""
    by_name = {p.name: p for p in params}
    values = {p.name: p.default for p in params}
    for text in assignments:
        if "=" not in text:
            raise ParamError(text, "expected NAME=VALUE")
        name, _, raw = text.partition("=")
        name = name.strip()
        if name not in by_name:
            raise ParamError(name, f"unknown parameter; known: {', '.join(by_name) or '(none)'}")
        values[name] = by_name[name].parse(raw.strip())
    return values


def check_all(params: Sequence[Param], values: dict) -> dict:
    """Validate a full dict of values (used by the Python API)."""
    by_name = {p.name: p for p in params}
    for name in values:
        if name not in by_name:
            raise ParamError(name, f"unknown parameter; known: {', '.join(by_name) or '(none)'}")
    out = {p.name: p.default for p in params}
    out.update(values)
    for p in params:
        p.check(out[p.name])
    return out


