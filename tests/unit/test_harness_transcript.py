"""The transcript format is one chat template: the harness renders it itself and a tokenizer
carrying it (the tiny policy's) renders the same prompt to the character."""

from __future__ import annotations

import random

from harness.policy.base import TRANSCRIPT_TEMPLATE, render_prompt
from harness.policy.tiny import build_tokenizer


def _conversation(rng: random.Random) -> list[dict]:
    words = ["fix", "calc.py", '<tool>lint {}</tool>', "ü", "x\ny", "return a + b"]

    def text(longest: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, longest)))

    messages = [{"role": "user", "content": text(20)}]
    for turn in range(rng.randint(0, 10)):
        messages.append({"role": "assistant", "content": text(rng.choice([3, 150]))})
        if rng.random() < 0.7:
            messages += [{"role": "tool", "tool_call_id": f"c{turn}-{n}",
                          "content": text(rng.choice([3, 120]))}
                         for n in range(rng.randint(1, 3))]
        else:
            messages.append({"role": "user", "content": text(8)})
    return messages


def test_a_tokenizer_carrying_the_template_renders_the_harness_prompt() -> None:
    tokenizer = build_tokenizer(["Task: fix\nA: <tool>lint {}</tool>\n"] * 4, vocab_size=300)
    tokenizer.chat_template = TRANSCRIPT_TEMPLATE
    rng = random.Random(7)
    for _ in range(200):
        messages = _conversation(rng)
        served = tokenizer.apply_chat_template(
            [{"role": "system", "content": "ignored"}, *messages], add_generation_prompt=True,
            tokenize=False)
        assert served == render_prompt(messages)


def test_latest_turns_fit_the_budget_long_messages_are_cut_and_observations_joined() -> None:
    messages = [{"role": "user", "content": "Rename cnt."}]
    messages += [{"role": "assistant", "content": "a" * 500},
                 {"role": "tool", "content": "first"}, {"role": "tool", "content": "second"}]
    prompt = render_prompt(messages)
    assert prompt == ("Task: Rename cnt.\nA: " + "a" * 400 + " ...\n"
                      "O: first\n---\nsecond\nA: ")
    many = messages[:1] + [{"role": "user", "content": f"turn {i} " + "b" * 90}
                           for i in range(30)]
    prompt = render_prompt(many)
    assert len(prompt) <= 1400 + len("A: ") and "turn 29" in prompt and "turn 0 " not in prompt
    assert prompt.startswith("Task: Rename cnt.\nU: turn ")
