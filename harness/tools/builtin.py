"""The agent's tools: read_file, edit_file, list_dir, grep, search, run, lint.

``lint`` and ``read_file`` end with the workspace's numbered quick fixes on the files they cover
(``fix 2: calc.py "a - b" -> "a + b"``), when it offers any; ``edit_file {"fix": 2}`` applies one
as an exact search/replace on its file, so it fails like any edit when the text is gone.

Each is ``(workspace, args) -> ToolOutput``; arguments were already checked against the tool's
:class:`ToolSpec` (JSON Schema). Failures a policy can cause raise :class:`ToolError` or
:class:`SandboxViolation` and become error observations.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import ToolError
from harness.tools.calls import ToolSpec
from harness.tools.edits import (
    EditSummary,
    apply_diff,
    apply_search_replace,
    count_lines_changed,
)
from harness.tools.sandbox import SandboxLimits, run_sandboxed
from harness.tools.workspace import Workspace
from schemas.events import ToolErrorKind
from schemas.tooldefs import ToolDef

__all__ = ["TOOL_SPECS", "ToolOutput", "tool_definitions", "tool_function"]

MAX_OBSERVATION_CHARS = 1200
_MAX_HITS = 12


@dataclass(frozen=True)
class ToolOutput:
    observation: str
    edit: EditSummary | None = None
    error_kind: ToolErrorKind | None = None  # set by tools that ran but hit a limit ("timeout")


def _with_fixes(text: str, ws: Workspace, paths: list[str]) -> str:
    """``text`` followed by the quick fixes on ``paths``, numbered as ``edit_file`` takes them."""
    fixes = [f"fix {n}: {path} {json.dumps(search)} -> {json.dumps(replace)}"
             for n, (path, search, replace) in enumerate(ws.fixes, 1) if path in paths]
    return "\n".join([text.rstrip("\n"), *fixes]) if fixes else text


def _read_file(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    text = ws.read_text(args["path"])[:MAX_OBSERVATION_CHARS]
    return ToolOutput(_with_fixes(text, ws, [args["path"]]))


def _list_dir(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    return ToolOutput("\n".join(ws.files(args.get("path", "."))) or "(empty)")


def _grep(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    try:
        pattern = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolError(f"pattern is not a valid regular expression: {exc}") from None
    hits = [f"{path}:{n}: {line.strip()}"
            for path in ws.files(args.get("path", "."))
            for n, line in enumerate(ws.read_text(path).splitlines(), 1) if pattern.search(line)]
    return ToolOutput("\n".join(hits[:_MAX_HITS]) or "no matches")


def _search(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    """Files ranked by how many of the query's words they contain, with their best line."""
    words = {w.lower() for w in re.findall(r"\w+", args["query"]) if len(w) > 1}
    if not words:
        raise ToolError("query has no words to search for")
    ranked = []
    for path in ws.files():
        lines = ws.read_text(path).splitlines()
        scores = [sum(w in line.lower() for w in words) for line in lines]
        if scores and max(scores) > 0:
            best = scores.index(max(scores))
            ranked.append((-sum(scores), path, f"{path}:{best + 1}: {lines[best].strip()}"))
    return ToolOutput("\n".join(hit for *_, hit in sorted(ranked)[:5]) or "no results")


