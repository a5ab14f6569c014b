"""The LoRA adapters a torch engine serves, and which weights serve each request.

One live adapter is served **merged**: a copy of the base model with ``W + scale * B @ A`` folded
into every weight the adapter touches, so a token costs exactly a base-model forward pass (peft's
unmerged layers add two small matmuls and Python dispatch per targeted module per token, which
on a small model is 13-73% of the step). The copy shares every tensor the adapter leaves
unchanged with the base (embeddings, norms, untargeted layers) and owns the rest: for the
demo's targets (every projection and the output head) that is one more copy of the weights,
e.g. +513 MB for SmolLM2-135M in float32 (+51 MB for an adapter on the q/v projections only).
A tied output head is untied in the copy first, so merging into the head never changes the
input embeddings.

Several live adapters (A/B arms with different checkpoints, or the moment of a promotion between
loading the new adapter and draining the old one) are served **unmerged** by one peft model over
a shell of the base that shares all its weights: it costs only the LoRA matrices, adds the
per-token work, and leaves the base itself untouched, so base requests always run at base speed.
Going back to one adapter merges it again. Each change builds the new model before it replaces
the old one, so a failed load leaves the served adapters as they were. Not thread-safe: the
engine calls every method under its lock.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import torch

from infra.models import head_adapter_warnings_off, is_adapter_dir
from serving.engine.errors import AdapterNotFound, UnsupportedRequest

__all__ = ["AdapterSet", "merged_copy", "unmerged_model"]

log = logging.getLogger(__name__)


def _untie_output_embeddings(model: Any) -> None:
    """Give the output head its own weight, so a merge into it leaves the embeddings alone."""
    head, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or embeddings is None or head.weight is not embeddings.weight:
        return
    head.weight = torch.nn.Parameter(embeddings.weight.detach().clone(), requires_grad=False)
    model.config.tie_word_embeddings = False


def _share_unchanged(merged: Any, base: Any) -> int:
    """Point every parameter of ``merged`` that equals the base's at the base's tensor; returns
    the bytes ``merged`` still owns."""
    originals = dict(base.named_parameters(remove_duplicate=False))
    owned: dict[int, int] = {}
    for name, param in merged.named_parameters(remove_duplicate=False):
        original = originals.get(name)
        if original is not None and original.shape == param.shape and \
                original.dtype == param.dtype and torch.equal(original, param):
            owner_name, _, attr = name.rpartition(".")
            merged.get_submodule(owner_name).register_parameter(attr, original)
        else:
            owned[id(param)] = param.numel() * param.element_size()
    return sum(owned.values())


def merged_copy(base: Any, adapter_path: str) -> tuple[Any, int]:
    """``base`` with the adapter at ``adapter_path`` merged in, as a new model (``base`` is left
    as it was), and the bytes of weights the copy does not share with ``base``."""
    from peft import PeftModel

    model = copy.deepcopy(base)
    _untie_output_embeddings(model)
    with head_adapter_warnings_off():
        wrapped = PeftModel.from_pretrained(model, adapter_path, is_trainable=False)
        merged = wrapped.merge_and_unload()
    owned_bytes = _share_unchanged(merged, base)
    return merged.eval(), owned_bytes


def unmerged_model(base: Any, paths: dict[str, str]) -> Any:
    """A peft model serving every adapter in ``paths`` over a copy of ``base``'s module tree
    that shares its parameters (peft replaces modules in the copy, never in ``base``)."""
    from peft import PeftModel

    shell = copy.deepcopy(base, memo={id(p): p for p in base.parameters()})
    model: Any = None
    with head_adapter_warnings_off():
        for name, path in paths.items():
            if model is None:
                model = PeftModel.from_pretrained(shell, path, adapter_name=name,
                                                  is_trainable=False)
            else:
                model.load_adapter(path, adapter_name=name, is_trainable=False)
    return model.eval()


class AdapterSet:
    """Adapters by served name, and the forward pass of the base or of one adapter."""

    def __init__(self, base: Any) -> None:
        self.base = base  # never modified: adapters live in their own (weight-sharing) models
        self._paths: dict[str, str] = {}
        self._merged: tuple[str, Any] | None = None  # (name, merged model) with one adapter live
        self._peft: Any = None  # a PeftModel while several adapters are live

    def paths(self) -> dict[str, str]:
        return dict(self._paths)

    def merged_name(self) -> str | None:
        """The adapter served merged now, if any."""
        return self._merged[0] if self._merged else None

    def load(self, name: str, path: str) -> None:
        if not is_adapter_dir(Path(path)):
            raise UnsupportedRequest(f"lora_path {path} has no adapter_config.json")
        if name in self._paths:
            raise UnsupportedRequest(f"The lora adapter '{name}' has already been loaded.")
        if not self._paths:
            self._merge(name, path)
        elif self._peft is None:
            self._peft = unmerged_model(self.base, {**self._paths, name: path})
            self._merged = None
            log.info("serving %d adapters unmerged", len(self._paths) + 1)
        else:
            with head_adapter_warnings_off():
                self._peft.load_adapter(path, adapter_name=name, is_trainable=False)
        self._paths[name] = path

    def unload(self, name: str) -> None:
        if name not in self._paths:
            raise AdapterNotFound(f"The lora adapter '{name}' cannot be found.")
        rest = {n: p for n, p in self._paths.items() if n != name}
        if not rest:
            self._merged = None
        elif len(rest) == 1:
            self._merge(*next(iter(rest.items())))
            self._peft = None
        else:
            if self._peft.active_adapter == name:
                self._peft.set_adapter(next(iter(rest)))
            self._peft.delete_adapter(name)
        self._paths = rest

    def _merge(self, name: str, path: str) -> None:
        model, owned_bytes = merged_copy(self.base, path)
        self._merged = (name, model)
        log.info("serving adapter %s merged into a copy of the base weights (+%.1f MB)",
                 name, owned_bytes / 2**20)

    def forward(self, adapter: str | None, **inputs: Any) -> Any:
        """The model output for ``inputs`` under ``adapter`` (None: the base model)."""
        if adapter is None:
            return self.base(**inputs)
        if self._merged is not None and self._merged[0] == adapter:
            return self._merged[1](**inputs)
        if adapter not in self._paths or self._peft is None:
            raise AdapterNotFound(f"The model `{adapter}` does not exist.")
        if self._peft.active_adapter != adapter:
            self._peft.set_adapter(adapter)
        return self._peft(**inputs)
