"""A task with a service on Kubernetes: the service runs in the Pod's services container (its own PID
namespace and /tmp, the Pod's network and /workdir), and the verifier runs there once the agent's container
has ended (fake API server, bwrap kubelet, the real lightkube client)."""

from __future__ import annotations

import json

import pytest
from k8s_helpers import needs_bwrap
from test_k8s_verifier import verify_in_place

from openforgerl.sandbox.base import SandboxError, SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend
from openforgerl.sandbox.kubernetes.errors import PodLost
from openforgerl.sandbox.verifier import run_verifier
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap

PORT = 8731
# The task's service: its state (is the task done, how often the verifier read it) lives in its memory.
SERVICE = f"""
import http.server, json
state = {{"done": False, "reads": 0}}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/state":
            state["reads"] += 1
        body = json.dumps(state).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        state["done"] = True
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", {PORT}), H).serve_forever()
"""
# The agent's impostor: the same port, a state that says done.
IMPOSTOR = SERVICE.replace('{"done": False', '{"done": True')
PY = "/usr/bin/python3"
URL = f"http://127.0.0.1:{PORT}"
# The verifier: reads the service (which the service counts), takes its time, reads the service and the answer
# again, and scores both; then it lingers, as a verifier with more checks would.
PROBE = f"""
get() {{ {PY} -I -c 'import sys, urllib.request as u
print(u.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }}
get {URL}/state > /dev/null; sleep 1
done=$(get {URL}/peek | {PY} -I -c 'import json, sys; print(int(json.load(sys.stdin)["done"]))')
answer=$(cat /workdir/answer.txt); expected=$(cat /verifier/in/tests/expected)
ok=$([ "$answer" = "$expected" ] && [ "$done" = 1 ] && echo 1 || echo 0)
printf '{{"done": %s, "answer": "%s"}}\\n' "$done" "$answer" > seen.json
echo "{{\\"reward\\": $ok}}" > reward.json
sleep 1
"""
# Left running by the agent (under a supervisor that restarts it): once the verifier has read the service,
# it marks the task done and writes the right answer; all along it writes a reward of 1 into any verifier
# output folder it can reach.
LEFTOVER = f"""
import glob, json, time, urllib.request
while True:
    for d in glob.glob("/tmp/.openforgerl-verifier-*/out") + glob.glob("/verifier/out"):
        with open(d + "/reward.json", "w") as f:
            f.write('{{"reward": 1}}')
    try:
        if json.load(urllib.request.urlopen("{URL}/peek", timeout=1))["reads"] > 0:
            urllib.request.urlopen(urllib.request.Request("{URL}/done", data=b"", method="POST"), timeout=1)
            with open("/workdir/answer.txt", "w") as f:
                f.write("42\\n")
    except OSError:
        pass
    time.sleep(0.05)
"""


async def wait_for_service(sbx: object) -> None:
    res = await sbx.exec(
        [
            "sh",
            "-c",
            f"for i in $(seq 100); do {PY} -I -c 'import urllib.request; "  # type: ignore[attr-defined]
            f'urllib.request.urlopen("{URL}/peek", timeout=1)\' && exit 0; sleep 0.1; done; exit 1',
        ]
    )
    assert res.returncode == 0, res.stderr


async def open_task(backend: KubernetesBackend, name: str) -> object:
    """A sandbox whose task service was started the way the rollout starts it (`spawn`)."""
    sbx = await backend.open_sandbox(SandboxSpec(name))
    await sbx.spawn([PY, "-I", "-c", SERVICE])
    await wait_for_service(sbx)
    return sbx


async def agent(sbx: object, script: str) -> None:
    res = await sbx.exec(["sh", "-c", script])  # type: ignore[attr-defined]
    assert res.returncode == 0, res.stderr


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


async def verify(sbx: object) -> tuple[dict[str, object], dict[str, object]]:
    run = await run_verifier(
        sbx,
        ["/bin/sh", "-c", PROBE],
        inputs={"tests/expected": b"42\n"},
        outputs=("reward.json", "seen.json"),
        timeout_s=60,
    )
    assert run.result.returncode == 0, run.result.stderr
    return json.loads(run.outputs["reward.json"]), json.loads(run.outputs["seen.json"])


async def leave(sbx: object) -> None:
    await agent(
        sbx,
        f"echo 41 > /workdir/answer.txt; "
        f"(setsid sh -c 'while :; do {PY} -I -c \"$0\"; done' {_q(LEFTOVER)} > /dev/null 2>&1 < /dev/null &)",
    )