def _edit_file(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    path = _numbered_fix(ws, args)[0] if "fix" in args else args["path"]
    real = ws.resolve(path)
    before = real.read_text() if real.is_file() else ""
    if not real.is_file() and args.get("search", "") != "":
        raise ToolError(f"no file {path!r}; to create it, use an empty search text")
    if "fix" in args:
        after = apply_search_replace(before, *_numbered_fix(ws, args)[1:], path)
    elif "diff" in args:
        after = apply_diff(before, args["diff"], path)
    else:
        after = apply_search_replace(before, args["search"], args["replace"], path)
    ws.write_text(path, after)
    added, removed = count_lines_changed(before, after)
    return ToolOutput(f"edited {path}: +{added} -{removed}",
                      edit=EditSummary(path, lines_added=added, lines_removed=removed))


def _numbered_fix(ws: Workspace, args: dict[str, Any]) -> tuple[str, str, str]:
    number, offered = int(args["fix"]), ws.fixes  # the schema allows 2.0
    if not 1 <= number <= len(offered):
        listed = f"fixes 1 to {len(offered)}" if offered else "no fixes"
        raise ToolError(f"the workspace offers {listed}, not fix {number}; lint lists them")
    fix = offered[number - 1]
    if args.get("path", fix[0]) != fix[0]:
        raise ToolError(f"fix {number} is on {fix[0]}, not {args['path']}; give its number only")
    return fix


def _run(ws: Workspace, args: dict[str, Any], limits: SandboxLimits) -> ToolOutput:
    try:
        argv = shlex.split(args["cmd"])
    except ValueError as exc:
        raise ToolError(f"cmd is not a valid command line: {exc}") from None
    if not argv:
        raise ToolError("cmd is empty")
    result = run_sandboxed(ws, argv, limits)
    head = f"exit {result.returncode}" if result.returncode is not None else "stopped"
    note = f" ({result.error})" if result.error else ""
    if not result.isolated:
        note += " [unisolated sandbox, allowed by the operator]"
    text = f"{head}{note}\n{result.output[-MAX_OBSERVATION_CHARS:]}".rstrip()
    return ToolOutput(text, error_kind="timeout" if result.timed_out else None)


def _defined_names(tree: ast.AST) -> set[str]:
    names = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _lint_one(path: str, source: str) -> list[str]:
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return [f"{path}:{exc.lineno}: syntax error: {exc.msg}"]
    defined = _defined_names(tree)
    return [f"{path}:{node.lineno}: undefined name {node.id!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
            and node.id not in defined]


def _lint(ws: Workspace, args: dict[str, Any]) -> ToolOutput:
    paths = [args["path"]] if "path" in args else [p for p in ws.files() if p.endswith(".py")]
    problems = [p for path in paths for p in _lint_one(path, ws.read_text(path))]
    return ToolOutput(_with_fixes("\n".join(problems[:_MAX_HITS]) or "no problems", ws, paths))


def _object(required: dict[str, str], optional: dict[str, str] | None = None,
            **extra: Any) -> dict[str, Any]:
    """A JSON Schema of an arguments object: named properties of JSON types, nothing else."""
    properties = {name: {"type": kind} for name, kind in {**required, **(optional or {})}.items()}
    return {"type": "object", "properties": properties, "required": sorted(required),
            "additionalProperties": False, **extra}


def _only(*names: str) -> dict[str, Any]:
    return {"not": {"anyOf": [{"required": [name]} for name in names]}}


# edit_file takes exactly one form: search+replace, a unified diff, or a quick fix's number.
_EDIT_FORMS = {
    "description": "edit_file takes either path, search and replace; or path and diff; or fix "
                   "(path optional)",
    "oneOf": [
        {"required": ["path", "search", "replace"], **_only("diff", "fix")},
        {"required": ["path", "diff"], **_only("search", "replace", "fix")},
        {"required": ["fix"], **_only("search", "replace", "diff")},
    ],
}


def _spec(name: str, description: str, parameters: dict[str, Any],
          read_only: bool = True) -> ToolSpec:
    return ToolSpec(ToolDef(name, parameters, description), read_only)


TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in (
    _spec("read_file", "Read a file of the workspace, with its quick fixes.",
          _object({"path": "string"})),
    _spec("list_dir", "List the files under a directory.", _object({}, {"path": "string"})),
    _spec("grep", "Lines matching a regular expression.",
          _object({"pattern": "string"}, {"path": "string"})),
    _spec("search", "Files ranked by the words of a query.", _object({"query": "string"})),
    _spec("lint", "Undefined names and syntax errors, with the workspace's numbered quick fixes.",
          _object({}, {"path": "string"})),
    _spec("edit_file", "Edit a file by search and replace, a unified diff, or a quick fix.",
          _object({}, {"path": "string", "search": "string", "replace": "string",
                       "diff": "string", "fix": "integer"}, **_EDIT_FORMS), read_only=False),
    _spec("run", "Run a command in the sandbox.", _object({"cmd": "string"}), read_only=False),
)}


def tool_definitions() -> list[dict[str, Any]]:
    """The tools as an OpenAI ``tools`` list."""
    return [spec.definition.openai() for spec in TOOL_SPECS.values()]


_FUNCTIONS: dict[str, Callable[..., ToolOutput]] = {
    "read_file": _read_file, "list_dir": _list_dir, "grep": _grep, "search": _search,
    "lint": _lint, "edit_file": _edit_file,
}


def tool_function(name: str,
                  limits: SandboxLimits) -> Callable[[Workspace, dict[str, Any]], ToolOutput]:
    if name == "run":
        return lambda ws, args: _run(ws, args, limits)
    return _FUNCTIONS[name]
