"""rewardstream's telemetry SDK: typed events, validated against the published JSON Schemas,
kept in a disk-backed queue so a crash loses nothing accepted, and batched, gzip'd and retried
to the ingest API. Standard library only. Example::

    from rewardstream_telemetry import Telemetry, Trajectory

    with Telemetry("http://127.0.0.1:8400", api_key, queue_dir="/var/lib/app/telemetry") as tel:
        traj = Trajectory("traj-1", "session-1", "user-42", "ckpt-7")
        tel.tool_called(traj, call_id="c1", tool="read_file", valid=True)
"""

from rewardstream_telemetry.client import Telemetry, TelemetryStats
from rewardstream_telemetry.errors import InvalidEventError, QueueInUseError, TelemetryError
from rewardstream_telemetry.events import (
    EditDecision,
    FinishReason,
    Sentiment,
    ToolErrorKind,
    Trajectory,
    TrajectoryOutcome,
)
from rewardstream_telemetry.published import EVENT_SCHEMAS, EVENT_TYPES, SCHEMA_VERSIONS
from rewardstream_telemetry.transport import HttpTransport, Request, Response, Transport

__all__ = [
    "EVENT_SCHEMAS", "EVENT_TYPES", "SCHEMA_VERSIONS", "EditDecision", "FinishReason",
    "HttpTransport", "InvalidEventError", "QueueInUseError", "Request", "Response", "Sentiment",
    "Telemetry", "TelemetryError", "TelemetryStats", "ToolErrorKind", "Trajectory",
    "TrajectoryOutcome", "Transport",
]
