"""Pure rendering of every Kubernetes object the backend creates (no I/O, no clock).

A rollout gets one bare Pod (not a Job: podman kube play runs the same Pods, and a Job's retries
would hide infra faults from us). Its two containers idle in a keep-alive loop: the agent's
(setup and the harness run there through `exec`) and the services' (the task's services, started
through `exec`, and the verifier beside them). They share the network and /workdir, not their PID
namespaces, roots or /tmp: nothing the agent runs can see, signal or trace a service, and the
verifier runs once the agent's container has ended (`KubernetesSandbox.run_verifier`). The in-cluster gateway
is a Deployment behind a ClusterIP Service, and a NetworkPolicy lets sandbox Pods talk to that
Service (plus DNS) and nothing else.

Two planes (docs/threat-model.md): the gateway serves model calls on `gw.port` (the only port of
the Service, the only port the sandbox egress policy allows) and its admin API on `admin_port(gw)`,
which is in no Service. A second NetworkPolicy, on the gateway Pods, admits the admin port only from
Pods labelled `app.kubernetes.io/component=orchestrator` (the orchestrator, trainer and eval),
so a sandbox cannot reach it even where its own egress policy is missing. The admin token comes from the
Secret `<gateway name>-admin` (key `token`), which the operator creates and mounts into the orchestrator too;
without it the gateway generates a token nobody holds (the admin API is then closed, never open).
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from openforgerl.sandbox.base import WORKDIR, Limits, SandboxSpec
from openforgerl.sandbox.kubernetes.config import (
    ANNOTATION_ROLLOUT,
    LABEL_BACKEND,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_ROLLOUT,
    MANAGED_BY,
    GatewayService,
    KubernetesConfig,
    Toleration,
)

Manifest = dict[str, Any]
POD_PREFIX = "ofrl-"
LABEL_ROLE = "openforgerl.io/role"  # "verifier" on a verifier's Pod; absent on the agent's
KEEPALIVE = "echo openforgerl sandbox ready; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def slug(text: str, max_len: int = 63) -> str:
    """A DNS-1123 label for `text`; a hash suffix keeps distinct ids distinct after cleaning."""
    clean = _NOT_DNS.sub("-", text.lower()).strip("-")
    if clean == text and len(clean) <= max_len:
        return clean
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    head = clean[: max_len - len(digest) - 1].strip("-")
    return f"{head}-{digest}" if head else digest


def pod_name(rollout_id: str) -> str:
    return POD_PREFIX + slug(rollout_id, 63 - len(POD_PREFIX))


def sandbox_selector(cfg: KubernetesConfig) -> dict[str, str]:
    """Labels shared by every sandbox Pod of this backend: what the informer and janitor select."""
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: "sandbox", LABEL_BACKEND: slug(cfg.backend_id)}


def pod_labels(spec: SandboxSpec, cfg: KubernetesConfig) -> dict[str, str]:
    return {**cfg.extra_labels, **sandbox_selector(cfg), LABEL_ROLLOUT: slug(spec.rollout_id)}


def cpu_quantity(cpus: float) -> str:
    return f"{max(1, math.ceil(cpus * 1000))}m"


def memory_quantity(mb: int) -> str:
    return f"{max(1, int(mb))}Mi"


def resources(spec: SandboxSpec, cfg: KubernetesConfig) -> Manifest:
    """Limits from the spec (or the config defaults); requests a fraction of them."""
    cpus = spec.limits.cpus or cfg.default_cpus
    mem = spec.limits.memory_mb or cfg.default_memory_mb
    f = cfg.request_fraction
    return {
        "limits": {"cpu": cpu_quantity(cpus), "memory": memory_quantity(mem)},
        "requests": {"cpu": cpu_quantity(cpus * f), "memory": memory_quantity(math.ceil(mem * f))},
    }


def env_list(spec: SandboxSpec, cfg: KubernetesConfig) -> list[Manifest]:
    merged = {
        "OPENFORGERL_ROLLOUT_ID": spec.rollout_id,
        "OPENFORGERL_GATEWAY_URL": cfg.effective_gateway_url,
        "HOME": WORKDIR,
        **spec.env,
    }
    return [{"name": k, "value": str(v)} for k, v in merged.items()]


def toleration(t: Toleration) -> Manifest:
    out: Manifest = {"key": t.key, "operator": t.operator}
    if t.value is not None:
        out["value"] = t.value
    if t.effect is not None:
        out["effect"] = t.effect
    return out


def container(spec: SandboxSpec, cfg: KubernetesConfig) -> Manifest:
    return {
        "name": cfg.container_name,
        "image": spec.image or cfg.default_image,
        "imagePullPolicy": cfg.image_pull_policy,
        "command": ["/bin/sh", "-c", KEEPALIVE],  # PID 1: ends (and the kernel with it all it holds) on TERM
        "workingDir": WORKDIR,
        "env": env_list(spec, cfg),
        "resources": resources(spec, cfg),
        "volumeMounts": [
            {"name": "workdir", "mountPath": WORKDIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": cfg.read_only_root,
            "capabilities": {"drop": ["ALL"]},
        },
    }


VERIFIER_MOUNT = "/verifier"  # `bwrap.VERIFIER_IN` and `VERIFIER_OUT` live under it


def services_container(spec: SandboxSpec, cfg: KubernetesConfig) -> Manifest:
    """The task's services' container: the agent's image, env, /workdir and lockdown, but a /tmp and
    a /verifier of its own (the agent's container mounts neither) and its own limits (the agent's
    memory use cannot starve a service or the verifier). Its CPU request is `services_cpu_request`, below
    its limit (why: `KubernetesConfig.services_cpu_request`)."""
    ctr = container(spec, cfg)
    sized = SandboxSpec(
        rollout_id=spec.rollout_id, limits=Limits(cpus=cfg.services_cpus, memory_mb=cfg.services_memory_mb)
    )
    sizes = resources(sized, cfg)
    sizes["requests"]["cpu"] = cpu_quantity(min(cfg.services_cpu_request, cfg.services_cpus))
    ctr.update(
        name=cfg.services_container_name,
        resources=sizes,
        volumeMounts=[
            {"name": "workdir", "mountPath": WORKDIR},
            {"name": "services-tmp", "mountPath": "/tmp"},
            {"name": "verifier", "mountPath": VERIFIER_MOUNT},
        ],
    )
    return ctr


def pod_spec(spec: SandboxSpec, cfg: KubernetesConfig) -> Manifest:
    out: Manifest = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": math.ceil(spec.lifetime_s) + cfg.deadline_grace_s,
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "shareProcessNamespace": False,  # the agent must not see, signal or ptrace a service
        "containers": [container(spec, cfg), services_container(spec, cfg)],
        "volumes": [
            {"name": "workdir", "emptyDir": {"sizeLimit": cfg.workdir_size_limit}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
            {"name": "services-tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
            {"name": "verifier", "emptyDir": {"sizeLimit": cfg.workdir_size_limit}},
        ],
    }
    optional = {
        "nodeSelector": dict(cfg.node_selector) or None,
        "tolerations": [toleration(t) for t in cfg.tolerations] or None,
        "runtimeClassName": cfg.runtime_class_name,
        "serviceAccountName": cfg.service_account_name,
        "priorityClassName": cfg.priority_class_name,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def render_pod(spec: SandboxSpec, cfg: KubernetesConfig) -> Manifest:
    """The Pod for one rollout."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(spec.rollout_id),
            "namespace": cfg.namespace,
            "labels": pod_labels(spec, cfg),
            "annotations": {ANNOTATION_ROLLOUT: spec.rollout_id},
        },
        "spec": pod_spec(spec, cfg),
    }


