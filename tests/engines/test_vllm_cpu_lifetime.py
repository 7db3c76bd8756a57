"""A vllm-cpu server started by `start_vllm` dies with the process that started it.

The server runs in its own session (so `stop` kills its whole group); before `terminate_with_parent`
and `process_group_guard.py` a killed pytest left each server (~1.6 GB) running. The first test starts
`sleep` with the same hook (a control without it shows the orphan); the vllm-tier one kills the
starter of a real vllm-cpu server early in its start-up, when vLLM alone swallows a SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

SPAWN = """
import subprocess, sys
from openforgerl.engines.local.vllm_cpu import terminate_with_parent
hook = terminate_with_parent if sys.argv[1] == "tied" else None
child = subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=hook)
print(child.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _orphan_after_parent_killed(mode: str) -> tuple[int, bool]:
    parent = subprocess.Popen(
        [sys.executable, "-c", SPAWN, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)  # as a killed pytest: no cleanup runs
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid, _alive(pid)


@pytest.mark.parametrize(("mode", "survives"), [("tied", False), ("untied", True)])
def test_server_process_dies_with_its_starter(mode: str, survives: bool) -> None:
    pid, alive = _orphan_after_parent_killed(mode)
    try:
        assert alive is survives
    finally:
        if alive:
            os.kill(pid, signal.SIGKILL)


VLLM_PARENT = """
import sys
from pathlib import Path
from openforgerl.engines.local import vllm_cpu
proc = vllm_cpu.start_vllm(Path(sys.argv[1]), vllm_cpu.free_port(), Path(sys.argv[2]))
print(proc.pid, flush=True)
sys.stdin.read()
"""


def _group(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(") ", 1)[1].split()
            except (FileNotFoundError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry))
    return out


def _wait(pred: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.vllm
def test_real_vllm_server_and_engine_core_die_with_their_starter(tmp_path: object) -> None:
    from pathlib import Path

    from openforgerl.engines.chat_format import TINY_ASSETS
    from openforgerl.engines.local import vllm_cpu

    if vllm_cpu.vllm_python() is None:
        pytest.skip("vllm-cpu venv not installed (scripts/install_vllm.sh)")
    log = Path(str(tmp_path)) / "vllm.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", VLLM_PARENT, str(TINY_ASSETS), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    server = int(parent.stdout.readline())
    try:
        # guard, API server, resource tracker and engine core: killed before the engine core's handshake
        assert _wait(lambda: len(_group(server)) >= 4, 600), log.read_text(errors="replace")[-2000:]
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait(lambda: not _group(server), 120), f"left running: {_group(server)}"
    finally:
        for pid in _group(server):
            os.kill(pid, signal.SIGKILL)
