"""`SandboxBackend` on Kubernetes: one Pod per rollout, created and watched through `KubeApi`.

Lifecycle of `open_sandbox`: render the Pod (pure) and check it → take a boot slot (concurrency +
rate cap) → create it (409 is success: an earlier attempt of ours already did; 429/5xx retry with
backoff, then `ApiUnavailable`) → wait on the shared informer until Running or a fault, bounded by
the boot timeout → lay out the task's files. Any failure deletes the Pod before raising. Deletion
never gives up silently: it retries, runs shielded from cancellation, and what still escapes is
reaped by the janitor, which selects by our labels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.kubernetes import janitor
from openforgerl.sandbox.kubernetes.client import KubeApi, KubeApiError, Obj
from openforgerl.sandbox.kubernetes.config import ANNOTATION_ROLLOUT, LABEL_BACKEND, KubernetesConfig
from openforgerl.sandbox.kubernetes.errors import (
    CLUSTER_FIX,
    ApiUnavailable,
    KubeSandboxError,
    NoCluster,
    PodCreateRejected,
)
from openforgerl.sandbox.kubernetes.informer import PodInformer
from openforgerl.sandbox.kubernetes.manifests import render_pod, render_verifier_pod, sandbox_selector
from openforgerl.sandbox.kubernetes.ratelimit import BootGate
from openforgerl.sandbox.kubernetes.sandbox import KubernetesSandbox
from openforgerl.sandbox.kubernetes.status import boot_timeout_fault, fault, has_ended, is_running
from openforgerl.sandbox.kubernetes.validation import check_manifest

log = logging.getLogger(__name__)
DELETE_WAIT_S = 30.0


def is_foreign(err: BaseException) -> bool:
    return isinstance(err, PodCreateRejected) and err.reason == "AlreadyExists"


def backoff_s(attempt: int, base: float, cap: float) -> float:
    """Full-jitter exponential backoff."""
    return random.uniform(0, min(cap, base * 2**attempt))


class KubernetesBackend:
    name = "kubernetes"

    def __init__(
        self, api: KubeApi, config: KubernetesConfig | None = None, *, owns_api: bool = True
    ) -> None:
        self.config = config or KubernetesConfig()
        self.api = api
        self._owns_api = owns_api
        self.gate = BootGate(
            self.config.max_concurrent_boots, self.config.boots_per_second, self.config.boot_burst
        )
        self.informer = PodInformer(api, self.config.namespace, sandbox_selector(self.config))
        self.known: set[str] = set()  # pods this process created and has not released
        self._deletes: set[asyncio.Task[None]] = set()
        self._janitor: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        config: KubernetesConfig | None = None,
        *,
        kubeconfig: str | Path | None = None,
        server: str | None = None,
    ) -> KubernetesBackend:
        """Connect with lightkube (kubeconfig file, bare server URL, or in-cluster discovery) and start."""
        from lightkube import ConfigError

        from openforgerl.sandbox.kubernetes.lightkube_api import LightkubeApi

        cfg = config or KubernetesConfig.from_env()
        try:
            api = LightkubeApi.from_kubeconfig(kubeconfig, server=server, namespace=cfg.namespace)
        except ConfigError as e:
            raise NoCluster(f"no Kubernetes cluster configured ({e}): {CLUSTER_FIX}") from e
        backend = cls(api, cfg)
        try:
            await backend.first_contact()
            await backend.start()
        except BaseException as e:
            await backend.aclose()
            if isinstance(e, ApiUnavailable):  # it answered the first list, then kept failing
                raise NoCluster(f"the Kubernetes API server kept failing ({e}): {CLUSTER_FIX}") from e
            raise
        return backend

    async def first_contact(self) -> None:
        """One list before the informer starts: an address nothing listens on, or credentials the API
        server refuses, is the user's setup to fix, not an outage to retry for a minute."""
        try:
            await self.api.list_pods(self.config.namespace, sandbox_selector(self.config))
        except KubeApiError as e:
            if e.code == 0:
                where = getattr(self.api, "server", "") or "(unknown address)"
                raise NoCluster(
                    f"cannot reach the Kubernetes API server at {where} ({e}): {CLUSTER_FIX}"
                ) from e
            if e.code in (401, 403):
                raise NoCluster(
                    f"the Kubernetes API server refused to list pods in namespace "
                    f"{self.config.namespace!r} ({e}): give the orchestrator the Role in "
                    "deploy/k8s/rbac.yaml, or a kubeconfig whose user holds it"
                ) from e

    async def start(self) -> None:
        """Sync the informer, reap leftovers of an earlier run with our backend id, start the janitor."""
        await self.informer.start()
        await self.reap(min_age_s=0.0)
        self._janitor = asyncio.create_task(self._janitor_loop(), name="k8s-janitor")

    async def open_sandbox(self, spec: SandboxSpec) -> KubernetesSandbox:
        manifest = render_pod(spec, self.config)
        check_manifest(manifest)
        name = manifest["metadata"]["name"]
        deadline = asyncio.get_running_loop().time() + spec.lifetime_s
        self.known.add(name)
        sandbox = None
        try:
            async with self.gate.slot():
                await self._create(manifest)
                await self._wait_running(name, min(self.config.boot_timeout_s, spec.lifetime_s))
            sandbox = KubernetesSandbox(self, name, spec, deadline)
            await sandbox.lay_out(spec)
        except BaseException as e:
            if is_foreign(e):  # someone else's Pod holds the name: never delete it
                self.known.discard(name)
            else:
                await (sandbox.aclose() if sandbox else self.release(name))
            raise
        return sandbox

    async def open_verifier(self, spec: SandboxSpec, n: int) -> KubernetesSandbox:
        """A fresh Pod for the rollout's `n`-th verifier run (`KubernetesSandbox.run_verifier`)."""
        manifest = render_verifier_pod(spec, self.config, n)
        check_manifest(manifest)
        name = manifest["metadata"]["name"]
        self.known.add(name)
        try:
            async with self.gate.slot():
                await self._create(manifest)
                await self._wait_running(name, min(self.config.boot_timeout_s, spec.lifetime_s))
        except BaseException as e:
            if is_foreign(e):
                self.known.discard(name)
            else:
                await self.release(name)
            raise
        return KubernetesSandbox(self, name, spec, asyncio.get_running_loop().time() + spec.lifetime_s)

    async def _create(self, manifest: Obj) -> None:
        retries = self.config.create_retries
        for attempt in range(retries + 1):
            try:
                await self.api.create(manifest)
                return
            except KubeApiError as e:
                if e.code == 409:
                    return await self._adopt(manifest)
                if not e.retryable:
                    raise PodCreateRejected(str(e), pod=manifest["metadata"]["name"], reason=e.reason) from e
                if attempt == retries:
                    raise ApiUnavailable(
                        f"create failed {retries + 1} times: {e}", pod=manifest["metadata"]["name"]
                    ) from e
                await asyncio.sleep(backoff_s(attempt, self.config.retry_base_s, self.config.retry_max_s))

    async def _adopt(self, manifest: Obj) -> None:
        """409: fine if the Pod is ours (a retried create whose first answer was lost)."""
        meta = manifest["metadata"]
        pod = await self.api.get_pod(meta["namespace"], meta["name"])
        found = (pod or {}).get("metadata", {}).get("annotations", {}).get(ANNOTATION_ROLLOUT)
        if pod is not None and found != meta["annotations"][ANNOTATION_ROLLOUT]:
            raise PodCreateRejected(
                f"pod {meta['name']} exists for rollout {found!r}", pod=meta["name"], reason="AlreadyExists"
            )

    async def _wait_running(self, name: str, timeout_s: float) -> None:
        def settled(pod: Obj | None) -> bool:
            return pod is not None and (is_running(pod) or fault(pod) is not None)

        try:
            pod = await self.informer.wait_for(name, settled, timeout_s)
        except TimeoutError:
            raise boot_timeout_fault(self.informer.get(name), name, timeout_s) from None
        err = fault(pod) if pod else None
        if err is not None:
            raise err

    async def wait_for_fault(self, name: str, timeout_s: float, ended: Collection[str] = ()) -> Obj | None:
        """The Pod once it shows a fault (or a stub once it is gone); None if it stays healthy.
        `ended`: containers the backend ended itself, which are no fault."""
        try:
            pod = await self.informer.wait_for(
                name, lambda p: p is None or fault(p, ended) is not None, timeout_s
            )
        except TimeoutError:
            return None
        return (
            pod
            if pod is not None
            else {"metadata": {"name": name}, "status": {"phase": "Failed", "reason": "Deleted"}}
        )

    async def wait_ended(self, name: str, container: str, timeout_s: float) -> bool:
        """Whether the Pod's `container` is seen terminated (or the Pod gone) within `timeout_s`."""
        try:
            await self.informer.wait_for(name, lambda p: has_ended(p, container), timeout_s)
        except TimeoutError:
            return False
        return True

    def schedule_delete(self, name: str) -> asyncio.Task[None]:
        """Delete in a task of its own, so a cancelled caller cannot abandon it half-way."""
        task = asyncio.create_task(self._delete(name), name=f"delete-{name}")
        self._deletes.add(task)
        task.add_done_callback(self._deletes.discard)
        return task

    async def release(self, name: str) -> None:
        """Delete the Pod (retrying), wait until the watch sees it gone, forget it."""
        task = self.schedule_delete(name)
        try:
            await asyncio.shield(task)
            with contextlib.suppress(TimeoutError):
                await self.informer.wait_for(name, lambda p: p is None, DELETE_WAIT_S)
        finally:
            self.known.discard(name)

    async def _delete(self, name: str) -> None:
        cfg = self.config
        for attempt in range(cfg.delete_retries + 1):
            try:
                await self.api.delete("Pod", cfg.namespace, name, grace_s=0)
                return
            except KubeApiError as e:
                log.warning("delete of pod %s failed (%s), attempt %d", name, e, attempt + 1)
                await asyncio.sleep(backoff_s(attempt, cfg.retry_base_s, cfg.retry_max_s))
        log.error(
            "pod %s not deleted after %d attempts; the janitor will reap it", name, cfg.delete_retries + 1
        )

    async def reap(self, min_age_s: float | None = None) -> list[str]:
        """Delete our labelled Pods that no live sandbox owns (see `janitor`)."""
        age = self.config.janitor_min_age_s if min_age_s is None else min_age_s
        return await janitor.reap(
            self.api,
            self.config.namespace,
            sandbox_selector(self.config),
            self.known.__contains__,
            age,
            datetime.now(UTC),
        )

    async def reap_finished(self, min_age_s: float | None = None) -> list[str]:
        """Delete finished sandbox Pods of any openforgerl backend in our namespace."""
        age = self.config.janitor_min_age_s if min_age_s is None else min_age_s
        labels = {k: v for k, v in sandbox_selector(self.config).items() if k != LABEL_BACKEND}
        return await janitor.reap_finished(self.api, self.config.namespace, labels, age)

    async def _janitor_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.janitor_interval_s)
            with contextlib.suppress(KubeApiError, KubeSandboxError):
                await self.reap()
                await self.reap_finished()

    async def aclose(self) -> None:
        """Stop the janitor, delete every Pod still ours, wait for the deletes, close the client."""
        if self._closed:
            return
        self._closed = True
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        await asyncio.gather(*(self.release(n) for n in list(self.known)), return_exceptions=True)
        await asyncio.gather(*self._deletes, return_exceptions=True)
        await self.informer.aclose()
        if self._owns_api:
            await self.api.aclose()
