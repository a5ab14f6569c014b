"""What the gateway serves on each arm, waiting for it to follow the registry, and the --hack
variant deployed around the gates."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx

from infra.errors import ServiceError
from infra.supervisor import Supervisor
from schemas.checkpoints import CheckpointEvent, promotion, rollback
from schemas.ids import uuid7
from trainer.registry_io import RegistryStore

__all__ = ["arms_served", "deploy_hack", "wait_served"]


def arms_served(gateway_url: str, api_key: str) -> dict[str, str]:
    """The checkpoint each arm of the gateway serves now (empty when it cannot say)."""
    try:
        models = httpx.get(gateway_url + "/v1/models", timeout=5.0,
                           headers={"Authorization": f"Bearer {api_key}"}).json()["data"]
        arms = models[0]["arms"]
        return {arm: target["checkpoint_id"] for arm, target in arms.items()}
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return {}


def wait_served(gateway_url: str, api_key: str, wanted: Mapping[str, str], services: Supervisor,
                timeout_s: float = 60.0) -> None:
    """Wait until every arm in ``wanted`` serves its checkpoint."""
    deadline = time.monotonic() + timeout_s
    while True:
        served = arms_served(gateway_url, api_key)
        if all(served.get(arm) == checkpoint for arm, checkpoint in wanted.items()):
            return
        services.check_alive()
        if time.monotonic() > deadline:
            raise ServiceError(f"the gateway serves {served}, not {dict(wanted)}, after "
                               f"{timeout_s:.0f} s; see {services.log_dir / 'gateway.log'}")
        time.sleep(0.3)


def deploy_hack(store: RegistryStore, model: str, adapter_dir: Path, base_path: Path,
                parent_id: str,
                hack: str) -> str:
    """Register the variant as a checkpoint of ``parent_id`` and make it production by hand
    (around the gate and the canary, as an operator could), so its traffic is compared against
    the parent's. A canary still waiting for its A/B is withdrawn: the variant takes all users."""
    now = datetime.now(UTC)
    registry = store.read()
    reason = f"--hack {hack}: deployed around the gate and the canary"
    canary = registry.canary(model)
    if canary is not None:
        store.publish(rollback(registry, canary.checkpoint_id, now, "demo", reason))
        registry = store.read()
    checkpoint_id = adapter_dir.name
    created = CheckpointEvent(
        event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=now, kind="created",
        status="candidate", checkpoint_id=checkpoint_id, model=model, parent_id=parent_id,
        path=str(adapter_dir.resolve()), adapter=True,
        base_path=str(base_path.resolve()),
        actor="demo", evidence={"reason": f"--hack {hack}: a policy that games the reward"})
    store.publish([created])
    store.publish([promotion(store.read(), checkpoint_id, now, "demo", {"reason": reason})])
    return checkpoint_id
