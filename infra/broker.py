"""The local single-node Kafka broker: jars from Maven Central, KRaft storage, a java process.

``rewardstream kafka start|stop|status`` and the pytest fixture both call :func:`start`,
:func:`stop` and :func:`status`, so tests run against exactly the broker operators run.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from infra.errors import BrokerError
from infra.settings import Settings, cache_dir

__all__ = ["BrokerStatus", "ensure_jars", "start", "status", "stop", "wait_port_free"]

_STARTED_LINE = "Kafka Server started"
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 45.0


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    data_dir: Path
    log_file: Path

    def describe(self) -> str:
        if self.running:
            return f"running (pid {self.pid}) on {self.bootstrap_servers}, data in {self.data_dir}"
        return f"not running (data dir {self.data_dir})"


def _infra_file(name: str) -> str:
    return (Path(__file__).parent / name).read_text()


def _jars_dir() -> Path:
    pom_hash = hashlib.sha256(_infra_file("pom.xml").encode()).hexdigest()[:12]
    return cache_dir() / f"kafka-jars-{pom_hash}"


def ensure_jars() -> Path:
    """The directory of broker jars, resolved with Maven the first time (cached by pom hash)."""
    jars = _jars_dir()
    if (jars / ".complete").exists():
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Maven (mvn) is not installed: install it (apt-get install maven) so the Kafka jars "
            "can be fetched from Maven Central"
        )
    staging = jars.with_name(jars.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "pom.xml").write_text(_infra_file("pom.xml"))
    result = subprocess.run(
        [mvn, "-q", "-B", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["(no output)"]
        raise BrokerError(
            f"could not fetch the Kafka jars from Maven Central (mvn exit {result.returncode}: "
            f"{last[0]}); check network access to Maven Central and retry"
        )
    (staging / ".complete").write_text("ok\n")
    shutil.rmtree(jars, ignore_errors=True)
    staging.rename(jars)
    return jars


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("Java is not installed: install a JDK 17+ (apt-get install openjdk-17-jre-headless)")
    return java


def _paths(settings: Settings) -> tuple[Path, Path, Path, Path]:
    data = settings.kafka_data_dir
    return data, data / "broker.pid", data / "broker.log", data / "server.properties"


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A zombie is dead for our purposes; it only awaits its parent's wait().
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def _read_pid(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def status(settings: Settings) -> BrokerStatus:
    data, pid_file, log_file, _ = _paths(settings)
    pid = _read_pid(pid_file)
    running = pid is not None and _port_open(settings.kafka_port)
    return BrokerStatus(running, pid, settings.bootstrap_servers, data, log_file)


def _cluster_id() -> str:
    # Kafka's Uuid format: 16 random bytes, URL-safe base64 without padding, never a leading '-'.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _write_config(settings: Settings, config_file: Path) -> None:
    text = _infra_file("server.properties").format(
        port=settings.kafka_port,
        controller_port=settings.kafka_controller_port,
        log_dirs=settings.kafka_data_dir / "logs",
    )
    config_file.write_text(text)
    (config_file.parent / "log4j.properties").write_text(_infra_file("log4j.properties"))


def _format_storage(java: str, classpath: str, config_file: Path, logs: Path) -> None:
    if (logs / "meta.properties").exists():
        return
    result = subprocess.run(
        [java, "-Xmx256m", "-cp", classpath, "kafka.tools.StorageTool", "format",
         "-t", _cluster_id(), "-c", str(config_file), "--ignore-formatted"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        raise BrokerError(f"formatting Kafka storage in {logs} failed: {result.stderr.strip()[-300:]}")


def _check_ports_free(settings: Settings) -> None:
    for port in (settings.kafka_port, settings.kafka_controller_port):
        if _port_open(port):
            raise BrokerError(
                f"port {port} is already taken by another process: stop it, or choose other ports "
                "with REWARDSTREAM_KAFKA_PORT / REWARDSTREAM_KAFKA_CONTROLLER_PORT"
            )


def _wait_started(proc: subprocess.Popen[bytes], settings: Settings, log_file: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_file.read_text(errors="replace").strip().splitlines()[-5:]
            raise BrokerError(
                f"the Kafka broker exited with code {proc.returncode} during start-up; "
                f"last log lines ({log_file}): " + " | ".join(tail)
            )
        if _STARTED_LINE in log_file.read_text(errors="replace") and _port_open(settings.kafka_port):
            return
        time.sleep(0.25)
    proc.terminate()
    raise BrokerError(f"the Kafka broker did not start within {_START_TIMEOUT_S:.0f} s; see {log_file}")


def start(settings: Settings) -> tuple[BrokerStatus, bool]:
    """Start the broker unless it runs; returns its status and whether this call started it.

    Concurrent callers (two demos, a test fixture and the CLI) serialise on a lock file, so only
    one of them launches the broker and the others find it running.
    """
    settings.kafka_data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.kafka_data_dir / "broker.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = status(settings)
        if current.running:
            return current, False
        return _launch(settings), True


def _launch(settings: Settings) -> BrokerStatus:
    java = _java()
    _check_ports_free(settings)
    jars = ensure_jars()
    data, pid_file, log_file, config_file = _paths(settings)
    data.mkdir(parents=True, exist_ok=True)
    _write_config(settings, config_file)
    classpath = f"{jars}/*"
    _format_storage(java, classpath, config_file, data / "logs")
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(
            [java, f"-Xms{settings.kafka_heap_mb // 2}m", f"-Xmx{settings.kafka_heap_mb}m",
             "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
             f"-Dlog4j.configuration=file:{data / 'log4j.properties'}",
             "-cp", classpath, "kafka.Kafka", str(config_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # the broker outlives the CLI that started it
        )
    pid_file.write_text(f"{proc.pid}\n")
    _wait_started(proc, settings, log_file)
    return status(settings)


def wait_port_free(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _port_open(port):
            return True
        time.sleep(0.2)
    return not _port_open(port)


def stop(settings: Settings) -> bool:
    """Stop the broker cleanly (SIGTERM, then SIGKILL after a grace period); False if none ran."""
    _, pid_file, _, _ = _paths(settings)
    pid = _read_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.2)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    pid_file.unlink(missing_ok=True)
    for port in (settings.kafka_port, settings.kafka_controller_port):
        if not wait_port_free(port, 10.0):
            raise BrokerError(f"the broker stopped but port {port} is still in use")
    return True
