"""The gateway SIGKILLed while it serves, and started again on the same spool.

A gateway writes each completion to its spool before the client gets the answer (the whole
reply, or a stream's ``[DONE]``), so a kill loses none of the completions it answered: the next
gateway on the same ``--spool-dir`` delivers what the killed one had not. A request in flight
at the kill fails at the client (a stream is cut off without ``[DONE]``); its completion may
still be on the log (logged, answered as failed), never the other way round. A streamed
completion the client finished is logged whole: the token ids it received, as it ended.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infra.settings import Settings
from tests.support.fault_ledger import FaultRow, check_log, report
from tests.support.gateway_process import (
    CompletionTraffic,
    GatewayProcess,
    completions_on_log,
    served_on_log,
    wait_drained,
)
from tests.support.ports import free_port
from tests.support.waits import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

# Completions answered before the kill (it comes while the gateway serves) and after the restart.
BEFORE, AFTER = 5, 3


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_killed_gateway_loses_no_completion_it_answered(
        stream: bool, cluster: Settings, tiny_model_dir: Path, tmp_path: Path,
        report_figures: Callable[[str], None]) -> None:
    gateway = GatewayProcess(cluster, tiny_model_dir, tmp_path / "spool",
                             tmp_path / "gateway.log", free_port())
    gateway.start()
    try:
        with CompletionTraffic(gateway.url, stream=stream) as traffic:
            wait_for(lambda: len(traffic.ids) >= BEFORE, 120, "completions before the kill")
            before_kill = len(traffic.ids)
            gateway.stop(signal.SIGKILL)
            killed_at = time.monotonic()
            gateway.start()  # the same port and spool
            back_s = time.monotonic() - killed_at
            wait_for(lambda: len(traffic.ids) >= before_kill + AFTER, 120,
                     "completions answered after the restart")
        drained_s = wait_drained(gateway)
    finally:
        gateway.stop()
    logged = completions_on_log(cluster)
    check = check_log(traffic.ids, logged)
    kind = "streamed" if stream else "whole"
    report(FaultRow(
        f"SIGKILL the gateway while it serves ({kind} replies), restart it on the same spool",
        f"pytest 'tests/faults/test_gateway_kill.py::"
        f"test_a_killed_gateway_loses_no_completion_it_answered[{kind}]'",
        len(traffic.ids) + traffic.failed, check,
        back_s + drained_s,
        f"{traffic.failed} requests failed at the client while it was down"
        + (f" ({traffic.cut} streams cut off after their 200)" if stream else "") + "; "
        f"{check.unexpected} logged completions the client saw fail"), report_figures)
    assert before_kill > 0 and len(traffic.ids) > before_kill
    assert check.lost == 0  # every completion answered is on the log
    assert check.unexpected <= 1  # at most the one request in flight at the kill
    # A repeat can only be of what the killed gateway had sent and not yet struck off.
    served_after_kill = {cid for at, cid in traffic.served if at > killed_at}
    assert not {cid for cid, n in logged.items() if n > 1} & served_after_kill
    if stream:  # each stream the client finished is on the log whole, as it ended
        payloads = {p.completion_id: p for p in served_on_log(cluster)}
        for completion_id, tokens in traffic.tokens.items():
            assert payloads[completion_id].completion_token_ids == tokens, completion_id
            assert payloads[completion_id].finish_reason in ("stop", "length"), completion_id
