"""Tiny models trained to answer set prompts with set replies, well-formed tool calls or broken
ones, so that tool calling is exercised end to end with a real model and real tokens; ``build``
makes the integration tests' one (what it answers to each request of REPLIES, and the TOOLS it is
offered)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LINT_TOOL", "READ_FILE_TOOL", "REPLIES", "TOOLS", "build", "build_tool_model",
           "train_replies"]

REPLIES = {
    "Read calc.py.": '<tool>read_file {"path": "calc.py"}</tool>',
    "Look around.": '<tool>lint {}</tool><tool>read_file {"path": "src/app/calc.py"}</tool>',
    "Break it.": '<tool>read_file {"path": calc.py}</tool>',
    "Open calc.py.": '<tool>read_file {"file": "calc.py"}</tool>',
    "Say done.": "Done.",
}
READ_FILE_TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"], "additionalProperties": False}}}
LINT_TOOL = {"type": "function", "function": {"name": "lint", "description": "Lint the code."}}
TOOLS = [READ_FILE_TOOL, LINT_TOOL]


def train_replies(out_dir: Path, tokenizer: Any, pairs: Sequence[tuple[str, str]],
                  config: Any = None, steps: int = 120, learning_rate: float = 1e-2,
                  batch_size: int | None = None) -> Path:
    """A tiny model (``config``: a ``TinyModelConfig``) for ``tokenizer`` that answers each
    prompt of ``pairs`` with its reply and then ends; saved with the tokenizer in ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.policy.sft import SftConfig, encode_examples, train_sft
    from harness.policy.tiny import TinyModelConfig, build_tiny_model

    build_tiny_model(tokenizer, out_dir, config or TinyModelConfig())
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                 local_files_only=True)
    examples = encode_examples(tokenizer, list(pairs), model.config.max_position_embeddings)
    sft = SftConfig(steps=steps, batch_size=batch_size or len(pairs),
                    learning_rate=learning_rate)
    with torch.random.fork_rng():
        train_sft(model, examples, tokenizer.pad_token_id, sft)
    model.save_pretrained(out_dir, safe_serialization=True)
    return out_dir


def build_tool_model(out_dir: Path, replies: Mapping[str, str], chat_template: str,
                     tools: Sequence[Mapping[str, Any]], added_tokens: Sequence[str] = (),
                     steps: int = 120, learning_rate: float = 1e-2, config: Any = None) -> Path:
    """A tiny model that answers each user message of ``replies`` with its text (near
    certainly, whatever the seed), asked as the torch engine renders a chat under
    ``chat_template`` with ``tools``; ``added_tokens`` become single tokens (vLLM's hermes
    parser needs ``<tool_call>`` and ``</tool_call>`` in the vocabulary); ``config`` is a
    ``TinyModelConfig`` (wider models want a lower ``learning_rate``)."""
    from harness.policy.tiny import build_tokenizer
    from schemas.tooldefs import parse_tool_request
    from serving.engine.chat import render_chat, renders_tools

    tokenizer = build_tokenizer([*replies, *replies.values()] * 4, vocab_size=300)
    tokenizer.add_tokens(list(added_tokens))
    tokenizer.chat_template = chat_template
    native = renders_tools(tokenizer, chat_template)
    offered = parse_tool_request({"tools": list(tools)})
    pairs = [(render_chat(tokenizer, chat_template, native, [{"role": "user", "content": ask}],
                          offered).text, reply) for ask, reply in replies.items()]
    return train_replies(out_dir, tokenizer, pairs, config, steps, learning_rate)


def build(out_dir: Path) -> Path:
    """A tiny model with the harness's transcript chat template (no tools section, so the
    engine's fallback applies, as for the demo's policy), trained to answer each request of
    REPLIES with its call: deterministic tool calls from a real model."""
    from harness.policy.base import TRANSCRIPT_TEMPLATE

    return build_tool_model(out_dir, REPLIES, TRANSCRIPT_TEMPLATE, TOOLS)
