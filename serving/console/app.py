"""The console's FastAPI app: the page, the JSON API behind it, and the staff actions.

Every route but ``/livez``, ``/readyz``, ``/metrics`` (Prometheus: counts only), the sign-in and the
static files needs a session or a staff key (see ``auth``), and shows only the orgs its staff
member is granted (``grants``): what they cannot see, they cannot act on either (it answers as
if it did not exist). Actions become events: alert actions on ``alerts`` (acknowledged,
silenced, resolved), a rollback as the registry's rollback events on ``checkpoints``
(``schemas.checkpoints.rollback``: the same events the CLI and auto-protect write), offered only
for a checkpoint the platform serves. An alert's sample trajectories are read from ``rewards``
and ``events.raw`` when asked for (``sample_reader``), of the alert's own org only. Every answer
carries a Content-Security-Policy that allows only the console's own scripts and styles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from infra.kafka_health import KAFKA_UNAVAILABLE
from schemas.alert_lifecycle import AlertState, acknowledge, lift_silence, resolve, silence_alert
from schemas.checkpoints import Registry, rollback
from schemas.errors import AlertActionError, RegistryError
from schemas.metrics import COMPONENT_METRIC_PREFIX, METRIC_DESCRIPTIONS, metric_unit
from serving.console.auth import Staff, StaffAuth, client_address
from serving.console.grants import FLEET
from serving.console.metrics import console_registry
from serving.console.page import CONTENT_SECURITY_POLICY, LOGIN_HTML, STATIC_FILES, console_page
from serving.console.problems import problem_views
from serving.console.sample_reader import read_samples
from serving.console.samples import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor
from serving.console.state import ConsoleState
from serving.prometheus import count_requests, serve_metrics
from serving.request_body import validation_message

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


class SignIn(BaseModel):
    key: str = Field(..., min_length=1, max_length=512)


_SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                     "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                     "Cache-Control": "no-store"}


def create_app(state: ConsoleState, auth: StaffAuth, *, follow: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if follow:
            state.start()
        yield
        if follow:
            state.stop()

    app = FastAPI(title="rewardstream console", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url="/api/openapi.json")

    async def _kafka_away(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": f"Kafka is unavailable ({type(exc).__name__}); the "
                             "action was not recorded: try again once the console is ready "
                             "(GET /readyz)"}, status_code=503, headers={"Retry-After": "5"})

    for unavailable in KAFKA_UNAVAILABLE:
        app.add_exception_handler(unavailable, _kafka_away)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer echoes the input, and cannot write the inf that 1e999 becomes.
        return JSONResponse({"detail": validation_message(exc.errors())}, status_code=422)

    @app.middleware("http")
    async def _security_headers(request: Request,
                                call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        for name, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    viewer, actor = Depends(auth.viewer), Depends(auth.actor)

    def act(visible: Callable[[], bool], build: Callable[[AlertState], Any]) -> dict[str, Any]:
        """Build an action's event from the alert state, or, for what the staff member may not
        see, from an empty one: it is refused exactly as if it did not exist."""
        try:
            with state.lock:
                event = build(state.alerts if visible() else AlertState())
        except AlertActionError as exc:
            raise HTTPException(409, str(exc)) from None
        state.publish_alert_event(event)
        return {"event_id": event.event_id, "kind": event.kind}

    @app.get("/livez", include_in_schema=False)
    def livez() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> JSONResponse:
        problem = state.not_ready()
        return JSONResponse({"status": "ready"} if problem is None else
                            {"status": "not ready", "detail": problem},
                            status_code=200 if problem is None else 503)

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request) -> HTMLResponse:
        found = auth.session(request)
        if found is None:
            return HTMLResponse(LOGIN_HTML, status_code=401)
        session, staff = found
        return HTMLResponse(console_page(staff.name, sorted(staff.grant.orgs),
                                         session.csrf_token))

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in STATIC_FILES:
            raise HTTPException(404, f"no static file {name[:100]!r}")
        content, media_type = STATIC_FILES[name]
        return Response(content, media_type=media_type, headers={"Cache-Control": "no-cache"})

    @app.post("/api/session")
    def sign_in(body: SignIn, request: Request, response: Response) -> dict[str, Any]:
        """Exchange a staff key for a session cookie (429 after too many wrong keys)."""
        key = auth.check_key(body.key, client_address(request))
        staff = auth.open_session(key, response, secure=request.url.scheme == "https")
        return {"staff": staff.name, "orgs": sorted(staff.grant.orgs),
                "expires_in_s": auth.session_ttl_s}

    @app.delete("/api/session")
    def sign_out(request: Request, response: Response, _: Staff = actor) -> dict[str, Any]:
        auth.close_session(request, response)
        return {"signed_out": True}

    @app.get("/api/alerts")
    def alerts(staff: Staff = viewer) -> dict[str, Any]:
        """Every alert the staff member sees, and the same as problems: one per condition,
        its org and fleet alerts grouped (``problems.py``)."""
        views = state.alert_views(staff.grant)
        return {"alerts": views, "problems": problem_views(views),
                "silences": state.silence_views(staff.grant)}

    @app.get("/api/alerts/{fingerprint}/trajectories")
    def trajectories(fingerprint: str, limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
                     cursor: str | None = None, staff: Staff = viewer) -> dict[str, Any]:
        """Sample trajectories in the alert's window, of its org and checkpoint: their events,
        reward components and completions, ``limit`` a page; ``cursor`` is a page's ``next``."""
        try:
            position = None if cursor is None else decode_cursor(cursor)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        found = state.samples_query(fingerprint, staff.grant, limit)
        if found is None:
            raise HTTPException(404, f"fingerprint {fingerprint[:100]!r}: no such alert")
        query, alert = found
        page = read_samples(state.settings, query, position)
        return {"fingerprint": fingerprint, "title": alert.title, "detector": alert.detector,
                "scope": {"org": query.org, "checkpoint": query.checkpoint, "arm": query.arm},
                "window": {"since": query.since.isoformat(), "until": query.until.isoformat()},
                **page}

    def alert_act(fingerprint: str, staff: Staff,
                  build: Callable[[AlertState], Any]) -> dict[str, Any]:
        return act(lambda: state.alert_visible(fingerprint, staff.grant), build)

    @app.post("/api/alerts/{fingerprint}/acknowledge")
    def ack(fingerprint: str, body: Note, who: Staff = actor) -> dict[str, Any]:
        return alert_act(fingerprint, who, lambda alerts: acknowledge(
            alerts, fingerprint, who.name, datetime.now(UTC), body.note))

    @app.post("/api/alerts/{fingerprint}/resolve")
    def resolve_(fingerprint: str, body: Note, who: Staff = actor) -> dict[str, Any]:
        return alert_act(fingerprint, who, lambda alerts: resolve(
            alerts, fingerprint, who.name, datetime.now(UTC), body.note))

    @app.post("/api/alerts/{fingerprint}/silence")
    def silence(fingerprint: str, body: SilenceRequest, who: Staff = actor) -> dict[str, Any]:
        now = datetime.now(UTC)
        return alert_act(fingerprint, who, lambda alerts: silence_alert(
            alerts, fingerprint, who.name, now, now + timedelta(seconds=body.duration_s),
            body.comment))

    @app.post("/api/silences/{silence_id}/lift")
    def lift(silence_id: str, who: Staff = actor) -> dict[str, Any]:
        return act(lambda: state.silence_visible(silence_id, who.grant),
                   lambda alerts: lift_silence(alerts, silence_id, who.name, datetime.now(UTC)))

    @app.get("/api/metrics")
    def metric_names(_: Staff = viewer) -> dict[str, Any]:
        """The metrics charted, and how staff read each (``schemas.metrics.metric_unit``)."""
        return {"rewards": list(REWARD_METRICS), "ingest": list(INGEST_METRICS),
                "units": {name: metric_unit(name)
                          for name in (*REWARD_METRICS, *INGEST_METRICS, *METRIC_DESCRIPTIONS)}}

    @app.get("/api/series")
    def series(metric: str, scope: str = "rewards", staff: Staff = viewer) -> dict[str, Any]:
        known = REWARD_METRICS if scope == "rewards" else INGEST_METRICS
        if metric not in known and not metric.startswith(COMPONENT_METRIC_PREFIX):
            raise HTTPException(422, f"metric {metric!r}: not a {scope} metric; see /api/metrics")
        return {"metric": metric, "scope": scope,
                "series": state.series_view(scope, metric, staff.grant)}

    @app.get("/api/quarantine")
    def quarantine(staff: Staff = viewer) -> dict[str, Any]:
        return state.quarantine_view(staff.grant)

    registry = console_registry(state, lambda: state.quarantine_view(FLEET))
    count_requests(app, registry, "console")
    serve_metrics(app, registry)

    @app.get("/api/checkpoints")
    def checkpoints(staff: Staff = viewer) -> dict[str, Any]:
        return {"checkpoints": state.checkpoint_views(staff.grant)}

    @app.get("/api/canaries")
    def canaries(staff: Staff = viewer) -> dict[str, Any]:
        return {"canaries": state.canary_views(staff.grant)}

    @app.post("/api/checkpoints/{checkpoint_id}/rollback")
    def rollback_(checkpoint_id: str, body: RollbackRequest,
                  who: Staff = actor) -> dict[str, Any]:
        evidence = {"alert_fingerprint": body.alert_fingerprint} if body.alert_fingerprint else {}
        try:
            with state.lock:
                visible = state.checkpoint_visible(checkpoint_id, who.grant)
                events = rollback(state.checkpoints if visible else Registry(), checkpoint_id,
                                  datetime.now(UTC), who.name, body.reason, evidence)
        except RegistryError as exc:
            raise HTTPException(409, str(exc)) from None
        state.publish_checkpoint_events(events)
        return {"events": [{"event_id": e.event_id, "sequence": e.sequence, "kind": e.kind,
                            "checkpoint_id": e.checkpoint_id} for e in events]}

    return app
