"""One policy-gradient update on a global batch of samples: shard, micro-batch, sum, clip, step."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer.actor import Actor
from trainer.batch import TrainSample, collate, token_logprobs
from trainer.config import TrainConfig
from trainer.distributed import DistContext
from trainer.importance import truncated_is_weights
from trainer.loss import policy_gradient_loss

__all__ = ["PolicyUpdater", "UpdateStats", "make_optimizer"]


@dataclass(frozen=True)
class UpdateStats:
    samples: int
    tokens: int
    loss: float
    pg_loss: float
    kl: float
    grad_norm: float
    mean_ratio: float  # mean untruncated pi/mu over tokens
    truncated_fraction: float  # share of tokens whose ratio hit the cap
    mismatch_kl: float  # token-mean k3 of the behaviour policy against the actor


def make_optimizer(params: list[torch.nn.Parameter], config: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(params, lr=config.lr, betas=config.adam_betas, eps=config.adam_eps,
                             weight_decay=config.weight_decay)


class PolicyUpdater:
    def __init__(self, actor: Actor, optimizer: torch.optim.Optimizer, config: TrainConfig,
                 dist: DistContext) -> None:
        self.actor = actor
        self.optimizer = optimizer
        self.config = config
        self.dist = dist
        self.params = actor.trainable()

    def step(self, samples: list[TrainSample]) -> UpdateStats:
        """Apply one optimizer step for the global batch ``samples`` (the same on every rank)."""
        total_tokens = sum(s.completion_tokens for s in samples)
        mine = self.dist.shard(samples)
        sums = {"loss": 0.0, "pg": 0.0, "kl": 0.0, "ratio": 0.0, "truncated": 0.0, "mismatch": 0.0}
        size = self.config.micro_batch_size
        for start in range(0, len(mine), size):
            for key, value in self._micro_step(mine[start : start + size], total_tokens).items():
                sums[key] += value
        totals = {k: self.dist.sum_scalar(v) for k, v in sums.items()}
        self.dist.sum_gradients(self.params)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return UpdateStats(
            samples=len(samples), tokens=total_tokens, loss=totals["loss"], pg_loss=totals["pg"],
            kl=totals["kl"], grad_norm=float(grad_norm),
            mean_ratio=totals["ratio"] / total_tokens,
            truncated_fraction=totals["truncated"] / total_tokens,
            mismatch_kl=totals["mismatch"] / total_tokens,
        )

    def _micro_step(self, samples: list[TrainSample], total_tokens: int) -> dict[str, float]:
        batch = collate(samples, self.actor.pad_id)
        device = self.dist.device
        input_ids = batch.input_ids.to(device)  # (b, L)
        attention = batch.attention_mask.to(device)  # (b, L)
        mask = batch.completion_mask.to(device)  # (b, L-1)
        behaviour = batch.behaviour_logprobs.to(device)  # (b, L-1)
        actor_lp = token_logprobs(self.actor.logits(input_ids, attention), input_ids)  # (b, L-1)
        weights, ratios = truncated_is_weights(actor_lp, behaviour, self.config.is_cap)
        ref_lp = None
        if self.config.kl_coef > 0:
            ref_lp = token_logprobs(self.actor.reference_logits(input_ids, attention), input_ids)
        parts = policy_gradient_loss(actor_lp, weights, batch.advantages.to(device), mask,
                                     total_tokens, ref_lp, self.config.kl_coef)
        parts.loss.backward()
        log_ratio = (behaviour - actor_lp.detach()) * mask  # (b, L-1)
        mismatch = (torch.exp(log_ratio) - log_ratio - 1.0) * mask
        return {
            "loss": float(parts.loss.detach()), "pg": float(parts.pg), "kl": float(parts.kl),
            "ratio": float((ratios * mask).sum()),
            "truncated": float(((ratios > self.config.is_cap).float() * mask).sum()),
            "mismatch": float(mismatch.sum()),
        }
