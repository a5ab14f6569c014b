"""Executing one completion's calls: broken calls answered, read-only runs in parallel groups."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.errors import SandboxViolation, ToolError
from harness.tools.builtin import TOOL_SPECS, ToolOutput, tool_function
from harness.tools.calls import BrokenCall, ToolCall
from harness.tools.edits import EditSummary
from harness.tools.sandbox import SandboxLimits
from harness.tools.workspace import Workspace
from schemas.events import ToolErrorKind

__all__ = ["CallOutcome", "ToolBox"]


@dataclass(frozen=True)
class CallOutcome:
    tool: str
    valid: bool
    error_kind: ToolErrorKind | None
    observation: str
    duration_ms: float = 0.0
    parallel_group: int | None = None
    edit: EditSummary | None = None


def _broken(call: BrokenCall) -> CallOutcome:
    return CallOutcome(call.tool, False, call.error_kind,
                       f"error ({call.error_kind}): {call.reason}. "
                       'Write calls as <tool>NAME {"arg": "value"}</tool>.')


class ToolBox:
    """The tools bound to one workspace; numbers parallel groups across a trajectory."""

    def __init__(self, workspace: Workspace, limits: SandboxLimits = SandboxLimits()) -> None:
        self.workspace = workspace
        self.limits = limits
        self.specs = TOOL_SPECS
        self._groups = 0

    def _one(self, call: ToolCall, group: int | None) -> CallOutcome:
        started = time.perf_counter()
        try:
            output = tool_function(call.name, self.limits)(self.workspace, call.args)
            kind = output.error_kind
        except SandboxViolation as exc:
            output, kind = ToolOutput(f"error (sandbox_violation): {exc}"), "sandbox_violation"
        except ToolError as exc:
            output, kind = ToolOutput(f"error (tool_error): {exc}"), "tool_error"
        elapsed_ms = (time.perf_counter() - started) * 1000
        return CallOutcome(call.name, kind is None, kind, output.observation, elapsed_ms,
                           group, output.edit)

    def execute(self, calls: tuple[ToolCall | BrokenCall, ...]) -> list[CallOutcome]:
        """Outcomes in call order; consecutive valid read-only calls run together."""
        outcomes: list[CallOutcome] = []
        batch: list[ToolCall] = []

        def flush() -> None:
            if len(batch) > 1:
                self._groups += 1
                group = self._groups
                with ThreadPoolExecutor(max_workers=len(batch)) as pool:
                    outcomes.extend(pool.map(lambda c: self._one(c, group), batch))
            elif batch:
                outcomes.append(self._one(batch[0], None))
            batch.clear()

        for call in calls:
            if isinstance(call, ToolCall) and self.specs[call.name].read_only:
                batch.append(call)
                continue
            flush()
            outcomes.append(_broken(call) if isinstance(call, BrokenCall)
                            else self._one(call, None))
        flush()
        return outcomes
