"""A built-in eval suite: how likely a checkpoint finds held-out demonstrations, per family.

Each demonstration string is one task; its score is the geometric-mean token probability the
checkpoint assigns to it, ``exp(mean log p)``, in (0, 1]. It needs no sandbox, so the gate works
before the harness's agent tasks are wired in (a harness suite plugs in as
``eval_suite = "package.module:factory"``).
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import torch

from schemas.evals import EvalSuite, TaskResult
from trainer.batch import token_logprobs
from trainer.errors import TrainerConfigError

__all__ = ["DEFAULT_DEMONSTRATIONS", "LikelihoodSuite", "build_suite"]

DEFAULT_DEMONSTRATIONS: dict[str, list[str]] = {
    "edit": [
        '<tool>edit_file {"path": "src/app.py", "search": "a - b", "replace": "a + b"}</tool>',
        '<tool>edit_file {"path": "src/util.py", "search": "return x", '
        '"replace": "return y"}</tool>',
        "def add(a, b):\n    return a + b\n",
        "def sub(a, b):\n    return a - b\n",
    ],
    "tool": [
        '<tool>read_file {"path": "src/app.py"}</tool>',
        '<tool>read_file {"path": "tests/test_app.py"}</tool>',
        '<tool>grep {"pattern": "def add"}</tool>',
        '<tool>list_dir {"path": "src"}</tool>',
    ],
    "reply": [
        "The tests pass now. I kept the change small.",
        "I fixed the sign in add and the tests pass.",
        "The change is small and the tests pass now.",
        "I read the file, fixed the bug and kept the change small.",
    ],
}


class LikelihoodSuite:
    def __init__(self, demonstrations: dict[str, list[str]] | None = None) -> None:
        self.demonstrations = demonstrations or DEFAULT_DEMONSTRATIONS

    def evaluate(self, checkpoint_dir: Path, seed: int) -> list[TaskResult]:
        """Deterministic: every demonstration is scored; ``seed`` has no draws to make."""
        from transformers.utils import logging

        from infra.models import load_policy

        logging.disable_progress_bar()
        model, tokenizer = load_policy(checkpoint_dir)
        results = []
        with torch.no_grad():
            for family, texts in sorted(self.demonstrations.items()):
                for i, text in enumerate(texts):
                    ids = [tokenizer.bos_token_id, *tokenizer(text).input_ids]
                    input_ids = torch.tensor([ids])  # (1, L)
                    logprobs = token_logprobs(model(input_ids=input_ids).logits, input_ids)
                    score = math.exp(float(logprobs.mean()))
                    results.append(TaskResult(f"{family}-{i}", family, score))
        return results


def build_suite(spec: str, demos: Path | None) -> EvalSuite:
    """``builtin`` (optionally with a demonstrations JSON file) or ``package.module:factory``."""
    if spec == "builtin":
        data = json.loads(demos.read_text()) if demos is not None else None
        return LikelihoodSuite(data)
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TrainerConfigError(
            f"eval_suite={spec!r} cannot be imported ({exc}); "
            "use 'builtin' or 'package.module:factory'"
        ) from None
    return factory()
