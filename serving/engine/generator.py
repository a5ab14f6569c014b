"""Token-by-token generation with a KV cache over one base model and any number of LoRA adapters.

Each step's logits produce both the sampled token and its behaviour logprob, so the logprob is
of the distribution actually sampled from, from the same forward pass. Requests run in their own
threads and interleave step by step: a lock covers only adapter selection plus one forward pass
(peft's active adapter is global state), which also makes loading and unloading adapters safe
between steps. How adapters are applied (merged, each in its own copy of the weights, up to
``merged_adapters`` at once; unmerged beyond) is ``serving.engine.adapters``. A request whose
adapter is unloaded mid-generation fails at its next step; the gateway drains adapters before
unloading them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from infra.models import ModelLoadError, is_adapter_dir, load_policy
from serving.engine.adapters import AdapterSet
from serving.engine.errors import AdapterNotFound, UnsupportedRequest
from serving.engine.sampling import GREEDY_BELOW, LogitShift, choose_token, processed_logprobs

__all__ = ["GenerationRequest", "StepOutput", "TorchGenerator"]


@dataclass(frozen=True)
class GenerationRequest:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    adapter: str | None = None  # None: the base model
    top_logprobs: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias)


@dataclass(frozen=True)
class StepOutput:
    token_id: int
    logprob: float  # under the processed (sampling) distribution
    top: tuple[tuple[int, float], ...] = ()
    finish_reason: str | None = None  # set on the last step: "stop" or "length"


class TorchGenerator:
    """The engine's model state; every public method is safe to call from any thread."""

    def __init__(self, model_dir: Path | str, dtype: str = "float32", device: str = "cpu",
                 token_delay_s: float = 0.0, merged_adapters: int = 2) -> None:
        if is_adapter_dir(Path(model_dir)):
            raise UnsupportedRequest(
                f"{model_dir} is a LoRA adapter; start the engine on its base model and load the "
                "adapter with POST /v1/load_lora_adapter"
            )
        self.model_dir = str(model_dir)
        base, self.tokenizer = load_policy(model_dir, dtype=dtype, device=device)
        self._adapters = AdapterSet(base, merged_adapters)
        self._lock = threading.Lock()
        self._device = device
        # Simulates a slower accelerator (per generated token) for demos and rollout tests.
        self.token_delay_s = token_delay_s
        config = base.config
        self.max_positions: int = int(getattr(config, "max_position_embeddings", 2048))
        embeddings = base.get_input_embeddings()
        if not isinstance(embeddings, torch.nn.Embedding):
            raise ModelLoadError(f"{model_dir}: the engine reads the vocabulary size from an input "
                                 f"embedding table, and this model's is a "
                                 f"{type(embeddings).__name__}")
        self.vocabulary_size: int = embeddings.num_embeddings
        eos = base.generation_config.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self._eos_ids.add(self.tokenizer.eos_token_id)

    @property
    def base_model(self) -> Any:
        return self._adapters.base

    def adapters(self) -> dict[str, str]:
        with self._lock:
            return self._adapters.paths()

    def merged_adapters(self) -> list[str]:
        """The adapters served merged, each in its own copy of the weights, now."""
        with self._lock:
            return self._adapters.merged_names()

    def load_adapter(self, name: str, path: str) -> None:
        with self._lock:
            try:
                self._adapters.load(name, path)
            except UnsupportedRequest:
                raise
            except Exception as exc:  # a broken adapter directory is the caller's to fix
                raise UnsupportedRequest(
                    f"lora_path {path}: not a loadable adapter ({type(exc).__name__}: "
                    f"{str(exc)[:200]})") from None

    def unload_adapter(self, name: str) -> None:
        with self._lock:
            self._adapters.unload(name)

    def _forward(self, adapter: str | None, input_ids: torch.Tensor, past: Any) -> tuple:
        with self._lock, torch.no_grad():
            out = self._adapters.forward(adapter, input_ids=input_ids, past_key_values=past,
                                         use_cache=True)
        return out.logits[0, -1], out.past_key_values

    def check(self, request: GenerationRequest) -> None:
        """Raise before streaming starts when ``request`` cannot be served."""
        if request.adapter is not None and request.adapter not in self.adapters():
            raise AdapterNotFound(f"The model `{request.adapter}` does not exist.")
        total = len(request.prompt_ids) + request.max_tokens
        if not request.prompt_ids or total > self.max_positions:
            raise UnsupportedRequest(
                f"prompt ({len(request.prompt_ids)} tokens) + max_tokens ({request.max_tokens}) "
                f"must be between 1 and the model's {self.max_positions} positions; lower "
                "max_tokens", "max_tokens")
        if not all(0 <= token < self.vocabulary_size for token in request.prompt_ids):
            raise UnsupportedRequest(
                f"prompt: token ids must lie in [0, {self.vocabulary_size}), the model's "
                "vocabulary", "prompt")
        biased = [token for token, _ in request.logit_bias
                  if not 0 <= token < self.vocabulary_size]
        if biased:
            raise UnsupportedRequest(
                f"logit_bias: token id {biased[0]} is not in the model's vocabulary "
                f"[0, {self.vocabulary_size})", "logit_bias")

    def generate(self, request: GenerationRequest,
                 cancelled: threading.Event | None = None) -> Iterator[StepOutput]:
        """Sample up to ``max_tokens`` tokens (blocking; run it in a worker thread)."""
        self.check(request)
        generator = None
        if request.seed is not None:
            generator = torch.Generator(self._device).manual_seed(request.seed)
        input_ids = torch.tensor([request.prompt_ids], device=self._device)
        past = None
        shift = LogitShift(request.presence_penalty, request.frequency_penalty,
                           request.logit_bias)
        for index in range(request.max_tokens):
            if cancelled is not None and cancelled.is_set():
                return
            logits, past = self._forward(request.adapter, input_ids, past)
            logprobs = processed_logprobs(logits, request.temperature, request.top_k,
                                          request.top_p, shift)
            token = choose_token(logprobs, request.temperature < GREEDY_BELOW, generator)
            shift.count(token, logits.shape[-1])
            top: tuple[tuple[int, float], ...] = ()
            if request.top_logprobs > 0:
                values, ids = torch.topk(logprobs, request.top_logprobs)
                top = tuple(zip(ids.tolist(), values.tolist(), strict=False))
            finish = None
            if token in self._eos_ids and not request.ignore_eos:
                finish = "stop"
            elif index == request.max_tokens - 1:
                finish = "length"
            yield StepOutput(token, float(logprobs[token]), top, finish)
            if finish:
                return
            input_ids = torch.tensor([[token]], device=self._device)
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
