"""The kustomize base `deploy/k8s`: committed files equal the renderer's output, the rendered base
validates against the Kubernetes schemas (1.30 and 1.37, strict), and the threat model's rules hold in
it: sandboxes reach only model ports and DNS, the admin port only admin clients, the orchestrator's
Role only what the backend calls.

Rendering: `kubectl kustomize` when kubectl is installed; always also a small in-test subset of
kustomize (resources, namespace, images, secretGenerator env files), checked equal to kubectl's output
where both run, so the schema checks run on machines without kubectl too.
"""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from openforgerl.cli.gateway import command as gateway_command
from openforgerl.gateway.admin import add_admin_routes
from openforgerl.sandbox.kubernetes import deploy
from openforgerl.sandbox.kubernetes.manifests import admin_port
from openforgerl.sandbox.kubernetes.validation import check_manifest, schema_problems

pytest.importorskip("kubernetes_validate")
ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s"
KUBECTL = shutil.which("kubectl")


def with_secrets(tmp: Path) -> Path:
    """A copy of the base with the example secret files filled in, as a user would."""
    out = tmp / "k8s"
    shutil.copytree(BASE, out)
    for example in (out / "secrets").glob("*.env.example"):
        key = example.read_text().split("=", 1)[0]
        example.with_suffix("").write_text(f"{key}=value-of-{key}\n")
    return out


def subset_kustomize(base: Path) -> list[dict[str, Any]]:
    """What `kubectl kustomize` does with the features the base uses, and nothing more."""
    kust = yaml.safe_load((base / "kustomization.yaml").read_text())
    known = {"apiVersion", "kind", "namespace", "resources", "images", "generatorOptions", "secretGenerator"}
    assert set(kust) <= known, f"the subset renderer does not know {set(kust) - known}"
    objs = [o for r in kust["resources"] for o in yaml.safe_load_all((base / r).read_text())]
    for gen in kust.get("secretGenerator", []):
        data = dict(
            line.split("=", 1)
            for f in gen["envs"]
            for line in (base / f).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {"name": gen["name"]},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            }
        )
    images = {i["name"]: i for i in kust.get("images", [])}
    for obj in objs:
        if obj["kind"] != "Namespace":
            obj["metadata"]["namespace"] = kust["namespace"]
        for ctr in containers(obj):
            name = ctr["image"].rsplit(":", 1)[0]
            if name in images:
                ctr["image"] = f"{images[name].get('newName', name)}:{images[name]['newTag']}"
    return objs


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec", {})
    pod = {
        "Pod": spec,
        "Deployment": spec.get("template", {}).get("spec", {}),
        "PodTemplate": obj.get("template", {}).get("spec", {}),
    }.get(obj["kind"], {})
    return list(pod.get("containers", []))


def kubectl_kustomize(base: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(base)], capture_output=True, text=True, timeout=60, check=True
    )
    return list(yaml.safe_load_all(out.stdout))


