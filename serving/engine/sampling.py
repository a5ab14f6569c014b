"""The sampling distribution, in the same order vLLM applies it: OpenAI's ``logit_bias``, then
the frequency and presence penalties, then temperature, then top-k, then top-p. The behaviour
logprob of a token is its log-probability under exactly this distribution, every step of it
included ("processed" logprobs, vLLM's ``--logprobs-mode processed_logprobs``): the distribution
the token was actually drawn from, which is what an importance ratio's denominator must be.
Pure torch, no model."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["GREEDY_BELOW", "LogitShift", "choose_token", "processed_logprobs"]

# As in vLLM: a temperature this small is greedy decoding (dividing by 5e-324 gives inf logits).
GREEDY_BELOW = 1e-5


@dataclass
class LogitShift:
    """OpenAI's additive logit changes for one completion, as OpenAI defines them:
    ``logit[j] + bias[j] - frequency_penalty * count[j] - presence_penalty * (count[j] > 0)``,
    where ``count[j]`` is how often token j was generated so far in this completion (the prompt
    does not count, as in vLLM)."""

    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias in [-100, 100])
    _counts: torch.Tensor | None = field(default=None, init=False, repr=False)
    _bias: torch.Tensor | None = field(default=None, init=False, repr=False)

    @property
    def active(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.logit_bias)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` (a 1-D vocabulary) shifted by the bias and the penalties so far."""
        shifted = logits.float()
        if self.logit_bias:
            if self._bias is None:
                self._bias = torch.zeros_like(shifted)
                ids, values = zip(*self.logit_bias, strict=True)
                self._bias[list(ids)] = torch.tensor(values, dtype=shifted.dtype)
            shifted = shifted + self._bias
        if self._counts is not None:
            shifted = (shifted - self.frequency_penalty * self._counts
                       - self.presence_penalty * (self._counts > 0).float())
        return shifted

    def count(self, token: int, vocabulary: int) -> None:
        """Record that ``token`` was generated (what the penalties count)."""
        if not (self.presence_penalty or self.frequency_penalty):
            return
        if self._counts is None:
            self._counts = torch.zeros(vocabulary)
        self._counts[token] += 1


def processed_logprobs(logits: torch.Tensor, temperature: float, top_k: int,
                       top_p: float, shift: LogitShift | None = None) -> torch.Tensor:
    """Log-probabilities of the distribution sampled from, over the vocabulary (last dim).

    ``shift`` (bias and penalties) applies first. A temperature below ``GREEDY_BELOW`` is greedy
    decoding; its logprobs are of the untempered (shifted) softmax, as in vLLM. Tokens removed by
    top-k/top-p, or biased to ``-inf``, get ``-inf``.
    """
    shifted = shift.apply(logits) if shift is not None and shift.active else logits.float()
    scaled = shifted / temperature if temperature >= GREEDY_BELOW else shifted
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
