"""Which checkpoint each arm is served by, kept in step with the registry.

:meth:`Router.apply` is the only writer: it hot-loads the adapters the new registry needs
*before* switching any arm to them, then switches all arms at once. Adapters nobody routes to
any more are drained: each request holds a lease on its target for its whole life, and an
adapter is unloaded from the backend only when its last lease ends. So a promotion or rollback
never fails a request in flight, and new requests see the change as soon as ``apply`` returns.
While a started canary states its share (``arms.CanaryOverlay``), the ``canary`` arm is routed
too, and :attr:`Router.canary` tells the gateway whom to give it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from schemas.checkpoints import Registry
from serving.gateway.arms import CANARY_ARM, ArmSplit, CanaryOverlay
from serving.gateway.backend import BackendClient
from serving.gateway.errors import BackendError
from serving.gateway.registry import Target, canary_overlay, resolve_targets

__all__ = ["Router"]

log = logging.getLogger(__name__)


class Router:
    def __init__(self, backend: BackendClient, split: ArmSplit, base: Target,
                 base_path: str | None = None) -> None:
        self._backend = backend
        self._split = split
        self._base = base
        self._base_path = base_path
        self.targets: dict[str, Target] = {arm: base for arm in split.targets()}
        self.canary: CanaryOverlay | None = None
        self._loaded: dict[str, str] = {}  # served name -> adapter path, on the backend
        self._leases: Counter[str] = Counter()
        self._draining: set[str] = set()
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def loaded(self) -> dict[str, str]:
        return dict(self._loaded)

    async def adopt_backend_adapters(self) -> None:
        """Take over adapters a previous run left loaded, so they are unloaded when unused."""
        async with self._lock:
            self._loaded.update(await self._backend.loaded_adapters())
            self._draining |= set(self._loaded) - self._routed()

    def _routed(self) -> set[str]:
        return {target.served_name for target in self.targets.values()}

    async def apply(self, registry: Registry) -> dict[str, Target]:
        """Route by ``registry``; returns the new targets. An adapter that fails to load
        leaves its arms on their previous target (the next registry change retries)."""
        async with self._lock:
            overlay = canary_overlay(registry, self._base_path)
            arms = self._split.targets()
            if overlay is not None:
                arms.setdefault(CANARY_ARM, "canary")
            wanted = resolve_targets(registry, arms, self._base, self._base_path)
            for arm, target in wanted.items():
                path = target.adapter_path
                if path is None or self._loaded.get(target.served_name) == path:
                    continue
                try:
                    await self._backend.load_adapter(target.served_name, path)
                    self._loaded[target.served_name] = path
                except BackendError as exc:
                    log.error("cannot load %s for arm %s, keeping %s: %s", target.served_name,
                              arm, self.targets[arm].checkpoint_id, exc)
                    wanted[arm] = self.targets.get(arm, self._base)
                    overlay = None if arm == CANARY_ARM else overlay
            if wanted != self.targets:
                log.info("routing %s", {a: t.checkpoint_id for a, t in wanted.items()})
            self.targets, self.canary = wanted, overlay
            self._draining = (self._draining | set(self._loaded)) - self._routed()
            await self._unload_idle()
            return dict(self.targets)

    async def _unload_idle(self) -> None:
        for name in sorted(self._draining):
            if self._leases[name] == 0:
                try:
                    await self._backend.unload_adapter(name)
                except BackendError as exc:
                    log.error("cannot unload %s (will retry): %s", name, exc)
                    continue
                self._loaded.pop(name, None)
                self._draining.discard(name)
                log.info("unloaded %s", name)

    async def _unload_idle_locked(self) -> None:
        async with self._lock:
            await self._unload_idle()

    @asynccontextmanager
    async def lease(self, arm: str) -> AsyncIterator[Target]:
        """The arm's current target, kept loaded until the block exits (the first arm's when
        the arm is gone: a canary that ended since the request was assigned)."""
        target = self.targets.get(arm) or self.targets[self._split.arms[0].name]
        self._leases[target.served_name] += 1
        try:
            yield target
        finally:
            self._leases[target.served_name] -= 1
            if self._leases[target.served_name] == 0 and target.served_name in self._draining:
                task = asyncio.get_running_loop().create_task(self._unload_idle_locked())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