async def test_honest_pass_on_a_service_task(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    sbx = await open_task(kube_backend, "svc-pass")
    try:
        await agent(
            sbx,
            f"echo 42 > answer.txt; {PY} -I -c 'import urllib.request; "
            f'urllib.request.urlopen(urllib.request.Request("{URL}/done", data=b""))\'',
        )
        reward, seen = await verify(sbx)
        assert reward == {"reward": 1} and seen["done"] == 1 and seen["answer"] == "42"
        with pytest.raises(SandboxError, match="ended for the verifier"):
            await sbx.exec(["true"])  # type: ignore[attr-defined]
        again, seen2 = await verify(sbx)  # a grader's second round: the same live service, a fresh folder
        assert again == {"reward": 1} and seen2["done"] == 1
        assert [p["metadata"]["name"] for p in fake_kube.pods()] == [sbx.pod_name]  # type: ignore[attr-defined]
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_honest_fail_on_a_service_task(kube_backend: KubernetesBackend):
    sbx = await open_task(kube_backend, "svc-fail")
    try:
        await agent(sbx, "echo 41 > answer.txt")
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen == {"done": 0, "answer": "41"}
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_attack_a_leftover_process_cannot_rewrite_a_service_tasks_verdict(
    kube_backend: KubernetesBackend,
):
    """The agent fails and leaves a supervised process that, once the verifier reads the service, marks the
    task done, rewrites the answer and writes reward 1 into any verifier output folder: the verdict stays the
    failure the host saw when the agent's turn ended."""
    sbx = await open_task(kube_backend, "svc-attack")
    try:
        await leave(sbx)
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen == {"done": 0, "answer": "41"}
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_the_leftover_process_rewrites_the_verdict_from_a_plain_exec(
    kube_backend: KubernetesBackend,
):
    """The same attack where the verifier runs as a plain exec in the agent's container (the protection
    absent): the leftover turns the failure into a pass."""
    sbx = await open_task(kube_backend, "svc-control")
    try:
        await leave(sbx)
        reward, seen = await verify_in_place(sbx, PROBE, ("reward.json", "seen.json"))
        assert reward == {"reward": 1}
        assert seen["done"] == 1 and seen["answer"] == "42"  # it changed the service's state and the answer
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def kill_and_impersonate(sbx: object) -> None:
    """Kill every process the agent may signal (its own exec's wrapper too: that exec ends 137), then serve
    the impostor on the service's port."""
    await sbx.exec(["sh", "-c", "echo 41 > answer.txt; kill -9 -1"])  # type: ignore[attr-defined]
    await agent(
        sbx, f"sleep 0.3; (setsid {PY} -I -c {_q(IMPOSTOR)} > /tmp/impostor.log 2>&1 < /dev/null &); sleep 1"
    )


async def test_attack_the_agent_cannot_kill_or_replace_the_service(kube_backend: KubernetesBackend):
    """The agent kills every process it can and starts an impostor on the service's port: the service is in
    another PID namespace, still holds the port, and the verdict is the agent's failure."""
    sbx = await open_task(kube_backend, "svc-impostor")
    try:
        await kill_and_impersonate(sbx)
        log = await sbx.read_file("/tmp/impostor.log")  # type: ignore[attr-defined]
        assert b"Address already in use" in log
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen["done"] == 0
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_a_service_in_the_agents_container_is_killed_and_replaced(
    kube_backend: KubernetesBackend,
):
    """The same attack on a service started by a plain exec in the agent's container: the impostor answers."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("svc-impostor-control"))
    try:
        await agent(sbx, f"(setsid {PY} -I -c {_q(SERVICE)} > /dev/null 2>&1 < /dev/null &)")
        await wait_for_service(sbx)
        await kill_and_impersonate(sbx)
        await wait_for_service(sbx)
        reward, seen = await verify_in_place(sbx, PROBE, ("reward.json", "seen.json"))
        assert seen["done"] == 1 and reward == {
            "reward": 0
        }  # the impostor's state; the answer was still wrong
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_attack_the_agent_ending_its_own_container_is_not_infra(kube_backend: KubernetesBackend):
    """An agent that ends its own container (TERM to its PID 1) has chosen its failure: its exec ends 137, not
    as a sandbox fault, and the verifier still runs beside the service and scores it."""
    sbx = await open_task(kube_backend, "svc-self-end")
    try:
        await agent(sbx, "echo 41 > answer.txt")
        res = await sbx.exec(["sh", "-c", "kill -TERM 1; sleep 5"])  # type: ignore[attr-defined]
        assert res.returncode == 137 and not res.timed_out
        later = await sbx.exec(["true"])  # type: ignore[attr-defined]
        assert later.returncode == 137 and b"PID 1" in later.stderr
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen["answer"] == "41"
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_a_pod_whose_only_container_ended_is_a_sandbox_fault(kube_backend: KubernetesBackend):
    """The same TERM where the container is the Pod's only one (a verifier Pod): the Pod ends, and that is
    reported as the sandbox's fault (`PodLost`), which is why the agent's container never runs alone."""
    sbx = await kube_backend.open_verifier(SandboxSpec("svc-self-end-control"), 1)
    try:
        with pytest.raises(PodLost):
            await sbx.exec(["sh", "-c", "kill -TERM 1; sleep 5"])
    finally:
        await sbx.aclose()


LINK_TO_EXPECTED = "ln -sf /verifier/in/tests/expected /workdir/answer.txt"


async def test_attack_a_link_into_the_verifiers_inputs_is_not_followed(kube_backend: KubernetesBackend):
    """The agent's answer is a link to where the verifier's expected answer will be: the link leaves the
    workdir, so it is dropped (as the fresh-Pod path drops it) and the answer is missing."""
    sbx = await open_task(kube_backend, "svc-link")
    try:
        await agent(sbx, LINK_TO_EXPECTED)
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen["answer"] == ""
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_the_link_reads_the_expected_answer_in_the_services_container(
    kube_backend: KubernetesBackend,
):
    """The same link, read in the services container once the inputs are there, gives the expected answer."""
    sbx = await open_task(kube_backend, "svc-link-control")
    try:
        await agent(sbx, LINK_TO_EXPECTED)
        svc = kube_backend.config.services_container_name
        res = await sbx._exec_in(
            svc,
            [
                "sh",
                "-c",
                "mkdir -p /verifier/in/tests && echo 42 > /verifier/in/tests/expected "  # type: ignore[attr-defined]
                "&& cat /workdir/answer.txt",
            ],
        )
        assert res.stdout == b"42\n"
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_attack_a_fifo_for_an_answer_cannot_hang_the_verifier_into_infra(
    kube_backend: KubernetesBackend,
):
    """A FIFO where the verifier reads the answer is dropped: the verifier finishes and scores the failure."""
    sbx = await open_task(kube_backend, "svc-fifo")
    try:
        await agent(sbx, "rm -f answer.txt; mkfifo answer.txt")
        reward, seen = await verify(sbx)
        assert reward == {"reward": 0} and seen["answer"] == ""
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_a_fifo_for_an_answer_hangs_a_plain_read(kube_backend: KubernetesBackend):
    sbx = await open_task(kube_backend, "svc-fifo-control")
    try:
        await agent(sbx, "rm -f answer.txt; mkfifo answer.txt")
        res = await sbx.exec(["cat", "/workdir/answer.txt"], timeout_s=2)  # type: ignore[attr-defined]
        assert res.timed_out
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_a_container_that_does_not_end_is_the_agents_failure_not_infra(
    kube_backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch
):
    """Where the agent's PID 1 would not exit on TERM (only an agent that took it over could make that so;
    here the TERM is not sent), the run is the agent's: exit 3 (tampered, reward 0), no outputs, no verifier
    run beside the leftovers. The control is every other test here: the TERM ends it and the verifier runs."""
    from openforgerl.sandbox.kubernetes import sandbox as k8s_sandbox
    from openforgerl.tasks.verdicts import TamperError, verdict_of

    monkeypatch.setattr(k8s_sandbox, "END_AGENT", "true")
    monkeypatch.setattr(k8s_sandbox, "AGENT_END_S", 1.0)
    sbx = await open_task(kube_backend, "svc-stuck")
    try:
        await leave(sbx)
        run = await run_verifier(
            sbx, ["/bin/sh", "-c", PROBE], inputs={"tests/expected": b"42\n"}, timeout_s=60
        )
        assert run.result.returncode == 3 and run.outputs == {}
        with pytest.raises(TamperError, match="did not end"):
            verdict_of(run)
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]
