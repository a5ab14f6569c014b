"""Training samples as padded tensors, and the actor's log-probabilities of their tokens.

A sample is prompt + completion; only completion tokens are trained. The token at input position
p is predicted by the logits at p - 1, so every per-token tensor here has length L - 1 and
position j holds the prediction of input token j + 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["TokenBatch", "TrainSample", "collate", "token_logprobs"]


@dataclass(frozen=True)
class TrainSample:
    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    behaviour_logprobs: tuple[float, ...]  # one per completion token, as logged when served
    advantage: float

    @property
    def completion_tokens(self) -> int:
        return len(self.completion_token_ids)


@dataclass(frozen=True)
class TokenBatch:
    input_ids: torch.Tensor  # (B, L) long, right-padded with pad_id
    attention_mask: torch.Tensor  # (B, L) long
    completion_mask: torch.Tensor  # (B, L-1) float: 1 where position j predicts a completion token
    behaviour_logprobs: torch.Tensor  # (B, L-1) float, 0 off the mask
    advantages: torch.Tensor  # (B,) float


def collate(samples: Sequence[TrainSample], pad_id: int) -> TokenBatch:
    length = max(len(s.prompt_token_ids) + s.completion_tokens for s in samples)
    batch = len(samples)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)  # (B, L)
    attention = torch.zeros((batch, length), dtype=torch.long)  # (B, L)
    mask = torch.zeros((batch, length - 1))  # (B, L-1)
    behaviour = torch.zeros((batch, length - 1))  # (B, L-1)
    for i, s in enumerate(samples):
        prompt, completion = len(s.prompt_token_ids), s.completion_tokens
        input_ids[i, : prompt + completion] = torch.tensor(
            s.prompt_token_ids + s.completion_token_ids, dtype=torch.long)
        attention[i, : prompt + completion] = 1
        mask[i, prompt - 1 : prompt - 1 + completion] = 1.0
        behaviour[i, prompt - 1 : prompt - 1 + completion] = torch.tensor(s.behaviour_logprobs)
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)  # (B,)
    return TokenBatch(input_ids, attention, mask, behaviour, advantages)


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """(B, L-1) log p(input token j+1 | prefix) from logits (B, L, V), without a (B, L, V) copy."""
    logits = logits[:, :-1].float()  # (B, L-1, V)
    targets = input_ids[:, 1:]  # (B, L-1)
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, L-1)
    return picked - torch.logsumexp(logits, dim=-1)  # (B, L-1)
