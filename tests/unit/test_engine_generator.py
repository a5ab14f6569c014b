"""The torch engine's behaviour logprobs equal a separate teacher-forced forward pass, for the
base model and for hot-loaded LoRA adapters; adapters load and unload independently."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.engine.errors import AdapterNotFound, UnsupportedRequest
from serving.engine.generator import GenerationRequest, TorchGenerator
from serving.testing import build_random_adapter, teacher_forced_logprobs
from trainer.modeling import load_policy

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def adapters(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("adapters")
    return [build_random_adapter(tiny_model_dir, root / f"a{seed}", seed) for seed in (1, 2)]


def _max_error(model_dir: Path, request: GenerationRequest, steps: list) -> float:
    model, _ = load_policy(model_dir)
    ids = [step.token_id for step in steps]
    expected = teacher_forced_logprobs(model, request.prompt_ids, ids, request.temperature)
    return max(abs(step.logprob - want) for step, want in zip(steps, expected, strict=True))


def test_logprobs_match_a_teacher_forced_pass_for_base_and_adapters(
    tiny_model_dir: Path, adapters: list[Path]
) -> None:
    engine = TorchGenerator(tiny_model_dir)
    engine.load_adapter("c1", str(adapters[0]))
    engine.load_adapter("c2", str(adapters[1]))
    prompt = engine.tokenizer("def add(a, b):").input_ids
    for adapter, model_dir in ((None, tiny_model_dir), ("c1", adapters[0]),
                               ("c2", adapters[1])):
        request = GenerationRequest(prompt, max_tokens=12, temperature=0.7, seed=3,
                                    ignore_eos=True, adapter=adapter)
        steps = list(engine.generate(request))
        assert len(steps) == 12 and steps[-1].finish_reason == "length"
        assert _max_error(model_dir, request, steps) < TOLERANCE


def test_adapters_change_the_distribution_and_unload_cleanly(
    tiny_model_dir: Path, adapters: list[Path]
) -> None:
    engine = TorchGenerator(tiny_model_dir)
    prompt = engine.tokenizer("return a + b").input_ids

    def first_logprob(adapter: str | None) -> float:
        request = GenerationRequest(prompt, max_tokens=1, temperature=0.0, adapter=adapter)
        return next(engine.generate(request)).logprob

    base = first_logprob(None)
    engine.load_adapter("c1", str(adapters[0]))
    assert abs(first_logprob("c1") - base) > 1e-3
    engine.load_adapter("c2", str(adapters[1]))
    engine.unload_adapter("c1")
    assert set(engine.adapters()) == {"c2"}
    engine.unload_adapter("c2")
    assert engine.adapters() == {} and first_logprob(None) == pytest.approx(base, abs=1e-6)
    with pytest.raises(AdapterNotFound):
        first_logprob("c1")
    with pytest.raises(AdapterNotFound):
        engine.unload_adapter("c1")


def test_requests_longer_than_the_context_are_refused(tiny_model_dir: Path) -> None:
    engine = TorchGenerator(tiny_model_dir)
    with pytest.raises(UnsupportedRequest, match="max_tokens"):
        engine.check(GenerationRequest([1, 2], max_tokens=10_000))
