"""What a test needs of the machine (a broker, a browser, kernel namespaces): missing, the test
is skipped on a developer's machine and fails under ``CI=true``, where a skip would pass a run
that checked nothing."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["isolating_kernel", "require", "root", "unavailable"]


def unavailable(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (required under CI=true)")
    pytest.skip(message)


def require(problem: str | None) -> None:
    """Go on when ``problem`` is None, else :func:`unavailable` with it."""
    if problem is not None:
        unavailable(problem)


@pytest.fixture
def isolating_kernel() -> None:
    """For tests of the sandbox's isolation: the kernel gives it its namespaces."""
    from harness.tools.sandbox import isolation_problem

    require(isolation_problem())


@pytest.fixture
def root() -> None:
    """For tests that make a kernel that refuses namespaces (a user namespace of their own)."""
    require(None if os.geteuid() == 0 else "making a refusing kernel needs root")
