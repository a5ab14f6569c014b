"""fix-arithmetic: a function uses the wrong operator; the request says what it should compute."""

from __future__ import annotations

import itertools

from harness.tasks.base import DISTRACTOR, Edit, Task

__all__ = ["FAMILY", "make_tasks"]

FAMILY = "fix-arithmetic"
_MODULES = ("calc", "mathops", "numtools", "arith", "compute")
_FUNCTIONS = {"total": "+", "add": "+", "plus": "+", "diff": "-", "minus": "-",
              "subtract": "-", "times": "*", "product": "*", "multiply": "*"}
_CLARITY = ("clear", "clear", "vague", "ambiguous")
_APPLY = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q}
_HELPER = "def half(v):\n    return v / 2\n"


def _task(index: int, module: str, fn: str, clarity: str) -> Task:
    p, q = "a", "b"
    op = _FUNCTIONS[fn]
    others = [o for o in "+-*" if o != op]
    wrong, other = others if index % 2 == 0 else others[::-1]
    source = f"def {fn}({p}, {q}):\n    return {p} {wrong} {q}\n\n\n{_HELPER}"
    checks = "\n".join(f"assert {module}.{fn}({a}, {b}) == {_APPLY[op](a, b)}"
                       for a, b in ((7, 3), (2, 5)))
    # Names are quoted as the tool calls quote them, so they tokenise the same way in both.
    clear = f'{fn}({p}, {q}) in "{module}.py" should return "{p} {op} {q}".'
    request = {"clear": clear, "vague": f'{fn} in "{module}.py" gives wrong results.',
               "ambiguous": "Some numbers come out wrong. Please fix it."}[clarity]
    path = f"{module}.py"
    return Task(
        task_id=f"arith-{index:04d}", family=FAMILY,
        files={path: source, **DISTRACTOR},
        hidden_test=f"import {module}\n{checks}\nassert {module}.half(8) == 4\n",
        request=request, clarity=clarity, clarification=clear,
        solution=(Edit(path, f"{p} {wrong} {q}", f"{p} {op} {q}"),),
        wrong_solution=(Edit(path, f"{p} {wrong} {q}", f"{p} {other} {q}"),),
        meta={"function": fn, "module": module},
    )


def make_tasks() -> list[Task]:
    grid = itertools.product(_MODULES, _FUNCTIONS, _CLARITY)
    return [_task(i, *params) for i, params in enumerate(grid)]
