"""Strict tool-call parsing: malformed calls become recorded broken calls, never dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tools.builtin import TOOL_SPECS
from harness.tools.calls import BrokenCall, ToolCall, format_call, parse_action
from harness.tools.executor import ToolBox
from harness.tools.workspace import Workspace


def test_a_well_formed_call_round_trips() -> None:
    text = format_call("read_file", {"path": "calc.py"})
    expected = (ToolCall("read_file", {"path": "calc.py"}, text),)
    assert parse_action(text, TOOL_SPECS).calls == expected


def test_text_without_tags_is_a_reply_and_a_question_ends_in_a_question_mark() -> None:
    assert parse_action("Done.", TOOL_SPECS).reply.is_question is False
    assert parse_action("Which file?", TOOL_SPECS).reply.is_question is True
    assert parse_action("Done.", TOOL_SPECS).calls == ()


@pytest.mark.parametrize(("text", "kind", "reason"), [
    ('<tool>read_file {"path": "a.py"}', "malformed_call", "without </tool>"),
    ('<tool>read_file {"path": a.py}</tool>', "malformed_call", "not valid JSON"),
    ('<tool>read_file ["a.py"]</tool>', "malformed_call", "NAME {json arguments}"),
    ("<tool>read_file</tool>", "malformed_call", "NAME {json arguments}"),
    ('<tool>read_file {"path": "a.py"}</tool> and then', "malformed_call", "text after a call"),
    ('read_file {"path": "a.py"}</tool>', "malformed_call", "must start with <tool>"),
    ('<tool>delete {"path": "a.py"}</tool>', "unknown_tool", "no tool 'delete'"),
    ("<tool>read_file {}</tool>", "bad_arguments", 'read_file: "path" is a required property'),
    ('<tool>read_file {"path": "a.py", "file": 1}</tool>', "bad_arguments",
     "'file' was unexpected"),
    ('<tool>read_file {"path": 3}</tool>', "bad_arguments", 'path: 3 is not of type "string"'),
    ('<tool>edit_file {"path": "a.py", "search": "x"}</tool>', "bad_arguments",
     "edit_file: edit_file takes either path, search and replace; or path and diff"),
    ('<tool>edit_file {"fix": true}</tool>', "bad_arguments", "fix: true is not of type"),
])
def test_malformed_calls_become_broken_calls_with_a_kind(text: str, kind: str, reason: str) -> None:
    [call] = [c for c in parse_action(text, TOOL_SPECS).calls if isinstance(c, BrokenCall)]
    assert call.error_kind == kind
    assert reason in call.reason


def test_good_calls_next_to_a_broken_one_are_all_kept(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    text = ('<tool>read_file {"path": "a.py"}</tool><tool>read_file {path}</tool>'
            '<tool>lint {}</tool>')
    box = ToolBox(Workspace(tmp_path))
    outcomes = box.execute(parse_action(text, box.specs).calls)
    assert [(o.tool, o.valid, o.error_kind) for o in outcomes] == [
        ("read_file", True, None), ("read_file", False, "malformed_call"), ("lint", True, None)]
    assert outcomes[1].observation.startswith("error (malformed_call)")


def test_consecutive_read_only_calls_form_one_parallel_group(tmp_path: Path) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(f"# {name}\n")
    box = ToolBox(Workspace(tmp_path))
    reads = format_call("read_file", {"path": "a.py"}) + format_call("read_file", {"path": "b.py"})
    edit = format_call("edit_file", {"path": "a.py", "search": "# a.py", "replace": "# A"})
    outcomes = box.execute(parse_action(reads + edit + reads, box.specs).calls)
    assert [o.parallel_group for o in outcomes] == [1, 1, None, 2, 2]
    assert [o.observation for o in outcomes[3:]] == ["# A\n", "# b.py\n"]


def test_edits_by_search_replace_and_by_unified_diff(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    box = ToolBox(Workspace(tmp_path))
    diff = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
            "-    return a - b\n+    return a + b\n")
    call = format_call("edit_file", {"path": "calc.py", "diff": diff})
    [outcome] = box.execute(parse_action(call, box.specs).calls)
    assert outcome.edit is not None
    assert (outcome.edit.lines_added, outcome.edit.lines_removed) == (1, 1)
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    again = format_call("edit_file", {"path": "calc.py", "search": "a - b", "replace": "b"})
    [missing] = box.execute(parse_action(again, box.specs).calls)
    assert (missing.error_kind, missing.edit) == ("tool_error", None)
    assert "not found" in missing.observation


def test_grep_search_and_lint_observe_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "util.py").write_text("def totl(xs):\n    return sum(xs)\n")
    (tmp_path / "main.py").write_text("import util\n\ndef report(xs):\n    return total(xs)\n")
    box = ToolBox(Workspace(tmp_path))
    text = ('<tool>grep {"pattern": "tot"}</tool><tool>search {"query": "report total"}</tool>'
            "<tool>lint {}</tool>")
    grep, search, lint = box.execute(parse_action(text, box.specs).calls)
    assert grep.observation == "main.py:4: return total(xs)\nutil.py:1: def totl(xs):"
    assert search.observation.splitlines()[0].startswith("main.py:")
    assert lint.observation == "main.py:4: undefined name 'total'"


def test_quick_fixes_are_listed_by_lint_and_applied_by_number(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "other.py").write_text("X = 1\n")
    fixes = [("calc.py", "a - b", "a * b"), ("calc.py", "a - b", "a + b"), ("other.py", "1", "2")]
    box = ToolBox(Workspace(tmp_path, fixes))
    [lint] = box.execute(parse_action(format_call("lint", {}), box.specs).calls)
    assert lint.observation.splitlines() == [
        "no problems", 'fix 1: calc.py "a - b" -> "a * b"', 'fix 2: calc.py "a - b" -> "a + b"',
        'fix 3: other.py "1" -> "2"']
    [read] = box.execute(parse_action(format_call("read_file", {"path": "other.py"}),
                                      box.specs).calls)
    assert read.observation == 'X = 1\nfix 3: other.py "1" -> "2"'
    [edit] = box.execute(parse_action(format_call("edit_file", {"fix": 2}), box.specs).calls)
    assert edit.valid and edit.edit is not None and edit.edit.path == "calc.py"
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    calls = [{"fix": 1}, {"fix": 4}, {"path": "calc.py", "fix": 3}]  # stale, absent, wrong file
    outcomes = box.execute(parse_action("".join(format_call("edit_file", c) for c in calls),
                                        box.specs).calls)
    assert [o.error_kind for o in outcomes] == ["tool_error"] * 3
    assert "not found" in outcomes[0].observation and "1 to 3" in outcomes[1].observation
    [pathless] = parse_action(format_call("edit_file", {"search": "a", "replace": "b"}),
                              box.specs).calls
    assert isinstance(pathless, BrokenCall) and pathless.error_kind == "bad_arguments"
