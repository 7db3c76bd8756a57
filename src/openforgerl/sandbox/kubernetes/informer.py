"""One list+watch of all our sandbox Pods, shared by every rollout of a backend.

The classic informer loop: list (gives a resourceVersion), watch from it, apply events to a local
cache. A 410 Gone (the version was compacted, as an HTTP status or as an ERROR event mid-stream)
means we missed events: re-list and resume from the new version. Other API errors back off and
re-list too. Waiters block on a change signal, never on their own API calls, so thousands of booting
rollouts cost one watch connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from openforgerl.sandbox.kubernetes.client import KubeApi, KubeApiError, Obj, WatchExpired
from openforgerl.sandbox.kubernetes.errors import ApiUnavailable

PodPredicate = Callable[[Obj | None], bool]


class PodInformer:
    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        labels: Mapping[str, str],
        retry_s: float = 0.5,
        max_retry_s: float = 5.0,
    ) -> None:
        self._api, self._ns, self._labels = api, namespace, dict(labels)
        self._retry_s, self._max_retry_s = retry_s, max_retry_s
        self.pods: dict[str, Obj] = {}
        self.relists = 0  # how many times a 410 forced a re-list
        self.errors = 0
        self._rv = ""
        self._changed = asyncio.Event()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 60.0) -> None:
        """Start watching; returns once the first list has landed in the cache."""
        self._task = asyncio.create_task(self._run(), name="pod-informer")
        try:
            await asyncio.wait_for(self._synced.wait(), timeout_s)
        except TimeoutError as e:
            await self.aclose()
            raise ApiUnavailable(f"could not list pods within {timeout_s:.0f}s") from e

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        need_list, delay = True, self._retry_s
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._follow()
                delay = self._retry_s
            except WatchExpired:
                self.relists += 1
                need_list = True
            except KubeApiError:
                self.errors += 1
                need_list = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_retry_s)

    async def _relist(self) -> None:
        pods, rv = await self._api.list_pods(self._ns, self._labels)
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self._rv = rv
        self._synced.set()
        self._signal()

    async def _follow(self) -> None:
        async for kind, pod in self._api.watch_pods(self._ns, self._labels, self._rv):
            self._apply(kind, pod)

    def _apply(self, kind: str, pod: Obj) -> None:
        meta = pod.get("metadata", {})
        self._rv = meta.get("resourceVersion") or self._rv
        if kind == "BOOKMARK":
            return
        if kind == "DELETED":
            self.pods.pop(meta["name"], None)
        else:
            self.pods[meta["name"]] = pod
        self._signal()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def get(self, name: str) -> Obj | None:
        return self.pods.get(name)

    async def wait_for(self, name: str, predicate: PodPredicate, timeout_s: float) -> Obj | None:
        """Wait until `predicate(pod or None)` holds; raises TimeoutError after `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            while not predicate(self.pods.get(name)):
                await self._changed.wait()
        return self.pods.get(name)
