"""Sandbox hardening on real bubblewrap sandboxes: the allow-list of binds, exec semantics
(a killed command is reported, never re-run), limits on by default, the verifier's own sandbox and
hostile files in the agent's space."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from sbx_helpers import needs_bwrap, needs_root

from openforgerl.sandbox import bwrap
from openforgerl.sandbox.base import Limits, SandboxError, SandboxSpec, TamperError
from openforgerl.sandbox.local import DEFAULT_LIMITS, LocalBackend

pytestmark = [needs_bwrap]

SUITE = Path(bwrap.__file__).resolve().parents[1] / "envs" / "claw" / "suite" / "tasks"
GUI_SUITE = Path(bwrap.__file__).resolve().parents[1] / "envs" / "gui" / "suite" / "tasks"


async def _sh(sbx, script: str, **kw):
    return await sbx.exec(["sh", "-c", script], **kw)


async def test_only_the_allow_list_is_visible(backend: LocalBackend) -> None:
    """No /root (beyond the interpreter's own folder), /home, /run, /etc/shadow, task solutions."""
    solve, gui_oracle = (
        next(SUITE.glob("*/solution/solve.sh")),
        next(GUI_SUITE.glob("*/solution/actions.json")),
    )
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="allow"))
    res = await _sh(
        sbx,
        f"cat /etc/shadow; cat /root/.bashrc; ls -A /home /run /var; cat {solve} {gui_oracle}; "
        f"ls {SUITE}; cat {SUITE.parent / 'families.py'} | head -c 3; echo; "
        "ls /usr/bin/env && ls /etc/passwd",
    )
    await sbx.aclose()
    out, err = res.stdout.decode(), res.stderr.decode()
    assert "root:" not in out and "solve" not in out and out.splitlines()[0] == '"""'  # only the code
    for gone in ("/etc/shadow", "/root/.bashrc", "/home", "/run", "/var", str(solve), str(gui_oracle)):
        assert gone in err and "No such file" in err.split(gone)[1][:60], (gone, err)
    assert out.rstrip().endswith("/usr/bin/env\n/etc/passwd")
    assert sbx.host_path("/root/.bashrc") is None and sbx.host_path(str(solve)) is None
    assert sbx.host_path("/usr/bin/env") == Path("/usr/bin/env")


async def test_host_unix_socket_outside_tmp_is_unreachable(backend: LocalBackend, tmp_path: Path) -> None:
    """A host service listening on a unix socket (here under /work's tree-like place: the test's own
    folder next to the sandboxes) cannot be connected to from inside."""
    path = Path(f"/var/tmp/ofrl-test-{os.getpid()}.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(1)
    try:
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="unix"))
        probe = (
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
            "try:\n s.connect(sys.argv[1]); print('CONNECTED')\nexcept OSError as e: print(type(e).__name__)"
        )
        res = await sbx.exec([sys.executable, "-c", probe, str(path)])
        await sbx.aclose()
        assert res.stdout.strip() == b"FileNotFoundError", res
    finally:
        srv.close()
        path.unlink()  # noqa: ASYNC240


async def test_command_killed_from_outside_is_reported_and_not_rerun(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="kill"))
    running = asyncio.ensure_future(_sh(sbx, "echo run >> /workdir/runs.txt; sleep 60"))
    for _ in range(200):
        if sbx._execs and (sbx.host_workdir / "runs.txt").exists():
            break
        await asyncio.sleep(0.05)
    (proc,) = sbx._execs
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)  # "from outside": e.g. an operator, a host OOM killer
    res = await running
    assert time.monotonic() - t0 < 10
    assert res.killed_by_signal == signal.SIGKILL and res.returncode == -signal.SIGKILL
    assert not res.timed_out
    await asyncio.sleep(0.5)
    assert (await sbx.read_file("runs.txt")) == b"run\n"  # ran exactly once, never re-run
    ok = await _sh(sbx, "true")  # the sandbox is still usable; a normal exit has no signal
    assert ok.returncode == 0 and ok.killed_by_signal is None
    await sbx.aclose()


async def test_timeout_is_not_a_kill_from_outside(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="to"))
    res = await _sh(sbx, "sleep 30", timeout_s=0.5)
    await sbx.aclose()
    assert res.timed_out and res.killed_by_signal is None


