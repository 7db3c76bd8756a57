"""Pure reading of a Pod's status: is it up, and if not, which infra fault is it?

Kubernetes reports faults in several places (`status.reason`, container `state.terminated.reason`,
`state.waiting.reason`, the `PodScheduled` condition). This module is the single place that maps
them onto our error types, so the backend decides by type.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from openforgerl.sandbox.kubernetes.errors import (
    BootTimeout,
    ImagePullFailed,
    KubeSandboxError,
    PodEvicted,
    PodLost,
    PodOOMKilled,
    SandboxExpired,
    Unschedulable,
)
from openforgerl.sandbox.kubernetes.manifests import LABEL_ROLE

Pod = dict[str, Any]
IMAGE_WAITING = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
}
FATAL_WAITING = {
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
}


def name_of(pod: Pod) -> str:
    return str(pod.get("metadata", {}).get("name", "?"))


def phase(pod: Pod) -> str:
    return pod.get("status", {}).get("phase") or "Pending"


def container_statuses(pod: Pod) -> list[dict[str, Any]]:
    return pod.get("status", {}).get("containerStatuses") or []


def is_running(pod: Pod) -> bool:
    """Running with every container started (exec needs a live container, not Ready probes)."""
    statuses = container_statuses(pod)
    return (
        phase(pod) == "Running"
        and bool(statuses)
        and all("running" in (s.get("state") or {}) for s in statuses)
    )


def terminated(pod: Pod, ended: Collection[str] = ()) -> list[dict[str, Any]]:
    states = [s.get("state") or {} for s in container_statuses(pod) if s.get("name") not in ended]
    return [st["terminated"] for st in states if st.get("terminated")]


def has_ended(pod: Pod | None, container: str) -> bool:
    """The container has terminated (or the Pod is gone): nothing it ran is left running."""
    if pod is None or phase(pod) in ("Failed", "Succeeded"):
        return True
    return any(
        s.get("name") == container and (s.get("state") or {}).get("terminated")
        for s in container_statuses(pod)
    )


def waiting_reasons(pod: Pod) -> set[str]:
    states = [s.get("state") or {} for s in container_statuses(pod)]
    return {st["waiting"].get("reason", "") for st in states if st.get("waiting")}


def unschedulable_message(pod: Pod) -> str | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return cond.get("message") or "Unschedulable"
    return None


def ended_itself(pod: Pod, container: str, others_ended: bool = False) -> bool:
    """The container's PID 1 exited 0 while its Pod runs on (or its other containers ended by the agent's
    doing, `others_ended`): a keep-alive exits 0 only on a TERM, which the kubelet sends a container only
    when its Pod ends (a deletion, a fault); anything else was sent from inside (the agent's `kill 1`, or
    the backend ending it for the verifier)."""
    status = pod.get("status", {})
    if (
        pod.get("metadata", {}).get("deletionTimestamp")
        or status.get("reason")
        or (phase(pod) != "Running" and not others_ended)
    ):
        return False
    return any(
        s.get("name") == container and ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
        for s in container_statuses(pod)
    )


def oom_killed(pod: Pod, container: str) -> bool:
    """`container` was OOMKilled in a rollout's Pod that nothing ended from outside: not evicted or past
    its deadline (`status.reason`), not being deleted, not a verifier's Pod. Only the agent fills the
    memory of a rollout Pod's containers: its own processes in its container, a task service through the
    API the agent calls in `services`. So that kill is the agent's outcome, never infra (else allocating
    would turn any failing rollout into a retried one). A node-level OOM kill reads the same; with memory
    requests equal to limits (the default) the node never overcommits these Pods' memory, and under
    pressure its kubelet evicts (`PodEvicted`, infra), usually before the kernel has to kill."""
    meta, status = pod.get("metadata", {}), pod.get("status", {})
    if meta.get("deletionTimestamp") or status.get("reason") or (meta.get("labels") or {}).get(LABEL_ROLE):
        return False
    return any(
        s.get("name") == container
        and ((s.get("state") or {}).get("terminated") or {}).get("reason") == "OOMKilled"
        for s in container_statuses(pod)
    )


def agents_doing(pod: Pod, agent: str, services: str) -> dict[str, tuple[str, ...]]:
    """The containers whose end is the agent's own outcome, each with the limits that ended it: the
    agent's, ended from inside (`ended_itself`, none) or OOMKilled ("memory"); `services`, OOMKilled."""
    out: dict[str, tuple[str, ...]] = {
        name: ("memory",) for name in (agent, services) if oom_killed(pod, name)
    }
    if agent not in out and ended_itself(pod, agent, others_ended=services in out):
        out[agent] = ()
    return out


def fault(pod: Pod, ended: Collection[str] = ()) -> KubeSandboxError | None:
    """The infra fault this Pod shows right now, or None while it is healthy or still booting.
    `ended`: containers the backend ended itself (the agent's, before the verifier), not a fault."""
    name, status = name_of(pod), pod.get("status", {})
    if status.get("reason") == "Evicted":
        return PodEvicted(f"pod {name} evicted: {status.get('message', '')}", pod=name)
    if status.get("reason") == "DeadlineExceeded":  # the kubelet's activeDeadlineSeconds backstop
        return SandboxExpired(f"pod {name} killed at activeDeadlineSeconds", pod=name)
    for term in terminated(pod, ended):
        if term.get("reason") == "OOMKilled":
            return PodOOMKilled(f"pod {name} OOMKilled (exit {term.get('exitCode')})", pod=name)
    fatal = waiting_reasons(pod) & FATAL_WAITING
    if fatal:
        reason = sorted(fatal)[0]
        cls = ImagePullFailed if reason in IMAGE_WAITING else BootTimeout
        return cls(f"pod {name} cannot start: {reason}", pod=name, reason=reason)
    if phase(pod) in ("Failed", "Succeeded") or terminated(pod, ended):
        why: str | None = status.get("reason") or next(
            (t.get("reason") for t in terminated(pod, ended)), None
        )
        return PodLost(f"pod {name} ended: phase {phase(pod)} ({why})", pod=name, reason=why)
    return None


def boot_timeout_fault(pod: Pod | None, name: str, timeout_s: float) -> KubeSandboxError:
    """Why a Pod is still not running at the boot timeout: image pull, scheduling, or unknown."""
    if pod is None:
        return BootTimeout(f"pod {name} not seen within {timeout_s:.0f}s", pod=name)
    pulls = waiting_reasons(pod) & IMAGE_WAITING
    if pulls:
        reason = sorted(pulls)[0]
        return ImagePullFailed(f"pod {name} stuck Pending: {reason}", pod=name, reason=reason)
    unsched = unschedulable_message(pod)
    if unsched:
        return Unschedulable(f"pod {name} unschedulable: {unsched}", pod=name)
    detail = ",".join(sorted(waiting_reasons(pod))) or phase(pod)
    return BootTimeout(f"pod {name} not running after {timeout_s:.0f}s ({detail})", pod=name)
