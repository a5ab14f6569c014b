"""Warm-starting the tiny policy: demonstrations from the scripted expert, then SFT.

1. **Corpus**: the expert (with a :class:`DemoMix` of deliberate mistakes) acts in the real
   agent loop on the training side of the task split; every turn of its transcript becomes one
   ``(prompt, completion)`` pair, rendered exactly as the loop renders prompts.
2. **Tokenizer and model**: a byte-level BPE tokenizer trained on that corpus, carrying the
   transcript format as its chat template, and a tiny Llama built from a config
   (``harness.policy.tiny``); nothing is downloaded.
3. **SFT**: next-token loss on completion tokens only (the prompt is context), AdamW.

The result is an ordinary model directory (``load_policy`` reads it) with ``policy.json``
describing how it was made.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.agent import AgentConfig, run_episode
from harness.instrument import Recorder, SimClock, TrajectoryContext
from harness.policy.base import TRANSCRIPT_TEMPLATE, render_prompt
from harness.policy.expert import MIXES, DemoMix, ExpertPolicy
from harness.policy.local import encode_prompt
from harness.policy.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
from harness.tasks import Task, all_tasks, materialise, sample_tasks
from harness.tools.executor import ToolBox
from harness.users import SimulatedUser, UserConfig

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "POLICY_MODEL", "SftConfig", "build_policy", "demonstrations", "encode_examples",
    "train_sft", "training_tasks",
]

POLICY_MODEL = TinyModelConfig(hidden_size=96, layers=3, heads=4, intermediate_size=192,
                               max_positions=512)
_PATIENT = UserConfig(gives_up_on_needless_question=0.0)


@dataclass(frozen=True)
class SftConfig:
    mix: str = "warm"  # a key of harness.policy.expert.MIXES
    strength: float = 1.0  # a hack mix's share of hacked trajectories (DemoMix.at_strength)
    demos_per_task: int = 1
    steps: int = 1000
    batch_size: int = 16
    learning_rate: float = 6e-3
    vocab_size: int = 1024
    seed: int = 0
    tasks_per_family: int | None = None  # None: every training task (fewer for quick tests)


def training_tasks(per_family: int | None, seed: int) -> list[Task]:
    if per_family is not None:
        return sample_tasks(per_family, held_out=False, seed=seed)
    return [t for t in all_tasks() if not t.held_out]


def demonstrations(mix: DemoMix, tasks: list[Task], demos_per_task: int = 1,
                   seed: int = 0) -> list[tuple[str, str]]:
    """``(prompt, completion)`` pairs from the expert's transcripts in the real loop."""
    pairs: list[tuple[str, str]] = []
    user = SimulatedUser(_PATIENT, seed)
    with tempfile.TemporaryDirectory(prefix="rs-demos-") as tmp:
        for n, task in enumerate(t for t in tasks for _ in range(demos_per_task)):
            workspace = materialise(task, Path(tmp) / f"t{n}")
            recorder = Recorder(lambda _e: None, TrajectoryContext(f"demo-{n}", "demo", "demo"),
                                SimClock())
            policy = ExpertPolicy(task, mix, seed=seed * 7919 + n)
            episode = run_episode(task, policy, ToolBox(workspace), recorder, user,
                                  AgentConfig(max_turns=8))
            for i, message in enumerate(episode.messages):
                if message["role"] == "assistant":
                    pairs.append((render_prompt(episode.messages[:i]), message["content"]))
    return pairs


def encode_examples(tokenizer: PreTrainedTokenizerBase, pairs: list[tuple[str, str]],
                    max_len: int) -> list[tuple[list[int], int]]:
    """Token ids of prompt + completion + EOS, and where the completion starts."""
    encoded = []
    for prompt, completion in pairs:
        p = encode_prompt(tokenizer, prompt)
        c = encode_prompt(tokenizer, completion) + [tokenizer.eos_token_id]
        keep = max(0, len(p) + len(c) - max_len)
        encoded.append((p[keep:] + c, len(p) - keep))
    return encoded


def _batch(examples: list[tuple[list[int], int]],
           pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(ids) for ids, _ in examples)
    inputs = torch.full((len(examples), width), pad_id)
    labels = torch.full((len(examples), width), -100)
    for row, (ids, start) in enumerate(examples):
        inputs[row, :len(ids)] = torch.tensor(ids)
        labels[row, start:len(ids)] = torch.tensor(ids[start:])
    return inputs, labels, (inputs != pad_id) | (labels != -100)


def _length_buckets(examples: list[tuple[list[int], int]], batch_size: int,
                    rng: random.Random) -> list[list[tuple[list[int], int]]]:
    """Batches of similar length (little padding), in random order."""
    ordered = sorted(examples, key=lambda e: len(e[0]) + rng.random())
    batches = [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]
    rng.shuffle(batches)
    return batches


def train_sft(model: PreTrainedModel, examples: list[tuple[list[int], int]], pad_id: int,
              config: SftConfig,
              on_step: Callable[[int, float], None] = lambda step, loss: None) -> float:
    """Completion-only next-token loss; returns the mean loss of the last 20 steps."""
    import torch

    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, config.learning_rate,
                                                   total_steps=config.steps, pct_start=0.1)
    model.train()
    recent: list[float] = []
    batches: list[list[tuple[list[int], int]]] = []
    for step in range(config.steps):
        batches = batches or _length_buckets(examples, config.batch_size, rng)
        inputs, labels, mask = _batch(batches.pop(), pad_id)
        loss = model(input_ids=inputs, attention_mask=mask.long(), labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        recent = (recent + [loss.item()])[-20:]
        on_step(step, recent[-1])
    model.eval()
    return sum(recent) / len(recent)


def build_policy(out_dir: Path, config: SftConfig = SftConfig(),
                 model_config: TinyModelConfig = POLICY_MODEL,
                 on_step: Callable[[int, float], None] = lambda step, loss: None
                 ) -> dict[str, Any]:
    """Tokenizer + tiny model + SFT on expert demonstrations, saved to ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM

    tasks = training_tasks(config.tasks_per_family, config.seed)
    mix = MIXES[config.mix].at_strength(config.strength)
    pairs = demonstrations(mix, tasks, config.demos_per_task, config.seed)
    tokenizer = build_tokenizer((p + c for p, c in pairs), vocab_size=config.vocab_size)
    # Servers that render chats with the model's own template then build the trained prompts.
    tokenizer.chat_template = TRANSCRIPT_TEMPLATE
    build_tiny_model(tokenizer, out_dir, model_config)
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                 local_files_only=True)
    examples = encode_examples(tokenizer, pairs, model_config.max_positions)
    final_loss = train_sft(model, examples, tokenizer.pad_token_id, config, on_step)
    model.save_pretrained(out_dir, safe_serialization=True)
    info = {"sft": asdict(config), "model": asdict(model_config), "demonstrations": len(pairs),
            "final_loss": round(final_loss, 4)}
    (out_dir / "policy.json").write_text(json.dumps(info, indent=2) + "\n")
    return info
