"""The docs' tables that name the test asserting each row name tests that exist: the fault table
in reliability.md (its "reproduce" column), both "Bad input" tables in ingest-and-sdks.md and
the abuse table in security.md (their "test" column). Each row names at least one test; each
``path::function`` (a parametrised id allowed) is a file of the checkout defining that
function."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (page, the header line's first cells, the column naming the tests)
TABLES = [
    ("docs/reliability.md", "| fault | reproduce |", "reproduce"),
    ("docs/ingest-and-sdks.md", "| what | bound | name |", "test"),
    ("docs/ingest-and-sdks.md", "| bad input | answer |", "test"),
    ("docs/security.md", "| target | requests | 5xx |", "test"),
]
_NAMED = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+)(?:\[[^\]`']*\])?)?")


def _column(page: str, header: str, column: str) -> list[str]:
    """The cells of ``column`` in the table whose header starts with ``header``."""
    lines = (ROOT / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = [cell.strip() for cell in lines[start].strip("|").split("|")]
    at = names.index(column)
    cells = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells.append([cell.strip() for cell in line.strip().strip("|").split("|")][at])
    return cells


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


@pytest.mark.parametrize("page, header, column", TABLES, ids=lambda v: str(v))
def test_every_row_names_a_test_that_exists(page: str, header: str, column: str) -> None:
    cells = _column(page, header, column)
    assert cells, (page, header)
    for cell in cells:
        named = _NAMED.findall(cell)
        assert named, (page, cell)  # every row names its test
        for file, function in named:
            assert (ROOT / file).is_file(), (page, file)
            if function:
                assert function in _functions(ROOT / file), (page, f"{file}::{function}")


def test_a_missing_function_or_file_is_noticed() -> None:
    here = Path(__file__).relative_to(ROOT).as_posix()
    (file, function), = _NAMED.findall(f"`{here}::test_nope[a-b]`")
    assert (file, function) == (here, "test_nope")
    assert function not in _functions(ROOT / file)
    assert "test_a_missing_function_or_file_is_noticed" in _functions(ROOT / file)
