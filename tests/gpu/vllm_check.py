"""GPU check: the gateway's vLLM backend serves hot-loaded LoRA checkpoints with behaviour
logprobs equal to a torch recomputation, and tool calls that vLLM parses and the gateway judges.

On a machine with an NVIDIA GPU and vLLM installed (nothing is downloaded, no Kafka needed):

    python -m tests.gpu.vllm_check            # --dtype float32 by default
    python -m tests.gpu.vllm_check --dtype bfloat16 --keep
    python -m tests.gpu.vllm_check --engine  # dry run on the torch engine, no GPU needed

It builds a tiny Llama model (trained to write two tool calls, see ``vllm_check_tools``) and a
random LoRA adapter locally, starts ``vllm serve`` with runtime LoRA loading, processed
logprobs and hermes tool calling, starts the gateway (in this process, on loopback) whose
registry has the adapter in production and a 50% holdout on the base model, so the gateway
hot-loads the adapter through ``/v1/load_lora_adapter``. It then sends completions and chat
completions (streamed and not, temperature 0.7 and 1.0) and chats with tools through the
gateway, recomputes every logged behaviour logprob with one teacher-forced torch forward pass,
checks the tool calls and the gateway's broken-call record, and prints PASS/FAIL lines; the
exit status is 0 only when every check passes.
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


def _build(root: Path) -> tuple[Path, Path]:
    from harness.policy.tiny import TinyModelConfig
    from infra.models import build_random_adapter
    from tests.gpu.vllm_check_tools import ADDED_TOKENS, REPLIES, TOOL_TEMPLATE, TOOLS
    from tests.support.tool_model import build_tool_model

    # head_dim 64 and fp32-friendly sizes: every vLLM attention and LoRA kernel supports them.
    config = TinyModelConfig(hidden_size=256, layers=2, heads=4, intermediate_size=512)
    base = build_tool_model(root / "base", REPLIES, TOOL_TEMPLATE, TOOLS, ADDED_TOKENS,
                            learning_rate=3e-3, config=config)
    return base, build_random_adapter(base, root / "ckpt-1", seed=1, rank=8)


def _start_vllm(base: Path, root: Path, port: int, dtype: str) -> subprocess.Popen[bytes]:
    from tests.gpu.vllm_check_tools import TOOL_TEMPLATE, VLLM_TOOL_FLAGS

    vllm = shutil.which("vllm")
    if vllm is None:
        sys.exit("FAIL vllm: the vllm command is not installed (pip install vllm)")
    template = root / "chat_template.jinja"
    template.write_text(TOOL_TEMPLATE)
    command = [
        vllm, "serve", str(base), "--served-model-name", "tiny-base", "--port", str(port),
        "--host", "127.0.0.1", "--dtype", dtype, "--max-model-len", "512", "--enforce-eager",
        "--enable-lora", "--max-lora-rank", "8", "--max-loras", "2",
        "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm",
        "--chat-template", str(template), "--gpu-memory-utilization", "0.3", "--seed", "0",
        *VLLM_TOOL_FLAGS,
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
    from tests.support.service_keys import GATEWAY_HEADERS

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
                    with httpx.stream("POST", gateway + path, json=body, timeout=120,
                                      headers=GATEWAY_HEADERS) as r:
                        r.raise_for_status()
                        chunks = list(parse_sse_lines(r.iter_lines()))
                    assert all("error" not in c for c in chunks), chunks[-1]
                    arms = {c["arm"] for c in chunks}
                else:
                    r = httpx.post(gateway + path, json=body, timeout=120,
                                   headers=GATEWAY_HEADERS)
                    r.raise_for_status()
                    arms = {r.json()["arm"]}
                replies.append({"arm": arm, "arms": arms, "path": path})
    return replies


def _compare(events: list, models: dict, tokenizer) -> tuple[float, float, bool]:
    """(max |logged - recomputed|, max |logged - untempered| at T != 1, ids ok). Reading the
    raw logprobs instead of the processed ones is a server-wide mistake, so one completion that
    shows it suffices; the base model is trained to near certainty and hides it on its own."""
    from infra.models import teacher_forced_logprobs

    worst, separation, ids_ok = 0.0, 0.0, True
    for event in events:
        p = event.payload
        model = models[event.checkpoint_id]
        expected = teacher_forced_logprobs(model, p.prompt_token_ids, p.completion_token_ids,
                                           p.sampling.temperature)
        gaps = (abs(a - b) for a, b in zip(p.behaviour_logprobs, expected, strict=True))
        worst = max([worst, *gaps])
        if p.sampling.temperature != 1.0:
            raw = teacher_forced_logprobs(model, p.prompt_token_ids, p.completion_token_ids)
            separation = max(separation, max(abs(a - b) for a, b in
                                             zip(p.behaviour_logprobs, raw, strict=False)))
        if p.completion_id.startswith("cmpl-"):
            ids_ok &= p.prompt_token_ids == tokenizer("def add(a, b):").input_ids
    return worst, separation, ids_ok


def _run(root: Path, port: int, dtype: str, engine: bool) -> bool:
    import httpx
    import torch

    from infra.models import load_policy
    from schemas.checkpoints import CheckpointEvent
    from serving.gateway.app import GatewayConfig, create_gateway_app
    from serving.gateway.arms import HOLDOUT_ARM, ArmSplit, assign_arm
    from serving.gateway.backend import BackendClient
    from serving.gateway.sinks import MemoryEventSink
    from serving.local_server import serve_in_thread
    from tests.gpu.vllm_check_tools import judge_tool_replies, send_tool_requests
    from tests.support.service_keys import gateway_auth

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
        gateway_app = create_gateway_app(config, BackendClient(url), sink, gateway_auth())
        with serve_in_thread(gateway_app) as gateway:
            models = httpx.get(f"{url}/v1/models").json()["data"]
            loaded = any(m["id"] == "ckpt-1" for m in models)
            results.append((loaded, "gateway hot-loaded ckpt-1 via /v1/load_lora_adapter"))
            replies = _requests(gateway.url, users)
            plain = len(sink.events)
            tool_replies = send_tool_requests(gateway.url, users[HOLDOUT_ARM])
        routed = all(r["arms"] == {r["arm"]} for r in replies)
        results.append((routed, f"{len(replies)} requests served on arms {sorted(users)}"))
        named = {e.checkpoint_id for e in sink.events[:plain]} == {"ckpt-1", "base"}
        results.append((plain == len(replies) and named,
                        f"{plain} completion.served events naming ckpt-1 and base"))
        results += judge_tool_replies(tool_replies, sink.events[plain:])
        events = [e for e in sink.events if e.type == "completion.served"]
        device = "cuda" if torch.cuda.is_available() else "cpu"
        policies = {"ckpt-1": load_policy(adapter, device=device)[0],
                    "base": load_policy(base, device=device)[0]}
        tokenizer = load_policy(base)[1]
        worst, separation, ids_ok = _compare(events, policies, tokenizer)
        tol = TOLERANCE[dtype]
        results.append((ids_ok, "the backend's prompt token ids equal the local tokenizer's"))
        results.append((worst <= tol, f"max |logged - torch recomputed| logprob = {worst:.2e} "
                                      f"(tolerance {tol:.0e}, {dtype})"))
        results.append((separation > 5 * tol, f"untempered logprobs differ by up to "
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
