"""Hostile request bodies for any JSON API, by class: empty and non-JSON bodies, wrong content
types, deep nesting, non-finite and huge numbers, invalid UTF-8, lone surrogates, repeated
keys, oversize bodies, and wrong types in the fields a route reads (given a valid body)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attempt", "hostile_bodies", "wrong_types"]

_HOLE = "\u0000HOLE\u0000"
_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Attempt:
    kind: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: dict(_JSON))


def _with(valid: dict[str, Any], name: str, literal: str) -> bytes:
    return json.dumps(valid | {name: _HOLE}).replace(json.dumps(_HOLE), literal).encode()


def hostile_bodies(valid: dict[str, Any], rng: random.Random, oversize_bytes: int,
                   ) -> Iterator[Attempt]:
    """Bodies a route must refuse with a 4xx (or, for content types, may serve)."""
    text = json.dumps(valid).encode()
    for body in (b"", b" \n", b"null", b"42", b'"text"', b"[]", b"[1, 2]", b"not json",
                 b"{", b'{"a": }', text[:-1], text + b" trailing", text + text):
        yield Attempt("empty or non-JSON bodies", body)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml",
                         "multipart/form-data; boundary=x", "application/json-seq", "x/y"):
        yield Attempt("wrong content types", text, {"Content-Type": content_type})
    yield Attempt("wrong content types", text, {})
    for depth in (33, 1_000, 100_000):
        yield Attempt("nesting", b"[" * depth + b"]" * depth)
        yield Attempt("nesting", _with(valid, "extra", '{"a":' * depth + "1" + "}" * depth))
    names = list(valid) + ["extra"]
    for literal in ("1e999", "-1e999", "NaN", "Infinity", "9" * 400, "-" + "9" * 5000,
                    "1e308", "0.0000000000000000000000000001"):
        yield Attempt("non-finite and huge numbers", _with(valid, rng.choice(names), literal))
    for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"):
        yield Attempt("invalid UTF-8", text.replace(b"{", b'{"x": "' + bad + b'", ', 1))
        yield Attempt("invalid UTF-8", bad + text)
    for literal in ('"\\ud800"', '"\\udfff tail"'):
        yield Attempt("lone surrogates", _with(valid, rng.choice(names), literal))
    for name in list(valid)[:3]:
        yield Attempt("duplicated keys", text.replace(
            b"{", b"{" + json.dumps(name).encode() + b": " + json.dumps(valid[name]).encode()
            + b", ", 1))
    yield Attempt("oversize", b'{"pad": "' + b"x" * oversize_bytes + b'"}')


def wrong_types(valid: dict[str, Any], fields: dict[str, list[Any]]) -> Iterator[Attempt]:
    """The valid body with one field replaced by each wrong value listed for it."""
    for name, values in fields.items():
        for value in values:
            yield Attempt("wrong types and values", json.dumps(valid | {name: value}).encode())
