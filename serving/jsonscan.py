"""Checks of untrusted JSON that run before any parser recurses into it.

Python's ``json`` recurses once per nesting level (a body nested 100,000 deep raised
``RecursionError``, a 500), and two parsers may disagree on a key given twice in one object
(the first value or the last?). Nesting is measured by :func:`deeper_than` from the brackets
outside strings with byte-level operations only (``translate``, ``split``, ``replace``), so its
cost is a few passes over the bytes at C speed and its memory is bounded by chunking, however
hostile the text. Duplicated keys, text that is not UTF-8 and broken syntax are found by jiter
(pydantic's Rust parser, which stops at 200 levels instead of recursing further), asked to
refuse a repeated key.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, count, islice
from operator import sub
from typing import Any

import jiter

from schemas.errors import RewardstreamError

__all__ = ["DEFAULT_MAX_DEPTH", "JsonProblem", "MalformedJson", "check_document", "deeper_than",
           "load_object", "more_containers_than"]

# Events nest three deep (envelope → payload → sampling); OpenAI requests about five.
DEFAULT_MAX_DEPTH = 32
_CHUNK = 1 << 16
_BRACKETS = bytes.maketrans(b"{}", b"[]")  # one kind of bracket is enough to count depth
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))


@dataclass(frozen=True, slots=True)
class JsonProblem:
    field: str  # the offending key when known, "" for the document as a whole
    reason: str


class MalformedJson(RewardstreamError):
    """A request body that is not one well-formed, bounded JSON object; ``status_code`` is 400."""

    status_code = 400

    def __init__(self, problem: JsonProblem) -> None:
        where = f"{problem.field}: " if problem.field else ""
        super().__init__(where + problem.reason)
        self.problem = problem


def _chunks(data: bytes) -> Iterator[bytes]:
    return (data[start:start + _CHUNK] for start in range(0, len(data), _CHUNK))


def _brackets_outside_strings(data: bytes) -> Iterator[bytes]:
    # Escaped backslashes first, then escaped quotes: what is left of '"' delimits strings.
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    inside = False
    for chunk in _chunks(data.translate(_BRACKETS, _NOT_STRUCTURE)):
        parts = chunk.split(b'"')
        yield b"".join(parts[inside::2])
        inside ^= len(parts) % 2 == 0


def deeper_than(data: bytes, max_depth: int) -> bool:
    """Whether brackets in ``data`` nest deeper than ``max_depth`` (``{}`` is 1), counting none
    inside strings. Malformed text gets an answer too: the parser that follows refuses it."""
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False  # text cannot nest deeper than it opens: the answer for every event
    depth = 0
    for brackets in _brackets_outside_strings(data):
        runs = brackets.split(b"]")  # the openers between consecutive closers
        opened = islice(accumulate(map(len, runs), initial=depth), 1, None)
        if max(map(sub, opened, count())) > max_depth:  # the depth before each closer
            return True
        depth += len(brackets) - 2 * (len(runs) - 1)
    return False


def more_containers_than(data: bytes, limit: int) -> bool:
    """Whether ``data`` opens more than ``limit`` objects and arrays outside strings: a bound on
    the values parsing it would build (an OTLP/JSON export of a million empty spans parses into
    gigabytes), found without building any."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    return sum(brackets.count(b"[") for brackets in _brackets_outside_strings(data)) > limit


def check_document(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> JsonProblem | None:
    """The first problem of one JSON document, or None: nesting deeper than ``max_depth``, text
    that is not UTF-8 or not JSON, a key given twice in one object (compared after unescaping,
    so ``"a"`` and ``"\\u0061"`` are one key)."""
    if deeper_than(data, max_depth):
        return JsonProblem("", f"nested deeper than {max_depth} levels")
    try:
        jiter.from_json(data, catch_duplicate_keys=True)
    except ValueError as exc:
        return _problem(data, str(exc))
    return None


def _problem(data: bytes, message: str) -> JsonProblem:
    """What a jiter error means for the client (decoding again only once parsing failed)."""
    if message.startswith("Detected duplicate key "):
        key = message.split('"')[1] if message.count('"') >= 2 else ""
        where = message.rsplit(" at ", 1)[-1]
        return JsonProblem(key[:64], f"the key appears twice in one object (at {where}); "
                                     "parsers disagree on which value wins")
    try:
        data.decode()
    except UnicodeDecodeError as exc:
        return JsonProblem("", f"the text is not UTF-8 (byte {exc.start}: {exc.reason})")
    return JsonProblem("", f"not valid JSON: {message}")


def _refuse_non_finite(value: Any) -> None:
    stack = [value]
    while stack:  # iterative: the depth was checked, but nothing here recurses either way
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise MalformedJson(JsonProblem("", "a number is too large to be finite"))
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def load_object(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """One JSON object from a request body, or :class:`MalformedJson` saying what is wrong:
    empty, too deep, not UTF-8, not JSON, a repeated key, a non-finite number, not an object."""
    if not data.strip():
        raise MalformedJson(JsonProblem("", "the body is empty; send a JSON object"))
    if deeper_than(data, max_depth):
        raise MalformedJson(JsonProblem("", f"nested deeper than {max_depth} levels"))
    try:
        value = jiter.from_json(data, catch_duplicate_keys=True, allow_inf_nan=False)
    except ValueError as exc:
        raise MalformedJson(_problem(data, str(exc))) from None
    if not isinstance(value, dict):
        raise MalformedJson(JsonProblem("", f"the body must be a JSON object, not "
                                            f"{type(value).__name__}"))
    _refuse_non_finite(value)
    return value
