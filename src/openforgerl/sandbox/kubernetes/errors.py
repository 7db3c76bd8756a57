"""Sandbox faults of the Kubernetes backend, each named after what went wrong in the cluster.

Every class is a `SandboxError`, so the orchestrator files all of them as `infra_error:sandbox` and
drops the rollout from training (DESIGN principle 4). `reason` keeps the Kubernetes vocabulary
(`OOMKilled`, `Evicted`, `ErrImagePull`, ...) for logs and metrics; callers decide by type, never
by parsing messages.
"""

from __future__ import annotations

from typing import ClassVar

from openforgerl.errors import UserError
from openforgerl.sandbox.base import SandboxError

CLUSTER_FIX = (
    "set KUBECONFIG to the kubeconfig of a reachable cluster, or run the orchestrator in a Pod "
    "whose ServiceAccount holds deploy/k8s/rbac.yaml's Role (in-cluster config)"
)


class NoCluster(UserError):
    """The backend cannot start: no kubeconfig, no in-cluster config, an API server nothing answers
    at, or credentials it refuses. The user's setup, so one line naming the fix (never an infra fault:
    no rollout has started)."""


class KubeSandboxError(SandboxError):
    """Base of every Kubernetes-backend fault; always infrastructure, never the model's doing."""

    infra_class: ClassVar[str] = "sandbox"
    default_reason: ClassVar[str] = "Unknown"

    def __init__(self, message: str, *, pod: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.pod = pod
        self.reason = reason or self.default_reason


class ApiUnavailable(KubeSandboxError):
    """The API server kept answering 429/5xx (or could not be reached) after all retries."""

    default_reason = "ApiUnavailable"


class PodCreateRejected(KubeSandboxError):
    """The API server refused the Pod for good (4xx other than 409/429): a template bug."""

    default_reason = "Rejected"


class BootTimeout(KubeSandboxError):
    """The Pod did not reach Running before the boot timeout (stuck Pending)."""

    default_reason = "BootTimeout"


class ImagePullFailed(BootTimeout):
    """The Pod stayed Pending on an image pull error (ErrImagePull, ImagePullBackOff, ...)."""

    default_reason = "ErrImagePull"


class Unschedulable(BootTimeout):
    """The scheduler found no node for the Pod (resources, selectors, taints)."""

    default_reason = "Unschedulable"


class PodOOMKilled(KubeSandboxError):
    """A container was killed for exceeding its memory limit (exit 137, reason OOMKilled) in a Pod where
    that is not the agent's doing (a verifier's Pod); in a rollout's Pod it is (`status.oom_killed`)."""

    default_reason = "OOMKilled"


class PodEvicted(KubeSandboxError):
    """The kubelet evicted the Pod (node pressure, preemption): phase Failed, reason Evicted."""

    default_reason = "Evicted"


class PodLost(KubeSandboxError):
    """The Pod ended or vanished while we still needed it (deleted, node lost, container exited)."""

    default_reason = "PodLost"


class ExecChannelLost(KubeSandboxError):
    """The exec websocket broke before it delivered the command's exit status."""

    default_reason = "ExecChannelLost"


class SandboxExpired(KubeSandboxError):
    """The sandbox outlived its lifetime; the backend deleted the Pod."""

    default_reason = "DeadlineExceeded"


__all__ = [
    "ApiUnavailable",
    "BootTimeout",
    "ExecChannelLost",
    "ImagePullFailed",
    "KubeSandboxError",
    "PodCreateRejected",
    "PodEvicted",
    "PodLost",
    "PodOOMKilled",
    "SandboxExpired",
    "Unschedulable",
]
