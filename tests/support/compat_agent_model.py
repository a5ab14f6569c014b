"""The compatibility suite's model: a tiny model that plays a two-tool weather agent for every
client, whatever the client's own system prompt.

Its attention sees only the last few dozen tokens (a sliding window), so what it writes depends
on how the conversation ends, never on a framework's system prompt (smolagents' runs to
thousands of characters) or on the random call ids earlier in the conversation. It is trained
on the endings each client's conversation has at each step, rendered by the torch engine's own
prompt code, behind varied earlier text: asked for the weather, it calls ``get_weather``; given
``sunny``, it calls ``get_time``; given ``14:05``, it answers. smolagents gets the same in its
own forms: observations as user messages, the answer through ``final_answer``, and for its
CodeAgent, code blocks ended by the ``</code>`` stop sequence. The clients ask for greedy
decoding (``temperature: 0``), so each run is the same; the model need not be good, the
protocol must hold.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["ANSWER", "CITY", "CODE_ANSWER", "CODE_TASK", "FINAL_ANSWER", "FINAL_ANSWER_TOOL",
           "TASK", "TIME", "TOOLS", "WEATHER", "build", "get_time", "get_weather", "run_tool"]

CITY, WEATHER, TIME = "Paris", "sunny", "14:05"
TASK = f"What is the weather in {CITY}?"
CODE_TASK = f"Write code to get the weather in {CITY}."
# The answers differ in their words, so that no reply holds another: the window could not
# tell which one it is writing.
ANSWER = f"It is {WEATHER} in {CITY} at {TIME}."  # a chat's last reply
FINAL_ANSWER = f"{CITY}: {WEATHER}, {TIME}"  # smolagents' final_answer call
CODE_ANSWER = f"{WEATHER} at {TIME}"  # what smolagents' CodeAgent's code returns


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return WEATHER


def get_time(city: str) -> str:
    """The local time in a city.

    Args:
        city: The city.
    """
    return TIME


def run_tool(name: str, arguments: str) -> str:
    """A tool call of an OpenAI reply, run: its result as a tool message's content."""
    return {"get_weather": get_weather, "get_time": get_time}[name](**json.loads(arguments))


def _function(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}


TOOLS = [_function("get_weather", "The weather in a city."),
         _function("get_time", "The local time in a city.")]
FINAL_ANSWER_TOOL = {"type": "function", "function": {
    "name": "final_answer", "description": "Provides a final answer to the given problem.",
    "parameters": {"type": "object", "properties": {"answer": {"type": "string"}},
                   "required": ["answer"]}}}


def _call(name: str, arguments: dict[str, str]) -> str:
    return f"<tool>{name} {json.dumps(arguments)}</tool>"


_ASK_WEATHER = _call("get_weather", {"city": CITY})
_ASK_TIME = _call("get_time", {"city": CITY})
_CODE_WEATHER = f'print(get_weather(city="{CITY}"))'
_CODE_ANSWER = f'final_answer("{WEATHER} at " + get_time(city="{CITY}"))'
Message = dict[str, Any]


