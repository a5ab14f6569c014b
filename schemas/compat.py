"""Backward compatibility between two JSON Schemas: can the new one read what the old one wrote?

The check is conservative over the JSON Schema subset pydantic emits (objects, arrays, scalars,
``$ref``/``$defs``, ``anyOf``, ``enum``/``const``, numeric and length bounds, patterns,
formats). Under ``additionalProperties: false`` a field may be added only as optional and never
removed; types may widen (integer → number) but not narrow; enums may grow but not shrink;
bounds may loosen but not tighten; a pattern may not appear or change (whether one pattern
admits everything another does is not decidable here). Each problem names the JSON path where
it was found.
"""

from __future__ import annotations

from typing import Any

__all__ = ["backward_problems"]

Schema = dict[str, Any]

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems")


class _Resolver:
    def __init__(self, root: Schema) -> None:
        self._defs: dict[str, Schema] = root.get("$defs", {})

    def __call__(self, schema: Schema) -> Schema:
        while "$ref" in schema:
            schema = self._defs[schema["$ref"].rsplit("/", 1)[-1]]
        return schema


def _types(schema: Schema) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return set(declared) if isinstance(declared, list) else {declared}


def _values(schema: Schema) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    return schema.get("enum")


class _Checker:
    def __init__(self, new_root: Schema, old_root: Schema) -> None:
        self.new = _Resolver(new_root)
        self.old = _Resolver(old_root)
        self.problems: list[str] = []

    def reads(self, new: Schema, old: Schema, path: str) -> bool:
        """Record why ``new`` cannot accept every document ``old`` accepts; True if it can."""
        before = len(self.problems)
        self._compare(self.new(new), self.old(old), path)
        return len(self.problems) == before

    def _try(self, new: Schema, old: Schema, path: str) -> list[str]:
        """The problems ``new`` would have reading ``old``, without recording them."""
        trial = _Checker.__new__(_Checker)
        trial.new, trial.old, trial.problems = self.new, self.old, []
        trial.reads(new, old, path)
        return trial.problems

    def _compare(self, new: Schema, old: Schema, path: str) -> None:
        if "anyOf" in old:
            for i, branch in enumerate(old["anyOf"]):
                self.reads(new, branch, f"{path}|{i}")
            return
        if "anyOf" in new:
            trials = [(self._differs_in_type(branch, old), self._try(branch, old, path))
                      for branch in new["anyOf"]]
            if all(problems for _, problems in trials):
                # Name what the closest alternative refuses (a bound, say), not just "none fits":
                # one of the same type if there is one, else the one with the fewest problems.
                self.problems.extend(min(trials, key=lambda t: (t[0], len(t[1])))[1])
            return
        self._compare_types(new, old, path)
        self._compare_values(new, old, path)
        self._compare_bounds(new, old, path)
        if new.get("pattern") is not None and new.get("pattern") != old.get("pattern"):
            self.problems.append(f"{path}: pattern {new['pattern']!r} is new (was "
                                 f"{old.get('pattern')!r})")
        if new.get("format") is not None and new.get("format") != old.get("format"):
            self.problems.append(
                f"{path}: format changed from {old.get('format')} to {new['format']}")
        if "object" in (_types(old) or set()) or "properties" in old:
            self._compare_objects(new, old, path)
        if "items" in old and "items" in new:
            self.reads(new["items"], old["items"], f"{path}[]")

    def _differs_in_type(self, new: Schema, old: Schema) -> bool:
        new_types, old_types = _types(self.new(new)), _types(old)
        return new_types is not None and old_types is not None and not new_types & old_types

    def _compare_types(self, new: Schema, old: Schema, path: str) -> None:
        new_types, old_types = _types(new), _types(old)
        if new_types is None:
            return
        if old_types is None:
            self.problems.append(f"{path}: type narrowed from any to {sorted(new_types)}")
            return
        widened = set(new_types) | ({"integer"} if "number" in new_types else set())
        lost = old_types - widened
        if lost:
            self.problems.append(
                f"{path}: type {sorted(lost)} no longer accepted (now {sorted(new_types)})")

    def _compare_values(self, new: Schema, old: Schema, path: str) -> None:
        new_values = _values(new)
        if new_values is None:
            return
        old_values = _values(old)
        if old_values is None:
            self.problems.append(f"{path}: values restricted to {new_values}")
            return
        dropped = [v for v in old_values if v not in new_values]
        if dropped:
            self.problems.append(f"{path}: values {dropped} no longer accepted")

    def _compare_bounds(self, new: Schema, old: Schema, path: str) -> None:
        for key in _LOWER_BOUNDS:
            if key in new and (key not in old or new[key] > old[key]):
                self.problems.append(f"{path}: {key} tightened to {new[key]} (was {old.get(key)})")
        for key in _UPPER_BOUNDS:
            if key in new and (key not in old or new[key] < old[key]):
                self.problems.append(f"{path}: {key} tightened to {new[key]} (was {old.get(key)})")

    def _compare_objects(self, new: Schema, old: Schema, path: str) -> None:
        new_props: Schema = new.get("properties", {})
        old_props: Schema = old.get("properties", {})
        closed = new.get("additionalProperties") is False
        if closed and old.get("additionalProperties") is not False:
            self.problems.append(f"{path}: unknown fields are now refused")
        for name, old_prop in old_props.items():
            if name in new_props:
                self.reads(new_props[name], old_prop, f"{path}.{name}")
            elif closed:
                self.problems.append(f"{path}.{name}: field removed, but old events carry it")
        old_required = set(old.get("required", []))
        for name in new.get("required", []):
            if name not in old_required:
                self.problems.append(f"{path}.{name}: newly required, but old events may lack it")


def backward_problems(new: Schema, old: Schema) -> list[str]:
    """Why ``new`` cannot read every event valid under ``old``; empty when it can."""
    checker = _Checker(new, old)
    checker.reads(new, old, "$")
    return checker.problems
