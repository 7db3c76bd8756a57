"""Puts the in-cluster gateway in place: Deployment, ClusterIP Service, sandbox and gateway NetworkPolicies.

Sandboxes reach the gateway as `http://<service>.<namespace>.svc.cluster.local:<port>/r/<rollout>/v1`
(`KubernetesConfig.effective_gateway_url`). Creation is idempotent: 409 means it is already there.
This is the one-replica gateway the backend can create for itself (its call log on the Pod's own
volume); what a user applies is the kustomize base `deploy/k8s` (`deploy.py`): three replicas on a
shared PostgreSQL call log and one rollout-key secret. `python -m openforgerl.sandbox.kubernetes.gateway`
prints these objects.
"""

from __future__ import annotations

import argparse
import dataclasses

import yaml

from openforgerl.sandbox.kubernetes.client import KubeApi, KubeApiError, Obj
from openforgerl.sandbox.kubernetes.config import GatewayService, KubernetesConfig
from openforgerl.sandbox.kubernetes.manifests import (
    render_gateway_deployment,
    render_gateway_network_policy,
    render_gateway_service,
    render_sandbox_network_policy,
)
from openforgerl.sandbox.kubernetes.validation import check_manifest


def gateway_objects(
    cfg: KubernetesConfig, *, deployment: bool = True, network_policy: bool = True
) -> list[Obj]:
    objs = [render_gateway_deployment(cfg.gateway)] if deployment else []
    objs.append(render_gateway_service(cfg.gateway))
    policies = [render_sandbox_network_policy(cfg), render_gateway_network_policy(cfg)]
    return objs + (policies if network_policy else [])


async def ensure_gateway(
    api: KubeApi, cfg: KubernetesConfig, *, deployment: bool = True, network_policy: bool = True
) -> list[str]:
    """Create what is missing; returns `Kind/name` of the objects that were created now."""
    created = []
    for obj in gateway_objects(cfg, deployment=deployment, network_policy=network_policy):
        check_manifest(obj)
        try:
            await api.create(obj)
            created.append(f"{obj['kind']}/{obj['metadata']['name']}")
        except KubeApiError as e:
            if e.code != 409:
                raise
    return created


def gateway_yaml(cfg: KubernetesConfig) -> str:
    """Multi-document YAML of `gateway_objects`, each checked first."""
    objs = gateway_objects(cfg)
    for obj in objs:
        check_manifest(obj)
    return str(yaml.safe_dump_all(objs, sort_keys=False))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the in-cluster gateway manifests.")
    parser.add_argument("--namespace", default=GatewayService.namespace)
    parser.add_argument("--image", default=GatewayService.image)
    parser.add_argument("--engine", action="append", default=[], help="engine URL (repeatable)")
    args = parser.parse_args(argv)
    gw = GatewayService(namespace=args.namespace, image=args.image, engine_urls=tuple(args.engine))
    print(gateway_yaml(dataclasses.replace(KubernetesConfig(), namespace=args.namespace, gateway=gw)), end="")


if __name__ == "__main__":
    main()