@needs_root
async def test_limits_are_on_by_default(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="defaults"))
    if sbx.cgroup is None:
        pytest.skip("no writable cgroups here")
    assert sbx.limits == DEFAULT_LIMITS and all(
        (DEFAULT_LIMITS.cpus, DEFAULT_LIMITS.memory_mb, DEFAULT_LIMITS.pids, DEFAULT_LIMITS.disk_mb)
    )
    res = await _sh(sbx, "df -k /workdir | tail -1")
    mem = (sbx.cgroup.dirs[1] / "memory.limit_in_bytes").read_text() if len(sbx.cgroup.dirs) > 1 else ""
    await sbx.aclose()
    assert sbx.quota is False  # unmounted at close
    assert int(res.stdout.split()[1]) == DEFAULT_LIMITS.disk_mb * 1024
    assert mem in ("", f"{DEFAULT_LIMITS.memory_mb * 1024 * 1024}\n")
    off = await backend.open_sandbox(SandboxSpec(rollout_id="off", limits=Limits(0, 0, 0, 0)))
    assert off.cgroup is None and off.quota is False and off.limits == Limits()
    await off.aclose()


def test_limits_resolve_against_defaults() -> None:
    mine = Limits(cpus=0.5, memory_mb=0)
    assert mine.resolved(DEFAULT_LIMITS) == Limits(0.5, None, DEFAULT_LIMITS.pids, DEFAULT_LIMITS.disk_mb)


@needs_root
async def test_oom_kill_is_reported_as_the_memory_limit(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="oom", limits=Limits(memory_mb=64)))
    if sbx.cgroup is None:
        pytest.skip("no writable cgroups here")
    res = await _sh(sbx, "awk 'BEGIN{s=\"x\"; while(1) s=s s}'", timeout_s=60)
    await sbx.aclose()
    assert res.returncode != 0 and not res.timed_out and "memory" in res.limits_hit


@needs_root
async def test_fork_bomb_hits_the_pids_limit(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="bomb", limits=Limits(pids=64)))
    if sbx.cgroup is None:
        pytest.skip("no writable cgroups here")
    bomb = "b() { b | b & }; b; sleep 2; echo survived"
    t0 = time.monotonic()
    res = await sbx.exec(["bash", "-c", bomb], timeout_s=20)
    after = await _sh(sbx, "echo fine")  # the bomb's PID namespace is gone: the sandbox works
    await sbx.aclose()
    assert "pids" in res.limits_hit and time.monotonic() - t0 < 20
    assert after.stdout == b"fine\n"


PROBE = """
import time
with open("/tmp/probe.log", "w") as out:
    end = time.time() + 14
    while time.time() < end:  # 50 ms of CPU, then how long that took
        w, c = time.time(), time.process_time()
        while time.process_time() - c < 0.05:
            pass
        out.write(f"{time.time() - w:.3f}\\n")
        out.flush()
        time.sleep(0.1)
"""


@needs_root
async def test_a_busy_agent_cannot_starve_a_service_and_its_cpu_saturation_is_counted(
    backend: LocalBackend,
) -> None:
    """Services (`spawn`) sit in the sandbox's CPU group with ten times the weight of the agent's execs: 100
    busy loops under a 0.5-CPU quota still leave a service ~0.4 CPU (one shared group: 0.5/101). The quota
    throttling the sandbox for seconds is counted as the `cpu` limit hit."""
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="starve", limits=Limits(cpus=0.5)))
    if sbx.cgroup is None:
        pytest.skip("no writable cgroups here")
    await sbx.spawn([sys.executable, "-c", PROBE])
    await asyncio.sleep(1.5)
    res = await _sh(
        sbx, "for i in $(seq 100); do (while :; do :; done) & done; sleep 8; kill -9 -1", timeout_s=60
    )
    await asyncio.sleep(0.5)
    slices = [float(x) for x in (sbx.host_tmpdir / "probe.log").read_text().split()]
    await sbx.aclose()
    assert "cpu" in res.limits_hit, (res.limits_hit, res.returncode)
    assert len(slices) >= 10 and max(slices) < 1.5, slices  # measured: 0.20-0.29 s; one group: ~10 s


@needs_root
async def test_disk_quota_stops_a_300_mb_write(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="disk", limits=Limits(disk_mb=64)))
    if not sbx.quota:
        pytest.skip("no disk quota here (not root)")
    res = await _sh(
        sbx,
        "dd if=/dev/zero of=/workdir/big bs=1M count=300 2>&1; echo rc=$?; "
        "dd if=/dev/zero of=/tmp/big2 bs=1M count=10 2>&1 | tail -1",
    )
    size = (sbx.host_workdir / "big").stat().st_size
    await sbx.aclose()
    assert b"No space left on device" in res.stdout and b"rc=1" in res.stdout
    assert size <= 64 * 1024 * 1024 and "disk" in res.limits_hit


