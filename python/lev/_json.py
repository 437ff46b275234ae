"""JSON read the way serde_json reads lev's Rust types, so that both
verifiers accept and refuse the same bytes.

What serde_json does, and this module with it:

- A struct is read from a JSON object, or from an array of its fields in
  declaration order (a field with a default may be left off the end).
- A strict struct (`deny_unknown_fields`) refuses a field it does not know;
  a lenient one ignores it, and never looks inside its value (any type, any
  depth, any string). A known field given twice is refused either way.
- Every key is read, so a key holding a lone surrogate (or, from bytes, text
  that is not UTF-8) is refused everywhere; in a string value only when the
  value is read.
- `-0`, and integers outside the 64-bit ranges, are floating point numbers.

One difference is left: a value nested deeper than Python's own parser goes
(about a thousand levels) is refused even where serde_json ignores it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Reader = Callable[[Any], Any]

# What Rust's `str::trim` removes: characters with the White_Space property.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# serde_json's recursion limit, as `check_strict_json` meets it.
MAX_DEPTH = 127


class JsonError(ValueError):
    """Text that is not JSON, or JSON that is not the type it should be."""


class Obj(dict[str, Any]):
    """A JSON object as parsed here; `dups` names the keys it held more than once."""

    dups: frozenset[str] = frozenset()


def _pairs(pairs: list[tuple[str, Any]]) -> Obj:
    out = Obj()
    dups: set[str] = set()
    for k, v in pairs:
        if k in out:
            dups.add(k)
        else:
            out[k] = v
    if dups:
        out.dups = frozenset(dups)
    return out


def _int(text: str) -> int | float:
    if text == "-0":
        return -0.0
    if len(text) <= 21:
        n = int(text)
        if -(2**63) <= n < 2**64:
            return n
    return float(text)


def _constant(name: str) -> Any:
    raise JsonError(f"{name} is not JSON")


def load(data: str | bytes) -> Any:
    """Parse JSON text. Bytes that are not UTF-8 parse (as lone surrogates)
    and are refused where read, as serde_json's `from_slice` does."""
    text = bytes(data).decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_int=_int, parse_constant=_constant)
    except RecursionError:
        raise JsonError("nested too deeply") from None
    except ValueError as e:
        raise JsonError(str(e)) from None


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean `{str(v).lower()}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return "floating point"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "sequence"
    if isinstance(v, Mapping):
        return "map"
    return type(v).__name__


def _valid(s: Any) -> str:
    if not isinstance(s, str):
        raise JsonError(f"invalid type: {_kind(s)}, expected a string")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonError("a string that is not valid Unicode (a lone surrogate)") from None
    return s


def text(v: Any) -> str:
    """A string."""
    return _valid(v)


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise JsonError(f"invalid type: {_kind(v)}, expected a boolean")
    return v


def u32(v: Any) -> int:
    if type(v) is not int:
        raise JsonError(f"invalid type: {_kind(v)}, expected u32")
    if not 0 <= v <= 0xFFFF_FFFF:
        raise JsonError(f"invalid value: integer `{v}`, expected u32")
    return v


def optional(read: Reader) -> Reader:
    """`null` or what `read` reads."""
    return lambda v: None if v is None else read(v)


def seq(read: Reader) -> Reader:
    """An array of what `read` reads."""

    def run(v: Any) -> list[Any]:
        if not isinstance(v, list):
            raise JsonError(f"invalid type: {_kind(v)}, expected a sequence")
        return [read(x) for x in v]

    return run


@dataclass(frozen=True)
class Field:
    """A struct field: its JSON name, its reader, and whether it may be
    absent (`#[serde(default)]`), then `default`."""

    name: str
    read: Reader
    optional: bool = False
    default: Any = None


def struct(name: str, fields: Sequence[Field], *, strict: bool) -> Callable[[Any], dict[str, Any]]:
    """A reader of the struct `name`: a dict of every field, by JSON name."""
    by_name = {f.name: f for f in fields}
    expected = f"struct {name} with {len(fields)} elements"

    def from_map(v: Mapping[str, Any]) -> dict[str, Any]:
        dups: frozenset[str] = getattr(v, "dups", frozenset())
        out: dict[str, Any] = {}
        for key, x in v.items():
            _valid(key)
            f = by_name.get(key)
            if f is None:
                if strict:
                    raise JsonError(f"unknown field `{key}`")
                continue
            if key in dups:
                raise JsonError(f"duplicate field `{key}`")
            try:
                out[key] = f.read(x)
            except JsonError as e:
                raise JsonError(f"{key}: {e}") from None
        for f in fields:
            if f.name not in out:
                if not f.optional:
                    raise JsonError(f"missing field `{f.name}`")
                out[f.name] = f.default
        return out

    def from_seq(v: list[Any]) -> dict[str, Any]:
        if len(v) > len(fields):
            raise JsonError(f"invalid length {len(v)}, expected {expected}")
        out: dict[str, Any] = {}
        for i, f in enumerate(fields):
            if i < len(v):
                try:
                    out[f.name] = f.read(v[i])
                except JsonError as e:
                    raise JsonError(f"{f.name}: {e}") from None
            elif f.optional:
                out[f.name] = f.default
            else:
                raise JsonError(f"invalid length {len(v)}, expected {expected}")
        return out

    def read(v: Any) -> dict[str, Any]:
        if isinstance(v, Mapping):
            return from_map(v)
        if isinstance(v, list):
            return from_seq(v)
        raise JsonError(f"invalid type: {_kind(v)}, expected {expected}")

    return read


def check_strict(value: Any) -> None:
    """What lev's `check_strict_json` refuses in a parsed value: a key held
    twice, a lone surrogate, a number out of range, nesting past serde_json's
    limit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            _valid(v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise JsonError("number out of range")
        elif isinstance(v, list) or isinstance(v, Mapping):
            if depth > MAX_DEPTH:
                raise JsonError("recursion limit exceeded")
            if isinstance(v, Mapping):
                dups: frozenset[str] = getattr(v, "dups", frozenset())
                if dups:
                    raise JsonError(f"duplicate key {sorted(dups)[0]!r}")
                for k, x in v.items():
                    _valid(k)
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
