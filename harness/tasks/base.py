"""A bench task: a tiny repository, a request in the user's words, and hidden tests.

The hidden test is a plain Python script of assertions; it runs in the sandbox against a copy of
the workspace and is never shown to the policy. It passes only when a runner, after executing
the whole script without an exception, prints a line with a nonce it read from stdin: an exit
status of 0 proves nothing, since code under test can call ``os._exit(0)`` or ``sys.exit(0)``
at import. (Code that walks the runner's stack frames could still find the nonce; what this
stops is passing by leaving early.) The scripted expert's solution (and a plausible wrong one)
travel with the task, for demonstrations.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.tools.sandbox import RunResult, SandboxLimits, run_sandboxed
from harness.tools.workspace import Workspace

__all__ = ["AMBIGUITY", "DISTRACTOR", "Edit", "HiddenTestResult", "Task", "materialise",
           "run_hidden_tests"]

# How ambiguous each wording of a request is (0 clear .. 1 ambiguous).
AMBIGUITY = {"clear": 0.1, "vague": 0.4, "ambiguous": 0.9}
HIDDEN_TEST_NAME = "_hidden_test.py"
_RUNNER_NAME = "_hidden_runner.py"
_RUNNER = (Path(__file__).parent / "hidden_runner.py").read_text()
# A file unrelated to any bug, so that finding the right file is part of the work.
DISTRACTOR = {"strings.py": 'def shout(s):\n    return s.upper() + "!"\n'}
_HIDDEN_LIMITS = SandboxLimits(timeout_s=5, cpu_s=5, max_output_bytes=4096)


@dataclass(frozen=True)
class Edit:
    path: str
    search: str
    replace: str


@dataclass(frozen=True)
class Task:
    task_id: str
    family: str
    files: dict[str, str]
    hidden_test: str
    request: str
    clarity: str  # a key of AMBIGUITY
    clarification: str  # what the user answers to a clarifying question: the request, made clear
    solution: tuple[Edit, ...]
    wrong_solution: tuple[Edit, ...]  # a plausible fix that fails the hidden test
    two_files: bool = False
    meta: dict[str, str] = field(default_factory=dict)
    decoys: tuple[Edit, ...] = ()  # more plausible wrong fixes, offered among the quick fixes

    @property
    def ambiguity(self) -> float:
        return AMBIGUITY[self.clarity]

    @property
    def hard(self) -> bool:
        return self.clarity == "ambiguous" or self.two_files

    @property
    def held_out(self) -> bool:
        """One task in five, by a stable hash of its id, is kept out of demonstrations."""
        return int(hashlib.sha256(self.task_id.encode()).hexdigest(), 16) % 5 == 0


    @property
    def fixes(self) -> tuple[Edit, ...]:
        """The quick fixes the workspace offers: the solution's, the wrong fix's and the decoys'
        edits, in the fixed order an editor lists code actions in (by file, then by the text
        they write), so the same kind of bug always lists its fixes the same way."""
        candidates = dict.fromkeys(self.solution + self.wrong_solution + self.decoys)
        return tuple(sorted(candidates, key=lambda e: (e.path, e.replace)))

    def fix_number(self, edit: Edit) -> int:
        """The number ``lint`` and ``read_file`` show for ``edit`` among the quick fixes."""
        return self.fixes.index(edit) + 1


def materialise(task: Task, root: Path) -> Workspace:
    """Write the task's files under ``root`` (created) and return the workspace."""
    root.mkdir(parents=True, exist_ok=True)
    for path, text in task.files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return Workspace(root, [(e.path, e.search, e.replace) for e in task.fixes])


@dataclass(frozen=True)
class HiddenTestResult:
    passed: bool  # the runner reported every assertion passed (its nonce line), exit status 0
    run: RunResult

    @property
    def isolated(self) -> bool:
        return self.run.isolated


def run_hidden_tests(task: Task, workspace: Workspace,
                     allow_unisolated: bool = False) -> HiddenTestResult:
    """Run the task's hidden tests on ``workspace`` in the sandbox (see the module doc)."""
    nonce = secrets.token_hex(16)
    limits = replace(_HIDDEN_LIMITS, allow_unisolated=allow_unisolated)
    run = run_sandboxed(workspace, ["python", _RUNNER_NAME, HIDDEN_TEST_NAME], limits,
                        extra_files={HIDDEN_TEST_NAME: task.hidden_test, _RUNNER_NAME: _RUNNER},
                        stdin=f"{nonce}\n".encode())
    reported = f"{nonce} all hidden tests passed" in run.output.splitlines()
    return HiddenTestResult(passed=reported and run.ok, run=run)
