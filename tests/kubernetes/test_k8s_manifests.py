"""Rendered manifests: strict schema validation for two Kubernetes versions, our semantic checks
(which catch what the schema cannot), and golden files of the rendered objects."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openforgerl.sandbox.base import Limits, SandboxSpec
from openforgerl.sandbox.kubernetes import GatewayService, KubernetesConfig, Toleration
from openforgerl.sandbox.kubernetes.gateway import gateway_objects
from openforgerl.sandbox.kubernetes.manifests import pod_name, render_pod, slug
from openforgerl.sandbox.kubernetes.validation import (
    ManifestInvalid,
    check_manifest,
    is_dns_label,
    schema_problems,
    semantic_problems,
)

pytest.importorskip("kubernetes_validate")
GOLDEN = Path(__file__).parent / "golden"
VERSIONS = ("1.30", "1.37")
PROD = KubernetesConfig(
    namespace="rl-prod",
    default_image="registry.example.com/envs/swe:2026-11",
    image_pull_policy="Always",
    node_selector={"node.kubernetes.io/pool": "rollouts"},
    tolerations=(Toleration("dedicated", "Equal", "rollouts", "NoSchedule"), Toleration("gpu", "Exists")),
    runtime_class_name="gvisor",
    service_account_name="rollout-sandbox",
    priority_class_name="rl-batch",
    request_fraction=0.5,
    extra_labels={"team": "rl"},
    backend_id="run-2026-11-30",
    gateway=GatewayService(namespace="rl-prod", engine_urls=("http://vllm-0.rl-prod.svc:8000",)),
)
SPECS = {
    "pod_default": (SandboxSpec("rollout-0001"), KubernetesConfig()),
    "pod_production": (
        SandboxSpec(
            "Task_42/Group-7#3",
            image="ghcr.io/acme/env:1.2",
            lifetime_s=1800.5,
            limits=Limits(cpus=2.5, memory_mb=3000),
            env={"OPENAI_API_KEY": "sk-x"},
        ),
        PROD,
    ),
}


def rendered() -> dict[str, dict]:
    out = {name: render_pod(spec, cfg) for name, (spec, cfg) in SPECS.items()}
    for obj in gateway_objects(PROD):
        ingress = obj["metadata"]["name"].endswith("-ingress")  # the gateway's own NetworkPolicy
        out["gateway_ingress" if ingress else f"gateway_{obj['kind'].lower()}"] = obj
    return out


@pytest.mark.parametrize("name", sorted(rendered()))
@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_objects_pass_strict_schema(name: str, version: str):
    assert schema_problems(rendered()[name], [version]) == []


@pytest.mark.parametrize("name", sorted(rendered()))
def test_rendered_objects_pass_semantic_checks(name: str):
    check_manifest(rendered()[name])


@pytest.mark.parametrize("name", sorted(rendered()))
def test_golden(name: str):
    """Rendering is pure and stable. Regenerate with OPENFORGERL_UPDATE_GOLDEN=1 after a deliberate change."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(rendered()[name], indent=2, sort_keys=True) + "\n"
    if os.environ.get("OPENFORGERL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_pod_template_fields():
    pod = render_pod(*SPECS["pod_production"])
    spec, ctr = pod["spec"], pod["spec"]["containers"][0]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 1801 + PROD.deadline_grace_s
    assert (spec["runtimeClassName"], spec["serviceAccountName"]) == ("gvisor", "rollout-sandbox")
    assert spec["automountServiceAccountToken"] is False
    assert ctr["resources"] == {
        "limits": {"cpu": "2500m", "memory": "3000Mi"},
        "requests": {"cpu": "1250m", "memory": "1500Mi"},
    }
    env = {e["name"]: e["value"] for e in ctr["env"]}
    assert env["OPENFORGERL_GATEWAY_URL"] == "http://openforgerl-gateway.rl-prod.svc.cluster.local:8000"
    assert env["OPENAI_API_KEY"] == "sk-x"
    assert pod["metadata"]["annotations"]["openforgerl.io/rollout-id"] == "Task_42/Group-7#3"


def test_the_services_container_shares_the_network_and_workdir_but_not_processes_or_the_verifiers_folder():
    pod = render_pod(*SPECS["pod_production"])
    spec = pod["spec"]
    agent, services = spec["containers"]
    assert (agent["name"], services["name"]) == (PROD.container_name, PROD.services_container_name)
    assert spec["shareProcessNamespace"] is False  # the agent cannot see, signal or trace a service
    mounts = {c["name"]: {m["mountPath"]: m["name"] for m in c["volumeMounts"]} for c in (agent, services)}
    assert mounts[agent["name"]] == {"/workdir": "workdir", "/tmp": "tmp"}
    assert mounts[services["name"]] == {
        "/workdir": "workdir",
        "/tmp": "services-tmp",
        "/verifier": "verifier",
    }
    assert services["securityContext"] == agent["securityContext"]
    assert services["securityContext"]["readOnlyRootFilesystem"] is True
    assert services["image"] == agent["image"] and services["command"] == agent["command"]
    assert services["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}


def test_the_services_container_reserves_little_cpu_and_all_its_memory():
    """Every rollout Pod has `services`, used or not: its CPU request is small (throttled past it, never
    killed), its memory request its limit (memory the node has not reserved makes
    evictions, which are infra)."""
    cfg = KubernetesConfig()
    agent, services = render_pod(SandboxSpec("sizes"), cfg)["spec"]["containers"]
    assert services["resources"] == {
        "limits": {"cpu": "500m", "memory": "512Mi"},
        "requests": {"cpu": "100m", "memory": "512Mi"},
    }
    assert (
        agent["resources"]["requests"] == agent["resources"]["limits"] == {"cpu": "1000m", "memory": "1024Mi"}
    )
    guaranteed = KubernetesConfig(services_cpu_request=cfg.services_cpus)
    _, services = render_pod(SandboxSpec("sizes"), guaranteed)["spec"]["containers"]
    assert services["resources"]["requests"] == services["resources"]["limits"]


BAD = {
    "restartPolicy": lambda p: p["spec"].update(restartPolicy="Sometimes"),
    "quantity": lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(memory="lots"),
    "request>limit": lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="64"),
    "name": lambda p: p["metadata"].update(name="Bad_Name"),
    "label value": lambda p: p["metadata"]["labels"].update(x="v" * 64),
    "label key": lambda p: p["metadata"]["labels"].update({"bad key!": "v"}),
    "toleration": lambda p: p["spec"]["tolerations"][0].update(effect="Never"),
    "volume ref": lambda p: p["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "nope", "mountPath": "/x"}
    ),
    "env name": lambda p: p["spec"]["containers"][0]["env"].append({"name": "1=2", "value": ""}),
}


@pytest.mark.parametrize("what", sorted(BAD))
def test_semantic_checks_catch_what_the_schema_cannot(what: str):
    pod = copy.deepcopy(render_pod(*SPECS["pod_production"]))
    BAD[what](pod)
    assert semantic_problems(pod), what
    with pytest.raises(ManifestInvalid):
        check_manifest(pod)


def test_schema_catches_type_errors_and_unknown_fields():
    pod = copy.deepcopy(render_pod(*SPECS["pod_default"]))
    pod["spec"]["activeDeadlineSeconds"] = "600"
    pod["spec"]["containers"][0]["resourcez"] = {}
    assert len(schema_problems(pod, VERSIONS)) == 2  # one (the first) per version


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_any_rollout_id_gives_valid_names(rollout_id: str):
    name = pod_name(rollout_id)
    assert is_dns_label(name) and is_dns_label(slug(rollout_id))
    assert semantic_problems(render_pod(SandboxSpec(rollout_id), KubernetesConfig())) == []


def test_distinct_ids_stay_distinct_after_cleaning():
    ids = ["a_b", "a-b", "A-B", "a.b", "x" * 100, "x" * 101]
    assert len({pod_name(i) for i in ids}) == len(ids)


def test_gateway_yaml_for_kubectl_round_trips():
    import yaml

    from openforgerl.sandbox.kubernetes.gateway import gateway_yaml

    docs = list(yaml.safe_load_all(gateway_yaml(PROD)))
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "NetworkPolicy", "NetworkPolicy"]
    assert docs == gateway_objects(PROD)
    svc = docs[1]
    assert svc["spec"]["selector"] == docs[0]["spec"]["template"]["metadata"]["labels"]
    assert PROD.effective_gateway_url == f"http://{svc['metadata']['name']}.rl-prod.svc.cluster.local:8000"
