"""Checks of untrusted JSON before parsing: exact nesting depth without recursion, repeated
keys, UTF-8, non-finite numbers; hostile inputs take bounded memory."""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest

from serving.jsonscan import MalformedJson, check_document, deeper_than, load_object


def _reference_depth(text: bytes) -> int:
    """Depth by walking every byte: slow, obviously right."""
    depth = deepest = 0
    inside = escaped = False
    for byte in text:
        char = chr(byte)
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _random_document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 45 or roll < 0.3:
        return rng.choice([1, 2.5, None, True, 'a]"[\\', "x{", '\\\\"', "}}", ""])
    if roll < 0.65:
        return [_random_document(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f'k{i}"[': _random_document(rng, depth + 1) for i in range(rng.randint(0, 3))}


def test_depth_matches_a_byte_by_byte_walk_on_random_documents() -> None:
    rng = random.Random(7)
    for _ in range(600):
        text = json.dumps(_random_document(rng)).encode()
        depth = _reference_depth(text)
        for limit in (max(depth - 1, 0), depth, depth + 1):
            assert deeper_than(text, limit) == (depth > limit), (text, limit)


def test_brackets_inside_strings_do_not_count() -> None:
    assert not deeper_than(b'{"a": "' + b"[" * 100 + b'"}', 2)
    assert not deeper_than(b'{"a": "\\"' + b"{" * 100 + b'"}', 2)
    assert deeper_than(b'{"a": "\\\\"' + b", " + b"[" * 3 + b"]" * 3 + b"}", 3)


@pytest.mark.parametrize("text, deep", [
    (b"[" * 500_000 + b"]" * 500_000, True),
    (b"[" + b"[]," * 100_000 + b"[]]" + b"]" * 40, False),
    (b'["' + b'\\"[' * 340_000 + b'"]', False),
    (b"[" + b'"",' * 3_400_000 + b'""]', False),
])
def test_hostile_text_is_measured_in_bounded_memory(text: bytes, deep: bool) -> None:
    tracemalloc.start()
    assert deeper_than(text, 32) == deep
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Chunked: about a MiB whatever the size (splitting it whole would take hundreds).
    assert peak < 8 << 20, peak


@pytest.mark.parametrize("text, field, words", [
    (b'{"a": 1, "a": 2}', "a", "appears twice"),
    (b'{"p": {"k": 1, "\\u006b": 2}}', "k", "appears twice"),
    (b'{"a": "\xff"}', "", "not UTF-8"),
    (b'{"a": "\\ud800"}', "", "not valid JSON"),
    (b'{"a": tru}', "", "not valid JSON"),
    (b'{"a":' + b"[" * 40 + b"]" * 40 + b"}", "", "deeper than 32"),
])
def test_document_problems_are_named(text: bytes, field: str, words: str) -> None:
    problem = check_document(text)
    assert problem is not None and problem.field == field and words in problem.reason


def test_the_same_key_in_two_objects_is_fine() -> None:
    assert check_document(b'{"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]}') is None


@pytest.mark.parametrize("text, words", [
    (b"", "empty"), (b"  \n", "empty"), (b"[1]", "not list"), (b'"x"', "not str"),
    (b'{"t": 1e999}', "finite"), (b'{"t": [1, {"u": -1e400}]}', "finite"),
    (b'{"t": NaN}', "not valid JSON"), (b'{"t": Infinity}', "not valid JSON"),
    (b'{"n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    (b'{"a": 1, "a": 1}', "appears twice"), (b"[" * 100_000, "deeper than 32"),
    (b"\xff\xfe{}", "not UTF-8"), (b"{", "not valid JSON"),
])
def test_load_object_refuses_what_is_not_one_bounded_object(text: bytes, words: str) -> None:
    with pytest.raises(MalformedJson, match=words):
        load_object(text)


def test_load_object_returns_the_object() -> None:
    assert load_object(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}') == \
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
