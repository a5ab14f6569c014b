"""The reward spec: a declarative TOML file of weights, horizons and grace, versioned by content.

The version is a hash of the parsed, normalised content (defaults filled in), so a comment or a
reordering does not make a new version and any changed value does. Reward records carry it, and
their Kafka key includes it, so records of two specs never overwrite each other.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streams.errors import SpecError

__all__ = ["DEFAULT_SPEC_PATH", "KeptTerm", "RewardSpec", "load_spec", "parse_spec"]

DEFAULT_SPEC_PATH = Path(__file__).parent / "specs" / "default.toml"

Seconds = Annotated[int, Field(ge=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Finalise(_Section):
    grace_s: Seconds = 600
    idle_timeout_s: Seconds = 1800


class KeptTerm(_Section):
    horizon_s: Annotated[int, Field(gt=0)]
    weight: float


class Weights(_Section):
    accepted_edit: float = 0.25
    rejected_edit: float = -0.25
    reverted_edit: float = -0.5
    dissatisfied_followup: float = -0.5
    latency_s: float = -0.05
    broken_tool_call: float = -0.5
    deferred_edit: float = -0.5
    turn: float = -0.02


class Outcome(_Section):
    completed: float = 0.0
    aborted: float = -1.0
    error: float = -1.0
    unfinished: float = -0.5


class Clarification(_Section):
    unambiguous_below: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    unknown_is_unambiguous: bool = True


class RewardSpec(_Section):
    name: Annotated[str, Field(min_length=1, max_length=64)] = "default"
    finalise: Finalise = Finalise()
    kept: Annotated[list[KeptTerm], Field(min_length=1)]
    weights: Weights = Weights()
    outcome: Outcome = Outcome()
    clarification: Clarification = Clarification()

    @model_validator(mode="after")
    def _distinct_horizons(self) -> RewardSpec:
        horizons = [term.horizon_s for term in self.kept]
        if len(set(horizons)) != len(horizons):
            raise ValueError(f"kept horizons must be distinct, got {horizons}")
        return self

    # Cached: the join reads these for every event and every record (the spec is frozen).
    @cached_property
    def version(self) -> str:
        """First 16 hex digits of the SHA-256 of the normalised content."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @cached_property
    def horizons_s(self) -> tuple[int, ...]:
        return tuple(sorted(term.horizon_s for term in self.kept))

    @cached_property
    def max_horizon_s(self) -> int:
        return max(self.horizons_s)


def parse_spec(text: str, source: str = "<spec>") -> RewardSpec:
    """A spec from TOML text; errors name the file and the offending field."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source} is not valid TOML: {exc}") from None
    try:
        return RewardSpec.model_validate(raw)
    except ValidationError as exc:
        detail = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in detail["loc"]) or "(spec)"
        raise SpecError(f"{source}: field {field}: {detail['msg']}; fix it and retry") from None


def load_spec(path: Path | str | None = None) -> RewardSpec:
    """The spec at ``path``, or the shipped default (``streams/specs/default.toml``)."""
    spec_path = Path(path) if path is not None else DEFAULT_SPEC_PATH
    try:
        text = spec_path.read_text()
    except OSError as exc:
        raise SpecError(f"cannot read reward spec {spec_path}: {exc.strerror}") from None
    return parse_spec(text, str(spec_path))
