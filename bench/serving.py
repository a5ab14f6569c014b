"""``rewardstream bench serving``: tokens/s and time to first token of the gateway on the torch
engine, against plain transformers generation of the same model in the same run.

Three paths generate the same number of tokens from the same prompt, one request at a time:
plain ``model.generate`` in this process (the baseline), ``rewardstream serve engine`` over HTTP,
and ``rewardstream serve gateway`` in front of that engine (arm assignment, routing, token ids
and logprobs, ``completion.served`` built and handed to a sink that keeps nothing). Engine and
gateway run as their own processes, as deployed. Time to first token is measured by the client;
tokens/s is completion tokens over the whole request time.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

__all__ = ["register", "run_serving_bench"]

PROMPT = "def add(a, b):\n    return"


class _FirstTokenTimer:
    """A transformers streamer that notes when the first generated token arrives."""

    def __init__(self) -> None:
        self.calls, self.first_s = 0, 0.0

    def put(self, _value: Any) -> None:
        self.calls += 1
        if self.calls == 2:  # the first call carries the prompt
            self.first_s = time.perf_counter()

    def end(self) -> None:
        pass


def _plain_generate(model: Any, tokenizer: Any, max_tokens: int) -> tuple[float, float]:
    import torch

    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    timer = _FirstTokenTimer()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                             do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                             streamer=timer, pad_token_id=tokenizer.pad_token_id)
    total_s = time.perf_counter() - start
    assert out.shape[1] - ids.shape[1] == max_tokens
    return (timer.first_s - start) * 1000.0, max_tokens / total_s


def _http_generate(url: str, model: str, max_tokens: int) -> tuple[float, float]:
    import httpx

    from serving.sse import parse_sse_lines

    body = {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "logprobs": 0, "return_token_ids": True}
    start = time.perf_counter()
    first_s, tokens = 0.0, 0
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=120) as response:
        for chunk in parse_sse_lines(response.iter_lines()):
            if chunk.get("choices") and chunk["choices"][0].get("token_ids"):
                tokens += len(chunk["choices"][0]["token_ids"])
                first_s = first_s or time.perf_counter()
    total_s = time.perf_counter() - start
    assert tokens == max_tokens, f"{url} returned {tokens} tokens"
    return (first_s - start) * 1000.0, max_tokens / total_s


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _service(args: list[str], torch_threads: int, timeout_s: float = 300.0) -> Iterator[str]:
    """``rewardstream serve <args>`` in a child process; yields its URL once it answers."""
    import httpx

    from schemas.errors import RewardstreamError

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(torch_threads)}
    child = subprocess.Popen([sys.executable, "-m", "infra.cli", "serve", *args,
                              "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                raise RewardstreamError(f"rewardstream serve {args[0]} did not start")
            time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        child.wait(30)


def _summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {"ttft_ms_median": statistics.median(s[0] for s in samples),
            "tokens_per_s_median": statistics.median(s[1] for s in samples)}


def _tiny_model(root: Path, hidden_size: int) -> Path:
    from harness.policy.tiny import TinyModelConfig, build_tiny_model, build_tokenizer

    tokenizer = build_tokenizer([PROMPT, "The tests pass now.", "<tool>read_file</tool>"] * 20,
                                vocab_size=400)
    config = TinyModelConfig(hidden_size=hidden_size, layers=4, heads=4,
                             intermediate_size=4 * hidden_size)
    return build_tiny_model(tokenizer, root / "model", config)


def run_serving_bench(model_dir: Path | None, requests: int, max_tokens: int,
                      hidden_size: int, torch_threads: int = 1) -> dict[str, Any]:
    import torch

    from trainer.modeling import load_policy

    # All three paths share the process, so they share torch's intra-op threads; on a busy
    # machine more threads than free cores makes every path slower and noisier.
    torch.set_num_threads(torch_threads)
    label = str(model_dir) if model_dir else f"tiny(hidden={hidden_size}, layers=4)"
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = model_dir or _tiny_model(Path(tmp), hidden_size)
        model, tokenizer = load_policy(model_dir)
        engine_args = ["engine", "--model", str(model_dir), "--served-model-name", "bench"]
        with _service(engine_args, torch_threads) as engine, \
                _service(["gateway", "--backend-url", engine, "--no-follow", "--events", "none"],
                         torch_threads) as gateway:
            runs = {
                "transformers": lambda: _plain_generate(model, tokenizer, max_tokens),
                "engine": lambda: _http_generate(engine, "bench", max_tokens),
                "gateway": lambda: _http_generate(gateway, "rewardstream", max_tokens),
            }
            results: dict[str, Any] = {}
            for name, run in runs.items():
                run()  # warm-up
                results[name] = _summary([run() for _ in range(requests)])
    base, top = results["transformers"], results["gateway"]
    return {
        "model": label,
        "requests": requests, "max_tokens": max_tokens, "torch_threads": torch.get_num_threads(),
        "results": results,
        "gateway_vs_transformers": {
            "tokens_per_s_ratio": top["tokens_per_s_median"] / base["tokens_per_s_median"],
            "ttft_ratio": top["ttft_ms_median"] / base["ttft_ms_median"],
        },
    }


def serving(
    model: Path = typer.Option(None, exists=True, file_okay=False,
                               help="Local model directory (default: build a tiny one)."),
    requests: int = typer.Option(10, min=1, help="Timed requests per path (after one warm-up)."),
    max_tokens: int = typer.Option(64, min=1, help="Tokens generated per request."),
    hidden_size: int = typer.Option(256, help="Hidden size of the tiny model when none given."),
    torch_threads: int = typer.Option(1, min=1, help="torch intra-op threads for all paths."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Tokens/s and time to first token of the gateway on the torch engine vs plain transformers
    generation, side by side in one run, with the overhead ratio.

    Example: rewardstream bench serving --requests 10 --max-tokens 64
    """
    report = run_serving_bench(model, requests, max_tokens, hidden_size, torch_threads)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"model {report['model']}, {requests} requests x {max_tokens} tokens, "
               f"{report['torch_threads']} torch threads")
    typer.echo(f"{'path':<14}{'ttft ms':>10}{'tokens/s':>12}")
    for name, row in report["results"].items():
        typer.echo(f"{name:<14}{row['ttft_ms_median']:>10.1f}{row['tokens_per_s_median']:>12.1f}")
    ratios = report["gateway_vs_transformers"]
    typer.echo(f"gateway / transformers: tokens/s x{ratios['tokens_per_s_ratio']:.2f}, "
               f"ttft x{ratios['ttft_ratio']:.2f}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("serving")(serving)
