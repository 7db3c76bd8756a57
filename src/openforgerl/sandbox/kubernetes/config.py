"""Settings of the Kubernetes backend: the Pod template knobs and the backend's own budgets.

One frozen object, shared by the pure manifest renderer and the backend, so a rendered Pod is a
function of `(SandboxSpec, KubernetesConfig)` only.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from openforgerl import __version__

MANAGED_BY = "openforgerl"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_ROLLOUT = "openforgerl.io/rollout-id"
LABEL_BACKEND = "openforgerl.io/backend-id"
ANNOTATION_ROLLOUT = "openforgerl.io/rollout-id"
GATEWAY_IMAGE = "openforgerl/gateway"  # the images the deploy base names (`deploy/k8s`, `images:`)
ROLLOUT_IMAGE = "openforgerl/rollout"
ENV_PREFIX = "OPENFORGERL_K8S_"


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None


@dataclass(frozen=True)
class GatewayService:
    """Where the in-cluster gateway lives; sandboxes reach it as `http://<name>.<ns>.svc:<port>`."""

    name: str = "openforgerl-gateway"
    namespace: str = "openforgerl"
    port: int = 8000
    image: str = f"{GATEWAY_IMAGE}:{__version__}"
    replicas: int = 1
    store_path: str = "/data/calls.sqlite"
    engine_urls: tuple[str, ...] = ()
    store_secret: str | None = None
    """A Secret (key `url`) holding a `postgresql://` call log shared by every replica; None keeps the
    SQLite file on the Pod's own volume, which is only sound for one replica (lost with the Pod)."""
    key_secret: str | None = None
    """A Secret (key `secret`) read into `$OPENFORGERL_GATEWAY_SECRET`: replicas must derive the same
    rollout keys, or a call landing on another replica than the one that opened its rollout is a 401."""
    admin_token_required: bool = False
    """Refuse to start without the admin-token Secret (the deploy base) instead of making up a token."""
    requests: tuple[str, str] = ("500m", "512Mi")  # (cpu, memory)
    limits: tuple[str, str] = ("2", "2Gi")

    @property
    def url(self) -> str:
        return f"http://{self.name}.{self.namespace}.svc.cluster.local:{self.port}"


@dataclass(frozen=True)
class KubernetesConfig:
    namespace: str = "openforgerl"
    default_image: str = "docker.io/library/python:3.11-slim"
    image_pull_policy: str = "IfNotPresent"
    container_name: str = "sandbox"
    services_container_name: str = "services"  # the task's services and, beside them, their verifier
    services_cpus: float = 0.5  # the services container's limits
    services_memory_mb: int = 512
    services_cpu_request: float = 0.1
    """The services container's CPU request, below its limit: every rollout Pod has that container (the
    spec does not say whether a task starts a service), and requests are what the scheduler reserves,
    so a request at the limit would reserve half a CPU per rollout that most tasks leave idle. CPU only:
    past its request a container is throttled, never killed or evicted. Its memory request stays at its
    limit (x `request_fraction`): a service's memory is the agent's to drive through its API, and memory
    a node has not reserved makes node pressure, evictions (infra) and node-level OOM kills. Below
    `services_cpus` the Pod is Burstable, not Guaranteed; set it to `services_cpus` for Guaranteed QoS."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    runtime_class_name: str | None = None
    service_account_name: str | None = None
    priority_class_name: str | None = None
    default_cpus: float = 1.0
    default_memory_mb: int = 1024
    request_fraction: float = (
        1.0  # requests = fraction x limits (the services' CPU aside: `services_cpu_request`)
    )
    workdir_size_limit: str = "2Gi"
    read_only_root: bool = True  # like the local backend; /workdir and /tmp are writable emptyDirs
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    gateway: GatewayService = field(default_factory=GatewayService)
    gateway_url: str | None = None  # override; default is the Service DNS name
    backend_id: str = "default"
    """Labels every Pod. At start the backend deletes unowned Pods with its id (leftovers of a crashed
    run), so orchestrators sharing a namespace must use distinct ids."""
    boot_timeout_s: float = 300.0
    max_concurrent_boots: int = 32
    boots_per_second: float = 10.0
    boot_burst: int = 20
    create_retries: int = 6
    delete_retries: int = 6
    retry_base_s: float = 0.2
    retry_max_s: float = 5.0
    deadline_grace_s: int = 30  # activeDeadlineSeconds = lifetime + grace: ours fires first
    exec_grace_s: float = 15.0  # extra client-side wait beyond an exec's own timeout
    janitor_interval_s: float = 60.0
    janitor_min_age_s: float = 600.0
    """Unowned Pods with our id, and finished (Succeeded/Failed) sandbox Pods of any openforgerl
    backend, are reaped once this old."""

    @property
    def effective_gateway_url(self) -> str:
        return self.gateway_url or self.gateway.url

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KubernetesConfig:
        """Defaults overridden by `OPENFORGERL_K8S_{NAMESPACE,IMAGE,GATEWAY_URL,BACKEND_ID,...}`
        (what `openforgerl rollout --backend kubernetes` uses)."""
        env = os.environ if environ is None else environ
        base = cls()

        def given(key: str) -> str | None:  # an empty variable counts as unset
            return env.get(ENV_PREFIX + key) or None

        return dataclasses.replace(
            base,
            namespace=given("NAMESPACE") or base.namespace,
            default_image=given("IMAGE") or base.default_image,
            gateway_url=given("GATEWAY_URL") or base.gateway_url,
            backend_id=given("BACKEND_ID") or base.backend_id,
            runtime_class_name=given("RUNTIME_CLASS") or base.runtime_class_name,
            service_account_name=given("SERVICE_ACCOUNT") or base.service_account_name,
            priority_class_name=given("PRIORITY_CLASS") or base.priority_class_name,
        )
