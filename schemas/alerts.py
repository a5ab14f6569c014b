"""Alert lifecycle events, on the ``alerts`` topic, keyed by fingerprint (silences by id).

The alert state (firing → acknowledged → resolved, silences) is a fold over these events, so it
is rebuilt by replaying the topic. Detectors publish ``fired`` and ``resolved``; operators
publish ``acknowledged``, ``resolved``, ``silenced`` and ``silence_lifted``. A fingerprint names
one alert condition (detector + labels), like Alertmanager's label fingerprint; ``fired`` for a
fingerprint that is already open is a duplicate and only refreshes its evidence.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

__all__ = [
    "Alert",
    "AlertEvent",
    "AlertEventKind",
    "Severity",
    "Silence",
    "alert_event_key",
    "alert_fingerprint",
]

Severity = Literal["critical", "warning", "info"]
AlertEventKind = Literal["fired", "acknowledged", "resolved", "silenced", "silence_lifted"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Alert(_Frozen):
    """What a detector found: everything an operator needs to judge it."""

    detector: str
    fingerprint: str
    title: str
    severity: Severity
    summary: str  # one line with the numbers
    # Baseline vs now, sample sizes, intervals / statistics, thresholds; JSON-able values.
    evidence: dict[str, Any]
    runbook: str
    labels: dict[str, str]  # alertname, checkpoint, arm, org, severity
    window_end: AwareDatetime  # event time of the metric window that raised it


class Silence(_Frozen):
    silence_id: str
    # Label equality matchers; an alert is silenced when all of them match its labels.
    matchers: dict[str, str]
    ends_at: AwareDatetime
    created_by: str
    comment: str = ""


class AlertEvent(_Frozen):
    event_id: str  # idempotency key: applying the same event twice changes nothing
    kind: AlertEventKind
    occurred_at: AwareDatetime
    actor: str  # "detector" or the staff member's name
    fingerprint: str | None = None  # all kinds but the silence ones
    alert: Alert | None = None  # with kind "fired"
    silence: Silence | None = None  # with kind "silenced"
    silence_id: str | None = None  # with kind "silence_lifted"
    note: str = ""

    @model_validator(mode="after")
    def _kind_carries_its_fields(self) -> AlertEvent:
        # The alert state folds these fields by kind: a "fired" event without its alert would
        # stop every consumer of the topic at that record.
        missing = [name for name in _NEEDS[self.kind] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.kind!r} event needs {' and '.join(missing)}")
        if self.alert is not None and self.alert.fingerprint != self.fingerprint:
            raise ValueError(f"fingerprint {self.fingerprint!r} is not the alert's "
                             f"({self.alert.fingerprint!r})")
        return self


_NEEDS: dict[str, tuple[str, ...]] = {
    "fired": ("fingerprint", "alert"), "acknowledged": ("fingerprint",),
    "resolved": ("fingerprint",), "silenced": ("silence",), "silence_lifted": ("silence_id",),
}


def alert_fingerprint(detector: str, labels: dict[str, str]) -> str:
    """A stable id of one alert condition: the detector and its sorted labels, hashed."""
    canonical = detector + "\0" + "\0".join(f"{k}={labels[k]}" for k in sorted(labels))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def alert_event_key(event: AlertEvent) -> bytes:
    """The Kafka key: the fingerprint, or ``silence:<id>`` for silence events."""
    if event.fingerprint is not None:
        return event.fingerprint.encode()
    silence_id = event.silence_id or (event.silence.silence_id if event.silence else "")
    return f"silence:{silence_id}".encode()
