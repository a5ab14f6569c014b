"""Applying an edit: search/replace (the search text must occur exactly once) or a unified diff.

Diff hunks are located by their content (context and removed lines), not by their line numbers,
so a policy that miscounts lines still lands its edit where the text matches, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ToolError

__all__ = ["EditSummary", "apply_diff", "apply_search_replace", "count_lines_changed"]


@dataclass(frozen=True)
class EditSummary:
    path: str
    lines_added: int
    lines_removed: int


def apply_search_replace(text: str, search: str, replace: str, path: str) -> str:
    if search == "":
        if text:
            raise ToolError(f"empty search text on {path}, which is not empty; quote the lines "
                            "to change")
        return replace
    found = text.count(search)
    if found != 1:
        where = "not found" if found == 0 else f"found {found} times"
        raise ToolError(f"search text {where} in {path}; quote it exactly, with enough context "
                        "to be unique")
    return text.replace(search, replace, 1)


def _hunks(diff: str) -> list[tuple[list[str], list[str]]]:
    """(old lines, new lines) per hunk of a unified diff."""
    hunks: list[tuple[list[str], list[str]]] = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            hunks.append(([], []))
            continue
        if not hunks:
            raise ToolError("diff has no @@ hunk header before its lines")
        old, new = hunks[-1]
        tag, body = line[:1], line[1:]
        if tag in (" ", ""):
            old.append(body)
            new.append(body)
        elif tag == "-":
            old.append(body)
        elif tag == "+":
            new.append(body)
        elif tag != "\\":  # "\ No newline at end of file"
            raise ToolError(f"diff line {line!r} must start with ' ', '-', '+' or '@@'")
    if not hunks:
        raise ToolError("diff has no hunks; give a unified diff with @@ headers")
    return hunks


def apply_diff(text: str, diff: str, path: str) -> str:
    lines = text.splitlines()
    for old, new in _hunks(diff):
        starts = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
        if len(starts) != 1:
            where = "not found" if not starts else f"found {len(starts)} times"
            raise ToolError(f"a hunk's lines are {where} in {path}; add context to make it unique")
        lines[starts[0]:starts[0] + len(old)] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") or not text else "")


def count_lines_changed(before: str, after: str) -> tuple[int, int]:
    """(added, removed) lines between two versions, by a line-level diff."""
    import difflib

    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed
