"""A run killed outright leaves its sandboxes' folders, cgroups and quota tmpfs behind; the next
backend opening a sandbox under the same root removes them, and never a live process's sandboxes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sbx_helpers import needs_bwrap, needs_root

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.cgroups import existing_cgroup
from openforgerl.sandbox.local import LocalBackend
from openforgerl.sandbox.orphans import owner_alive, owner_mark, sweep

pytestmark = [needs_bwrap, needs_root]

# A run: one sandbox with the default limits (cgroups, a quota tmpfs), a service and a file in it;
# it prints the sandbox's folder and then waits to be killed.
RUN = """
import asyncio, sys
from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.local import LocalBackend

async def main():
    sbx = await LocalBackend(root=sys.argv[1]).open_sandbox(SandboxSpec(rollout_id="killed"))
    await sbx.spawn(["sleep", "1000"])
    await sbx.write_file("/workdir/data.bin", b"x" * 4096)
    print(sbx.home, flush=True)
    await asyncio.sleep(1000)

asyncio.run(main())
"""


def _start_run(root: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def _left(home: Path) -> dict[str, bool]:
    return {
        "folder": home.exists(),
        "tmpfs": os.path.ismount(home / "fs"),
        "cgroup": existing_cgroup(home.name) is not None,
    }


async def test_a_killed_runs_sandboxes_are_removed_by_the_next_backend(tmp_path: Path) -> None:
    root = tmp_path / "sbx"
    run, home = _start_run(root)
    try:
        # A live run's sandbox is left alone by another backend on the same root.
        other = LocalBackend(root=root)
        mine = await other.open_sandbox(SandboxSpec(rollout_id="live"))
        assert _left(home) == {"folder": True, "tmpfs": True, "cgroup": True}
        await mine.aclose()
        await other.aclose()
        assert (home / "fs" / "work" / "data.bin").stat().st_size == 4096
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    backend = LocalBackend(root=root)
    try:
        # Control: nothing of the killed run's cleanup ran; its sandbox is all still there.
        assert _left(home) == {"folder": True, "tmpfs": True, "cgroup": True}
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="next"))
        assert _left(home) == {"folder": False, "tmpfs": False, "cgroup": False}
        res = await sbx.exec(["sh", "-c", "echo ok"])
        assert res.returncode == 0 and res.stdout == b"ok\n"
    finally:
        await backend.aclose()
        sweep(root)  # what a failed assertion above left: the tmpfs stays mounted otherwise


def test_an_owner_is_its_process_not_only_its_pid() -> None:
    assert owner_alive(owner_mark())
    sleeper = subprocess.Popen(["sleep", "30"])
    mark = owner_mark(sleeper.pid)
    assert owner_alive(mark)
    sleeper.kill()
    sleeper.wait()
    assert not owner_alive(mark)
    pid, _, started = owner_mark().partition(" ")
    assert not owner_alive(f"{pid} {int(started) + 1}")  # the same PID, started at another time
    assert owner_alive("not a mark")  # unreadable: never swept
