"""Where the A/B report and replays read reward records: a JSON-lines file or the topic."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from infra.kafka_io import read_topic
from infra.settings import load_settings
from schemas.quarantine import UnusableRecord, decode_record
from schemas.rewards import RewardRecord
from streams.monitors.errors import MonitorInputError

__all__ = ["reward_records"]

log = logging.getLogger(__name__)


def _from_file(path: Path) -> Iterator[RewardRecord]:
    try:
        handle = path.open()
    except OSError as exc:
        raise MonitorInputError(f"--file {path}: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield RewardRecord.model_validate_json(line)
            except ValidationError as exc:
                raise MonitorInputError(
                    f"--file {path}, line {number}: not a reward record ({exc.errors()[0]['msg']})"
                ) from None


def reward_records(path: Path | None) -> Iterator[RewardRecord]:
    """Records from ``path`` (JSON lines) or, without one, everything on the rewards topic."""
    if path is not None:
        yield from _from_file(path)
        return
    for record in read_topic(load_settings(), "rewards"):
        try:
            yield decode_record(RewardRecord, record.value)
        except UnusableRecord as exc:
            # A report only reads: the consumers that use the topic quarantine such records.
            log.warning("rewards %d/%d is not a reward record (%s); left out of the report",
                        record.partition, record.offset, exc)
