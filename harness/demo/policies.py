"""The demo's models: the warm-started policy (built once, cached) and the reward-gaming variant.

The warm-started policy is cached under ``<cache>/demo-policy-<key>``, the key a hash of the SFT
settings, the model config and the source of everything that shapes the demonstrations (policy,
tasks, tools, agent loop, users), so a rerun skips the build and a code change rebuilds.

A ``--hack`` variant is a LoRA adapter over that policy, fine-tuned on the expert's
demonstrations of the hack at its strength (``clarify``: a question, then a stop once answered,
instead of an edit; ``broken-calls``: every edit call malformed, then a stop; each on that share
of the demonstrations, the others the warm mix's). It is written in the trainer's checkpoint
layout, so once deployed the trainer keeps training from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.policy.sft import POLICY_MODEL, SftConfig
from infra.file_lock import build_once, exclusive
from infra.settings import cache_dir

if TYPE_CHECKING:
    from trainer.config import TrainConfig

__all__ = ["HACK_SFT_STEPS", "build_hack_adapter", "cached_policy", "source_digest"]

HACK_SFT_STEPS = 80
_HARNESS = Path(__file__).resolve().parents[1]
_SHAPING_SOURCES = ("agent.py", "users.py", "instrument.py", "policy", "tasks", "tools")


def source_digest(extra: object) -> str:
    """16 hex digits over ``extra`` (JSON) and the harness sources that shape a policy."""
    digest = hashlib.sha256(json.dumps(extra, sort_keys=True, default=str).encode())
    for name in _SHAPING_SOURCES:
        root = _HARNESS / name
        for path in sorted([root] if root.is_file() else root.rglob("*.py")):
            digest.update(path.relative_to(_HARNESS).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _own_digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def cached_policy(config: SftConfig, on_step: Callable[[int, float], None]) -> tuple[Path, bool]:
    """The policy directory for ``config``; built (and cached) if missing. True when built."""
    from harness.policy.sft import build_policy

    key = source_digest({"sft": asdict(config), "model": asdict(POLICY_MODEL)})
    final = cache_dir() / f"demo-policy-{key}"
    # Demos started together (parallel tests) build it once; the others wait and reuse it.
    built = build_once(final, lambda scratch: build_policy(scratch, config, on_step=on_step))
    return final, built


def build_hack_adapter(mix: str, strength: float, train_config: TrainConfig,
                       learning_rate: float, seed: int,
                       on_step: Callable[[int, float], None]) -> Path:
    """A trainer-layout LoRA checkpoint fine-tuned on the ``mix`` demonstrations with the hack on
    ``strength`` of them (cached)."""
    import torch

    from harness.policy.expert import MIXES
    from harness.policy.sft import demonstrations, encode_examples, train_sft, training_tasks
    from trainer.adapters import CheckpointMeta, fit_adapter_checkpoint

    base = train_config.model_dir.resolve()
    sft = replace(SftConfig(), mix=mix, strength=strength, steps=HACK_SFT_STEPS,
                  learning_rate=learning_rate, seed=seed)
    key = source_digest({"hack": asdict(sft), "base": str(base), "code": _own_digest(),
                         "lora": [train_config.lora_rank, train_config.lora_alpha,
                                  train_config.lora_targets]})
    root = cache_dir() / f"demo-hack-{key}"
    checkpoint_id = f"hack-{mix}-{strength:g}-{key[:8]}"
    with exclusive(root.with_name(root.name + ".lock")):  # parallel demos fit it once
        if (root / checkpoint_id / "checkpoint.json").exists():
            return root / checkpoint_id
        pairs = demonstrations(MIXES[mix].at_strength(strength), training_tasks(None, seed),
                               sft.demos_per_task, seed)

        def fit(model: Any, tokenizer: Any, pad_id: int) -> None:
            examples = encode_examples(tokenizer, pairs, model.config.max_position_embeddings)
            with torch.random.fork_rng():
                train_sft(model, examples, pad_id, sft, on_step)

        meta = CheckpointMeta(checkpoint_id=checkpoint_id, model=train_config.model, adapter=True,
                              base_path=str(base), provenance={"hack": mix, "sft": asdict(sft)})
        return fit_adapter_checkpoint(train_config, root, checkpoint_id, fit, meta)
