"""The update step, sample preparation and durable checkpoints on the tiny local model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from trainer.actor import load_actor
from trainer.advantages import EmaBaseline
from trainer.batch import TrainSample, collate, token_logprobs
from trainer.checkpoint_io import (
    CheckpointMeta,
    latest_checkpoint,
    load_trainer_state,
    read_meta,
    write_checkpoint,
)
from trainer.config import load_config
from trainer.consumer import Lineage, Selection, Staleness
from trainer.distributed import DistContext
from trainer.errors import TrainerConfigError
from trainer.importance import truncated_is_weights
from trainer.prepare import prepare_batch
from trainer.source import ConsumedRecord, parse_record
from trainer.synthetic import synthetic_records
from trainer.update import PolicyUpdater, make_optimizer


def _updater(model_dir: Path, tmp_path: Path, **overrides: object) -> PolicyUpdater:
    config = load_config(None, model_dir=model_dir, out_dir=tmp_path, lr=1e-2, **overrides)
    actor = load_actor(config, None, "cpu")
    return PolicyUpdater(actor, make_optimizer(actor.trainable(), config), config, DistContext())


def _samples(tokenizer, advantages: list[float], behaviour: float = -3.0) -> list[TrainSample]:
    records = synthetic_records(tokenizer, len(advantages), good_fraction=1.0)
    return [TrainSample(tuple(r.samples[0].prompt_token_ids),
                        tuple(r.samples[0].completion_token_ids),
                        (behaviour,) * len(r.samples[0].completion_token_ids), a)
            for r, a in zip(records, advantages, strict=True)]


def _actor_logprobs(updater: PolicyUpdater, samples: list[TrainSample]) -> tuple[torch.Tensor, ...]:
    batch = collate(samples, updater.actor.pad_id)
    with torch.no_grad():
        lp = token_logprobs(updater.actor.logits(batch.input_ids, batch.attention_mask),
                            batch.input_ids)  # (B, L-1)
    return lp, batch.behaviour_logprobs, batch.completion_mask


def test_ratio_denominator_is_the_logged_behaviour_logprob(tiny_model_dir: Path,
                                                           tmp_path: Path) -> None:
    updater = _updater(tiny_model_dir, tmp_path)
    samples = _samples(updater.actor.tokenizer, [1.0, -1.0], behaviour=-3.0)
    before, behaviour, mask = _actor_logprobs(updater, samples)
    _, ratios = truncated_is_weights(before, behaviour, cap=100.0)
    stats = updater.step(samples)  # changes the actor
    assert stats.mean_ratio == pytest.approx(float((ratios * mask).sum() / mask.sum()), rel=1e-5)
    after, _, _ = _actor_logprobs(updater, samples)
    assert not torch.allclose(after, before)
    _, ratios_after = truncated_is_weights(after, behaviour, cap=100.0)
    on = mask.bool()
    # A new actor changes the numerator only: ratio / pi is exp(-logged mu) both times.
    expected = torch.full_like(after[on], 3.0).exp()
    assert torch.allclose(ratios[on] / before[on].exp(), expected, rtol=1e-4)
    assert torch.allclose(ratios_after[on] / after[on].exp(), expected, rtol=1e-4)


def test_positive_advantage_raises_the_completion_likelihood(tiny_model_dir: Path,
                                                             tmp_path: Path) -> None:
    updater = _updater(tiny_model_dir, tmp_path)
    for group in updater.optimizer.param_groups:
        group["lr"] = 1e-3
    good = _samples(updater.actor.tokenizer, [1.0])
    reversed_completion = good[0].completion_token_ids[::-1]
    bad = [TrainSample(good[0].prompt_token_ids, reversed_completion, good[0].behaviour_logprobs,
                       -1.0)]

    def total_logprob(samples: list[TrainSample]) -> float:
        lp, _, mask = _actor_logprobs(updater, samples)
        return float((lp * mask).sum())

    before = total_logprob(good), total_logprob(bad)
    for _ in range(3):
        stats = updater.step(good + bad)
    after = total_logprob(good), total_logprob(bad)
    assert after[0] > before[0] and after[1] < before[1]
    assert stats.truncated_fraction == 0.0 and stats.grad_norm > 0


def test_lora_trains_only_the_adapter_and_kl_is_positive_once_it_moves(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    updater = _updater(tiny_model_dir, tmp_path, lora=True, lora_rank=2, kl_coef=0.5)
    names = [n for n, p in updater.actor.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    samples = _samples(updater.actor.tokenizer, [1.0, -1.0])
    assert updater.step(samples).kl == pytest.approx(0.0, abs=1e-6)  # B starts at zero
    assert updater.step(samples).kl > 0.0


def test_prepare_counts_every_record_and_sample_it_does_not_train() -> None:
    def with_ckpt(record, checkpoint_id: str):
        sample = record.samples[0].model_copy(update={"checkpoint_id": checkpoint_id})
        return record.model_copy(update={"samples": [sample]})

    class _Tok:
        bos_token_id = 1

        def __call__(self, text: str):
            return type("E", (), {"input_ids": [ord(c) % 50 + 2 for c in text[:6]]})()

    records = synthetic_records(_Tok(), 5)
    unknown_token = records[4].samples[0].model_copy(update={"completion_token_ids": [2, 60]})
    records[4] = records[4].model_copy(update={"samples": [unknown_token]})
    consumed = [ConsumedRecord(f"k{i}", with_ckpt(r, c), "rewards", 0, i)
                for i, (r, c) in enumerate(zip(records, ["c2", "c1", "c0", "zz", "c2"],
                                               strict=True))]
    generations = {"c0": 0, "c1": 1, "c2": 2}
    out = prepare_batch([*consumed, ConsumedRecord("bad", None, "rewards", 0, 5)],
                        EmaBaseline(0.5), selection=Selection(staleness=Staleness(1)),
                        lineage=Lineage(2, generations.get), max_seq_len=100, vocab_size=60,
                        whiten=False)
    assert out.counts == {"records": 6, "records_unparseable": 1, "samples_kept": 2,
                          "samples_dropped_stale": 1, "samples_dropped_unknown_checkpoint": 1,
                          "samples_dropped_token_out_of_vocab": 1, "records_trained": 2}
    assert sorted(out.lags) == [0, 1] and len(out.samples) == 2


def test_a_completion_the_gateway_did_not_serve_never_trains_and_other_orgs_are_skipped(
) -> None:
    class _Tok:
        bos_token_id = 1

        def __call__(self, text: str):
            return type("E", (), {"input_ids": [ord(c) % 50 + 2 for c in text[:6]]})()

    acme, evil, forged = synthetic_records(_Tok(), 3)
    evil = evil.model_copy(update={"org_id": "evil"})
    acme = acme.model_copy(update={"org_id": "acme"})
    client_sample = forged.samples[0].model_copy(update={"producer": "ingest:acme-ide"})
    forged = forged.model_copy(update={"org_id": "acme", "samples": [client_sample]})
    quarantined: list[tuple[int, str]] = []

    def quarantine(_topic: str, _partition: int, offset: int, _value: object, reason: str) -> None:
        quarantined.append((offset, reason))

    consumed = [parse_record(None, r.model_dump_json().encode(), "rewards", 0, offset, quarantine)
                for offset, r in enumerate([acme, evil, forged])]
    assert consumed[2].record is None and quarantined == [(2, consumed[2].refused)]
    assert "samples.0.producer" in quarantined[0][1] and "not the gateway" in quarantined[0][1]
    out = prepare_batch(consumed, EmaBaseline(0.5),
                        selection=Selection(frozenset({"acme"}), staleness=Staleness(1)),
                        lineage=Lineage(0, {"base": 0}.get), max_seq_len=100, vocab_size=60,
                        whiten=False)
    assert out.counts == {"records": 3, "skipped_other_org": 1, "records_refused": 1,
                          "samples_kept": 1, "records_trained": 1}
    assert out.orgs == {"acme"} and len(out.samples) == 1


def test_checkpoint_round_trip_restores_weights_optimizer_and_rng(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    updater = _updater(tiny_model_dir, tmp_path)
    updater.step(_samples(updater.actor.tokenizer, [1.0, -1.0]))
    torch.manual_seed(123)
    meta = CheckpointMeta(checkpoint_id="c1", parent_id="base", offsets={"rewards:0": [0, 7]})
    path = write_checkpoint(tmp_path / "out", "c1", updater.actor.save, updater.optimizer, meta)
    expected_draw = torch.rand(3)
    assert latest_checkpoint(tmp_path / "out") == path and read_meta(path) == meta
    assert not list((tmp_path / "out").glob(".tmp-*"))
    with safe_open(path / "model.safetensors", "pt") as handle:
        assert json.loads(handle.metadata()["rewardstream"])["parent_id"] == "base"
    config = load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path, lr=1e-2)
    actor = load_actor(config, path, "cpu")
    optimizer = make_optimizer(actor.trainable(), config)
    load_trainer_state(path, optimizer, restore_rng=True)
    assert torch.equal(torch.rand(3), expected_draw)
    for mine, theirs in zip(actor.model.state_dict().values(),
                            updater.actor.model.state_dict().values(), strict=True):
        assert torch.equal(mine, theirs)
    old, new = updater.optimizer.state_dict()["state"], optimizer.state_dict()["state"]
    assert old.keys() == new.keys() and all(
        torch.equal(old[k]["exp_avg_sq"], new[k]["exp_avg_sq"]) for k in old)


def test_config_errors_name_the_field(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(TrainerConfigError, match="lr="):
        load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path, lr=0.0)
    with pytest.raises(TrainerConfigError, match="steps_per_cycle"):
        load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path, deterministic=True)
    with pytest.raises(TrainerConfigError, match="unknown trainer setting"):
        load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path, learning_rate=1.0)
    with pytest.raises(TrainerConfigError, match="model_dir"):
        load_config(None, model_dir=tmp_path / "missing", out_dir=tmp_path)
