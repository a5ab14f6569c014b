"""Kafka passwords on disk: one mode-600 file per principal, in a mode-700 directory.

A secured local broker keeps them under ``<data dir>/credentials``; a deployment hands each
service only its own file (``REWARDSTREAM_KAFKA_PASSWORD_FILE``), e.g. as a compose secret.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from pathlib import Path

from infra.errors import ConfigError
from infra.settings import KafkaAuth, Settings

__all__ = ["credentials_dir", "ensure_password", "password_file", "principal_settings",
           "write_private"]


def credentials_dir(settings: Settings) -> Path:
    """Where the local broker's principals' passwords live."""
    return settings.kafka_data_dir / "credentials"


def password_file(directory: Path, principal: str) -> Path:
    return directory / f"{principal}.password"


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, readable by its owner only from the first byte on."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def ensure_password(path: Path) -> str:
    """The password in ``path``; a new random one written there (mode 600) if there is none.

    Passwords are URL-safe base64, so they need no quoting in JAAS lines or in the
    ``SCRAM-SHA-512=[name=...,password=...]`` syntax of the storage tool.
    """
    if path.exists():
        password = path.read_text().strip()
        if not password:
            raise ConfigError(f"{path} is empty: delete it to have a new password made")
        return password
    password = secrets.token_urlsafe(24)
    write_private(path, password + "\n")
    return password


def principal_settings(settings: Settings, principal: str,
                       directory: Path | None = None) -> Settings:
    """``settings`` authenticated as ``principal``, with the password from its file (default:
    the local broker's credentials directory); over SASL_PLAINTEXT with SCRAM-SHA-512 unless
    ``settings`` already speak SASL."""
    path = password_file(directory or credentials_dir(settings), principal)
    if not path.exists():
        raise ConfigError(f"no password for Kafka principal {principal!r} at {path}: create it "
                          "with `rewardstream kafka principals create`")
    current = settings.kafka_auth
    base = current if current.sasl else KafkaAuth("SASL_PLAINTEXT")
    auth = replace(base, username=principal, password=ensure_password(path), password_file=path)
    return replace(settings, kafka_auth=auth)
