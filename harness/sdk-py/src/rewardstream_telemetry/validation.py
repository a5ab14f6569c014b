"""The subset of JSON Schema the published event schemas use, a validator for it, and the
filling of defaults.

:func:`unsupported` names any other keyword, so a schema the validator cannot enforce is refused
where the copies are made (and by the SDK's tests) instead of passing events unchecked.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["SUPPORTED_FORMATS", "SUPPORTED_KEYWORDS", "control_character_problem",
           "parse_date_time", "unsupported", "validate", "with_defaults"]

Schema = Mapping[str, Any]

SUPPORTED_KEYWORDS = frozenset({
    "$defs", "$ref", "additionalProperties", "anyOf", "const", "default", "description", "enum",
    "exclusiveMaximum", "exclusiveMinimum", "format", "items", "maxItems", "maxLength", "maximum",
    "minItems", "minLength", "minimum", "pattern", "properties", "required", "title", "type",
})
SUPPORTED_FORMATS = frozenset({"uuid", "date-time"})
_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
# RFC 3339 with a zone: the ingest's models refuse times without one.
_DATE_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", re.I)


# Ids, names and paths become Kafka keys, reward keys, file names and log lines: a control
# character (C0, DEL, C1: a NUL, a newline, an escape sequence) has no place in any of them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def control_character_problem(text: str) -> str | None:
    """Why ``text`` cannot be an id or name (it holds a control character), or None."""
    found = _CONTROL.search(text)
    if found is None:
        return None
    return (f"contains the control character U+{ord(found.group()):04X} at index "
            f"{found.start()}; ids and names must be printable")


def parse_date_time(text: str) -> datetime | None:
    """An RFC 3339 date-time with a zone as an aware datetime; None when ``text`` is not one."""
    match = _DATE_TIME.match(text)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    # Python 3.10 reads only 3 or 6 digits of a second's fraction, and no "Z".
    micros = ((fraction or "") + "000000")[:6]
    try:
        return datetime.fromisoformat(f"{whole}.{micros}" + ("+00:00" if zone in "Zz" else zone))
    except ValueError:
        return None


def unsupported(schema: Schema, path: str = "") -> list[str]:
    """Every keyword, type or format in ``schema`` the validator does not enforce, with where."""
    where = path or "(root)"
    found = [f"keyword {key!r} at {where}" for key in schema if key not in SUPPORTED_KEYWORDS]
    if "type" in schema and schema["type"] not in _TYPES:
        found.append(f"type {schema['type']!r} at {where}")
    if "format" in schema and schema["format"] not in SUPPORTED_FORMATS:
        found.append(f"format {schema['format']!r} at {where}")
    children = [*((f"$defs.{k}", v) for k, v in schema.get("$defs", {}).items()),
                *schema.get("properties", {}).items(),
                *((f"anyOf.{i}", v) for i, v in enumerate(schema.get("anyOf", []))),
                *((("items", schema["items"]),) if "items" in schema else ())]
    for name, child in children:
        found += unsupported(child, f"{path}.{name}" if path else name)
    return found


def _resolve(schema: Schema, root: Schema) -> Schema:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    target = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
    if target is None:
        raise ValueError(f"schema reference {ref} is not defined")
    return target


def _describe(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (int, float, str)):
        return repr(value) if isinstance(value, str) else str(value)
    return f"a {type(value).__name__}"


def _type_problem(kind: str, value: Any) -> str | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    checks = {
        "string": (isinstance(value, str), "must be a string"),
        "boolean": (isinstance(value, bool), "must be a boolean"),
        "null": (value is None, "must be null"),
        "integer": (is_number and (isinstance(value, int) or float(value).is_integer()),
                    "must be an integer"),
        "number": (is_number and (isinstance(value, int) or math.isfinite(value)),
                   "must be a finite number"),
        "array": (isinstance(value, (list, tuple)), "must be an array"),
        "object": (isinstance(value, Mapping), "must be an object"),
    }
    ok, problem = checks.get(kind, (False, f"has an unsupported schema type {kind}"))
    return None if ok else problem


def _characters(n: int) -> str:
    return "1 character" if n == 1 else f"{n} characters"


def _bound_problem(schema: Schema, value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for keyword, fails, words in (("minimum", operator.lt, ">="),
                                      ("maximum", operator.gt, "<="),
                                      ("exclusiveMinimum", operator.le, ">"),
                                      ("exclusiveMaximum", operator.ge, "<")):
            if keyword in schema and fails(value, schema[keyword]):
                return f"must be {words} {schema[keyword]}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"must have at least {_characters(schema['minLength'])}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"must have at most {_characters(schema['maxLength'])}"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"must match {schema['pattern']}"
        if schema.get("format") == "uuid" and not _UUID.match(value):
            return "must be a UUID"
        if schema.get("format") == "date-time" and parse_date_time(value) is None:
            return "must be an ISO-8601 date-time with a time zone"
    if isinstance(value, (list, tuple)):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"must have at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"must have at most {schema['maxItems']} items"
    return None


def _join(path: str, key: str | int) -> str:
    return str(key) if not path else f"{path}.{key}"


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def validate(schema: Schema, value: Any, root: Schema | None = None, path: str = "") -> str | None:
    """The first problem of ``value`` against ``schema`` as ``"field.path: reason"`` (the path
    style of the ingest API's answers, e.g. ``payload.behaviour_logprobs.3``), or None."""
    root = schema if root is None else root
    here = _resolve(schema, root)

    def at(reason: str) -> str:
        return f"{path or '(event)'}: {reason}"

    if "anyOf" in here:
        problems = [validate(branch, value, root, path) for branch in here["anyOf"]]
        if None in problems:
            return None
        # A null fails every branch but the null one: report the branch that fits its kind.
        if value is None:
            return at("must not be null")
        non_null = [p for b, p in zip(here["anyOf"], problems, strict=True)
                    if b.get("type") != "null"]
        return (non_null or problems)[0]
    if "const" in here and not _same(value, here["const"]):
        return at(f"must be {_describe(here['const'])}")
    if "enum" in here and not any(_same(value, option) for option in here["enum"]):
        options = ", ".join(_describe(option) for option in here["enum"])
        return at(f"must be one of {options}, got {_describe(value)}")
    wrong_type = _type_problem(here["type"], value) if "type" in here else None
    if wrong_type is not None:
        return at(f"{wrong_type}, got {_describe(value)}")
    out_of_bounds = _bound_problem(here, value)
    if out_of_bounds is not None:
        return at(out_of_bounds)
    if isinstance(value, (list, tuple)) and "items" in here:
        for index, item in enumerate(value):
            problem = validate(here["items"], item, root, _join(path, index))
            if problem is not None:
                return problem
    if isinstance(value, Mapping) and "properties" in here:
        return _object_problem(here, value, root, path)
    return None


def _object_problem(here: Schema, value: Mapping[str, Any], root: Schema,
                    path: str) -> str | None:
    properties = here["properties"]
    for name in here.get("required", []):
        if name not in value:
            return f"{_join(path, name)}: is required"
    for name, item in value.items():
        if name not in properties:
            if here.get("additionalProperties") is False:
                return f"{_join(path, name)}: unknown field"
            continue
        problem = validate(properties[name], item, root, _join(path, name))
        if problem is not None:
            return problem
    return None


def with_defaults(schema: Schema, value: Any, root: Schema | None = None) -> Any:
    """A copy of ``value`` with every absent property that has a default set to it,
    recursively (into the object branch of an ``anyOf``)."""
    root = schema if root is None else root
    here = _resolve(schema, root)
    if not isinstance(value, Mapping):
        return value
    branches = [_resolve(branch, root) for branch in here.get("anyOf", [])]
    object_schema = next((b for b in branches if "properties" in b), here)
    if "properties" not in object_schema:
        return value
    filled = dict(value)
    for name, prop in object_schema["properties"].items():
        if name not in filled and "default" in prop:
            filled[name] = _copy(prop["default"])
        if name in filled:
            filled[name] = with_defaults(prop, filled[name], root)
    return filled


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
