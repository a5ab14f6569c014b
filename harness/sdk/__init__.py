"""The telemetry SDK: typed events, batched, gzip'd and retried to the ingest API, with a
disk-backed queue so a crash loses nothing it accepted.

Imports only the standard library, httpx and pydantic (through ``schemas``): no FastAPI, no
torch, so any client process can use it. Example::

    from harness.sdk import Telemetry, Trajectory

    with Telemetry("http://127.0.0.1:8400", api_key, queue_dir="/var/lib/app/telemetry") as tel:
        traj = Trajectory("traj-1", "session-1", "user-42", "ckpt-7")
        tel.tool_called(traj, call_id="c1", tool="read_file", valid=True)
"""

from harness.sdk.client import Telemetry, TelemetryStats
from harness.sdk.errors import TelemetryError
from harness.sdk.events import Trajectory

__all__ = ["Telemetry", "TelemetryError", "TelemetryStats", "Trajectory"]
