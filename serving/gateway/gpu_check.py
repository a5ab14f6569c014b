"""GPU check: the gateway's vLLM backend serves hot-loaded LoRA checkpoints with behaviour
logprobs equal to a torch recomputation.

On a machine with an NVIDIA GPU and vLLM installed (nothing is downloaded, no Kafka needed):

    python -m serving.gateway.gpu_check            # --dtype float32 by default
    python -m serving.gateway.gpu_check --dtype bfloat16 --keep
    python -m serving.gateway.gpu_check --engine  # dry run on the torch engine, no GPU needed

It builds a tiny Llama model and two random LoRA adapters locally, starts ``vllm serve`` with
runtime LoRA loading and processed logprobs, starts the gateway (in this process, on loopback)
whose registry has one adapter in production and a 50% holdout on the base model, so the
gateway hot-loads the adapter through ``/v1/load_lora_adapter``. It then sends completions and
chat completions (streamed and not, temperature 0.7 and 1.0) through the gateway, recomputes
every logged behaviour logprob with one teacher-forced torch forward pass, and prints PASS/FAIL
lines; the exit status is 0 only when every check passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["main"]

TOLERANCE = {"float32": 2e-3, "float16": 5e-2, "bfloat16": 1e-1}
CORPUS = ["def add(a, b):\n    return a + b\n", "The tests pass now. I kept the change small.",
          '<tool>read_file {"path": "src/app.py"}</tool>'] * 20


def _build(root: Path) -> tuple[Path, Path]:
    from harness.policy.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
    from serving.testing import build_random_adapter

    # head_dim 64 and fp32-friendly sizes: every vLLM attention and LoRA kernel supports them.
    config = TinyModelConfig(hidden_size=256, layers=2, heads=4, intermediate_size=512)
    base = build_tiny_model(build_tokenizer(CORPUS, vocab_size=512), root / "base", config)
    return base, build_random_adapter(base, root / "ckpt-1", seed=1, rank=8)


def _start_vllm(base: Path, root: Path, port: int, dtype: str) -> subprocess.Popen[bytes]:
    from serving.engine.protocol import DEFAULT_CHAT_TEMPLATE

    vllm = shutil.which("vllm")
    if vllm is None:
        sys.exit("FAIL vllm: the vllm command is not installed (pip install vllm)")
    template = root / "chat_template.jinja"
    template.write_text(DEFAULT_CHAT_TEMPLATE)
    command = [
        vllm, "serve", str(base), "--served-model-name", "tiny-base", "--port", str(port),
        "--host", "127.0.0.1", "--dtype", dtype, "--max-model-len", "512", "--enforce-eager",
        "--enable-lora", "--max-lora-rank", "8", "--max-loras", "2",
        "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm",
        "--chat-template", str(template), "--gpu-memory-utilization", "0.3", "--seed", "0",
    ]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "HF_HUB_OFFLINE": "1"}
    log = (root / "vllm.log").open("wb")
    print("starting:", " ".join(command), flush=True)
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_healthy(url: str, child: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    print(log.read_text(errors="replace")[-4000:])
    sys.exit("FAIL vllm: server did not become healthy (log tail above)")


def _requests(gateway: str, users: dict[str, str]) -> list[dict]:
    """Streamed and whole completions and chats through the gateway, on both arms."""
    import httpx

    from serving.sse import parse_sse_lines

    replies = []
    for arm, user in users.items():
        for temperature, stream in ((0.7, False), (1.0, True)):
            for path, body in (
                ("/v1/completions", {"prompt": "def add(a, b):"}),
                ("/v1/chat/completions", {"messages": [{"role": "user", "content": "fix it"}]}),
            ):
                body |= {"model": "rewardstream", "max_tokens": 16, "temperature": temperature,
                         "ignore_eos": True, "seed": 7, "user": user, "stream": stream}
                if stream:
                    with httpx.stream("POST", gateway + path, json=body, timeout=120) as r:
                        r.raise_for_status()
                        chunks = list(parse_sse_lines(r.iter_lines()))
                    assert all("error" not in c for c in chunks), chunks[-1]
                    arms = {c["arm"] for c in chunks}
                else:
                    r = httpx.post(gateway + path, json=body, timeout=120)
                    r.raise_for_status()
                    arms = {r.json()["arm"]}
                replies.append({"arm": arm, "arms": arms, "path": path})
    return replies


def _compare(events: list, models: dict, tokenizer) -> tuple[float, float, bool]:
    """(max |logged - recomputed|, smallest max |logged - untempered| at T != 1, ids ok)."""
    from serving.testing import teacher_forced_logprobs

    worst, separation, ids_ok = 0.0, float("inf"), True
    for event in events:
        p = event.payload
        model = models[event.checkpoint_id]
        expected = teacher_forced_logprobs(model, p.prompt_token_ids, p.completion_token_ids,
                                           p.sampling.temperature)
        worst = max([worst, *(abs(a - b) for a, b in zip(p.behaviour_logprobs, expected))])
        if p.sampling.temperature != 1.0:
            raw = teacher_forced_logprobs(model, p.prompt_token_ids, p.completion_token_ids)
            separation = min(separation, max(abs(a - b) for a, b in
                                             zip(p.behaviour_logprobs, raw)))
        if p.completion_id.startswith("cmpl-"):
            ids_ok &= p.prompt_token_ids == tokenizer("def add(a, b):").input_ids
    return worst, separation, ids_ok


def _run(root: Path, port: int, dtype: str, engine: bool) -> bool:
    import httpx
    import torch

    from schemas.checkpoints import CheckpointEvent
    from serving.gateway.app import GatewayConfig, create_gateway_app
    from serving.gateway.arms import ArmSplit, assign_arm
    from serving.gateway.backend import BackendClient
    from serving.gateway.sinks import MemoryEventSink
    from serving.local_server import serve_in_thread
    from trainer.modeling import load_policy

    base, adapter = _build(root)
    if engine:
        from serving.engine.cli import build_engine_app

        backend = serve_in_thread(build_engine_app(base, "tiny-base"))
        url, stop = backend.url, backend.stop
    else:
        child = _start_vllm(base, root, port, dtype)
        url = f"http://127.0.0.1:{port}"

        def stop() -> None:
            child.terminate()
            child.wait(60)
    results: list[tuple[bool, str]] = []
    try:
        if not engine:
            _wait_healthy(url, child, root / "vllm.log", timeout_s=900)
        results.append((True, f"{'torch engine' if engine else 'vllm serve'} is up with LoRA"))
        split = ArmSplit(holdout_fraction=0.5)
        users = {}
        for i in range(100):
            users.setdefault(assign_arm(f"user-{i}", split), f"user-{i}")
        event = CheckpointEvent(
            event_id="e1", sequence=1, occurred_at=datetime.now(UTC), kind="promoted",
            status="production", checkpoint_id="ckpt-1", model="tiny", path=str(adapter),
            adapter=True, base_path=str(base))
        sink = MemoryEventSink()
        config = GatewayConfig(split=split, initial_registry=(event,))
        with serve_in_thread(create_gateway_app(config, BackendClient(url), sink)) as gateway:
            models = httpx.get(f"{url}/v1/models").json()["data"]
            loaded = any(m["id"] == "ckpt-1" for m in models)
            results.append((loaded, "gateway hot-loaded ckpt-1 via /v1/load_lora_adapter"))
            replies = _requests(gateway.url, users)
        routed = all(r["arms"] == {r["arm"]} for r in replies)
        results.append((routed, f"{len(replies)} requests served on arms {sorted(users)}"))
        events = sink.events
        named = {e.checkpoint_id for e in events} == {"ckpt-1", "base"}
        results.append((len(events) == len(replies) and named,
                        f"{len(events)} completion.served events naming ckpt-1 and base"))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        policies = {"ckpt-1": load_policy(adapter, device=device)[0],
                    "base": load_policy(base, device=device)[0]}
        tokenizer = load_policy(base)[1]
        worst, separation, ids_ok = _compare(events, policies, tokenizer)
        tol = TOLERANCE[dtype]
        results.append((ids_ok, "the backend's prompt token ids equal the local tokenizer's"))
        results.append((worst <= tol, f"max |logged - torch recomputed| logprob = {worst:.2e} "
                                      f"(tolerance {tol:.0e}, {dtype})"))
        results.append((separation > 5 * tol, f"untempered logprobs differ by >= "
                        f"{separation:.2e} at T=0.7, so the check can tell them apart"))
    finally:
        stop()
    for ok, line in results:
        print(("PASS " if ok else "FAIL ") + line)
    return all(ok for ok, _ in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8011, help="port for vllm serve")
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="float32")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (model, log)")
    parser.add_argument("--engine", action="store_true",
                        help="dry run against the built-in torch engine instead of vLLM")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rewardstream-gpu-check-"))
    try:
        ok = _run(root, args.port, args.dtype, args.engine)
    finally:
        if args.keep:
            print("work dir:", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print("SUMMARY:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