def verifier_pod_name(rollout_id: str, n: int) -> str:
    return pod_name(f"{rollout_id}.verify{n}")


def render_verifier_pod(spec: SandboxSpec, cfg: KubernetesConfig, n: int) -> Manifest:
    """A fresh Pod for the rollout's `n`-th verifier run, created after the agent's Pod is gone.

    The same image, labels (the informer and janitor see it), securityContext and network policy as the
    agent's Pod, but none of the task's env and only the default limits (the agent's limits were sized
    for the agent; its memory use must not starve the verifier). The workdir and the verifier's inputs
    arrive over exec; `/verifier` is an emptyDir of its own. One container: no service runs here."""
    bare = SandboxSpec(rollout_id=spec.rollout_id, image=spec.image, lifetime_s=spec.lifetime_s)
    pod = render_pod(bare, cfg)
    pod["metadata"]["name"] = verifier_pod_name(spec.rollout_id, n)
    pod["metadata"]["labels"][LABEL_ROLE] = "verifier"
    ctr = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [ctr]
    ctr["volumeMounts"].append({"name": "verifier", "mountPath": VERIFIER_MOUNT})
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] in ("workdir", "tmp")]
    pod["spec"]["volumes"].append({"name": "verifier", "emptyDir": {"sizeLimit": cfg.workdir_size_limit}})
    return pod


def gateway_labels(gw: GatewayService) -> dict[str, str]:
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: "gateway", "app.kubernetes.io/name": gw.name}


def render_gateway_service(gw: GatewayService) -> Manifest:
    """ClusterIP Service in front of the gateway; its DNS name is every sandbox's `gateway_url`."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": gw.name, "namespace": gw.namespace, "labels": gateway_labels(gw)},
        "spec": {
            "type": "ClusterIP",
            "selector": gateway_labels(gw),
            "ports": [{"name": "http", "port": gw.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


ADMIN_CLIENT_COMPONENT = "orchestrator"  # `app.kubernetes.io/component` of Pods allowed on the admin port


def admin_port(gw: GatewayService) -> int:
    """The gateway's admin listener: beside the model port, never in the Service."""
    return gw.port + 1


def admin_secret_name(gw: GatewayService) -> str:
    return f"{gw.name}-admin"


STORE_URL_ENV = "OPENFORGERL_STORE_URL"


