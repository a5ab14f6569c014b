"""An in-process policy: a Hugging Face causal LM sampling completions with behaviour logprobs.

Prompts and completions are tokenised exactly as the SFT corpus was (no special tokens around
the prompt; the completion ends with EOS, which is part of the sample with its logprob), so what
is trained is what is sampled. Sampling is seeded per call, so an eval replays exactly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.instrument import TrajectoryContext
from harness.policy.base import Completion, Message, render_prompt
from infra.models import decode_text
from schemas.events import FinishReason

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["LocalPolicy", "encode_prompt"]


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    return tokenizer(prompt, add_special_tokens=False)["input_ids"]


class LocalPolicy:
    emits_completion_events = True

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 checkpoint_id: str, temperature: float = 1.0,
                 max_new_tokens: int = 96) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.checkpoint_id = checkpoint_id
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    @classmethod
    def from_dir(cls, path: Path | str, temperature: float = 1.0,
                 checkpoint_id: str | None = None, max_new_tokens: int = 96) -> LocalPolicy:
        from infra.models import load_policy

        model, tokenizer = load_policy(path)
        return cls(model, tokenizer, checkpoint_id or Path(path).name, temperature,
                   max_new_tokens)

    def _next_token(self, logits: torch.Tensor, generator: torch.Generator) -> tuple[int, float]:
        import torch

        if self.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            token = int(torch.argmax(logprobs))
        else:
            logprobs = torch.log_softmax(logits / self.temperature, dim=-1)
            token = int(torch.multinomial(logprobs.exp(), 1, generator=generator))
        return token, min(float(logprobs[token]), 0.0)

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion:
        import torch

        started = time.perf_counter()
        prompt_ids = encode_prompt(self.tokenizer, render_prompt(messages))
        limit = self.model.config.max_position_embeddings - self.max_new_tokens
        prompt_ids = prompt_ids[-limit:]
        generator = torch.Generator().manual_seed(seed if seed is not None else 0)
        tokens: list[int] = []
        logprobs: list[float] = []
        ttft_ms = 0.0
        past, feed = None, torch.tensor([prompt_ids])
        finish: FinishReason = "length"
        with torch.no_grad():
            for _ in range(self.max_new_tokens):
                out = self.model(input_ids=feed, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token, logprob = self._next_token(out.logits[0, -1].float(), generator)
                ttft_ms = ttft_ms or (time.perf_counter() - started) * 1000
                tokens.append(token)
                logprobs.append(logprob)
                if token == self.tokenizer.eos_token_id:
                    finish = "stop"
                    break
                feed = torch.tensor([[token]])
        text = decode_text(self.tokenizer, tokens, skip_special_tokens=True)
        return Completion(
            text=text, checkpoint_id=self.checkpoint_id, model=self.checkpoint_id,
            completion_id=f"cmpl-{uuid.uuid4().hex[:16]}", prompt_token_ids=prompt_ids,
            token_ids=tokens, logprobs=logprobs, ttft_ms=ttft_ms,
            latency_ms=(time.perf_counter() - started) * 1000, finish_reason=finish,
            temperature=self.temperature,
        )
