"""Trainer settings: one typed dataclass, read from a TOML file and command-line overrides."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from trainer.consumer import Selection, Staleness
from trainer.errors import TrainerConfigError

__all__ = ["TrainConfig", "load_config"]


@dataclass(frozen=True)
class TrainConfig:
    model_dir: Path  # the base Hugging Face causal LM (local directory)
    out_dir: Path  # where checkpoints are written (one directory each, plus LATEST)
    model_name: str = ""  # the registry's model family; defaults to model_dir's name
    base_checkpoint_id: str = "base"  # the id serving stamps on samples of the base model
    # Parameterisation: full fine-tuning, or a LoRA adapter over model_dir.
    lora: bool = False
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_targets: str = "all-linear"  # peft target_modules; comma-separated names or all-linear
    # Optimiser.
    lr: float = 1e-5
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0
    # On-policy control and the objective.
    max_staleness: int = 1  # generations a sample's checkpoint may lag the policy
    max_staleness_hours: float | None = None  # hours since it was served (None: no bound)
    is_cap: float = 2.0  # truncation of the token importance ratio pi/mu
    ema_decay: float = 0.9
    whiten: bool = True
    kl_coef: float = 0.0
    ref_dir: Path | None = None  # reference policy for the KL; None: the base model
    # Batching.
    batch_records: int = 32
    batch_timeout_s: float = 30.0
    micro_batch_size: int = 8
    max_seq_len: int = 4096
    reward_spec_version: str | None = None  # train only on this spec's records (None: any)
    # Train only on these organisations' records (None: every organisation's); a checkpoint
    # records the organisations it was trained on in its lineage.
    orgs: tuple[str, ...] | None = None
    dedupe_window: int = 100_000  # record keys remembered to drop redelivered duplicates
    # Cycle: a candidate after steps_per_cycle updates, or after cycle_period_s of updates.
    steps_per_cycle: int | None = None
    cycle_period_s: float = 5 * 3600.0
    deterministic: bool = False  # count-only batching and deterministic kernels, for replays
    seed: int = 0
    # Gate.
    eval_suite: str = "builtin"  # "builtin" or "package.module:factory"
    eval_demos: Path | None = None  # JSON {family: [strings]} for the built-in suite
    gate_margin: float = 0.02
    # The gate also fails a candidate whose share of tasks with a broken tool call is surely
    # (95% lower bound) higher than the incumbent's by more than this.
    gate_broken_call_tolerance: float = 0.05
    gate_confidence: float = 0.95
    gate_resamples: int = 2000
    gate_seed: int = 0
    # A candidate that passes the gate becomes production (False), or serves the canary arm
    # until an A/B concludes it (True: ``schemas.checkpoints.conclude_canary``).
    canary: bool = False
    group_id: str = "rewardstream-trainer"

    def selection(self) -> Selection:
        """Which records and samples this trainer takes (``trainer.consumer``)."""
        return Selection(orgs=frozenset(self.orgs) if self.orgs is not None else None,
                         spec_version=self.reward_spec_version,
                         staleness=Staleness(self.max_staleness, self.max_staleness_hours))

    @property
    def model(self) -> str:
        return self.model_name or self.model_dir.resolve().name

    def hyperparams(self) -> dict[str, Any]:
        """What a checkpoint records about how it was trained (JSON-safe)."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    def validate(self) -> TrainConfig:
        positive = ("lr", "is_cap", "batch_records", "micro_batch_size", "max_seq_len",
                    "cycle_period_s", "gate_resamples", "lora_rank", "max_grad_norm")
        for name in positive:
            if getattr(self, name) <= 0:
                raise TrainerConfigError(f"{name}={getattr(self, name)!r} must be positive")
        if not 0.0 <= self.ema_decay < 1.0:
            raise TrainerConfigError(f"ema_decay={self.ema_decay} must be in [0, 1)")
        if not 0.0 < self.gate_confidence < 1.0:
            raise TrainerConfigError(f"gate_confidence={self.gate_confidence} must be in (0, 1)")
        if not 0.0 <= self.gate_broken_call_tolerance <= 1.0:
            raise TrainerConfigError(f"gate_broken_call_tolerance="
                                     f"{self.gate_broken_call_tolerance} must be in [0, 1]")
        if self.max_staleness_hours is not None and not self.max_staleness_hours > 0:
            raise TrainerConfigError(f"max_staleness_hours={self.max_staleness_hours} must be "
                                     "positive")
        if self.max_staleness < 0 or self.gate_margin < 0 or self.kl_coef < 0:
            raise TrainerConfigError("max_staleness, gate_margin and kl_coef must be >= 0")
        if self.steps_per_cycle is not None and self.steps_per_cycle <= 0:
            raise TrainerConfigError(f"steps_per_cycle={self.steps_per_cycle} must be positive")
        if self.deterministic and self.steps_per_cycle is None:
            raise TrainerConfigError(
                "deterministic=true needs steps_per_cycle: a cycle that ends on a clock is not "
                "reproducible")
        if not self.model_dir.is_dir():
            raise TrainerConfigError(
                f"model_dir={self.model_dir} is not a directory; point it at a local model")
        return self


def load_config(path: Path | None, **overrides: Any) -> TrainConfig:
    """Settings from a TOML file (keys as the field names), then non-None overrides on top."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise TrainerConfigError(f"config file {path}: {exc}") from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise TrainerConfigError(f"unknown trainer setting(s) {unknown}; known: {sorted(known)}")
    for name in ("model_dir", "out_dir"):
        if name not in data:
            option = name.replace("_", "-")
            raise TrainerConfigError(
                f"{name} is required (in the config file or as --{option})")
    for name in ("model_dir", "out_dir", "ref_dir", "eval_demos"):
        if data.get(name) is not None:
            data[name] = Path(data[name])
    for name in ("adam_betas", "orgs"):
        if data.get(name) is not None:
            data[name] = tuple(data[name])
    return replace(TrainConfig(model_dir=data["model_dir"], out_dir=data["out_dir"]),
                   **data).validate()
