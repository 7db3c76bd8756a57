"""The kustomize base in `deploy/k8s/`: every object rendered here, from the same functions the backend uses.

`python -m openforgerl.sandbox.kubernetes.deploy deploy/k8s` rewrites the base's files;
`tests/kubernetes/test_k8s_deploy.py` fails when the committed files differ from this render, so the
YAML a user applies and the Pods the backend creates cannot drift apart.

What is in it (docs/kubernetes.md): the gateway Deployment (3 replicas on one PostgreSQL call log and
one rollout-key secret), its model and admin Services, a PodDisruptionBudget, the NetworkPolicies, the
orchestrator's ServiceAccount and Role, the trainer's model-plane Service, and the rollout Pod as a
`PodTemplate` (a reference: applying it starts nothing). Secrets come from `secretGenerator` env files
the user writes (`secrets/*.env`, git-ignored), so no placeholder credential can be applied by mistake.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from openforgerl import __version__
from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.kubernetes.config import (
    GATEWAY_IMAGE,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    ROLLOUT_IMAGE,
    GatewayService,
    KubernetesConfig,
)
from openforgerl.sandbox.kubernetes.manifests import (
    Manifest,
    admin_secret_name,
    render_gateway_admin_service,
    render_gateway_deployment,
    render_gateway_network_policy,
    render_gateway_pdb,
    render_gateway_service,
    render_pod,
    render_sandbox_network_policy,
    sandbox_selector,
)

NAMESPACE = "openforgerl"
MODEL_PORT = 8080  # `openforgerl gateway`'s own defaults: --port 8080, --admin-port 8081
ORCHESTRATOR = "openforgerl-orchestrator"
TRAINER = "openforgerl-trainer"
KEY_SECRET = "openforgerl-gateway-keys"
STORE_SECRET = "openforgerl-store"
GATEWAY = GatewayService(
    namespace=NAMESPACE,
    port=MODEL_PORT,
    image=f"{GATEWAY_IMAGE}:{__version__}",
    replicas=3,
    engine_urls=("http://vllm.openforgerl.svc.cluster.local:8000",),
    store_secret=STORE_SECRET,
    key_secret=KEY_SECRET,
    admin_token_required=True,
)
SANDBOXES = KubernetesConfig(
    namespace=NAMESPACE, default_image=f"{ROLLOUT_IMAGE}:{__version__}", gateway=GATEWAY
)
# pods: what the backend creates, watches, deletes (and reads back on a 409); exec: setup, harness and
# verifier over a websocket, which is a GET, so authorized as `get`, and from Kubernetes 1.35 also as
# `create`; log: a sandbox's output. Nothing cluster-wide, no Secrets, no Deployments.
ORCHESTRATOR_RULES = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
)


def meta(name: str, component: str) -> Manifest:
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: component}
    return {"name": name, "namespace": NAMESPACE, "labels": labels}


def trainer_labels() -> dict[str, str]:
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: "trainer", "app.kubernetes.io/name": TRAINER}


def render_namespace() -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def render_rbac() -> list[Manifest]:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(ORCHESTRATOR, "orchestrator")}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(ORCHESTRATOR, "orchestrator"),
        "rules": [dict(r) for r in ORCHESTRATOR_RULES],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(ORCHESTRATOR, "orchestrator"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ORCHESTRATOR},
        "subjects": [{"kind": "ServiceAccount", "name": ORCHESTRATOR, "namespace": NAMESPACE}],
    }
    return [sa, role, binding]


def render_trainer_service() -> Manifest:
    """`train` embeds its own gateway: its model port, and only that, behind a Service for the sandboxes."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(TRAINER, "trainer"),
        "spec": {
            "type": "ClusterIP",
            "selector": trainer_labels(),
            "ports": [{"name": "http", "port": MODEL_PORT, "targetPort": MODEL_PORT, "protocol": "TCP"}],
        },
    }


def render_sandbox_to_trainer_policy() -> Manifest:
    """Adds (NetworkPolicies are a union) the trainer's model port to what sandbox Pods may reach."""
    to_trainer = {
        "podSelector": {"matchLabels": trainer_labels()},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "openforgerl-sandbox-egress-trainer", "namespace": NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": sandbox_selector(SANDBOXES)},
            "policyTypes": ["Egress"],
            "egress": [{"to": [to_trainer], "ports": [{"protocol": "TCP", "port": MODEL_PORT}]}],
        },
    }


def render_rollout_template() -> Manifest:
    """The Pod the backend creates per rollout, as a PodTemplate: to read and diff, never to run."""
    pod = render_pod(SandboxSpec("example-rollout", lifetime_s=600.0), SANDBOXES)
    template_meta = {k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations")}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": meta("openforgerl-rollout", "sandbox"),
        "template": {"metadata": template_meta, "spec": pod["spec"]},
    }


def base_files() -> dict[str, list[Manifest]]:
    """File name -> objects, in apply order."""
    return {
        "namespace.yaml": [render_namespace()],
        "rbac.yaml": render_rbac(),
        "gateway.yaml": [
            render_gateway_deployment(GATEWAY),
            render_gateway_pdb(GATEWAY),
            render_gateway_service(GATEWAY),
            render_gateway_admin_service(GATEWAY),
        ],
        "network-policies.yaml": [
            render_sandbox_network_policy(SANDBOXES),
            render_gateway_network_policy(SANDBOXES),
            render_sandbox_to_trainer_policy(),
        ],
        "trainer.yaml": [render_trainer_service()],
        "rollout-pod-template.yaml": [render_rollout_template()],
    }


SECRETS = {  # Secret name -> (env file under secrets/, keys it must hold)
    admin_secret_name(GATEWAY): ("admin.env", ("token",)),
    KEY_SECRET: ("rollout-key.env", ("secret",)),
    STORE_SECRET: ("store.env", ("url",)),
}


def kustomization() -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": list(base_files()),
        "images": [
            {"name": GATEWAY_IMAGE, "newTag": __version__},
            {"name": ROLLOUT_IMAGE, "newTag": __version__},
        ],
        # fixed names: the Deployment refers to them, and a rotated value must not leave an old copy behind
        "generatorOptions": {"disableNameSuffixHash": True},
        "secretGenerator": [
            {"name": name, "envs": [f"secrets/{file}"]} for name, (file, _) in SECRETS.items()
        ],
    }


HEADER = (
    "# Generated by `python -m openforgerl.sandbox.kubernetes.deploy "
    "deploy/k8s`; edit the renderer, not this file.\n"
)


def render_files() -> dict[str, str]:
    """Every generated file of the base, as text."""
    out = {name: HEADER + yaml.safe_dump_all(objs, sort_keys=False) for name, objs in base_files().items()}
    out["kustomization.yaml"] = HEADER + yaml.safe_dump(kustomization(), sort_keys=False)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the kustomize base (deploy/k8s).")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    for name, text in render_files().items():
        (args.out / name).write_text(text)


if __name__ == "__main__":
    main()