def by_key(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    base = with_secrets(tmp_path_factory.mktemp("deploy"))
    return by_key(kubectl_kustomize(base) if KUBECTL else subset_kustomize(base))


def test_committed_files_equal_the_render():
    """One source of truth: `python -m openforgerl.sandbox.kubernetes.deploy deploy/k8s` rewrites them."""
    files = deploy.render_files()
    for name, text in files.items():
        assert (BASE / name).read_text() == text, f"deploy/k8s/{name} is stale: re-run the renderer"
    committed = {p.name for p in BASE.glob("*.yaml")}
    assert committed == set(files), (
        f"deploy/k8s has files the renderer does not write: {committed - set(files)}"
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed; the subset renderer stands in")
def test_subset_renderer_matches_kubectl(tmp_path: Path):
    base = with_secrets(tmp_path)
    assert by_key(subset_kustomize(base)) == by_key(kubectl_kustomize(base))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kustomize_refuses_the_base_without_secret_files(tmp_path: Path):
    """No placeholder credential can be applied: the env files must exist first."""
    shutil.copytree(BASE, tmp_path / "k8s")
    out = subprocess.run(
        [KUBECTL, "kustomize", str(tmp_path / "k8s")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0 and "secrets/" in out.stderr


@pytest.mark.parametrize("version", ["1.30", "1.37"])
def test_every_rendered_object_passes_strict_schema(rendered, version: str):
    kinds = {k for k, _ in rendered}
    assert {
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "Secret",
        "NetworkPolicy",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PodTemplate",
        "Namespace",
    } <= kinds
    problems = {key: schema_problems(obj, [version]) for key, obj in rendered.items()}
    assert {k: p for k, p in problems.items() if p} == {}


def test_schema_check_can_fail(rendered):
    """Control: a mistyped field in the same objects is caught."""

    def broken(change) -> dict[str, Any]:
        dep = yaml.safe_load(yaml.safe_dump(rendered[("Deployment", "openforgerl-gateway")]))
        change(dep["spec"])
        return dep

    assert schema_problems(broken(lambda s: s.update(replicas="three")), ["1.30"])
    typo = broken(lambda s: s["template"]["spec"]["containers"][0].update(readinesProbe={}))
    assert schema_problems(typo, ["1.30"])


def test_workloads_pass_semantic_checks(rendered):
    for key in [
        ("Deployment", "openforgerl-gateway"),
        ("Service", "openforgerl-gateway"),
        ("Service", "openforgerl-gateway-admin"),
        ("Service", "openforgerl-trainer"),
    ]:
        check_manifest(rendered[key])


def test_images_are_overridable(tmp_path: Path):
    """The image build names `openforgerl/gateway` and `openforgerl/rollout`; an overlay's `images:` wins."""
    base = with_secrets(tmp_path)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["../k8s"],
                "images": [
                    {
                        "name": "openforgerl/gateway",
                        "newName": "registry.example.com/og/gateway",
                        "newTag": "9.9",
                    },
                    {
                        "name": "openforgerl/rollout",
                        "newName": "registry.example.com/og/rollout",
                        "newTag": "9.9",
                    },
                ],
            }
        )
    )
    if KUBECTL is None:
        pytest.skip("kubectl not installed: overlays need the real kustomize")
    objs = by_key(kubectl_kustomize(overlay))
    images = {key: [c["image"] for c in containers(o)] for key, o in objs.items() if containers(o)}
    assert images == {
        ("Deployment", "openforgerl-gateway"): ["registry.example.com/og/gateway:9.9"],
        ("PodTemplate", "openforgerl-rollout"): ["registry.example.com/og/rollout:9.9"] * 2,
    }
    assert base.exists()


def test_gateway_deployment_shares_state_across_replicas(rendered):
    dep = rendered[("Deployment", "openforgerl-gateway")]
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    assert dep["spec"]["replicas"] == 3
    assert "volumes" not in dep["spec"]["template"]["spec"], "no per-Pod call log"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in ctr["env"]}
    secrets = {n for k, n in rendered if k == "Secret"}
    for name, (_, keys) in deploy.SECRETS.items():
        assert name in secrets and set(rendered[("Secret", name)]["data"]) == set(keys)
    assert {(r["name"], r["key"], r["optional"]) for r in env.values()} == {
        ("openforgerl-gateway-admin", "token", False),
        ("openforgerl-gateway-keys", "secret", False),
        ("openforgerl-store", "url", False),
    }
    assert set(env) == {"OPENFORGERL_ADMIN_TOKEN", "OPENFORGERL_GATEWAY_SECRET", "OPENFORGERL_STORE_URL"}
    assert set(ctr["resources"]) == {"requests", "limits"}
    assert (
        rendered[("PodDisruptionBudget", "openforgerl-gateway")]["spec"]["selector"]["matchLabels"]
        == dep["spec"]["selector"]["matchLabels"]
    )


def test_gateway_args_parse_with_the_real_cli(rendered):
    """The container's argv is one the `openforgerl gateway` command accepts, the store from the Secret."""
    import typer

    ctr = rendered[("Deployment", "openforgerl-gateway")]["spec"]["template"]["spec"]["containers"][0]
    args = ctr["args"]
    assert args[0] == "gateway"
    app = typer.Typer(add_completion=False)
    app.command()(gateway_command)
    click_cmd = typer.main.get_command(app)
    params = click_cmd.make_context("gateway", list(args[1:])).params
    assert params["store"] == "$(OPENFORGERL_STORE_URL)"
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert (params["port"], params["admin_port"]) == (ports["http"], ports["admin"]) == (8080, 8081)


def test_probes_use_the_admin_planes_open_health_route(rendered):
    ctr = rendered[("Deployment", "openforgerl-gateway")]["spec"]["template"]["spec"]["containers"][0]
    app = web.Application()
    add_admin_routes(app)
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}
    for probe in ("readinessProbe", "livenessProbe"):
        get = ctr[probe]["httpGet"]
        assert get["port"] == "admin" and ("GET", get["path"]) in routes


