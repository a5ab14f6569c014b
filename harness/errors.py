"""Errors of the agent harness: what a caller (or a policy, through its tool calls) can cause."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["HarnessError", "PolicyError", "SandboxUnavailable", "SandboxViolation", "ToolError"]


class HarnessError(RewardstreamError):
    """A harness operation could not be done as asked."""


class SandboxViolation(HarnessError):
    """A tool argument reached outside the workspace (absolute path, ``..``, outward symlink)."""


class SandboxUnavailable(HarnessError):
    """The sandbox cannot isolate commands here and the operator did not allow running without."""


class ToolError(HarnessError):
    """A well-formed tool call that failed (missing file, search text not found, ...)."""


class PolicyError(HarnessError):
    """The policy endpoint or model could not produce a completion."""
