"""The Kubernetes backend's Pod, as `manifests.render_pod` sends it, run by `podman kube play` with the
rollout image (scripts/build_images.sh): the Claw task's service, tool CLI and verifier work inside it to a
verified result. The task's oracle actions through the Claw CLI give reward 1; the control, the same verifier
before any action, gives 0 (the check can fail). Its locked-down settings hold: the root is read-only,
/workdir writable, no capabilities, no network but loopback (`--network none`). The verifier's own Pod
(`manifests.render_verifier_pod`) runs there too, through the same steps as `KubernetesSandbox.verify_here`:
the agent's workdir and the inputs sealed (no write bit, no capability: root cannot write them), the image's
Python, never one the agent left; the control, a wrong answer, scores 0."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml
from sbx_helpers import needs_root
from test_podman_rollouts import IMAGE_PYTHON, SUITE, rollout_image  # noqa: F401  (the session fixture)

from openforgerl.env.tool_client import URL_ENV
from openforgerl.envs.claw.oracle_policy import _shell_line, load_actions
from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.bwrap import VERIFIER_IN, VERIFIER_OUT
from openforgerl.sandbox.kubernetes import commands
from openforgerl.sandbox.kubernetes.config import KubernetesConfig
from openforgerl.sandbox.kubernetes.manifests import render_pod, render_verifier_pod
from openforgerl.sandbox.kubernetes.sandbox import SEAL, VERIFIER_PATH
from openforgerl.sandbox.podman import write_containers_conf
from openforgerl.tasks.loader import load_runtime

pytestmark = [pytest.mark.podman, needs_root, pytest.mark.timeout(600)]

TASK = "easy-todo-add-01"


class Pod:
    def __init__(self, container: str, env: Mapping[str, str]) -> None:
        self.container, self.env = container, env

    def sh(
        self,
        script: str,
        stdin: bytes | None = None,
        detach: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        flags = ["-d"] if detach else (["-i"] if stdin is not None else [])
        envs = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
        return subprocess.run(
            ["podman", "exec", *flags, *envs, self.container, "sh", "-c", script],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=120,
        )


def _tar(files: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def pod(rollout_image: str, tmp_path: Path) -> Iterator[Pod]:  # noqa: F811
    import os

    env = {**os.environ, "CONTAINERS_CONF": str(write_containers_conf(tmp_path / "podman"))}
    cfg = KubernetesConfig(image_pull_policy="Never")
    manifest = render_pod(SandboxSpec(rollout_id=f"kube-play-{os.getpid()}", image=rollout_image), cfg)
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(manifest))
    name = manifest["metadata"]["name"]
    played = subprocess.run(
        ["podman", "kube", "play", "--network", "none", str(tmp_path / "pod.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert played.returncode == 0, played.stderr
    try:
        yield Pod(f"{name}-{cfg.container_name}", env)
    finally:
        subprocess.run(
            ["podman", "pod", "rm", "-f", "-t", "0", name], capture_output=True, env=env, timeout=120
        )


def _reward(pod: Pod, runtime: object, n: int) -> float:
    """The task's verifier in the pod (its inputs in a fresh folder under /tmp); the reward it wrote."""
    from openforgerl.tasks.format import read_tree

    base = f"/tmp/verifier-{n}"
    inputs = read_tree(runtime.task.root / "tests", "tests/")  # type: ignore[attr-defined]
    assert pod.sh(f"mkdir -p {base}/in {base}/out && tar -x -C {base}/in", stdin=_tar(inputs)).returncode == 0
    argv = [
        IMAGE_PYTHON,
        "-I",
        "-m",
        "openforgerl.envs.claw.verify",
        "--checks",
        f"{VERIFIER_IN}/tests/checks.toml",
        "--state-url",
        runtime.url,
        "--workdir",
        "/workdir",
        "--out",  # type: ignore[attr-defined]
        f"{VERIFIER_OUT}/reward.json",
        "--log",
        f"{VERIFIER_OUT}/verifier.log",
    ]
    argv = [a.replace(VERIFIER_IN, f"{base}/in").replace(VERIFIER_OUT, f"{base}/out") for a in argv]
    ran = pod.sh(f"cd {base}/out && " + shlex.join(argv))
    out = pod.sh(f"cat {base}/out/reward.json")
    assert out.returncode == 0, (ran.stdout[-500:], ran.stderr[-1500:])
    return float(json.loads(out.stdout)["reward"])


