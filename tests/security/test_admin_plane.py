"""The admin plane cannot be reached from inside a rollout (two planes, docs/threat-model.md).

The attacker (agents/admin_attacker.py) runs as the harness inside a real bubblewrap sandbox, through
the real forwarder, gateway and orchestrator. It knows the admin port and another rollout's id, and
tries to pause, resume (bump the policy version), close or read the other rollout, open a rollout
with reward 1.0, set its own reward or outcome, and read metrics: through the forwarded port (404:
those routes do not exist on the model listener), with its own key and a guessed token, on the
admin port inside its namespace (refused) and at the host's addresses (unreachable). A loopback port
scan finds one open port, the forwarded model port. Afterwards nothing changed: not paused, policy
version 0, the other rollout untouched, no forged rollout in the store, its own reward what its work
earned (0), and the orchestrator still finishes honest rollouts. On Kubernetes the same holds by
construction of the manifests (checked below): the Service and the sandbox egress policy carry the
model port only, and the gateway's ingress policy admits the admin port from orchestrator Pods only.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp

from openforgerl.harness.generic import CommandHarness
from openforgerl.records import RolloutStatus
from openforgerl.testing.harnesses import CALL_MODEL
from openforgerl.testing.markers import needs_bwrap
from openforgerl.testing.tasks import ProofFileTask

ATTACK = (Path(__file__).parent / "agents" / "admin_attacker.py").read_bytes()


def proof_task(instruction: str, task_id: str = "admin-attack") -> ProofFileTask:
    """Reward 1 iff /workdir/proof.txt holds the magic word; the attack script is a seed file."""
    return ProofFileTask(instruction=instruction, task_id=task_id, seed_files={"attack.py": ATTACK})


def _host_addresses() -> list[str]:
    found = {"10.0.2.2", "172.17.0.1"}
    try:
        found.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: just picks the outgoing interface
            found.add(s.getsockname()[0])
        except OSError:
            pass
    return sorted(a for a in found if not a.startswith("127."))


async def _victim_call(gw: Any, ro: dict[str, str]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "victim's work"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            ro["openai_base_url"] + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {ro['api_key']}"},
        ) as r,
    ):
        assert r.status == 200


@needs_bwrap
async def test_admin_plane_is_unreachable_from_inside_the_sandbox(attack_env) -> None:
    gw, store = attack_env.gateway, attack_env.store
    victim = await gw.open_rollout(task_id="victim")
    await _victim_call(gw, victim)
    intel = {"admin_port": gw.admin_port, "victim": victim["rollout_id"], "host_addresses": _host_addresses()}
    task = proof_task(instruction=json.dumps(intel))
    harness = CommandHarness([sys.executable, "/workdir/attack.py"])
    (rec,) = (await attack_env.run([task], harness)).records
    out = rec.metadata["harness_stdout_tail"].strip().splitlines()
    assert out, rec.metadata.get("harness_stderr_tail")
    report = json.loads(out[-1])

    assert report["attempts"] == 99 and report["not_refused"] == {}, report
    assert report["open_ports"] == [report["fwd_port"]]  # the model port, nothing else
    assert report["host_admin"] == "unreachable"
    assert report["victim_call"] == 401  # its key is not the other rollout's
    assert report["honest"] == 200  # the model plane works from inside

    assert not gw.gateway.gate.paused and gw.gateway.gate.policy_version == 0
    before = await store.get_rollout(victim["rollout_id"])
    assert before is not None and not before.closed and before.reward is None and before.status is None
    assert len(await store.list_calls(victim["rollout_id"])) == 1
    ids = {r.rollout_id for r in await store.list_rollouts()}
    assert ids == {victim["rollout_id"], rec.rollout_id}  # no forged rollout
    assert rec.reward == 0.0 and not rec.status.is_infra, (rec.status, rec.reward)
    stored = await store.get_rollout(rec.rollout_id)
    assert stored is not None and stored.reward == 0.0

    honest = proof_task(instruction="write the magic word", task_id="honest")
    harness = CommandHarness(["sh", "-c", f"{CALL_MODEL} >/dev/null; echo abracadabra > /workdir/proof.txt"])
    (ok,) = (await attack_env.run([honest], harness)).records
    assert ok.status is RolloutStatus.OK and ok.reward == 1.0, ok.verifier_log


def test_kubernetes_sandboxes_reach_only_the_model_port() -> None:
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.kubernetes.config import KubernetesConfig
    from openforgerl.sandbox.kubernetes.gateway import gateway_objects
    from openforgerl.sandbox.kubernetes.manifests import ADMIN_CLIENT_COMPONENT, admin_port, render_pod

    cfg = KubernetesConfig(
        extra_labels={"app.kubernetes.io/component": ADMIN_CLIENT_COMPONENT}
    )  # a forged label
    gw = cfg.gateway
    objs = {(o["kind"], o["metadata"]["name"]): o for o in gateway_objects(cfg)}
    service = objs[("Service", gw.name)]
    assert [p["port"] for p in service["spec"]["ports"]] == [gw.port]
    egress = objs[("NetworkPolicy", "openforgerl-sandbox-egress")]["spec"]["egress"]
    to_gateway = [
        rule
        for rule in egress
        if any(
            "podSelector" in t and "namespaceSelector" in t and "k8s-app" not in str(t) for t in rule["to"]
        )
    ]
    assert [[p["port"] for p in rule["ports"]] for rule in to_gateway] == [[gw.port]]
    ingress = objs[("NetworkPolicy", "openforgerl-gateway-ingress")]["spec"]["ingress"]
    (admin_rule,) = [r for r in ingress if r["ports"][0]["port"] == admin_port(gw)]
    allowed = admin_rule["from"][0]["podSelector"]["matchLabels"]
    pod_labels = render_pod(SandboxSpec("r1"), cfg)["metadata"]["labels"]
    assert not all(pod_labels.get(k) == v for k, v in allowed.items())  # a sandbox is never an admin client
    args = objs[("Deployment", gw.name)]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--admin-port") + 1] == str(admin_port(gw)) != str(gw.port)
