"""off-by-one: a loop skips the first or the last item; the fix is ``range(len(xs))``."""

from __future__ import annotations

import itertools

from harness.tasks.base import DISTRACTOR, Edit, Task

__all__ = ["FAMILY", "make_tasks"]

FAMILY = "off-by-one"
_MODULES = ("stats", "lists", "seqs", "counting")
# name -> (loop body over item `{v}[i]`, expected result on _INPUT); the first and the last
# item of _INPUT both count for every function, so skipping either one fails.
_INPUT = [4, 3, 1, 6]
_FUNCTIONS = {
    "count_pos": ("if {v}[i] > 0:\n            n += 1", 4),
    "sum_all": ("n += {v}[i]", 14),
    "count_even": ("if {v}[i] % 2 == 0:\n            n += 1", 2),
    "count_big": ("if {v}[i] > 2:\n            n += 1", 3),
}
_BUGS = ("len({v}) - 1", "1, len({v})")
_CLARITY = ("clear", "clear", "vague", "ambiguous")


def _task(index: int, module: str, fn: str, bug: str, clarity: str) -> Task:
    v = "xs"
    body, expected = _FUNCTIONS[fn]
    loop = f"range({bug.format(v=v)})"
    fixed = f"range(len({v}))"
    source = (f"def {fn}({v}):\n    n = 0\n    for i in {loop}:\n        {body.format(v=v)}\n"
              "    return n\n")
    clear = f'{fn} in "{module}.py" should loop over "{fixed}".'
    request = {"clear": clear, "vague": f'{fn} in "{module}.py" is off by one.',
               "ambiguous": "A count is wrong somewhere. Please fix it."}[clarity]
    path = f"{module}.py"
    return Task(
        task_id=f"obo-{index:04d}", family=FAMILY,
        files={path: source, **DISTRACTOR},
        hidden_test=(f"import {module}\nassert {module}.{fn}({_INPUT}) == {expected}\n"
                     f"assert {module}.{fn}([]) == 0\n"),
        request=request, clarity=clarity, clarification=clear,
        solution=(Edit(path, loop, fixed),),
        wrong_solution=(Edit(path, loop, f"range(len({v}) + 1)"),),
        read_paths=(path,), meta={"function": fn, "module": module},
    )


def make_tasks() -> list[Task]:
    grid = itertools.product(_MODULES, _FUNCTIONS, _BUGS, _CLARITY)
    return [_task(i, *params) for i, params in enumerate(grid)]