def test_rendered_pod_under_kube_play_runs_the_task_to_a_verified_result(pod: Pod) -> None:
    locked = pod.sh(
        "touch /x 2>/dev/null && echo root-writable; touch /workdir/w && echo workdir-ok; "
        "grep CapEff /proc/self/status; ls /sys/class/net"
    )
    assert b"root-writable" not in locked.stdout and b"workdir-ok" in locked.stdout, locked
    assert b"CapEff:\t0000000000000000" in locked.stdout and locked.stdout.split()[-1] == b"lo", locked.stdout
    runtime = load_runtime(SUITE / TASK, python=IMAGE_PYTHON)
    assert pod.sh("tar -x -C /workdir", stdin=_tar(runtime.files())).returncode == 0
    assert pod.sh(shlex.join(runtime.service_argv()), detach=True).returncode == 0
    probe = (
        f"{IMAGE_PYTHON} -I -c 'import urllib.request; "
        f'urllib.request.urlopen("{runtime.url}/healthz", timeout=2)\''
    )
    for _ in range(100):
        if pod.sh(probe).returncode == 0:
            break
        time.sleep(0.2)
    assert _reward(pod, runtime, 1) == 0.0  # control: nothing done yet
    for action in load_actions(runtime):
        done = pod.sh(_shell_line(runtime)(action), env={URL_ENV: runtime.url})
        assert done.returncode == 0, done
    assert _reward(pod, runtime, 2) == 1.0
    versions = pod.sh(
        "node --version && /opt/openforgerl/tools/npm/codex/node_modules/.bin/codex --version && "
        "/opt/openforgerl/tools/npm/claude-code/node_modules/.bin/claude --version"
    )
    assert versions.returncode == 0 and b"v20." in versions.stdout, versions


@pytest.fixture
def verifier_pod(rollout_image: str, tmp_path: Path) -> Iterator[Pod]:  # noqa: F811
    """The verifier's Pod as `manifests.render_verifier_pod` renders it, under `podman kube play`."""
    import os

    env = {**os.environ, "CONTAINERS_CONF": str(write_containers_conf(tmp_path / "podman"))}
    cfg = KubernetesConfig(image_pull_policy="Never")
    manifest = render_verifier_pod(
        SandboxSpec(rollout_id=f"kube-verify-{os.getpid()}", image=rollout_image), cfg, 1
    )
    (tmp_path / "verifier.yaml").write_text(yaml.safe_dump(manifest))
    name = manifest["metadata"]["name"]
    played = subprocess.run(
        ["podman", "kube", "play", "--network", "none", str(tmp_path / "verifier.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert played.returncode == 0, played.stderr
    try:
        yield Pod(f"{name}-{cfg.container_name}", env)
    finally:
        subprocess.run(
            ["podman", "pod", "rm", "-f", "-t", "0", name], capture_output=True, env=env, timeout=120
        )


def _agent_workdir(answer: bytes) -> bytes:
    """A workdir as it leaves an agent's Pod: the answer, a link out of the workdir, a planted program."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for rel, data in {
            "./answer.txt": answer,
            "./bin/python3": b"#!/bin/sh\necho '{\"reward\": 1}'\n",
        }.items():
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o755
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("./out")
        link.type, link.linkname = tarfile.SYMTYPE, VERIFIER_OUT
        tf.addfile(link)
    return commands.clean_tar(buf.getvalue(), "/workdir")


def _verify_in(pod: Pod, answer: bytes) -> tuple[float, bytes]:
    """The steps of `KubernetesSandbox.verify_here`, through `podman exec`: the reward and the seal probe."""
    assert pod.sh(shlex.join(commands.untar_argv("/workdir")), stdin=_agent_workdir(answer)).returncode == 0
    assert (
        pod.sh(
            shlex.join(commands.untar_argv(VERIFIER_IN)), stdin=commands.tar_bytes({"expected": b"42\n"}, {})
        ).returncode
        == 0
    )
    assert pod.sh(shlex.join(["sh", "-c", SEAL, VERIFIER_OUT, "/workdir", VERIFIER_IN])).returncode == 0
    probe = pod.sh(
        "touch /workdir/w 2>/dev/null && echo workdir-writable; "
        f"touch {VERIFIER_IN}/w 2>/dev/null && echo inputs-writable; ls -l /workdir/out; "
        f"PATH={VERIFIER_PATH}; cd {VERIFIER_OUT} && touch ok && command -v python3"
    )
    script = (
        "import json, pathlib; a = pathlib.Path('/workdir/answer.txt').read_bytes(); "
        f"e = pathlib.Path('{VERIFIER_IN}/expected').read_bytes(); "
        "pathlib.Path('reward.json').write_text(json.dumps({'reward': float(a == e)}))"
    )
    ran = pod.sh(f"cd {VERIFIER_OUT} && PATH={VERIFIER_PATH} python3 -I -c {shlex.quote(script)}")
    assert ran.returncode == 0, ran.stderr
    out = pod.sh(shlex.join(commands.tar_out_argv(VERIFIER_OUT)))
    files = commands.regular_files(out.stdout, 1 << 20)
    return float(json.loads(files["reward.json"])["reward"]), probe.stdout


def test_rendered_verifier_pod_under_kube_play_sees_the_workdir_sealed(verifier_pod: Pod) -> None:
    reward, probe = _verify_in(verifier_pod, b"42\n")
    assert reward == 1.0
    assert b"writable" not in probe  # no write bit and no capability: even root cannot write there
    assert b"/opt/openforgerl/venv/bin/python3" in probe  # the image's, never the workdir's bin/python3
    assert b"-> /verifier/out" not in probe  # the link out of the workdir was left out


def test_control_rendered_verifier_pod_scores_a_wrong_answer_zero(verifier_pod: Pod) -> None:
    reward, _ = _verify_in(verifier_pod, b"41\n")
    assert reward == 0.0
