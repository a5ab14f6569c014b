"""Behaviour profiles of simulated policies (:mod:`streams.monitors.simulate`): a healthy one,
and the failure modes the detectors exist for."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "Profile"]


@dataclass(frozen=True)
class Profile:
    p_edit: float = 0.62  # trajectory proposes at least one edit
    extra_edits_mean: float = 1.5  # Poisson extra edits beyond the first
    p_accept: float = 0.7  # per proposed edit
    kept_alpha: float = 8.0  # share of the accepted edits kept ~ Beta(alpha, beta)
    kept_beta: float = 2.0
    p_clarify: float = 0.08
    p_unambiguous: float = 0.5  # a clarification was on an unambiguous request
    p_broken: float = 0.03  # trajectory has broken tool calls
    tool_calls_mean: float = 4.0
    p_dissatisfied: float = 0.12
    latency_ms_median: float = 1800.0
    latency_sigma: float = 0.5  # log-normal spread


PROFILES: dict[str, Profile] = {
    "healthy": Profile(),
    "defers_edits": Profile(p_edit=0.30, p_clarify=0.45, p_unambiguous=0.8),
    "broken_calls": Profile(p_broken=0.15),
    # Many small edits that users accept and later undo: the spec pays per accepted edit, so
    # reward rises while the edits kept per trajectory fall by about a third.
    "reward_hacking": Profile(extra_edits_mean=4.0, p_accept=0.95, kept_alpha=1.0, kept_beta=4.0),
    "slow": Profile(latency_ms_median=2600.0),
}
