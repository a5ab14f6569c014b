"""Errors of the trainer that an operator can cause and fix."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["CheckpointError", "TrainerConfigError"]


class TrainerConfigError(RewardstreamError):
    """A trainer setting is missing, out of range or contradicts another one."""


class CheckpointError(RewardstreamError):
    """A checkpoint directory is missing, incomplete or does not match the trainer's model."""
