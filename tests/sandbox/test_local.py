"""Real bubblewrap sandboxes: isolation, networking, process-tree kill, limits and cleanup."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
from pathlib import Path

import pytest
from sbx_helpers import EchoServer, needs_bwrap, needs_root, procs_with

from openforgerl.sandbox.base import CommandNotFoundError, Limits, SandboxError, SandboxSpec, TamperError
from openforgerl.sandbox.local import LocalBackend

pytestmark = [needs_bwrap]

PROBE = """
import json, socket, sys
out = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=3)
        s.sendall(b"hi"); out[target] = "ok:" + s.recv(100).decode(); s.close()
    except OSError as e:
        out[target] = "err:" + type(e).__name__
print(json.dumps(out))
"""


async def probe(sbx, *targets: str) -> dict[str, str]:
    res = await sbx.exec([sys.executable, "-c", PROBE, *targets], timeout_s=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


async def test_workdir_is_the_only_writable_place(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="w", files={"in/a.txt": b"task"}))
    script = (
        "cat in/a.txt > copy.txt && echo t > /tmp/t && "
        "for p in /etc/x /usr/x /root/x /x /work/x /var/x; do touch $p 2>/dev/null && echo WROTE $p; done; "
        "true"
    )
    res = await sbx.exec(["sh", "-c", script])
    assert res.returncode == 0, res.stderr
    assert b"WROTE" not in res.stdout
    assert (sbx.host_workdir / "copy.txt").read_bytes() == b"task"
    leaked = [p for p in ("/etc/x", "/usr/x", "/root/x", "/work/x", "/var/x") if _exists(p)]
    assert leaked == []
    with pytest.raises(SandboxError):
        await sbx.write_file("/etc/evil", b"x")
    await sbx.write_file("/workdir/sub/f.txt", b"data")
    assert await sbx.read_file("sub/f.txt") == b"data"
    await sbx.aclose()


async def test_symlink_cannot_leak_host_files_through_read_file(
    backend: LocalBackend, tmp_path: Path
) -> None:
    secret = tmp_path / "sbx" / "secret.txt"  # lives in the (hidden) sandboxes root
    _write_text(secret, "host secret")
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="s"))
    await sbx.exec(["ln", "-s", str(secret), "/workdir/link"])
    with pytest.raises(TamperError):
        await sbx.read_file("/workdir/link")  # a link in the agent's space is never followed
    with pytest.raises(TamperError):
        await sbx.write_file("/workdir/link", b"overwrite")
    assert secret.read_text() == "host secret"
    assert len(sbx.violations) == 2 and "symlink" in sbx.violations[0]
    await sbx.aclose()


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@needs_root
async def test_network_reaches_only_the_gateway(
    backend: LocalBackend, echo: EchoServer, other_port: EchoServer
) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="n", gateway_port=echo.port))
    assert sbx.gateway_url == f"http://127.0.0.1:{echo.port}"
    host_ip = await _host_ip()
    out = await probe(
        sbx,
        f"127.0.0.1:{echo.port}",
        f"127.0.0.1:{other_port.port}",
        f"{host_ip}:{other_port.port}",
        "1.1.1.1:80",
    )
    assert out[f"127.0.0.1:{echo.port}"] == "ok:gateway:hi"
    assert out[f"127.0.0.1:{other_port.port}"].startswith("err:")
    assert out[f"{host_ip}:{other_port.port}"].startswith("err:")
    assert out["1.1.1.1:80"].startswith("err:")
    assert other_port.hits == 0
    res = await sbx.exec(["ip", "-o", "link"])
    assert [ln.split(":")[1].strip() for ln in res.stdout.decode().splitlines()] == ["lo"]
    await sbx.aclose()


async def _host_ip() -> str:
    proc = await asyncio.create_subprocess_exec("ip", "-4", "-o", "addr", stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    for line in out.decode().splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("127."):
            return addr
    return "127.0.0.2"


@needs_root
async def test_netns_test_host_reachable_from_host_but_not_from_sandbox(
    backend: LocalBackend, echo: EchoServer
) -> None:
    """A host in its own netns behind a veth pair: the host reaches it, the sandbox must not."""
    name, hv, tv = f"ofrl-th{os.getpid() % 10000}", f"ofh{os.getpid() % 10000}", f"oft{os.getpid() % 10000}"
    cmds = [
        f"ip netns add {name}",
        f"ip link add {hv} type veth peer name {tv} netns {name}",
        f"ip addr add 10.254.77.1/30 dev {hv}",
        f"ip link set {hv} up",
        f"ip -n {name} addr add 10.254.77.2/30 dev {tv}",
        f"ip -n {name} link set {tv} up",
        f"ip -n {name} link set lo up",
    ]
    try:
        for c in cmds:
            assert await _sh(c) == 0, c
        server = await asyncio.create_subprocess_exec(
            "ip",
            "netns",
            "exec",
            name,
            sys.executable,
            "-c",
            "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            "s.bind(('10.254.77.2',8099));s.listen()\n"
            "while True:\n c,_=s.accept();c.recv(10);c.sendall(b'testhost');c.close()",
        )
        try:
            sbx = await backend.open_sandbox(SandboxSpec(rollout_id="th", gateway_port=echo.port))
            assert await _host_can_reach("10.254.77.2", 8099)
            out = await probe(sbx, "10.254.77.2:8099", "10.254.77.1:8099")
            assert all(v.startswith("err:") for v in out.values()), out
            await sbx.aclose()
        finally:
            server.kill()
            await server.wait()
    finally:
        await _sh(f"ip link del {hv} 2>/dev/null; ip netns del {name} 2>/dev/null")


async def _sh(cmd: str) -> int:
    proc = await asyncio.create_subprocess_shell(cmd)
    return await proc.wait()


async def _host_can_reach(host: str, port: int) -> bool:
    for _ in range(50):
        try:
            r, w = await asyncio.open_connection(host, port)
            w.write(b"x")
            data = await r.read(20)
            w.close()
            return data == b"testhost"
        except OSError:
            await asyncio.sleep(0.1)
    return False


async def test_rollouts_cannot_see_each_other(backend: LocalBackend) -> None:
    a = await backend.open_sandbox(SandboxSpec(rollout_id="a", files={"secret-a.txt": b"A"}))
    b = await backend.open_sandbox(SandboxSpec(rollout_id="b"))
    await a.exec(["sh", "-c", "echo tmpA > /tmp/secret-tmp"])
    res = await b.exec(
        ["sh", "-c", f"ls {backend.root} ; cat {a.host_workdir}/secret-a.txt ; ls /tmp ; ls /workdir"]
    )
    assert b"secret" not in res.stdout
    assert b"No such file" in res.stderr
    await a.aclose()
    await b.aclose()


async def test_timeout_kills_runaway_tree(backend: LocalBackend, marker: str) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="t"))
    script = (
        f"trap '' TERM; for i in 1 2 3; do (trap '' TERM HUP; exec -a {marker} sleep 1000) & done; "
        f"setsid sh -c 'trap \"\" TERM; exec -a {marker} sleep 1000' & "
        f"(sh -c 'sleep 1000 & exec -a {marker} sleep 1000' &) ; exec -a {marker} sleep 1000"
    )
    assert procs_with(marker) == []  # control: every marked process below is the script's own
    res_task = asyncio.ensure_future(sbx.exec(["bash", "-c", script], timeout_s=2))
    await _wait_for(lambda: len(procs_with(marker)) >= 5)
    res = await res_task
    assert res.timed_out and res.returncode != 0
    await _wait_for(lambda: procs_with(marker) == [])
    await sbx.aclose()


async def test_a_cancelled_exec_leaves_no_output_reader_behind(backend: LocalBackend, marker: str) -> None:
    """Ctrl-C or SIGTERM cancels a running exec: its output readers go with it, so the loop's shutdown
    finds no gather holding an unread CancelledError to print as a traceback into the user's log.

    The process here is the host's own, with a grandchild that keeps the pipes open, so the readers are
    still pending when the exec is cancelled, as they were when the shutdown won that race in a sandbox."""
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="c"))
    seen: list[dict] = []
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))

    def readers() -> list[asyncio.Task]:
        return [t for t in asyncio.all_tasks() if "read_capped" in repr(t.get_coro())]

    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f"(exec -a {marker} sleep 1000) & exec -a {marker} sleep 1000",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        task = asyncio.ensure_future(sbx._collect(proc, None, 60, 0.0))
        await _wait_for(lambda: len(readers()) == 2)  # control: the check sees the exec's two readers
        ours = readers()
        await _wait_for(lambda: len(procs_with(marker)) >= 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for t in ours:  # what asyncio.run's shutdown does to every task still pending
            t.cancel()
        await asyncio.sleep(0.1)
        gc.collect()
        await asyncio.sleep(0)
        # only the exec's own reports: other tests' fixtures may share this loop
        assert [
            c.get("message")
            for c in seen
            if "_GatheringFuture" in str(c.get("message"))
            or "read_capped" in repr(c.get("future") or c.get("task"))
        ] == []
    finally:
        loop.set_exception_handler(before)
        os.killpg(proc.pid, 9)
        await proc.wait()
    await _wait_for(lambda: procs_with(marker) == [])
    await sbx.aclose()


async def _wait_for(cond, must: bool = True, timeout_s: float = 20.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    if must:
        raise AssertionError("condition not reached")


@needs_root
async def test_services_share_netns_and_aclose_leaves_nothing(
    backend: LocalBackend, echo: EchoServer, marker: str
) -> None:
    sbx = await backend.open_sandbox(
        SandboxSpec(rollout_id="svc", gateway_port=echo.port, limits=Limits(pids=200, memory_mb=512))
    )
    service = (
        "import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        "s.bind(('127.0.0.1',7001));s.listen()\n"
        "while True:\n c,_=s.accept();c.recv(10);c.sendall(b'service');c.close()"
    )
    await sbx.spawn([sys.executable, "-c", service, marker])
    await sbx.exec(["sh", "-c", f"exec -a {marker} sleep 1000 &"])  # a leftover from an exec
    out = {}
    for _ in range(100):
        out = await probe(sbx, "127.0.0.1:7001")
        if out["127.0.0.1:7001"].startswith("ok"):
            break
        await asyncio.sleep(0.1)
    assert out["127.0.0.1:7001"] == "ok:service"
    assert procs_with(marker)
    home, cg = sbx.home, list(sbx.cgroup.dirs) if sbx.cgroup else []
    ns_inode = os.stat(sbx.netns.path).st_ino
    assert _netns_users(ns_inode) and cg and all(d.exists() for d in cg)
    await sbx.aclose()
    await sbx.aclose()  # idempotent
    await _wait_for(lambda: procs_with(marker) == [])
    assert not home.exists()
    await backend.aclose()  # waits for the background deletion of the moved dir
    assert not (backend.root / ".trash").exists()
    assert _netns_users(ns_inode) == []  # no process is in it and no fd of ours holds it
    assert not any(d.exists() for d in cg)
    with pytest.raises(SandboxError):
        await sbx.exec(["true"])


@needs_root
async def test_memory_limit_is_enforced(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="m", limits=Limits(memory_mb=64)))
    if sbx.cgroup is None:
        pytest.skip("no writable cgroups here")
    res = await sbx.exec(["sh", "-c", "awk 'BEGIN{s=\"x\"; while(1) s=s s}'"], timeout_s=60)
    assert res.returncode in (137, -9) and not res.timed_out
    ok = await sbx.exec(["sh", "-c", "echo fine"])
    assert ok.stdout == b"fine\n"
    await sbx.aclose()


async def test_missing_command_and_lost_sandbox(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="x"))
    with pytest.raises(CommandNotFoundError):
        await sbx.exec(["/nonexistent/harness-cli"])
    with pytest.raises(CommandNotFoundError):
        await sbx.exec(["definitely-not-a-command-xyz"])
    await sbx.write_file("run.sh", b"#!/bin/sh\necho from-workdir\n")
    await sbx.exec(["chmod", "+x", "run.sh"])
    assert (await sbx.exec(["./run.sh"])).stdout == b"from-workdir\n"
    running = asyncio.ensure_future(sbx.exec(["sleep", "1000"]))
    await asyncio.sleep(0.5)
    sbx.expire("test: host lost the sandbox")
    with pytest.raises(SandboxError):
        await running
    with pytest.raises(SandboxError):
        await sbx.exec(["true"])
    await sbx.aclose()


async def test_lifetime_expiry_marks_sandbox_lost(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="life", lifetime_s=1.0))
    with pytest.raises(SandboxError):
        await sbx.exec(["sleep", "30"])
    await sbx.aclose()


async def test_stdin_and_exit_codes(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="io", env={"FOO": "bar"}))
    res = await sbx.exec(
        ["sh", "-c", "cat; echo $FOO $BAZ; echo err >&2; exit 3"], stdin=b"in\n", env={"BAZ": "qux"}
    )
    assert (res.returncode, res.stdout, res.stderr) == (3, b"in\nbar qux\n", b"err\n")
    await sbx.aclose()


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _netns_users(inode: int) -> list[str]:
    """/proc entries (a process's netns, or any fd) that still reference the namespace `inode`."""
    users = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        links = [f"/proc/{pid}/ns/net"]
        try:
            links += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for link in links:
            try:
                if os.readlink(link) == f"net:[{inode}]":
                    users.append(link)
            except OSError:
                pass
    return users


async def test_failed_bwrap_setup_is_retried_but_command_failures_are_not(
    backend: LocalBackend, monkeypatch
) -> None:
    """A bwrap that dies in its own setup (e.g. a racing umount) is retried; exit 1 of the command is not."""
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="retry"))
    real = sbx._command
    failures = [2]

    def flaky(argv, cwd, started_fd, status_fd, role="agent"):
        cmd = real(argv, cwd, started_fd, status_fd, role)
        if failures[0] > 0:
            failures[0] -= 1
            i = cmd.index("--chdir")
            cmd[i:i] = ["--bind", "/nonexistent-source-for-test", "/x"]  # setup fails before the command
        return cmd

    monkeypatch.setattr(sbx, "_command", flaky)
    res = await sbx.exec(["sh", "-c", "echo run >> /workdir/runs.txt; exit 1"])
    assert res.returncode == 1 and failures == [0]
    assert (await sbx.read_file("runs.txt")) == b"run\n"  # ran exactly once
    failures[0] = 2
    await sbx.spawn(["sh", "-c", "echo svc >> /workdir/spawned.txt"])
    assert failures == [0]
    await _wait_for(lambda: (sbx.host_workdir / "spawned.txt").exists())
    failures[0] = 99
    with pytest.raises(SandboxError):
        await sbx.exec(["true"])
    await sbx.aclose()


