"""The sampling distribution, in the same order vLLM applies it: temperature, then top-k, then
top-p; the behaviour logprob of a token is its log-probability under exactly this distribution
("processed" logprobs). Pure torch, no model."""

from __future__ import annotations

import torch

__all__ = ["GREEDY_BELOW", "choose_token", "processed_logprobs"]

# As in vLLM: a temperature this small is greedy decoding (dividing by 5e-324 gives inf logits).
GREEDY_BELOW = 1e-5


def processed_logprobs(logits: torch.Tensor, temperature: float, top_k: int,
                       top_p: float) -> torch.Tensor:
    """Log-probabilities of the distribution sampled from, over the vocabulary (last dim).

    A temperature below ``GREEDY_BELOW`` is greedy decoding; its logprobs are of the untempered
    softmax, as in vLLM. Tokens removed by top-k/top-p get ``-inf``.
    """
    scaled = logits.float() / temperature if temperature >= GREEDY_BELOW else logits.float()
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the mass before it already reaches top_p; the first always stays.
        mass_before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False  # even when top_p is below float32's smallest number
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


def choose_token(logprobs: torch.Tensor, greedy: bool,
                 generator: torch.Generator | None = None) -> int:
    """One token id drawn from ``exp(logprobs)`` (a 1-D vocabulary), or its argmax."""
    if greedy:
        return int(torch.argmax(logprobs))
    return int(torch.multinomial(logprobs.exp(), 1, generator=generator))
