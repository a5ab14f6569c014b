"""Errors of the platform's operational edge (broker, topics, configuration)."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["BrokerError", "ConfigError", "ServiceError"]


class BrokerError(RewardstreamError):
    """The local Kafka broker could not be installed, started, stopped or reached."""


class ConfigError(RewardstreamError):
    """A setting is missing or malformed."""


class ServiceError(RewardstreamError):
    """A supervised service exited for good or did not become ready."""