def _openai_call(rng: random.Random, name: str) -> Message:
    call_id = f"call_{rng.getrandbits(96):024x}"
    return {"role": "assistant", "content": rng.choice([None, ""]), "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps({"city": CITY})}}]}


def _smol_call(rng: random.Random, name: str, arguments: Any) -> Message:
    """An earlier call as smolagents writes it into the conversation: as text."""
    call_id = f"call_{rng.getrandbits(96):024x}" if name != "python_interpreter" else "call_1"
    return {"role": "assistant", "content": f"Calling tools:\n[{{'id': '{call_id}', 'type': "
            f"'function', 'function': {{'name': '{name}', 'arguments': {arguments!r}}}}}]"}


def conversations(rng: random.Random, system: str) -> list[tuple[list[Message], str]]:
    """Each step of each client's run: the conversation so far, in the client's own form, and
    what the model answers; ``system``: the client's system prompt, if it sends one."""
    head: list[Message] = [{"role": "system", "content": system}] if system else []
    ask = rng.choice([TASK, [{"type": "text", "text": TASK}]])
    chat = [*head, {"role": "user", "content": ask}]
    chat_weather = [*chat, _openai_call(rng, "get_weather"), {"role": "tool", "content": WEATHER}]
    chat_time = [*chat_weather, _openai_call(rng, "get_time"), {"role": "tool", "content": TIME}]
    smol = [*head, {"role": "user", "content": f"New task:\n{TASK}"}]
    smol_weather = [*smol, _smol_call(rng, "get_weather", {"city": CITY}),
                    {"role": "user", "content": f"Observation:\n{WEATHER}"}]
    smol_time = [*smol_weather, _smol_call(rng, "get_time", {"city": CITY}),
                 {"role": "user", "content": f"Observation:\n{TIME}"}]
    code = [*head, {"role": "user", "content": f"New task:\n{CODE_TASK}"}]
    first_code = f"Thought: I look up the weather.\n<code>\n{_CODE_WEATHER}\n"
    code_weather = [*code, {"role": "assistant", "content": f"{first_code}</code>\n"
                            + _smol_call(rng, "python_interpreter", _CODE_WEATHER)["content"]},
                    {"role": "user", "content": f"Observation:\nExecution logs:\n{WEATHER}\n"
                                                "Last output from code snippet:\nNone"}]
    return [(chat, _ASK_WEATHER), (chat_weather, _ASK_TIME), (chat_time, ANSWER),
            (smol, _ASK_WEATHER), (smol_weather, _ASK_TIME),
            (smol_time, _call("final_answer", {"answer": FINAL_ANSWER})),
            (code, first_code + "</code>"),
            (code_weather, f"Thought: I answer.\n<code>\n{_CODE_ANSWER}\n</code>")]


# What a training prompt keeps of its rendering: the end, well past what the window sees
# (the model cannot use more, and training on it would only cost time).
_TAIL_CHARS = 320


def _prompts(tokenizer: Any, corpus: str, variants: int, seed: int) -> list[tuple[str, str]]:
    """Every client's every step, rendered as the torch engine renders it, each ``variants``
    times with other call ids and a system prompt of other text (or none)."""
    from schemas.tooldefs import parse_tool_request
    from serving.engine.chat import render_chat
    from serving.engine.protocol import DEFAULT_CHAT_TEMPLATE

    rng = random.Random(seed)
    offered = [parse_tool_request({"tools": TOOLS}), None,
               parse_tool_request({"tools": [*TOOLS, FINAL_ANSWER_TOOL],
                                   "tool_choice": "required"})]
    pairs = []
    for _ in range(variants):
        start = rng.randrange(0, max(1, len(corpus) - 400))
        system = rng.choice(["", corpus[start:start + rng.randrange(20, 400)]])
        for messages, reply in conversations(rng, system):
            rendered = render_chat(tokenizer, DEFAULT_CHAT_TEMPLATE, False, messages,
                                   rng.choice(offered))
            pairs.append((rendered.text[-_TAIL_CHARS:], reply))
    return pairs


def build(out_dir: Path, corpus: Sequence[str] = (), variants: int = 12, steps: int = 400,
          seed: int = 0) -> Path:
    """Train the model into ``out_dir``; ``corpus``: text like the clients' system prompts
    (its tokenizer learns them too, so they cost few tokens)."""
    import torch

    from harness.policy.tiny import TinyModelConfig, build_tokenizer
    from tests.support.tool_model import train_replies

    text = "\n".join(corpus) or TASK
    steps_of_runs = conversations(random.Random(seed), "")
    replies = [reply for _, reply in steps_of_runs]
    said = [str(m["content"]) for messages, _ in steps_of_runs for m in messages]
    tokenizer = build_tokenizer([text, *replies * 8, *said], vocab_size=512)
    pairs = _prompts(tokenizer, text, variants, seed)
    # The window sees about the last 80 tokens: the ending, never the system prompt.
    config = TinyModelConfig(max_positions=16_384, sliding_window=40, seed=seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small batches: one thread trains as fast, and shares a busy CPU
    try:
        return train_replies(out_dir, tokenizer, pairs, config, steps, batch_size=16)
    finally:
        torch.set_num_threads(threads)
