"""The trainer benchmark runs end to end and reports both sides and their ratio."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rewardstream.cli import app


def test_bench_trainer_reports_both_rates_and_the_ratio() -> None:
    result = CliRunner().invoke(app, ["bench", "trainer", "--json", "--steps", "1", "--batch", "2",
                                      "--prompt-len", "4", "--completion-len", "4",
                                      "--hidden", "32", "--layers", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["tokens_per_step"] == 16
    assert report["trainer_tokens_per_s"] > 0 and report["reference_tokens_per_s"] > 0
    assert report["ratio"] == report["trainer_tokens_per_s"] / report["reference_tokens_per_s"]


def test_bench_trainer_trains_a_given_model_with_lora(tiny_model_dir) -> None:
    result = CliRunner().invoke(app, ["bench", "trainer", "--json", "--steps", "1", "--batch", "2",
                                      "--prompt-len", "4", "--completion-len", "4",
                                      "--model", str(tiny_model_dir), "--lora"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    model = report["model"]
    assert model["dir"] == str(tiny_model_dir) and model["lora"] is True
    assert 0 < model["trainable"] < model["params"] and report["ratio"] > 0
