"""``rewardstream bench serving``: tokens/s and time to first token of the gateway on the torch
engine, against plain transformers generation of the same model in the same run, and the cost of
serving a LoRA adapter instead of the base model.

Paths generate the same number of tokens from the same prompt, one request at a time, taking
turns request by request (in a rotating order) so machine load hits them alike: plain
``model.generate`` in this process (the baseline), ``rewardstream serve engine`` over HTTP, and
``rewardstream serve gateway`` in front of that engine (arm assignment, routing, token ids and
logprobs, ``completion.served`` built and handed to a sink that keeps nothing). Then the engine
serves a LoRA adapter too, merged into a copy of the weights (as the production adapter is),
and base and adapter requests are timed in pairs; then a second adapter is loaded, merged into
its own copy (as during an A/B test of two checkpoints), and the pairs are timed again; then a
third, beyond the engine's two merged adapters, served unmerged, and its pairs are timed.
Engine and gateway run as their own processes, as deployed. Time to first token is measured by
the client; tokens/s is completion tokens over the whole request time, and latency is the whole
request time.
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
from collections.abc import Callable, Iterator
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


def _http_generate(url: str, model: str, max_tokens: int,
                   api_key: str | None = None) -> tuple[float, float]:
    import httpx

    from serving.sse import parse_sse_lines

    body = {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "logprobs": 0, "return_token_ids": True}
    start = time.perf_counter()
    first_s, tokens = 0.0, 0
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=120,
                      headers=headers) as response:
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
def _service(args: list[str], torch_threads: int, timeout_s: float = 300.0,
             settings: dict[str, str] | None = None) -> Iterator[str]:
    """``rewardstream serve <args>`` in a child process (``settings`` added to its
    environment); yields its URL once it answers."""
    import httpx

    from schemas.errors import RewardstreamError

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(torch_threads), **(settings or {})}
    child = subprocess.Popen([sys.executable, "-m", "rewardstream", "serve", *args,
                              "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
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


def _gateway_key() -> tuple[str, dict[str, str]]:
    """A fresh gateway key without a rate limit, and the settings that make the gateway take
    it."""
    import secrets

    from serving.ingest.keys import ApiKey, KeyScope, hash_key, new_key

    key = new_key()
    entry = ApiKey("bench", hash_key(key), "bench", rate_per_s=1e9, burst=1e9,
                   scope=KeyScope.GATEWAY).to_entry()
    return key, {"REWARDSTREAM_GATEWAY_KEYS": json.dumps([entry]),
                 "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": secrets.token_hex(16)}


def _summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {"ttft_ms_median": statistics.median(s[0] for s in samples),
            "tokens_per_s_median": statistics.median(s[1] for s in samples)}


def _timed(runs: dict[str, Callable[[], tuple[float, float]]],
           requests: int) -> dict[str, dict[str, float]]:
    """Each path warmed up once, then ``requests`` rounds of one request per path; each round
    starts one path later, so no path always runs right after the same one."""
    for run in runs.values():
        run()
    names = list(runs)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for round_index in range(requests):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(runs[name]())
    return {name: _summary(rows) for name, rows in samples.items()}


def _paired(base: Callable[[], tuple[float, float]], adapter: Callable[[], tuple[float, float]],
            rounds: int) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Base and adapter requests in pairs, alternating which goes first (AB, BA, ...), and the
    medians of the per-pair ratios adapter / base: the two requests of a pair share the machine's
    load of that moment, which on a shared machine swings more than the effect measured."""
    base(), adapter()
    pairs = []
    for index in range(rounds):
        if index % 2:
            second = adapter()
            pairs.append((base(), second))
        else:
            pairs.append((base(), adapter()))
    summaries = {"engine": _summary([b for b, _ in pairs]),
                 "engine+adapter": _summary([a for _, a in pairs])}
    ratios = {"latency_ratio": statistics.median(b[1] / a[1] for b, a in pairs),
              "tokens_per_s_ratio": statistics.median(a[1] / b[1] for b, a in pairs),
              "ttft_ratio": statistics.median(a[0] / b[0] for b, a in pairs)}
    return summaries, ratios


def _load_adapter(engine_url: str, name: str, path: Path) -> None:
    import httpx

    from schemas.errors import RewardstreamError

    response = httpx.post(f"{engine_url}/v1/load_lora_adapter",
                          json={"lora_name": name, "lora_path": str(path)}, timeout=300)
    if response.status_code != 200:
        raise RewardstreamError(f"the engine refused adapter {path}: {response.text[:300]}")


def _tiny_model(root: Path, hidden_size: int) -> Path:
    from harness.policy.tiny import TinyModelConfig, build_tiny_model, build_tokenizer

    tokenizer = build_tokenizer([PROMPT, "The tests pass now.", "<tool>read_file</tool>"] * 20,
                                vocab_size=400)
    config = TinyModelConfig(hidden_size=hidden_size, layers=4, heads=4,
                             intermediate_size=4 * hidden_size)
    return build_tiny_model(tokenizer, root / "model", config)


def _random_adapter(model_dir: Path, out_dir: Path, seed: int) -> Path:
    """A LoRA adapter on the demo's targets (every projection and the output head)."""
    from harness.demo.config import DemoConfig
    from infra.models import build_random_adapter

    return build_random_adapter(model_dir, out_dir, seed,
                                target_modules=tuple(DemoConfig.lora_targets.split(",")))


