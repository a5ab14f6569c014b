"""rename-function: give a badly named function its proper name, and its callers too."""

from __future__ import annotations

import itertools

from harness.tasks.base import DISTRACTOR, Edit, Task

__all__ = ["FAMILY", "make_tasks"]

FAMILY = "rename-function"
_MODULES = ("util", "helpers", "tools", "core")
# old name -> (new name, body over xs, result on [3, 1, 2])
_NAMES = {
    "totl": ("total", "sum(xs)", 6), "avg": ("average", "sum(xs) / len(xs)", 2.0),
    "cnt": ("count", "len(xs)", 3), "mx": ("maximum", "max(xs)", 3),
    "mn": ("minimum", "min(xs)", 1), "frst": ("first", "xs[0]", 3),
}
_CALLERS = (False, True)  # whether main.py calls the function too
_CLARITY = ("clear", "clear", "vague", "ambiguous")


def _task(index: int, module: str, old: str, caller: bool, clarity: str) -> Task:
    new, body, expected = _NAMES[old]
    path = f"{module}.py"
    files = {path: f"def {old}(xs):\n    return {body}\n"}
    test = f"import {module}\nassert {module}.{new}([3, 1, 2]) == {expected}\n" \
           f"assert not hasattr({module}, {old!r})\n"
    solution = [Edit(path, f"def {old}(", f"def {new}(")]
    if caller:
        files["main.py"] = f"import {module}\n\n\ndef report(xs):\n    return {module}.{old}(xs)\n"
        test += f"import main\nassert main.report([3, 1, 2]) == {expected}\n"
        solution.append(Edit("main.py", f"{module}.{old}(", f"{module}.{new}("))
    else:
        files.update(DISTRACTOR)
    clear = f'Rename {old} to {new} in "{module}.py".'
    request = {"clear": clear, "vague": f"Rename {old} to {new}.",
               "ambiguous": "Some function names are cryptic. Please fix them."}[clarity]
    # A plausible miss: the definition renamed, the caller (or the exact name) not.
    wrong = solution[:1] if caller else [Edit(path, f"def {old}(", f"def {new}s(")]
    return Task(
        task_id=f"ren-{index:04d}", family=FAMILY, files=files, hidden_test=test,
        request=request, clarity=clarity, clarification=clear, solution=tuple(solution),
        wrong_solution=tuple(wrong), read_paths=tuple(files) if caller else (path,),
        locate_pattern=old if clarity == "vague" else None, two_files=caller,
        meta={"function": old, "module": module},
    )


def make_tasks() -> list[Task]:
    grid = itertools.product(_MODULES, _NAMES, _CALLERS, _CLARITY)
    return [_task(i, *params) for i, params in enumerate(grid)]