async def test_host_folders_under_tmp_show_through_the_sandbox_tmp(tmp_path: Path) -> None:
    """A checkout or venv under /tmp stays visible (read-only) although each sandbox has its own /tmp,
    and a program in it is found and runs (it was reported "not found")."""
    import shutil
    import tempfile

    host_dir = Path(tempfile.mkdtemp(prefix="ofrl-tmp-checkout-", dir="/tmp"))
    try:
        (host_dir / "tool.txt").write_text("visible")
        tool = host_dir / "bin" / "hello-cli"
        tool.parent.mkdir()
        tool.write_text("#!/bin/sh\necho hello from $0\n")
        tool.chmod(0o755)
        backend = LocalBackend(root=tmp_path / "sbx", ro_binds=[host_dir])
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="tmpbind"))
        assert sbx.host_path(str(tool)) == tool and sbx.host_path("/tmp/x") == sbx.host_tmpdir / "x"
        seen = await sbx.exec(["cat", str(host_dir / "tool.txt")])
        ran = await sbx.exec([str(tool)])
        by_path = await sbx.exec(["hello-cli"], env={"PATH": f"{tool.parent}:/usr/bin:/bin"})
        wrote = await sbx.exec(["sh", "-c", f"echo x > {host_dir}/new.txt"])
        own = await sbx.exec(["sh", "-c", "echo mine > /tmp/own.txt && cat /tmp/own.txt"])
        await backend.aclose()
        assert seen.returncode == 0 and seen.stdout == b"visible"
        assert ran.stdout == f"hello from {tool}\n".encode() and by_path.returncode == 0
        assert wrote.returncode != 0 and not (host_dir / "new.txt").exists()
        assert own.stdout == b"mine\n" and not Path("/tmp/own.txt").exists()  # noqa: ASYNC240
    finally:
        shutil.rmtree(host_dir)


