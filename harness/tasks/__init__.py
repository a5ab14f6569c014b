"""Bench task families: many small repositories with hidden tests, split into train and held-out.

Every family is a parameter grid, so the same index always names the same task; one task in five
(by a stable hash of its id) is held out of demonstrations and used by the eval suite.
"""

from __future__ import annotations

import functools
import random

from harness.tasks import arithmetic, off_by_one, rename
from harness.tasks.base import Edit, Task, materialise, run_hidden_tests

__all__ = ["FAMILIES", "Edit", "Task", "all_tasks", "held_out_per_family", "materialise",
           "run_hidden_tests", "sample_tasks", "user_cohort"]

FAMILIES = (arithmetic.FAMILY, off_by_one.FAMILY, rename.FAMILY)
_MAKERS = {arithmetic.FAMILY: arithmetic.make_tasks, off_by_one.FAMILY: off_by_one.make_tasks,
           rename.FAMILY: rename.make_tasks}


@functools.cache
def all_tasks() -> tuple[Task, ...]:
    return tuple(task for family in FAMILIES for task in _MAKERS[family]())


@functools.cache
def held_out_per_family() -> int:
    """The most held-out tasks every family can offer: what an eval suite may ask of each."""
    return min(sum(1 for t in all_tasks() if t.family == family and t.held_out)
               for family in FAMILIES)


def sample_tasks(per_family: int, held_out: bool, seed: int = 0) -> list[Task]:
    """``per_family`` tasks of each family from one side of the split, the same for one seed."""
    rng = random.Random(seed)
    chosen: list[Task] = []
    for family in FAMILIES:
        pool = [t for t in all_tasks() if t.family == family and t.held_out == held_out]
        chosen.extend(rng.sample(pool, min(per_family, len(pool))))
    return chosen


def user_cohort(count: int, seed: int = 0) -> list[Task]:
    """``count`` training tasks, the families in turn (equal shares, so the mix of families
    does not move a cohort's mean), the same for one seed; distinct while the families last."""
    per_family = -(-count // len(FAMILIES))
    chosen = sample_tasks(per_family, held_out=False, seed=seed)
    by_family = [[t for t in chosen if t.family == family] for family in FAMILIES]
    turns = [row[i % len(row)] for i in range(per_family) for row in by_family]
    return turns[:count]
