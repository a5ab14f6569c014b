"""Each Kafka client library's connection options, from the one :class:`infra.settings.Settings`.

Every client the platform makes (kafka-python, aiokafka, faust, confluent-kafka/librdkafka)
takes its broker address and its authentication from here, so one environment secures all of
them. The returned mappings hold the password: pass them to the client, never log them.
"""

from __future__ import annotations

import ssl
from typing import Any

from infra.settings import KafkaAuth, Settings

__all__ = ["client_env", "librdkafka_options", "faust_options", "python_client_options"]


def _ssl_context(auth: KafkaAuth) -> ssl.SSLContext | None:
    if auth.security_protocol != "SASL_SSL":
        return None
    return ssl.create_default_context(cafile=str(auth.ssl_cafile) if auth.ssl_cafile else None)


def python_client_options(settings: Settings) -> dict[str, Any]:
    """``bootstrap_servers`` and authentication for kafka-python (KafkaProducer, KafkaConsumer,
    KafkaAdminClient) and aiokafka (AIOKafkaProducer, AIOKafkaConsumer): the two libraries name
    these options alike, SCRAM's user and password included (``sasl_plain_*``)."""
    auth = settings.kafka_auth
    options: dict[str, Any] = {"bootstrap_servers": settings.bootstrap_servers}
    if auth.sasl:
        options |= {"security_protocol": auth.security_protocol,
                    "sasl_mechanism": auth.sasl_mechanism,
                    "sasl_plain_username": auth.username, "sasl_plain_password": auth.password}
    context = _ssl_context(auth)
    if context is not None:
        options["ssl_context"] = context
    return options


def faust_options(settings: Settings) -> dict[str, Any]:
    """``broker`` and ``broker_credentials`` for ``faust.App``."""
    options: dict[str, Any] = {"broker": f"kafka://{settings.bootstrap_servers}"}
    auth = settings.kafka_auth
    if auth.sasl:
        from faust import SASLCredentials

        # An SSL context is what makes faust speak SASL_SSL rather than SASL_PLAINTEXT.
        options["broker_credentials"] = SASLCredentials(
            username=auth.username, password=auth.password, mechanism=auth.sasl_mechanism,
            ssl_context=_ssl_context(auth))
    return options


def librdkafka_options(settings: Settings) -> dict[str, str]:
    """librdkafka properties (confluent-kafka, Quix Streams' ``ConnectionConfig``):
    ``bootstrap.servers``, ``security.protocol``, ``sasl.mechanisms``, ``sasl.username``,
    ``sasl.password`` and, under SASL_SSL with a CA bundle, ``ssl.ca.location``."""
    auth = settings.kafka_auth
    options = {"bootstrap.servers": settings.bootstrap_servers,
               "security.protocol": auth.security_protocol}
    if auth.sasl:
        assert auth.username is not None and auth.password is not None  # load_kafka_auth checks
        options |= {"sasl.mechanisms": auth.sasl_mechanism, "sasl.username": auth.username,
                    "sasl.password": auth.password}
    if auth.security_protocol == "SASL_SSL" and auth.ssl_cafile is not None:
        options["ssl.ca.location"] = str(auth.ssl_cafile)
    return options


def client_env(settings: Settings) -> dict[str, str]:
    """The ``REWARDSTREAM_*`` variables that give a child process the same brokers, prefix and
    credentials (the password as its file when it came from one)."""
    auth = settings.kafka_auth
    env = {"REWARDSTREAM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix,
           "REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": auth.security_protocol,
           "REWARDSTREAM_KAFKA_SASL_MECHANISM": auth.sasl_mechanism}
    if auth.sasl:
        env["REWARDSTREAM_KAFKA_USERNAME"] = auth.username or ""
        if auth.password_file is not None:
            env["REWARDSTREAM_KAFKA_PASSWORD_FILE"] = str(auth.password_file)
        else:
            env["REWARDSTREAM_KAFKA_PASSWORD"] = auth.password or ""
    if auth.ssl_cafile is not None:
        env["REWARDSTREAM_KAFKA_SSL_CAFILE"] = str(auth.ssl_cafile)
    return env
