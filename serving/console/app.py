"""The console's FastAPI app: the page, the JSON API behind it, and the staff actions.

Every route but ``/healthz`` needs a staff key (see ``auth``). Actions become events: alert
actions on ``alerts`` (acknowledged, silenced, resolved), rollbacks as a ``rolled_back``
registry event on ``checkpoints`` (see ``streams.monitors.rollback``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from serving.console.auth import StaffKeys
from serving.console.page import LOGIN_HTML, PAGE_HTML
from serving.console.state import ConsoleState
from streams.monitors.errors import AlertActionError
from streams.monitors.lifecycle import acknowledge, lift_silence, resolve, silence_alert
from streams.monitors.rollback import rollback_event

__all__ = ["create_app"]

REWARD_METRICS = (
    "edit_rate", "clarification_rate", "broken_tool_call_rate", "broken_call_trajectory_rate",
    "dissatisfied_followup_rate", "kept_edit_rate", "kept_edits", "latency_p50_ms",
    "latency_p95_ms", "reward", "on_policy_fraction", "unambiguous_clarification_rate",
)
INGEST_METRICS = ("ingest_events", "dead_letter_rate")


class Note(BaseModel):
    note: str = Field("", max_length=2000)


class SilenceRequest(BaseModel):
    duration_s: int = Field(3600, gt=0, le=30 * 24 * 3600)
    comment: str = Field("", max_length=2000)


class RollbackRequest(BaseModel):
    reason: str = Field(..., min_length=1, max_length=2000)
    alert_fingerprint: str | None = None


def create_app(state: ConsoleState, keys: StaffKeys, *, follow: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if follow:
            state.start()
        yield
        if follow:
            state.stop()

    app = FastAPI(title="rewardstream console", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url="/api/openapi.json")
    viewer, actor = Depends(keys.viewer), Depends(keys.actor)

    def act(build: Callable[[], Any]) -> dict[str, Any]:
        try:
            with state.lock:
                event = build()
        except AlertActionError as exc:
            raise HTTPException(409, str(exc)) from None
        state.publish_alert_event(event)
        return {"event_id": event.event_id, "kind": event.kind}

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request) -> HTMLResponse:
        try:
            name = keys.viewer(request)
        except HTTPException as exc:
            return HTMLResponse(LOGIN_HTML, status_code=exc.status_code)
        return HTMLResponse(PAGE_HTML.replace("{{staff}}", name))

    @app.get("/api/alerts")
    def alerts(_: str = viewer) -> dict[str, Any]:
        return {"alerts": state.alert_views(), "silences": state.silence_views()}

    @app.post("/api/alerts/{fingerprint}/acknowledge")
    def ack(fingerprint: str, body: Note, who: str = actor) -> dict[str, Any]:
        return act(lambda: acknowledge(state.alerts, fingerprint, who, datetime.now(UTC),
                                       body.note))

    @app.post("/api/alerts/{fingerprint}/resolve")
    def resolve_(fingerprint: str, body: Note, who: str = actor) -> dict[str, Any]:
        return act(lambda: resolve(state.alerts, fingerprint, who, datetime.now(UTC), body.note))

    @app.post("/api/alerts/{fingerprint}/silence")
    def silence(fingerprint: str, body: SilenceRequest, who: str = actor) -> dict[str, Any]:
        now = datetime.now(UTC)
        return act(lambda: silence_alert(state.alerts, fingerprint, who, now,
                                         now + timedelta(seconds=body.duration_s), body.comment))

    @app.post("/api/silences/{silence_id}/lift")
    def lift(silence_id: str, who: str = actor) -> dict[str, Any]:
        return act(lambda: lift_silence(state.alerts, silence_id, who, datetime.now(UTC)))

    @app.get("/api/metrics")
    def metric_names(_: str = viewer) -> dict[str, Any]:
        return {"rewards": list(REWARD_METRICS), "ingest": list(INGEST_METRICS)}

    @app.get("/api/series")
    def series(metric: str, scope: str = "rewards", _: str = viewer) -> dict[str, Any]:
        known = REWARD_METRICS if scope == "rewards" else INGEST_METRICS
        if metric not in known and not metric.startswith("reward."):
            raise HTTPException(422, f"metric {metric!r}: not a {scope} metric; see /api/metrics")
        return {"metric": metric, "scope": scope, "series": state.series_view(scope, metric)}

    @app.get("/api/checkpoints")
    def checkpoints(_: str = viewer) -> dict[str, Any]:
        return {"checkpoints": state.checkpoint_views()}

    @app.post("/api/checkpoints/{checkpoint_id}/rollback")
    def rollback(checkpoint_id: str, body: RollbackRequest, who: str = actor) -> dict[str, Any]:
        try:
            with state.lock:
                event = rollback_event(state.checkpoints, checkpoint_id, actor=who,
                                       reason=body.reason, now=datetime.now(UTC),
                                       alert_fingerprint=body.alert_fingerprint)
        except AlertActionError as exc:
            raise HTTPException(409, str(exc)) from None
        state.publish_checkpoint_event(event)
        return {"event_id": event.event_id, "sequence": event.sequence, "kind": event.kind}

    return app
