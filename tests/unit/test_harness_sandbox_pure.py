"""The sandbox's pure parts: the settings it hands its jail, and how it names a limit hit."""

from __future__ import annotations

import signal
from pathlib import Path

from harness.tools.jail import parse_args
from harness.tools.jail_run import JailRun
from harness.tools.sandbox import SandboxLimits, _jail_settings, _limit_note


def test_the_jail_reads_back_every_setting_the_sandbox_writes() -> None:
    limits = SandboxLimits(cpu_s=3, memory_bytes=5 << 20, max_file_bytes=7 << 20,
                           max_disk_bytes=11 << 20, max_files=13)
    copy = Path("/tmp/rs-sandbox-x/work")
    words = _jail_settings(copy, limits, isolate=False)
    settings, argv = parse_args([*words, "status_fd=9", "--", "python", "-c", "a=b"])
    assert argv == ["python", "-c", "a=b"]  # an '=' in the command stays the command's
    assert (settings.isolate, settings.workdir, settings.scratch_root) == (
        False, str(copy), "/tmp")
    assert (settings.disk_bytes, settings.max_files, settings.status_fd) == (11 << 20, 13, 9)
    assert settings.limits["RLIMIT_CPU"] == 3 and settings.limits["RLIMIT_AS"] == 5 << 20
    assert settings.limits["RLIMIT_FSIZE"] == 7 << 20 and settings.limits["RLIMIT_CORE"] == 0
    assert settings.limits["RLIMIT_NPROC"] > limits.max_processes


def _run(output: str = "", **report: str) -> JailRun:
    return JailRun(report, output, output_over=False, timed_out=False)


def test_each_limit_is_named_with_its_value() -> None:
    limits = SandboxLimits(max_disk_bytes=16 << 20, max_files=100, max_file_bytes=8 << 20)
    assert _limit_note(_run(disk_full="1"), 1, limits) == \
        "disk limit reached (16 MiB or 100 files in all)"
    assert _limit_note(_run(), -signal.SIGXFSZ, limits) == \
        "file size limit reached (8 MiB per file)"
    assert _limit_note(_run("OSError: [Errno 27] File too large"), 1, limits) == \
        "file size limit reached (8 MiB per file)"
    assert _limit_note(_run(), -signal.SIGXCPU, limits) == "CPU time limit reached (10 s)"
    assert _limit_note(_run("ok", disk_full="0"), 0, limits) is None
