"""`openforgerl rollout --backend kubernetes` without a usable cluster: one line naming the fix, exit 2,
no traceback. The real CLI in a subprocess, HOME an empty folder (no ~/.kube/config)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ARGS = [
    "rollout",
    "--tasks",
    "builtin:claw",
    "--limit",
    "1",
    "--n",
    "1",
    "--backend",
    "kubernetes",
    "--engine",
    "scripted",
]


def run_cli(tmp_path: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "OPENFORGERL_"))}
    env.update(HOME=str(home), KUBECONFIG=str(kubeconfig))
    cmd = [
        sys.executable,
        "-c",
        "from openforgerl.cli import main; main()",
        *ARGS,
        "--out",
        str(tmp_path / "out"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr + out.stdout
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "KUBECONFIG" in lines[0] and "in-cluster" in lines[0]
    return lines[0]


def test_no_kubeconfig_is_one_line_naming_the_fix(tmp_path: Path):
    line = assert_one_line(run_cli(tmp_path, tmp_path / "missing-kubeconfig"))
    assert "no Kubernetes cluster configured" in line


def test_unreachable_api_server_is_one_line_naming_the_fix(tmp_path: Path):
    kubeconfig, port = tmp_path / "kubeconfig", closed_port()
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    line = assert_one_line(run_cli(tmp_path, kubeconfig))
    assert f"cannot reach the Kubernetes API server at https://127.0.0.1:{port}" in line


def test_debug_keeps_the_traceback(tmp_path: Path):
    """Control: the same failure does raise (OPENFORGERL_DEBUG=1 shows it), so the one line is the
    CLI's handling of a real error, not a run that never reached the backend."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "OPENFORGERL_"))}
    env.update(HOME=str(home), KUBECONFIG=str(tmp_path / "missing"), OPENFORGERL_DEBUG="1")
    cmd = [
        sys.executable,
        "-c",
        "from openforgerl.cli import main; main()",
        *ARGS,
        "--out",
        str(tmp_path / "o"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode != 0 and "NoCluster" in out.stderr and "ConfigError" in out.stderr
