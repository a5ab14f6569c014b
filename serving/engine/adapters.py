"""The LoRA adapters a torch engine serves, and which weights serve each request.

A live adapter is served **merged**: a copy of the base model with ``W + scale * B @ A`` folded
into every weight the adapter touches, so a token costs exactly a base-model forward pass (peft's
unmerged layers add two small matmuls and Python dispatch per targeted module per token; what
that costs is measured in docs/benchmarks.md#serving). The copy shares every tensor the adapter
leaves unchanged with the base (embeddings, norms, untargeted layers) and owns the rest: for the
demo's targets (every projection and the output head) that is one more copy of the weights
(sizes measured in docs/gateway.md#the-torch-engine). A tied output head is untied in the copy
first, so merging into the head never changes the input embeddings.

Up to ``merged_limit`` adapters are merged at once, each in its own copy (two by default: the
production and canary arms of an A/B test, or the moment of a promotion between loading the new
adapter and draining the old one, so neither arm's latency is the adapter's). Adapters beyond
the limit are served **unmerged** by one peft model over a shell of the base that shares all its
weights: it costs only the LoRA matrices, adds the per-token work, and leaves the base itself
untouched, so base requests always run at base speed. When a merged adapter is unloaded, an
unmerged one takes its place. Each change builds the new model before it replaces the old one,
so a failed load leaves the served adapters as they were. Not thread-safe: the engine calls
every method under its lock.
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

    def __init__(self, base: Any, merged_limit: int = 2) -> None:
        if merged_limit < 0:
            raise ValueError(f"merged_limit={merged_limit} must be 0 or more")
        self.base = base  # never modified: adapters live in their own (weight-sharing) models
        self.merged_limit = merged_limit
        self._paths: dict[str, str] = {}
        self._merged: dict[str, Any] = {}  # name → its merged copy
        self._peft: Any = None  # a PeftModel of the adapters beyond the merged limit

    def paths(self) -> dict[str, str]:
        return dict(self._paths)

    def merged_names(self) -> list[str]:
        """The adapters served merged now, in the order they were merged."""
        return list(self._merged)

    def load(self, name: str, path: str) -> None:
        if not is_adapter_dir(Path(path)):
            raise UnsupportedRequest(f"lora_path {path} has no adapter_config.json")
        if name in self._paths:
            raise UnsupportedRequest(f"The lora adapter '{name}' has already been loaded.")
        if len(self._merged) < self.merged_limit:
            self._merged[name] = self._merged_copy(name, path)
        elif self._peft is None:
            self._peft = unmerged_model(self.base, {name: path})
            log.info("serving adapter %s unmerged (%d merged already)", name, len(self._merged))
        else:
            with head_adapter_warnings_off():
                self._peft.load_adapter(path, adapter_name=name, is_trainable=False)
        self._paths[name] = path

    def unload(self, name: str) -> None:
        if name not in self._paths:
            raise AdapterNotFound(f"The lora adapter '{name}' cannot be found.")
        rest = {n: p for n, p in self._paths.items() if n != name}
        if name in self._merged:
            waiting = [n for n in rest if n not in self._merged]
            if waiting:  # the first adapter served unmerged takes the freed place
                model = self._merged_copy(waiting[0], rest[waiting[0]])
                self._drop_unmerged(waiting[0])
                self._merged[waiting[0]] = model
            del self._merged[name]
        else:
            self._drop_unmerged(name)
        self._paths = rest

    def _drop_unmerged(self, name: str) -> None:
        others = [n for n in self._peft.peft_config if n != name]
        if not others:
            self._peft = None
            return
        if self._peft.active_adapter == name:
            self._peft.set_adapter(others[0])
        self._peft.delete_adapter(name)

    def _merged_copy(self, name: str, path: str) -> Any:
        model, owned_bytes = merged_copy(self.base, path)
        log.info("serving adapter %s merged into a copy of the base weights (+%.1f MB)",
                 name, owned_bytes / 2**20)
        return model

    def forward(self, adapter: str | None, **inputs: Any) -> Any:
        """The model output for ``inputs`` under ``adapter`` (None: the base model)."""
        if adapter is None:
            return self.base(**inputs)
        if adapter in self._merged:
            return self._merged[adapter](**inputs)
        if adapter not in self._paths or self._peft is None:
            raise AdapterNotFound(f"The model `{adapter}` does not exist.")
        if self._peft.active_adapter != adapter:
            self._peft.set_adapter(adapter)
        return self._peft(**inputs)
