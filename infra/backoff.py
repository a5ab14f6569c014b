"""How long to wait before trying again: doubling pauses up to a ceiling."""

from __future__ import annotations

__all__ = ["retry_pause_s"]


def retry_pause_s(failures: int, first_s: float, most_s: float) -> float:
    """The pause after ``failures`` (≥ 1) failed rounds in a row: doubling from ``first_s`` up
    to ``most_s``. The exponent is capped: an outage of hours runs into thousands of rounds, and
    a float overflow would end the loop that waits."""
    return min(first_s * 2.0 ** min(max(failures, 1) - 1, 60), most_s)