def gateway_args(gw: GatewayService) -> list[str]:
    # `$(VAR)` is expanded by the kubelet from the container's env: the URL stays in the Secret
    store = f"$({STORE_URL_ENV})" if gw.store_secret else gw.store_path
    args = [
        "gateway",
        "--host",
        "0.0.0.0",
        "--port",
        str(gw.port),
        "--store",
        store,
        "--admin-host",
        "0.0.0.0",
        "--admin-port",
        str(admin_port(gw)),
    ]
    for url in gw.engine_urls:
        args += ["--engine", url]
    return args


def secret_env(name: str, secret: str, key: str, *, optional: bool) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": optional}}}


def gateway_env(gw: GatewayService) -> list[Manifest]:
    env = [
        secret_env(
            "OPENFORGERL_ADMIN_TOKEN", admin_secret_name(gw), "token", optional=not gw.admin_token_required
        )
    ]
    if gw.key_secret:
        env.append(secret_env("OPENFORGERL_GATEWAY_SECRET", gw.key_secret, "secret", optional=False))
    if gw.store_secret:
        env.append(secret_env(STORE_URL_ENV, gw.store_secret, "url", optional=False))
    return env


def gateway_probes(gw: GatewayService) -> Manifest:
    """The admin listener's `/healthz` (the one unauthenticated admin route): a Pod whose admin plane is
    down cannot be driven, so it is not Ready. Liveness is slower to fire: a busy event loop is not dead."""

    def get() -> Manifest:
        return {"path": "/healthz", "port": "admin"}

    return {
        "readinessProbe": {"httpGet": get(), "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 2},
        "livenessProbe": {
            "httpGet": get(),
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
    }


def render_gateway_deployment(gw: GatewayService) -> Manifest:
    """The gateway itself; its call log is `gw.store_secret`'s PostgreSQL (shared by replicas) or a
    SQLite file on the Pod's own volume (one replica only)."""
    ctr: Manifest = {
        "name": "gateway",
        "image": gw.image,
        "command": ["openforgerl"],
        "args": gateway_args(gw),
        "ports": [
            {"name": "http", "containerPort": gw.port, "protocol": "TCP"},
            {"name": "admin", "containerPort": admin_port(gw), "protocol": "TCP"},
        ],
        "env": gateway_env(gw),
        "resources": {
            "requests": {"cpu": gw.requests[0], "memory": gw.requests[1]},
            "limits": {"cpu": gw.limits[0], "memory": gw.limits[1]},
        },
        **gateway_probes(gw),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod: Manifest = {"automountServiceAccountToken": False, "enableServiceLinks": False, "containers": [ctr]}
    if not gw.store_secret:
        ctr["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        pod["volumes"] = [{"name": "data", "emptyDir": {}}]
    labels = gateway_labels(gw)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": gw.name, "namespace": gw.namespace, "labels": labels},
        "spec": {
            "replicas": gw.replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        },
    }


def render_gateway_admin_service(gw: GatewayService) -> Manifest:
    """The admin plane's Service: reachable only from admin clients (`render_gateway_network_policy`).
    Never the sandboxes' `gateway_url`, and never on the sandbox egress policy's allowed port."""
    labels = gateway_labels(gw)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{gw.name}-admin", "namespace": gw.namespace, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(labels),
            "ports": [{"name": "admin", "port": admin_port(gw), "targetPort": "admin", "protocol": "TCP"}],
        },
    }


def render_gateway_pdb(gw: GatewayService) -> Manifest:
    """At most one replica down at a time for a voluntary disruption (a node drain)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": gw.name, "namespace": gw.namespace, "labels": gateway_labels(gw)},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": gateway_labels(gw)}},
    }


def render_sandbox_network_policy(cfg: KubernetesConfig) -> Manifest:
    """Sandbox Pods may reach the gateway Pods and cluster DNS, nothing else; no ingress."""
    gw = cfg.gateway
    dns = {"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    to_gateway = {
        "podSelector": {"matchLabels": gateway_labels(gw)},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": gw.namespace}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "openforgerl-sandbox-egress", "namespace": cfg.namespace},
        "spec": {
            "podSelector": {"matchLabels": sandbox_selector(cfg)},
            "policyTypes": ["Ingress", "Egress"],
            "egress": [
                {"to": [to_gateway], "ports": [{"protocol": "TCP", "port": gw.port}]},
                {"to": [dns], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
            ],
        },
    }


def render_gateway_network_policy(cfg: KubernetesConfig) -> Manifest:
    """Gateway Pods admit the model port from any Pod, the admin port only from Pods labelled as
    admin clients (an allow-list: orchestrator, trainer and eval Pods carry the label, sandboxes
    never do)."""
    gw = cfg.gateway
    admin_clients = {
        "podSelector": {"matchLabels": {LABEL_COMPONENT: ADMIN_CLIENT_COMPONENT}},
        "namespaceSelector": {},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "openforgerl-gateway-ingress", "namespace": gw.namespace},
        "spec": {
            "podSelector": {"matchLabels": gateway_labels(gw)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"protocol": "TCP", "port": gw.port}]},
                {"from": [admin_clients], "ports": [{"protocol": "TCP", "port": admin_port(gw)}]},
            ],
        },
    }
