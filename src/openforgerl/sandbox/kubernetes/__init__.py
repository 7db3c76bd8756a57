"""Kubernetes sandbox backend: one Pod per rollout (see `backend` for the lifecycle).

No cluster exists on the project's machines: tests drive this backend through the real lightkube
client against `openforgerl.testing.fake_kube` (a simulation), and against a real cluster only when
`KUBECONFIG` is set (`pytest -m k8s`). `manifests` renders the in-cluster gateway Deployment,
Service and the sandbox NetworkPolicy; `gateway_url` is the Service's DNS name. `deploy` writes the
kustomize base `deploy/k8s` from the same renderers.
"""

from openforgerl.sandbox.kubernetes.backend import KubernetesBackend
from openforgerl.sandbox.kubernetes.client import KubeApi, KubeApiError, WatchExpired
from openforgerl.sandbox.kubernetes.config import GatewayService, KubernetesConfig, Toleration
from openforgerl.sandbox.kubernetes.errors import (
    ApiUnavailable,
    BootTimeout,
    ExecChannelLost,
    ImagePullFailed,
    KubeSandboxError,
    PodCreateRejected,
    PodEvicted,
    PodLost,
    PodOOMKilled,
    SandboxExpired,
    Unschedulable,
)
from openforgerl.sandbox.kubernetes.sandbox import KubernetesSandbox

__all__ = [
    "ApiUnavailable",
    "BootTimeout",
    "ExecChannelLost",
    "GatewayService",
    "ImagePullFailed",
    "KubeApi",
    "KubeApiError",
    "KubeSandboxError",
    "KubernetesBackend",
    "KubernetesConfig",
    "KubernetesSandbox",
    "PodCreateRejected",
    "PodEvicted",
    "PodLost",
    "PodOOMKilled",
    "SandboxExpired",
    "Toleration",
    "Unschedulable",
    "WatchExpired",
]