async def test_verifier_runs_apart_from_the_agent(backend: LocalBackend) -> None:
    """Harness leftovers are killed first; the verifier sees /workdir read-only, not the agent's /tmp,
    its inputs at /verifier/in, and what it writes to /verifier/out comes back."""
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="ver"))
    await _sh(
        sbx,
        "echo agent > /workdir/a.txt; echo secret > /tmp/agent-tmp; "
        "mkdir -p /workdir/openforgerl; echo 'print(\"SHADOW\")' > /workdir/openforgerl/__init__.py",
    )
    ticker = "i=0; while true; do i=$((i+1)); echo $i > /workdir/tick; sleep 0.01; done"
    survivor = asyncio.ensure_future(_sh(sbx, f"setsid sh -c '{ticker}' & {ticker}"))
    await asyncio.sleep(0.5)
    script = (
        "import os, pathlib\n"
        "print(open('/verifier/in/spec.txt').read().strip(), open('/workdir/a.txt').read().strip())\n"
        "print(os.path.exists('/tmp/agent-tmp'), os.getcwd())\n"
        "try:\n open('/workdir/x', 'w')\nexcept OSError as e: print('ro', e.errno)\n"
        "import time; a = open('/workdir/tick').read(); "
        "time.sleep(0.3); print(a == open('/workdir/tick').read())\n"
        "import openforgerl; print(openforgerl.__file__.startswith('/workdir'))\n"
        "pathlib.Path('/verifier/out/reward.json').write_text('{\"reward\": 1}')\n"
    )
    run = await sbx.run_verifier(
        [sys.executable, "-I", "-c", script], inputs={"spec.txt": b"spec"}, timeout_s=60
    )
    lines = run.result.stdout.decode().splitlines()
    await sbx.aclose()  # (also ends the survivor if run_verifier had not)
    res = await asyncio.wait_for(survivor, 10)
    assert run.result.returncode == 0, run.result.stderr
    assert lines[:3] == ["spec agent", "False /verifier/out", "ro 30"]
    assert lines[3] == "True"  # nothing of the agent's (setsid'd child included) still writes /workdir
    assert lines[4] == "False" and "SHADOW" not in run.result.stdout.decode()
    assert run.outputs == {"reward.json": b'{"reward": 1}'}
    assert res.returncode != 0


async def test_verifier_program_must_not_come_from_the_agent(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="vprog"))
    await sbx.write_file("/workdir/fake-verifier", b"#!/bin/sh\necho 1\n")
    for argv in (["/workdir/fake-verifier"], ["/tmp/x"], ["python3"]):
        with pytest.raises(SandboxError):
            await sbx.run_verifier(argv, inputs={})
    await sbx.aclose()


async def test_eight_fifos_do_not_starve_anything(backend: LocalBackend) -> None:
    """Before: each `read_file` of a FIFO blocked a worker thread forever (6 stopped every rollout)."""
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="fifo"))
    await _sh(
        sbx,
        "for i in 1 2 3 4 5 6 7 8; do mkfifo /workdir/p$i /tmp/q$i; done; mknod /workdir/dev c 1 3 || true",
    )
    t0 = time.monotonic()
    reads = [sbx.read_file(f"/workdir/p{i}") for i in range(1, 9)]
    reads += [sbx.read_file(f"/tmp/q{i}") for i in range(1, 9)]
    writes = [sbx.write_file(f"/workdir/p{i}", b"x") for i in range(1, 9)]
    results = await asyncio.wait_for(asyncio.gather(*reads, *writes, return_exceptions=True), 10)
    assert all(isinstance(r, TamperError) for r in results), results
    assert time.monotonic() - t0 < 5 and len(sbx.violations) == 24
    await sbx.write_file("/workdir/ok.txt", b"fine")  # the pool still works
    assert await sbx.read_file("/workdir/ok.txt") == b"fine"
    await sbx.aclose()


def test_an_orphaned_namespace_init_is_killed_not_waited_for() -> None:
    """A launcher killed before its child armed the parent-death signal leaves the child (PID 1 of its
    own PID namespace) running; `wait_gone` kills it instead of timing out."""
    import asyncio
    import shutil
    import signal
    import subprocess
    import time

    from openforgerl.sandbox.launcher import gone, wait_gone

    if shutil.which("unshare") is None:
        pytest.skip("util-linux unshare missing")
    launcher = subprocess.Popen(["unshare", "--pid", "--fork", "sleep", "30"], start_new_session=True)
    deadline = time.monotonic() + 10
    child = None
    while child is None and time.monotonic() < deadline:
        kids = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
        found = kids.read_text().split() if kids.exists() else []
        child = int(found[0]) if found else None
        time.sleep(0.01)
    assert child is not None
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    assert not gone(child)  # orphaned, still sleeping
    t0 = time.monotonic()
    asyncio.run(wait_gone(child))
    assert gone(child) and time.monotonic() - t0 < 5
