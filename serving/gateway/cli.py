"""``rewardstream serve gateway``: the model gateway as an HTTP server."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from infra.ports import DEFAULT_PORTS


class EventsTo(StrEnum):
    kafka = "kafka"
    none = "none"

__all__ = ["register"]


def gateway(
    backend_url: str = typer.Option(None, help="An OpenAI-compatible backend with runtime LoRA "
                                               "loading, e.g. http://127.0.0.1:8001 (vllm serve "
                                               "--enable-lora, or rewardstream serve engine)."),
    engine_model: Path = typer.Option(None, exists=True, file_okay=False,
                                      help="Instead of --backend-url: run the torch engine on "
                                           "this local model inside the gateway's process."),
    backend_api_key: str = typer.Option(None, envvar="REWARDSTREAM_BACKEND_API_KEY",
                                        help="Bearer token for the backend (vllm --api-key)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(DEFAULT_PORTS["gateway"], help="Port to listen on."),
    arms: str = typer.Option("production=1", help="A/B split of non-holdout users: name=weight "
                             "or name:target=weight; targets are production, candidate, canary, "
                             "base or a checkpoint id. E.g. production=0.9,candidate=0.1 (a "
                             "canary the release controller starts needs no arm here)"),
    holdout: float = typer.Option(0.0, help="Fraction of users held out on --holdout-target."),
    holdout_target: str = typer.Option("base", help="What the holdout is served by."),
    salt: str = typer.Option("rewardstream", help="Assignment salt; changing it reshuffles "
                                                  "every user."),
    public_model: str = typer.Option("rewardstream", help="Model name /v1/models lists."),
    base_checkpoint_id: str = typer.Option("base", help="Checkpoint id events give the "
                                                        "backend's base model."),
    base_path: str = typer.Option(None, help="The backend's base model directory: full-model "
                                             "checkpoints at this path are served as the base "
                                             "(default: --engine-model)."),
    model_family: str = typer.Option(None, help="Follow only checkpoints of this model."),
    follow: bool = typer.Option(True, help="Follow the checkpoints topic (--no-follow: serve "
                                           "the base model only)."),
    events: EventsTo = typer.Option(
        EventsTo.kafka, help="Where completion.served and broken tool calls go: kafka "
        "(events.raw) or none."),
    spool_dir: Path = typer.Option(None, help="Where events wait until Kafka acknowledges them "
                                              "(one live gateway per directory; default: one "
                                              "per cluster and topic under the cache dir)."),
    spool_max_mb: int = typer.Option(1024, help="Disk the spool may fill; served events beyond "
                                                "it are lost and counted."),
    default_max_tokens: int = typer.Option(256, help="max_tokens when a request sets none."),
    reference_temperature: float = typer.Option(1.0, help="The trainer's temperature; others "
                                                          "are flagged as biasing ratios."),
    max_prompt_chars: int = typer.Option(None, help="Longest prompt in characters, 400 above "
                                         "[default: 262144]."),
    max_prompt_tokens: int = typer.Option(None, help="Longest prompt in tokens, 400 above "
                                          "[default and most: 65536, what completion.served "
                                          "records]."),
    max_completion_tokens: int = typer.Option(None, help="Largest max_tokens a request may ask "
                                              "for [default and most: 8192]."),
    text_policy: Path = typer.Option(
        None, exists=True, dir_okay=False, envvar="REWARDSTREAM_TEXT_POLICY_FILE",
        help="Which orgs' prompt and completion text completion.served carries, and the "
             "redaction run before it is written (TOML; docs/security.md). Default: every "
             "org's, unredacted."),
) -> None:
    """Serve the OpenAI-compatible model gateway: /v1/chat/completions and /v1/completions
    (SSE streaming) and /v1/models. Each request is assigned a sticky arm, served by that arm's
    checkpoint (named in the checkpoint_id field and X-Rewardstream-Checkpoint header), and
    emitted as completion.served with token ids and behaviour logprobs. Chat requests may offer
    tools (tool_calls come back as OpenAI shapes); broken calls are recorded as tool.called
    valid=false by the gateway itself. Promotions and rollbacks on the checkpoints topic are
    hot-loaded as LoRA adapters. Events go through a spool on disk until Kafka acknowledges
    them; /metrics (Prometheus) counts what waits there and what was lost.

    Every /v1 request needs a gateway key (Authorization: Bearer KEY) from
    REWARDSTREAM_GATEWAY_KEYS_FILE (`rewardstream keys create --for gateway --org ORG --file
    FILE`; reread when it changes): the key's org is the org of the events the request writes,
    and its rate is enforced (429). Users are pseudonymised with
    REWARDSTREAM_INGEST_PSEUDONYM_SECRET, ingest's, so both name a user alike.

    Example: rewardstream serve gateway --engine-model ./tiny --holdout 0.05
    """
    import uvicorn

    from infra.health_http import service_registry
    from infra.kafka_health import BrokerWatch
    from infra.settings import load_settings
    from serving.gateway.app import GatewayConfig, create_gateway_app
    from serving.gateway.arms import ArmSplit, parse_arms
    from serving.gateway.auth import load_gateway_auth
    from serving.gateway.backend import BackendClient
    from serving.gateway.errors import GatewayError
    from serving.gateway.request import RequestLimits
    from serving.gateway.sinks import KafkaEventSink, MemoryEventSink
    from serving.prometheus import count_requests, serve_metrics
    from serving.textpolicy import load_text_policy

    if (backend_url is None) == (engine_model is None):
        raise GatewayError("give exactly one of --backend-url and --engine-model")
    settings = load_settings()
    auth = load_gateway_auth()
    asked = {"max_prompt_chars": max_prompt_chars, "max_prompt_tokens": max_prompt_tokens,
             "max_completion_tokens": max_completion_tokens}
    limits = RequestLimits(**{name: value for name, value in asked.items() if value is not None})
    if engine_model is not None:
        from serving.engine.cli import build_engine_app
        from serving.local_server import serve_in_thread

        backend_url = serve_in_thread(build_engine_app(engine_model)).url
    split = ArmSplit(parse_arms(arms), holdout, holdout_target, salt)
    config = GatewayConfig(
        split=split, public_model=public_model, base_checkpoint_id=base_checkpoint_id,
        base_path=base_path or (str(engine_model) if engine_model else None),
        model_family=model_family, follow=settings if follow else None,
        default_max_tokens=default_max_tokens, reference_temperature=reference_temperature,
        limits=limits, text_policy=load_text_policy(text_policy),
    )
    registry = service_registry()
    sink = KafkaEventSink(settings, spool_dir, registry=registry,
                          max_spool_bytes=spool_max_mb << 20) \
        if events is EventsTo.kafka else MemoryEventSink()
    if events is EventsTo.kafka:  # it serves while Kafka is away: the watch only reports
        registry.register(BrokerWatch(settings, "gateway").start())
    app = create_gateway_app(config, BackendClient(backend_url, backend_api_key), sink, auth)
    count_requests(app, registry, "gateway")
    serve_metrics(app, registry)
    uvicorn.run(app, host=host, port=port, log_level="info")


def register(serve_app: typer.Typer) -> None:
    serve_app.command("gateway")(gateway)
