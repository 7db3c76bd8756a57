"""The fake kubelet: runs each of a Pod's containers as a local bubblewrap sandbox and writes the
status a real kubelet would (phase, conditions, containerStatuses) back into the store.

Honoured: command/args, env (`value` only), workingDir, emptyDir volumes (one host dir per volume,
bound writable into each container that mounts it), one network namespace per Pod and one PID and
mount namespace per container (`shareProcessNamespace` false), `activeDeadlineSeconds` (phase
Failed, reason DeadlineExceeded), `restartPolicy: Never` (a terminated container stays terminated;
the Pod stays Running while any container runs), deletion (kill, then the object disappears).
Not simulated: images (the host root is used read-only), resource limits, init containers,
probes, Services' networking, scheduling. Faults come from `Faults` (stuck Pending, Unschedulable)
or from `oom_kill` (the Pod, or one container) / `evict` on a running Pod.
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
    containers: dict[str, Container] = field(default_factory=dict)  # by name, in the spec's order
    ended: dict[str, Obj] = field(default_factory=dict)  # a container's `terminated` state, once it ended
    dir: Path | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    terminated: bool = False  # every container ended (or the Pod was killed)


def conditions(
    scheduled: bool, running: bool, reason: str | None = None, message: str | None = None
) -> list[Obj]:
    stamp = now_iso()
    sched: Obj = {
        "type": "PodScheduled",
        "status": "True" if scheduled else "False",
        "lastTransitionTime": stamp,
    }
    if reason:
        sched.update(reason=reason, message=message or reason)
    out = [sched]
    if scheduled:
        out.append({"type": "Initialized", "status": "True", "lastTransitionTime": stamp})
        out += [
            {"type": t, "status": "True" if running else "False", "lastTransitionTime": stamp}
            for t in ("ContainersReady", "Ready")
        ]
    return out


def container_status(
    pod: Obj, state: Obj, ready: bool = False, ended: dict[str, Obj] | None = None
) -> list[Obj]:
    """Every container in `state`, except those in `ended` (name: its `terminated` state)."""
    out = []
    for ctr in pod["spec"]["containers"]:
        st = {"terminated": ended[ctr["name"]]} if ended and ctr["name"] in ended else state
        out.append(
            {
                "name": ctr["name"],
                "image": ctr.get("image", ""),
                "imageID": "",
                "ready": ready and "running" in st,
                "started": "running" in st,
                "restartCount": 0,
                "state": st,
            }
        )
    return out


def qos_class(pod: Obj) -> str:
    """Guaranteed where every container's requests equal its limits (CPU and memory), BestEffort where
    none has any, else Burstable (as the API server derives it; quantities compared as written)."""
    sizes = [ctr.get("resources") or {} for ctr in pod["spec"]["containers"]]
    if not any(r.get("requests") or r.get("limits") for r in sizes):
        return "BestEffort"
    guaranteed = all(
        r.get("limits", {}).get(k) and r.get("requests", r.get("limits", {})).get(k) == r["limits"][k]
        for r in sizes
        for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


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
        self._set_status(key, phase="Pending", qosClass=qos_class(pod), conditions=conditions(False, False))
        if self.faults.take("unschedulable"):
            msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available."
            self._set_status(key, conditions=conditions(False, False, "Unschedulable", msg))
            return
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._set_status(
            key,
            conditions=conditions(True, False),
            hostIP=HOST_IP,
            startTime=now_iso(),
            containerStatuses=container_status(pod, waiting),
        )
        if self.faults.take("stuck_pending"):
            await self._stuck_pulling(key, pod)
            return
        await self._start(key, rt, pod)

    async def _stuck_pulling(self, key: tuple[str, str], pod: Obj) -> None:
        image = pod["spec"]["containers"][0].get("image", "")
        for reason in ("ErrImagePull", "ImagePullBackOff"):
            msg = (
                f'Back-off pulling image "{image}"'
                if reason == "ImagePullBackOff"
                else (f'failed to pull image "{image}": not found')
            )
            self._set_status(
                key, containerStatuses=container_status(pod, {"waiting": {"reason": reason, "message": msg}})
            )
            await asyncio.sleep(0.5)

    async def _start(self, key: tuple[str, str], rt: PodRuntime, pod: Obj) -> None:
        rt.dir = self.root / f"{key[0]}-{key[1]}"
        rt.dir.mkdir(parents=True, exist_ok=True)
        spec = pod["spec"]
        for i, ctr in enumerate(spec["containers"]):
            argv = list(ctr.get("command") or ["sh"]) + list(ctr.get("args") or [])
            env = {e["name"]: str(e.get("value", "")) for e in ctr.get("env", [])} | {"HOSTNAME": key[1]}
            first = next(iter(rt.containers.values()), None)
            try:
                started = await Container.start(
                    argv,
                    env=env,
                    binds=self._volumes(rt.dir, spec, ctr),
                    cwd=ctr.get("workingDir") or "/",
                    log_path=rt.dir / log_name(ctr["name"], i),
                    net_of=first.pid if first else None,
                )
            except OSError as e:
                self._kill(rt)
                self._terminate(key, rt, 128, "StartError", message=str(e))
                return
            rt.containers[ctr["name"]] = started
            self.started_pids.append(started.proc.pid)
        self._counter += 1
        running = {"running": {"startedAt": now_iso()}}
        self._set_status(
            key,
            phase="Running",
            podIP=POD_IP.format(n=self._counter % 250 + 2),
            conditions=conditions(True, True),
            containerStatuses=container_status(pod, running, True),
        )
        rt.tasks += [asyncio.create_task(self._reap_on_exit(key, rt, name)) for name in rt.containers]
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

    async def _reap_on_exit(self, key: tuple[str, str], rt: PodRuntime, name: str) -> None:
        code = await rt.containers[name].wait()
        code = 128 - code if code < 0 else code  # killed by a signal: 128 + signo, as a kubelet says
        if rt.terminated:
            return
        rt.ended.setdefault(
            name, {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": now_iso()}
        )  # an OOM kill recorded its own reason first
        if len(rt.ended) < len(rt.containers):  # the Pod runs on while any container does
            self._show_ended(key, rt)
            return
        failed = [e for e in rt.ended.values() if e["exitCode"] != 0]
        self._terminate(key, rt, failed[0]["exitCode"] if failed else 0, "Error" if failed else "Completed")

    def _show_ended(self, key: tuple[str, str], rt: PodRuntime) -> None:
        """The Pod still Running, its ended containers `terminated`, the others `running`."""
        with contextlib.suppress(ApiStatus):
            pod = self.store.get(PODS, *key)
            running = {"running": {"startedAt": now_iso()}}
            self._set_status(
                key,
                conditions=conditions(True, False),
                containerStatuses=container_status(pod, running, True, rt.ended),
            )

    async def _deadline(self, key: tuple[str, str], rt: PodRuntime, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._kill(rt)
        self._terminate(
            key,
            rt,
            137,
            "Error",
            phase="Failed",
            reason="DeadlineExceeded",
            message="Pod was active on the node longer than the specified deadline",
        )

    def _terminate(
        self,
        key: tuple[str, str],
        rt: PodRuntime,
        code: int,
        ctr_reason: str,
        *,
        phase: str | None = None,
        **status: Any,
    ) -> None:
        """Record the container's end once (restartPolicy Never: it stays terminated)."""
        if rt.terminated:
            return
        rt.terminated = True
        with contextlib.suppress(ApiStatus):
            pod = self.store.get(PODS, *key)
            term = {"terminated": {"exitCode": code, "reason": ctr_reason, "finishedAt": now_iso()}}
            self._set_status(
                key,
                phase=phase or ("Succeeded" if code == 0 else "Failed"),
                conditions=conditions(True, False),
                containerStatuses=container_status(pod, term, ended=rt.ended),
                **status,
            )

    @staticmethod
    def _kill(rt: PodRuntime) -> None:
        for ctr in rt.containers.values():
            ctr.kill()

    def runtime(self, namespace: str, name: str) -> PodRuntime:
        rt = self.pods.get((namespace, name))
        if rt is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found')
        return rt

    def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        """As if a container hit its memory limit: killed, exit 137, reason OOMKilled. `container` None:
        every container, and the Pod ends Failed. A name: that container alone, whole (cgroup v2's
        `memory.oom.group`, which a kubelet of 1.28 or later sets), while the Pod runs on in the others."""
        rt = self.runtime(namespace, name)
        if container is None:
            self._terminate((namespace, name), rt, 137, "OOMKilled")
            self._kill(rt)
            return
        if container not in rt.containers or container in rt.ended or rt.terminated:
            raise ApiStatus(400, "BadRequest", f"container {container} not running in pod {name}")
        rt.ended[container] = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": now_iso()}
        rt.containers[container].kill()
        if len(rt.ended) < len(rt.containers):
            self._show_ended((namespace, name), rt)

    def evict(self, namespace: str, name: str) -> None:
        """As if node pressure evicted the Pod: phase Failed, status.reason Evicted."""
        rt = self.runtime(namespace, name)
        self._terminate(
            (namespace, name),
            rt,
            137,
            "ContainerStatusUnknown",
            phase="Failed",
            reason="Evicted",
            message="The node was low on resource: memory.",
        )
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
            for ctr in rt.containers.values():
                await ctr.wait()
            if rt.dir is not None:
                shutil.rmtree(rt.dir, ignore_errors=True)
        with contextlib.suppress(ApiStatus):
            self.store.delete(PODS, namespace, name)

    def log_path(self, namespace: str, name: str, container: str | None = None) -> Path | None:
        rt = self.pods.get((namespace, name))
        if rt is None or rt.dir is None:
            return None
        names = [c["name"] for c in self.store.get(PODS, namespace, name)["spec"]["containers"]]
        i = names.index(container) if container in names else 0
        return rt.dir / log_name(names[i], i)

    async def aclose(self) -> None:
        for ns, name in list(self.pods):
            await self.delete(ns, name)
        shutil.rmtree(self.root, ignore_errors=True)


def log_name(container: str, index: int) -> str:
    return "log" if index == 0 else f"log-{container}"
