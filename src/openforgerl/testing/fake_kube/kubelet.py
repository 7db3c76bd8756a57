"""The fake kubelet: runs each Pod's first container as a local bubblewrap sandbox and writes the
status a real kubelet would (phase, conditions, containerStatuses) back into the store.

Honoured: command/args, env (`value` only), workingDir, emptyDir volumes (fresh host dirs, bound
writable), `activeDeadlineSeconds` (phase Failed, reason DeadlineExceeded), `restartPolicy: Never`
(a terminated container stays terminated), deletion (kill, then the object disappears).
Not simulated: images (the host root is used read-only), resource limits, init/sidecar containers,
probes, Services' networking, scheduling. Faults come from `Faults` (stuck Pending, Unschedulable)
or from `oom_kill` / `evict` on a running Pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.testing.fake_kube.bwrap import Container
from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.store import ApiStatus, Obj, Store, now_iso

PODS = "pods"
POD_IP = "10.244.0.{n}"
HOST_IP = "127.0.0.1"


@dataclass
class PodRuntime:
    container: Container | None = None
    dir: Path | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    terminated: bool = False


def conditions(scheduled: bool, running: bool, reason: str | None = None,
               message: str | None = None) -> list[Obj]:
    stamp = now_iso()
    sched: Obj = {"type": "PodScheduled", "status": "True" if scheduled else "False",
                  "lastTransitionTime": stamp}
    if reason:
        sched.update(reason=reason, message=message or reason)
    out = [sched]
    if scheduled:
        out.append({"type": "Initialized", "status": "True", "lastTransitionTime": stamp})
        out += [{"type": t, "status": "True" if running else "False", "lastTransitionTime": stamp}
                for t in ("ContainersReady", "Ready")]
    return out


def container_status(pod: Obj, state: Obj, ready: bool = False) -> list[Obj]:
    ctr = pod["spec"]["containers"][0]
    return [{"name": ctr["name"], "image": ctr.get("image", ""), "imageID": "", "ready": ready,
             "started": "running" in state, "restartCount": 0, "state": state}]


class Kubelet:
    def __init__(self, store: Store, faults: Faults, root: Path | None = None) -> None:
        self.store, self.faults = store, faults
        self.root = root or Path(tempfile.mkdtemp(prefix="fake-kubelet-"))
        self.pods: dict[tuple[str, str], PodRuntime] = {}
        self.started_pids: list[int] = []  # every bwrap we ran (tests check none outlives us)
        self._counter = 0
        store.on_create.append(self._on_create)

    def _on_create(self, plural: str, obj: Obj) -> None:
        if plural == PODS:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            rt = self.pods[key] = PodRuntime()
            rt.tasks.append(asyncio.create_task(self._run(key, rt), name=f"kubelet-{key[1]}"))

    def _set_status(self, key: tuple[str, str], **status: Any) -> None:
        def mutate(obj: Obj) -> None:
            obj.setdefault("status", {}).update(status)

        with contextlib.suppress(ApiStatus):  # the pod may be gone already
            self.store.update(PODS, key[0], key[1], mutate)

    async def _run(self, key: tuple[str, str], rt: PodRuntime) -> None:
        pod = self.store.get(PODS, *key)
        self._set_status(key, phase="Pending", qosClass="Guaranteed", conditions=conditions(False, False))
        if self.faults.take("unschedulable"):
            msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available."
            self._set_status(key, conditions=conditions(False, False, "Unschedulable", msg))
            return
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._set_status(key, conditions=conditions(True, False), hostIP=HOST_IP, startTime=now_iso(),
                         containerStatuses=container_status(pod, waiting))
        if self.faults.take("stuck_pending"):
            await self._stuck_pulling(key, pod)
            return
        await self._start(key, rt, pod)

    async def _stuck_pulling(self, key: tuple[str, str], pod: Obj) -> None:
        image = pod["spec"]["containers"][0].get("image", "")
        for reason in ("ErrImagePull", "ImagePullBackOff"):
            msg = f'Back-off pulling image "{image}"' if reason == "ImagePullBackOff" else (
                f'failed to pull image "{image}": not found')
            self._set_status(key, containerStatuses=container_status(
                pod, {"waiting": {"reason": reason, "message": msg}}))
            await asyncio.sleep(0.5)

    async def _start(self, key: tuple[str, str], rt: PodRuntime, pod: Obj) -> None:
        rt.dir = self.root / f"{key[0]}-{key[1]}"
        rt.dir.mkdir(parents=True, exist_ok=True)
        spec, ctr = pod["spec"], pod["spec"]["containers"][0]
        argv = list(ctr.get("command") or ["sh"]) + list(ctr.get("args") or [])
        env = {e["name"]: str(e.get("value", "")) for e in ctr.get("env", [])} | {"HOSTNAME": key[1]}
        try:
            rt.container = await Container.start(argv, env=env, binds=self._volumes(rt.dir, spec, ctr),
                                                  cwd=ctr.get("workingDir") or "/", log_path=rt.dir / "log")
        except OSError as e:
            self._terminate(key, rt, 128, "StartError", message=str(e))
            return
        self._counter += 1
        self.started_pids.append(rt.container.proc.pid)
        running = {"running": {"startedAt": now_iso()}}
        self._set_status(key, phase="Running", podIP=POD_IP.format(n=self._counter % 250 + 2),
                         conditions=conditions(True, True), containerStatuses=container_status(pod, running, True))
        rt.tasks.append(asyncio.create_task(self._reap_on_exit(key, rt)))
        deadline = spec.get("activeDeadlineSeconds")
        if deadline:
            rt.tasks.append(asyncio.create_task(self._deadline(key, rt, float(deadline))))

    @staticmethod
    def _volumes(pod_dir: Path, spec: Obj, ctr: Obj) -> dict[str, Path]:
        empty = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        binds = {}
        for mount in ctr.get("volumeMounts", []):
            if mount["name"] in empty:
                host = pod_dir / "volumes" / mount["name"]
                host.mkdir(parents=True, exist_ok=True)
                binds[mount["mountPath"]] = host
        return binds

    async def _reap_on_exit(self, key: tuple[str, str], rt: PodRuntime) -> None:
        assert rt.container is not None
        code = await rt.container.wait()
        code = 128 - code if code < 0 else code  # killed by a signal: 128 + signo, as a kubelet says
        self._terminate(key, rt, code, "Completed" if code == 0 else "Error")

    async def _deadline(self, key: tuple[str, str], rt: PodRuntime, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._kill(rt)
        self._terminate(key, rt, 137, "Error", phase="Failed", reason="DeadlineExceeded",
                        message="Pod was active on the node longer than the specified deadline")

    def _terminate(self, key: tuple[str, str], rt: PodRuntime, code: int, ctr_reason: str, *,
                   phase: str | None = None, **status: Any) -> None:
        """Record the container's end once (restartPolicy Never: it stays terminated)."""
        if rt.terminated:
            return
        rt.terminated = True
        with contextlib.suppress(ApiStatus):
            pod = self.store.get(PODS, *key)
            term = {"terminated": {"exitCode": code, "reason": ctr_reason,
                                   "finishedAt": now_iso()}}
            self._set_status(key, phase=phase or ("Succeeded" if code == 0 else "Failed"),
                             conditions=conditions(True, False), containerStatuses=container_status(pod, term),
                             **status)

    @staticmethod
    def _kill(rt: PodRuntime) -> None:
        if rt.container is not None:
            rt.container.kill()

    def runtime(self, namespace: str, name: str) -> PodRuntime:
        rt = self.pods.get((namespace, name))
        if rt is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found')
        return rt

    def oom_kill(self, namespace: str, name: str) -> None:
        """As if the container hit its memory limit: killed, exit 137, reason OOMKilled."""
        rt = self.runtime(namespace, name)
        self._terminate((namespace, name), rt, 137, "OOMKilled")
        self._kill(rt)

    def evict(self, namespace: str, name: str) -> None:
        """As if node pressure evicted the Pod: phase Failed, status.reason Evicted."""
        rt = self.runtime(namespace, name)
        self._terminate((namespace, name), rt, 137, "ContainerStatusUnknown", phase="Failed",
                        reason="Evicted", message="The node was low on resource: memory.")
        self._kill(rt)

    async def delete(self, namespace: str, name: str) -> None:
        """Kill the container, drop the object, remove the Pod's dirs."""
        rt = self.pods.pop((namespace, name), None)
        if rt is not None:
            rt.terminated = True
            for task in rt.tasks:
                task.cancel()
            # let each task handle its cancellation now (a starting container kills itself)
            await asyncio.gather(*rt.tasks, return_exceptions=True)
            self._kill(rt)
            if rt.container is not None:
                await rt.container.wait()
            if rt.dir is not None:
                shutil.rmtree(rt.dir, ignore_errors=True)
        with contextlib.suppress(ApiStatus):
            self.store.delete(PODS, namespace, name)

    def log_path(self, namespace: str, name: str) -> Path | None:
        rt = self.pods.get((namespace, name))
        return rt.dir / "log" if rt and rt.dir else None

    async def aclose(self) -> None:
        for ns, name in list(self.pods):
            await self.delete(ns, name)
        shutil.rmtree(self.root, ignore_errors=True)