def sandbox_egress(rendered) -> list[dict[str, Any]]:
    sandbox = {"app.kubernetes.io/component": "sandbox"}
    return [
        rule
        for (k, _), o in rendered.items()
        if k == "NetworkPolicy" and sandbox.items() <= o["spec"]["podSelector"]["matchLabels"].items()
        for rule in o["spec"].get("egress", [])
    ]


def reachable_ports(rules: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {
        (p["protocol"], p["port"])
        for rule in rules
        for p in rule.get("ports", [{"protocol": "*", "port": 0}])
    }


def test_sandboxes_reach_only_model_ports_and_dns(rendered):
    rules = sandbox_egress(rendered)
    assert rules and all(rule.get("to") for rule in rules), "an egress rule without peers allows everywhere"
    assert reachable_ports(rules) == {("TCP", 8080), ("TCP", 53), ("UDP", 53)}
    admin = rendered[("Service", "openforgerl-gateway-admin")]["spec"]["ports"][0]["port"]
    assert ("TCP", admin) not in reachable_ports(rules)


def test_sandbox_check_catches_an_open_admin_port(rendered):
    """Control: the same check fails once a policy lets sandboxes reach the admin port."""
    leaky = copy.deepcopy(rendered)
    policy = leaky[("NetworkPolicy", "openforgerl-sandbox-egress")]
    policy["spec"]["egress"][0]["ports"].append({"protocol": "TCP", "port": admin_port(deploy.GATEWAY)})
    with pytest.raises(AssertionError):
        test_sandboxes_reach_only_model_ports_and_dns(leaky)


def test_admin_port_admits_only_orchestrator_pods(rendered):
    policy = rendered[("NetworkPolicy", "openforgerl-gateway-ingress")]
    admin_rules = [r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 8081} in r["ports"]]
    assert len(admin_rules) == 1
    peers = admin_rules[0]["from"]
    assert [p["podSelector"]["matchLabels"] for p in peers] == [
        {"app.kubernetes.io/component": "orchestrator"}
    ]
    sandbox_labels = rendered[("PodTemplate", "openforgerl-rollout")]["template"]["metadata"]["labels"]
    assert sandbox_labels["app.kubernetes.io/component"] == "sandbox"


def test_orchestrator_role_holds_exactly_what_the_backend_calls(rendered):
    role = rendered[("Role", "openforgerl-orchestrator")]
    grants = {(res, verb) for r in role["rules"] for res in r["resources"] for verb in r["verbs"]}
    assert grants == {("pods", v) for v in ("create", "delete", "get", "list", "watch")} | {
        ("pods/exec", "get"),
        ("pods/exec", "create"),
        ("pods/log", "get"),
    }
    assert all(r["apiGroups"] == [""] for r in role["rules"])
    binding = rendered[("RoleBinding", "openforgerl-orchestrator")]
    assert (
        binding["roleRef"]["kind"] == "Role" and binding["subjects"][0]["name"] == "openforgerl-orchestrator"
    )
    assert not any(k in ("ClusterRole", "ClusterRoleBinding") for k, _ in rendered)


def test_rollout_template_is_what_the_backend_creates(rendered):
    """The PodTemplate is `render_pod`'s output; it reaches the gateway Service's model port."""
    spec = rendered[("PodTemplate", "openforgerl-rollout")]["template"]["spec"]
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    svc = rendered[("Service", "openforgerl-gateway")]
    assert (
        env["OPENFORGERL_GATEWAY_URL"]
        == f"http://{svc['metadata']['name']}.openforgerl.svc.cluster.local:{svc['spec']['ports'][0]['port']}"
    )
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"


def test_trainer_example_config_matches_the_base(rendered):
    from openforgerl.config import Config

    cfg = Config.from_yaml(ROOT / "examples" / "k8s.yaml")
    assert cfg.sandbox.backend == "kubernetes"
    svc = rendered[("Service", "openforgerl-trainer")]
    port = svc["spec"]["ports"][0]["port"]
    assert (
        cfg.sandbox.kubernetes.build().effective_gateway_url
        == f"http://{svc['metadata']['name']}.openforgerl.svc.cluster.local:{port}"
    )
    assert cfg.gateway.port == port and cfg.gateway.admin_host == "127.0.0.1"
    assert ("TCP", port) in reachable_ports(sandbox_egress(rendered))
