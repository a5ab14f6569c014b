"""A separate SDK process for the crash test: ``emit`` queues events and waits to be killed;
``flush`` sends whatever an earlier process left in the queue directory."""

from __future__ import annotations

import json
import sys
import time

from rewardstream_telemetry import Telemetry, Trajectory


def main(mode: str, url: str, key: str, queue_dir: str, count: int) -> None:
    tel = Telemetry(url, key, queue_dir=queue_dir, linger_s=0.05, backoff_base_s=0.05,
                    backoff_cap_s=0.5)
    if mode == "emit":
        traj = Trajectory("traj-crash", "session-crash", "user-1", "ckpt-0")
        ids = [str(tel.tool_called(traj, call_id=f"c{i}", tool="read_file", valid=True))
               for i in range(count)]
        print(json.dumps(ids), flush=True)
        time.sleep(3600)  # holding unsent events until SIGKILL
    else:
        flushed = tel.close(timeout_s=60)
        print(json.dumps({"flushed": flushed, "sent": tel.stats().sent}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