async def test_python_venv_under_tmp_runs_the_package(tmp_path: Path) -> None:
    """A copy of the project's interpreter setup under /tmp (a venv whose python links out, plus this
    package on its path): found by `_resolve` and able to import openforgerl inside."""
    import shutil
    import tempfile

    import openforgerl

    host_dir = Path(tempfile.mkdtemp(prefix="ofrl-tmp-venv-", dir="/tmp"))
    try:
        shutil.copytree(
            Path(openforgerl.__file__).parent,
            host_dir / "src" / "openforgerl",
            ignore=shutil.ignore_patterns("__pycache__", "suite"),
        )
        (host_dir / "bin").mkdir()
        (host_dir / "bin" / "python").symlink_to(os.path.realpath(sys.executable))  # noqa: ASYNC240
        backend = LocalBackend(root=tmp_path / "sbx", ro_binds=[host_dir])
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="tmpvenv"))
        res = await sbx.exec(
            [
                str(host_dir / "bin" / "python"),
                "-c",
                "import openforgerl.sandbox.safefile as m; print(m.__file__)",
            ],
            env={"PYTHONPATH": str(host_dir / "src")},
        )
        await backend.aclose()
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode().startswith(str(host_dir / "src" / "openforgerl"))
    finally:
        shutil.rmtree(host_dir)
