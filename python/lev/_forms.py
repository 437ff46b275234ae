"""The `form` kind: a flat JSON Schema (MCP elicitation's subset) from a
dict, a dataclass or a pydantic model, and the answer read back as that type.

The server checks both the schema (a keyword outside the subset is a 422
naming it) and the answer (a 422 naming each failing property); this module
only builds the schema and types the answer.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

T = TypeVar("T")

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _is_pydantic(shape: Any) -> bool:
    return (
        isinstance(shape, type)
        and hasattr(shape, "model_json_schema")
        and hasattr(shape, "model_validate")
    )


def _property(name: str, hint: Any) -> dict[str, Any]:
    if get_origin(hint) is Literal:
        values = list(get_args(hint))
        if not values or not all(isinstance(v, str) for v in values):
            raise TypeError(f"{name}: a Literal field of a form holds strings only")
        return {"type": "string", "enum": values}
    kind = _SCALARS.get(hint)
    if kind is None:
        raise TypeError(
            f"{name}: a form field is str, int, float, bool or a Literal of strings, found {hint!r}"
        )
    return {"type": kind}


def _dataclass_schema(shape: type) -> dict[str, Any]:
    hints = typing.get_type_hints(shape)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(shape):
        prop = _property(f.name, hints[f.name])
        prop["title"] = f.name.replace("_", " ").capitalize()
        for key in ("description", "format", "minimum", "maximum", "minLength", "maxLength"):
            if key in f.metadata:
                prop[key] = f.metadata[key]
        if f.default is not dataclasses.MISSING:
            prop["default"] = f.default
        else:
            required.append(f.name)
        properties[f.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _pydantic_schema(shape: Any) -> dict[str, Any]:
    raw = shape.model_json_schema()
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    for key in ("title", "description", "required"):
        if key in raw:
            schema[key] = raw[key]
    for name, prop in (raw.get("properties") or {}).items():
        # pydantic writes a Literal of one string as `const`: the subset has
        # an enum of one for that.
        prop = dict(prop)
        if "const" in prop:
            prop["enum"] = [prop.pop("const")]
            prop.setdefault("type", "string")
        schema["properties"][name] = prop
    return schema


def schema_of(shape: Any) -> dict[str, Any]:
    """The form schema for `shape`: a dict (used as given), a dataclass, or a
    pydantic model class (its `model_json_schema()`, kept to the subset)."""
    if isinstance(shape, Mapping):
        return dict(shape)
    if dataclasses.is_dataclass(shape) and isinstance(shape, type):
        return _dataclass_schema(shape)
    if _is_pydantic(shape):
        return _pydantic_schema(shape)
    raise TypeError(
        f"a form's shape is a JSON Schema dict, a dataclass or a pydantic model, found {shape!r}"
    )


def typed(shape: Any, fields: Mapping[str, Any]) -> Any:
    """The answer as `shape` says: a pydantic model validated, a dataclass
    built, else the dict itself."""
    if _is_pydantic(shape):
        return shape.model_validate(dict(fields))
    if dataclasses.is_dataclass(shape) and isinstance(shape, type):
        hints = typing.get_type_hints(shape)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(shape):
            if f.name in fields:
                v = fields[f.name]
                # JSON has one number type: an answer of 3 for a float is 3.0.
                values[f.name] = float(v) if hints[f.name] is float and isinstance(v, int) else v
        return shape(**values)
    return dict(fields)


def form_question(prompt: str, shape: Any) -> dict[str, Any]:
    """The `form` kind for `prompt` and `shape`."""
    return {"type": "form", "prompt": prompt, "schema": schema_of(shape)}