def run_serving_bench(model_dir: Path | None, requests: int, max_tokens: int,
                      hidden_size: int, torch_threads: int = 1,
                      adapter_dir: Path | None = None) -> dict[str, Any]:
    import torch

    from infra.models import load_policy

    # All three paths share the process, so they share torch's intra-op threads; on a busy
    # machine more threads than free cores makes every path slower and noisier.
    torch.set_num_threads(torch_threads)
    label = str(model_dir) if model_dir else f"tiny(hidden={hidden_size}, layers=4)"
    adapter_label = str(adapter_dir) if adapter_dir else "random, on the demo's LoRA targets"
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = model_dir or _tiny_model(Path(tmp), hidden_size)
        adapter_dir = adapter_dir or _random_adapter(model_dir, Path(tmp) / "adapter", 1)
        model, tokenizer = load_policy(model_dir)
        engine_args = ["engine", "--model", str(model_dir), "--served-model-name", "bench"]
        key, gateway_settings = _gateway_key()
        with _service(engine_args, torch_threads) as engine, \
                _service(["gateway", "--backend-url", engine, "--no-follow", "--events", "none"],
                         torch_threads, settings=gateway_settings) as gateway:
            results = _timed({
                "transformers": lambda: _plain_generate(model, tokenizer, max_tokens),
                "engine": lambda: _http_generate(engine, "bench", max_tokens),
                "gateway": lambda: _http_generate(gateway, "rewardstream", max_tokens, key),
            }, requests)

            def base() -> tuple[float, float]:
                return _http_generate(engine, "bench", max_tokens)

            def adapter() -> tuple[float, float]:
                return _http_generate(engine, "adapter", max_tokens)

            def third() -> tuple[float, float]:
                return _http_generate(engine, "third", max_tokens)

            _load_adapter(engine, "adapter", adapter_dir)
            merged_rows, merged = _paired(base, adapter, requests)
            _load_adapter(engine, "other", _random_adapter(model_dir, Path(tmp) / "other", 2))
            two_rows, two_merged = _paired(base, adapter, requests)
            _load_adapter(engine, "third", _random_adapter(model_dir, Path(tmp) / "third", 3))
            unmerged_rows, unmerged = _paired(base, third, requests)
    results |= {f"{name} (adapter merged)": row for name, row in merged_rows.items()}
    results |= {f"{name} (2 adapters, both merged)": row for name, row in two_rows.items()}
    results |= {f"{name} (3rd adapter, unmerged)": row for name, row in unmerged_rows.items()}
    plain, top = results["transformers"], results["gateway"]
    return {
        "model": label, "adapter": adapter_label,
        "requests": requests, "max_tokens": max_tokens, "torch_threads": torch.get_num_threads(),
        "results": results,
        "gateway_vs_transformers": {
            "tokens_per_s_ratio": top["tokens_per_s_median"] / plain["tokens_per_s_median"],
            "ttft_ratio": top["ttft_ms_median"] / plain["ttft_ms_median"],
        },
        "adapter_vs_base": merged, "two_merged_adapter_vs_base": two_merged,
        "unmerged_adapter_vs_base": unmerged,
    }


def serving(
    model: Path = typer.Option(None, exists=True, file_okay=False,
                               help="Local model directory (default: build a tiny one)."),
    adapter: Path = typer.Option(None, exists=True, file_okay=False,
                                 help="A LoRA checkpoint over --model, e.g. one the trainer "
                                      "wrote (default: a random adapter on every projection "
                                      "and the output head)."),
    requests: int = typer.Option(10, min=1, help="Timed requests per path (after one warm-up)."),
    max_tokens: int = typer.Option(64, min=1, help="Tokens generated per request."),
    hidden_size: int = typer.Option(256, help="Hidden size of the tiny model when none given."),
    torch_threads: int = typer.Option(1, min=1, help="torch intra-op threads for all paths."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Tokens/s and time to first token of the gateway on the torch engine vs plain transformers
    generation, side by side in one run, with the overhead ratio; and adapter / base latency on
    the engine, with the adapter served merged (alone, and beside a second) and a third adapter
    unmerged (beyond the two the engine merges).

    Example: rewardstream bench serving --model runs/policy --adapter runs/ckpt/ID
    """
    report = run_serving_bench(model, requests, max_tokens, hidden_size, torch_threads, adapter)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"model {report['model']}, {requests} requests x {max_tokens} tokens, "
               f"{report['torch_threads']} torch threads")
    typer.echo(f"{'path':<40}{'ttft ms':>10}{'tokens/s':>12}")
    for name, row in report["results"].items():
        typer.echo(f"{name:<40}{row['ttft_ms_median']:>10.1f}{row['tokens_per_s_median']:>12.1f}")
    ratios = report["gateway_vs_transformers"]
    typer.echo(f"gateway / transformers: tokens/s x{ratios['tokens_per_s_ratio']:.2f}, "
               f"ttft x{ratios['ttft_ratio']:.2f}")
    for key, label in (("adapter_vs_base", "merged, one adapter live"),
                       ("two_merged_adapter_vs_base", "merged, two adapters live"),
                       ("unmerged_adapter_vs_base", "unmerged, a third adapter live")):
        row = report[key]
        typer.echo(f"adapter / base on the engine ({label}): latency x{row['latency_ratio']:.2f}, "
                   f"tokens/s x{row['tokens_per_s_ratio']:.2f}, ttft x{row['ttft_ratio']:.2f}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("serving")(serving)
