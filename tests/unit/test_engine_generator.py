"""The torch engine's behaviour logprobs equal a separate teacher-forced forward pass, for the
base model and for hot-loaded LoRA adapters, served merged (up to the limit) or unmerged
(beyond it); adapters load and unload independently."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from infra.models import build_random_adapter, load_policy, teacher_forced_logprobs
from serving.engine.errors import AdapterNotFound, UnsupportedRequest
from serving.engine.generator import GenerationRequest, TorchGenerator

# float32 on CPU. The recomputation runs the adapter unmerged (x W + s (x A) B) in one full pass;
# the engine runs KV-cached steps, and a merged adapter as x (W + s A B). Both differ from the
# recomputation only by float32 rounding (observed: below 1e-5), far under a sampling effect.
TOLERANCE = 1e-4
# The demo's LoRA targets: every projection and the (tied) output head.
ALL_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
               "lm_head")


@pytest.fixture(scope="module")
def adapters(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two different adapters: attention-only, and the demo's targets with the output head."""
    root = tmp_path_factory.mktemp("adapters")
    return [build_random_adapter(tiny_model_dir, root / "a1", 1),
            build_random_adapter(tiny_model_dir, root / "a2", 2, target_modules=ALL_TARGETS)]


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


def _first_logprobs(engine: TorchGenerator, adapter: str | None) -> list[float]:
    prompt = engine.tokenizer("return a + b").input_ids
    request = GenerationRequest(prompt, max_tokens=6, temperature=0.0, adapter=adapter)
    return [step.logprob for step in engine.generate(request)]


def test_one_live_adapter_is_served_merged_and_matches_a_teacher_forced_pass(
    tiny_model_dir: Path, adapters: list[Path]
) -> None:
    engine = TorchGenerator(tiny_model_dir)
    embeddings = engine.base_model.get_input_embeddings().weight.clone()
    base = _first_logprobs(engine, None)
    engine.load_adapter("c2", str(adapters[1]))
    assert engine.merged_adapters() == ["c2"]
    request = GenerationRequest(engine.tokenizer("def add(a, b):").input_ids, max_tokens=12,
                                temperature=0.7, seed=3, ignore_eos=True, adapter="c2")
    steps = list(engine.generate(request))
    assert _max_error(adapters[1], request, steps) < TOLERANCE
    # Merging into the tied output head touched neither the base nor its embeddings.
    assert _first_logprobs(engine, None) == base
    assert torch.equal(engine.base_model.get_input_embeddings().weight, embeddings)


def test_two_live_adapters_are_both_served_merged_as_each_is_alone(
    tiny_model_dir: Path, adapters: list[Path]
) -> None:
    alone = {}
    for name, path in zip(("c1", "c2"), adapters, strict=True):
        engine = TorchGenerator(tiny_model_dir)
        engine.load_adapter(name, str(path))
        alone[name] = _first_logprobs(engine, name)
    engine = TorchGenerator(tiny_model_dir)  # two merged at once by default: an A/B's arms
    base = _first_logprobs(engine, None)
    engine.load_adapter("c1", str(adapters[0]))
    engine.load_adapter("c2", str(adapters[1]))
    assert engine.merged_adapters() == ["c1", "c2"]
    assert _first_logprobs(engine, "c1") == alone["c1"]  # the same merged weights, exactly
    assert _first_logprobs(engine, "c2") == alone["c2"]
    assert _first_logprobs(engine, None) == base


def test_adapters_beyond_the_merged_limit_are_unmerged_and_move_up_when_one_leaves(
    tiny_model_dir: Path, adapters: list[Path]
) -> None:
    engine = TorchGenerator(tiny_model_dir, merged_adapters=1)
    base = _first_logprobs(engine, None)
    engine.load_adapter("c1", str(adapters[0]))
    merged_c1 = _first_logprobs(engine, "c1")
    engine.load_adapter("c2", str(adapters[1]))
    assert engine.merged_adapters() == ["c1"]  # c2 is served unmerged beside it
    assert _first_logprobs(engine, None) == base  # the unmerged adapter wraps a shell, not it
    assert _first_logprobs(engine, "c1") == merged_c1
    unmerged_c2 = _first_logprobs(engine, "c2")
    engine.unload_adapter("c1")
    assert engine.merged_adapters() == ["c2"] and set(engine.adapters()) == {"c2"}
    assert _first_logprobs(engine, "c2") == pytest.approx(unmerged_c2, abs=TOLERANCE)
    assert merged_c1 != pytest.approx(unmerged_c2, abs=1e-3)
    engine.unload_adapter("c2")
    assert engine.merged_adapters() == [] and engine.adapters() == {}


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
