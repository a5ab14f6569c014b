"""A secured local broker: SASL/SCRAM for clients, ACLs enforced, ``admin`` its one super user.

``admin`` gets its SCRAM credentials when the storage is formatted (KIP-900); the services'
principals are created afterwards through it (``infra.principals_admin``). A data directory
formatted secured stays secured: its credentials directory holds ``admin.password``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from infra.credentials import credentials_dir, ensure_password, password_file, write_private
from infra.errors import BrokerError
from infra.settings import SASL_MECHANISMS, Settings

__all__ = ["ADMIN", "argument_file", "is_secured", "security_config"]

ADMIN = "admin"


def is_secured(settings: Settings) -> bool:
    return password_file(credentials_dir(settings), ADMIN).exists()


def security_config(settings: Settings, secure: bool, formatted: bool) -> tuple[str, list[str]]:
    """What a secured start adds: the lines appended to server.properties and the storage
    tool's ``--add-scram`` arguments for admin (both empty for a plaintext start).

    Secured when asked or when the data directory already is; storage ``formatted`` in
    plaintext cannot become secured (it has no admin credentials and no way to add them).
    """
    if not (secure or is_secured(settings)):
        return "", []
    if formatted and not is_secured(settings):
        raise BrokerError(
            f"the data directory {settings.kafka_data_dir} was formatted without security; a "
            "secured broker needs a new one (set REWARDSTREAM_KAFKA_DATA_DIR)")
    password = ensure_password(password_file(credentials_dir(settings), ADMIN))
    overlay = (Path(__file__).parent / "server-secure.properties").read_text()
    scram = [arg for mechanism in SASL_MECHANISMS
             for arg in ("--add-scram", f"{mechanism}=[name={ADMIN},password={password}]")]
    return "\n" + overlay.format(admin_password=password), scram


@contextmanager
def argument_file(directory: Path, args: Sequence[str]) -> Iterator[Path]:
    """A mode-600 ``java @file`` holding ``args``, removed afterwards: arguments that carry
    passwords stay out of the process list."""
    path = directory / "java-args.private"
    quoted = ('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"' for arg in args)
    write_private(path, "\n".join(quoted) + "\n")
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
