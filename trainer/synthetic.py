"""Synthetic reward records over demonstration strings, for benchmarks, smoke runs and tests.

Each record's completion is either a demonstration (reward 1) or the same tokens reversed
(reward 0), served by ``checkpoint_id`` with made-up but fixed behaviour log-probabilities, so a
policy trained on them should come to prefer the demonstrations.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from schemas.events import GATEWAY_PRODUCER
from schemas.rewards import Component, RewardRecord, Sample, Signal
from trainer.evalsuite import DEFAULT_DEMONSTRATIONS

__all__ = ["synthetic_records"]

_PROMPT = "Fix the failing test in src/app.py."
_AT = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic_records(tokenizer: Any, count: int, checkpoint_id: str = "base", seed: int = 0,
                      first_index: int = 0, good_fraction: float = 0.5) -> list[RewardRecord]:
    rng = random.Random(seed)
    prompt = [tokenizer.bos_token_id, *tokenizer(_PROMPT).input_ids]
    pool = [(family, text) for family, texts in sorted(DEFAULT_DEMONSTRATIONS.items())
            for text in texts]
    records = []
    for index in range(first_index, first_index + count):
        family, text = pool[rng.randrange(len(pool))]
        completion = tokenizer(text).input_ids
        good = rng.random() < good_fraction
        if not good:
            completion = completion[::-1]
        behaviour = [-1.0 - 0.25 * ((index + k) % 5) for k in range(len(completion))]
        sample = Sample(completion_id=f"syn-{index}-c0", checkpoint_id=checkpoint_id,
                        producer=GATEWAY_PRODUCER,
                        prompt_token_ids=prompt, completion_token_ids=completion,
                        behaviour_logprobs=behaviour)
        reward = 1.0 if good else 0.0
        records.append(RewardRecord(
            trajectory_id=f"syn-{index}", spec_version="synthetic-v1", checkpoint_id=checkpoint_id,
            arm="control", task_family=family, outcome="completed", finalized_by="complete",
            finalized_at=_AT, samples=[sample], components={Component.OUTCOME: reward},
            total=reward, signals={Signal.KEPT_FRACTION: reward}, event_ids=[],
        ))
    return records
