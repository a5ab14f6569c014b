"""``rewardstream serve engine``: the torch engine as an HTTP server."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infra.ports import DEFAULT_PORTS
from schemas.toolcalls import SYNTAXES

if TYPE_CHECKING:
    from fastapi import FastAPI

ToolCallParser = StrEnum("ToolCallParser", {name: name for name in SYNTAXES})  # type: ignore[misc]

__all__ = ["build_engine_app", "register"]


def build_engine_app(model: Path, served_model_name: str | None = None, dtype: str = "float32",
                     device: str = "cpu", token_delay_ms: float = 0.0,
                     tool_call_parser: str = "hermes", merged_adapters: int = 2) -> FastAPI:
    from serving.engine.app import create_engine_app
    from serving.engine.generator import TorchGenerator

    generator = TorchGenerator(model, dtype=dtype, device=device,
                               token_delay_s=token_delay_ms / 1000.0,
                               merged_adapters=merged_adapters)
    return create_engine_app(generator, served_model_name or model.name, tool_call_parser)


def engine(
    model: Path = typer.Option(..., "--model", exists=True, file_okay=False,
                               help="Local base model directory (e.g. one built by the tiny "
                                    "policy builder)."),
    served_model_name: str = typer.Option(None, help="Name clients use for the base model "
                                                     "(default: the directory's name)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(DEFAULT_PORTS["engine"], help="Port to listen on."),
    dtype: str = typer.Option("float32", help="torch dtype of the weights."),
    device: str = typer.Option("cpu", help="torch device, e.g. cpu or cuda:0."),
    token_delay_ms: float = typer.Option(0.0, help="Sleep after each generated token, to "
                                                   "simulate a slower accelerator."),
    tool_call_parser: ToolCallParser = typer.Option(
        "hermes", help="How calls are read when the model's chat template renders tools: "
                       "hermes or rewardstream. Templates without tools get the `<tool>` format."),
    merged_adapters: int = typer.Option(
        2, min=0, help="LoRA adapters served merged at once, each in its own copy of the "
                       "weights it changes (base speed; e.g. +513 MB each for SmolLM2-135M with "
                       "every projection adapted); more live adapters are served unmerged "
                       "(slower per token, only their LoRA matrices in memory)."),
) -> None:
    """Serve a local model with the built-in torch engine, speaking vLLM's OpenAI-compatible API
    (/v1/completions, /v1/chat/completions, /v1/models, /v1/load_lora_adapter,
    /v1/unload_lora_adapter) so the gateway can use it on a CPU machine.

    Example: rewardstream serve engine --model ./tiny-model --port 8001
    """
    import uvicorn

    uvicorn.run(build_engine_app(model, served_model_name, dtype, device, token_delay_ms,
                                 tool_call_parser.value, merged_adapters), host=host, port=port,
                log_level="info")


def register(serve_app: typer.Typer) -> None:
    serve_app.command("engine")(engine)
