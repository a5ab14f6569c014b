"""Create the services' Kafka principals: SCRAM credentials and the ACLs of
:data:`infra.principals.PRINCIPALS`, through the admin client (as a super user).

Idempotent: an existing password file is kept (its credentials are set again), an ACL that
exists already is left as it is. kafka-python sends AlterUserScramCredentials itself, so no
JVM tool is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourceType,
    UserScramCredentialUpsertion,
)

from infra.credentials import ensure_password, password_file
from infra.errors import BrokerError
from infra.principals import PRINCIPALS, AclGrant, Principal, acl_grants
from infra.settings import SASL_MECHANISMS, Settings
from infra.topics import admin_client

__all__ = ["CreatedPrincipal", "create_principals"]


@dataclass(frozen=True)
class CreatedPrincipal:
    name: str
    password_file: Path
    acls: int


def _acl(grant: AclGrant) -> ACL:
    resource = ResourcePattern(ResourceType[grant.resource], grant.name,
                               ACLResourcePatternType[grant.pattern])
    return ACL(f"User:{grant.principal}", "*", ACLOperation[grant.operation],
               ACLPermissionType.ALLOW, resource)


def create_principals(settings: Settings, directory: Path,
                      principals: tuple[Principal, ...] = PRINCIPALS) -> list[CreatedPrincipal]:
    """SCRAM-SHA-256 and -512 credentials and the ACLs of each principal, its password in
    ``directory/<name>.password`` (made, mode 600, when missing). ``settings`` must
    authenticate as a super user (the broker's admin)."""
    admin = admin_client(settings)
    try:
        created = []
        for each in principals:
            path = password_file(directory, each.name)
            password = ensure_password(path)
            # The broker refuses two alterations of one user in the same request.
            for mechanism in SASL_MECHANISMS:
                errors = admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion(each.name, mechanism, password)])
                if errors.get(each.name):
                    raise BrokerError(f"setting {mechanism} credentials of Kafka user "
                                      f"{each.name!r} failed: {errors[each.name]}")
            grants = acl_grants(each, settings.topic_prefix)
            result = admin.create_acls([_acl(grant) for grant in grants])
            if result["failed"]:
                raise BrokerError(f"creating {len(result['failed'])} of the {len(grants)} ACLs "
                                  f"of Kafka user {each.name!r} failed: {result['failed'][0]}")
            created.append(CreatedPrincipal(each.name, path, len(grants)))
        return created
    finally:
        admin.close()
