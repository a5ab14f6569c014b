"""The canary's state in words, from a look's evidence (what ``canary_look`` events carry):
the command line prints it, the demo prints it, the console shows the same fields."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_look", "look_line"]


def _bound(bound: dict[str, Any] | None) -> str:
    if not bound or bound.get("change") is None:
        return "no interval yet"
    low = "-inf" if bound.get("low") is None else f"{bound['low']:+.3f}"
    high = "+inf" if bound.get("high") is None else f"{bound['high']:+.3f}"
    return f"{bound['change']:+.3f} [{low}, {high}]"


def look_line(look: dict[str, Any]) -> str:
    """``promote: reward +0.120 [-0.101, +0.341] after 640 trajectories (412 s)``."""
    n = (look.get("n_baseline") or 0) + (look.get("n_candidate") or 0)
    elapsed = look.get("elapsed_s") or 0.0
    return (f"{look.get('decision', '?')}: reward {_bound(look.get('primary_bound'))} after "
            f"{n} trajectories ({elapsed:.0f} s)")


def describe_look(look: dict[str, Any]) -> str:
    """Several lines: the decision and reason, the always-valid bound against the margin, the
    split test, and what a decision still needs."""
    parameters = look.get("parameters", {})
    margin = parameters.get("margin")
    lines = [f"decision: {look.get('decision')} ({look.get('reason')})",
             f"trajectories: production {look.get('n_baseline')}, canary "
             f"{look.get('n_candidate')}, after {look.get('elapsed_s', 0):.0f} s"]
    if look.get("primary_bound"):
        lines.append(f"reward (canary - production), always-valid {1 - parameters['alpha']:.0%} "
                     f"bounds: {_bound(look['primary_bound'])}; promote above -{margin:g}, "
                     "reject below 0")
    if "srm_log_bayes_factor" in look:
        lines.append(f"split: log Bayes factor {look['srm_log_bayes_factor']:.2f} (a mismatch "
                     f"at {look['srm_threshold']:.2f})")
    if look.get("decision") == "continue":
        needed = look.get("needed")
        lines.append(f"a decision needs about {needed} more trajectories at the current effect"
                     if needed is not None else "no decision in sight at the current effect")
    if "rule" in look:
        lines.append(f"rule: {look['rule']}")
    return "\n".join(lines)
