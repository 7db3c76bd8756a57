"""Sandbox start latency and memory per rollout: podman (the rollout image) against bubblewrap (local).

Both backends run the same rollout command, a resident Node process (`node -e 'setInterval(...)'`: the
runtime the Codex and Claude Code CLIs run on, at rest), with the same limits and a network namespace of
their own with the gateway forwarder. Two phases per backend:

  start   - `--n` sandboxes one after another: open + the first `exec true` (what a rollout waits for
            before its harness starts), then close. Anchor, interleaved run by run so both see the same
            load: the runtime alone, `bwrap ... true` and `podman run --rm <image> true`.
  memory  - `--hold` sandboxes open at once, each running the rollout command, measured once every Node
            process is up: the sandbox's own memory cgroup (`memory.usage_in_bytes`, page cache and the
            tmpfs /workdir included: what a Kubernetes memory limit and the scheduler count), its
            anonymous part (`total_rss`), the summed RSS of the processes in it (shared pages counted in
            each, unlike the cgroup, which charges a page cache page once to whoever read it first), and
            what the sandbox costs outside its cgroup on the host (podman: the container's `conmon` and
            the `podman exec` client holding the command; local: nothing but the launcher, which joins
            the cgroup). Anchor: the same Node process run bare on the host (its RSS).

    python benchmarks/sandbox_start.py --n 20 --hold 8
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.local import LocalBackend
from openforgerl.sandbox.podman import PodmanBackend
from openforgerl.sandbox.podman_sandbox import PodmanSandbox

IMAGE = "localhost/openforgerl/rollout:0.1.0"
HOLD_JS = "setInterval(() => {}, 1000)"
ROLLOUT_CMD = ["node", "-e", HOLD_JS]
RAW_BWRAP = [
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-all",
    "--die-with-parent",
    "true",
]
MEMCG = Path("/sys/fs/cgroup/memory")
MIB = 1024 * 1024


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def summary_ms(xs: Sequence[float]) -> str:
    return f"p50 {pct(xs, 0.5) * 1000:7.1f} ms  p95 {pct(xs, 0.95) * 1000:7.1f} ms"


def timed(argv: Sequence[str], env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def memcg_of(pid: int) -> Path:
    """The v1 memory cgroup folder a process is charged to."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return MEMCG / path.lstrip("/")
    raise RuntimeError(f"no v1 memory cgroup for pid {pid} (this script reads cgroup v1, as this box has)")


def memcg_figures(group: Path) -> tuple[int, int]:
    """(usage_in_bytes, anonymous total_rss) of one memory cgroup, children included."""
    stat = dict(line.split() for line in (group / "memory.stat").read_text().splitlines())
    return int((group / "memory.usage_in_bytes").read_text()), int(stat["total_rss"])


def procs_in(group: Path) -> set[int]:
    found: set[int] = set()
    for f in group.rglob("cgroup.procs"):
        found |= {int(p) for p in f.read_text().split()}
    return found


def rss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


@dataclass(frozen=True)
class Memory:
    cgroup: float  # MiB per rollout
    anon: float
    rss: float
    outside: float
    node_up: int


async def node_pids(groups: Sequence[Path]) -> int:
    n = 0
    for g in groups:
        n += any(_is_node(p) for p in procs_in(g))
    return n


def _is_node(pid: int) -> bool:
    try:
        return psutil.Process(pid).name() == "node"
    except psutil.Error:
        return False


async def wait_all_up(groups: Sequence[Path], timeout_s: float = 120.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        up = await node_pids(groups)
        if up == len(groups):
            await asyncio.sleep(2.0)  # past Node's start-up allocation peak
            return up
        await asyncio.sleep(0.5)
    return await node_pids(groups)


def host_helpers(groups: Sequence[Path], containers: Sequence[str]) -> int:
    """RSS of what a sandbox costs on the host outside its own cgroup: our child processes (launchers,
    `podman exec` clients) not in any sandbox cgroup, and podman's `conmon` monitors for our containers."""
    inside: set[int] = set()
    for g in groups:
        inside |= procs_in(g)
    ours = {p.pid for p in psutil.Process().children(recursive=True)} - inside
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "conmon" and any(c in " ".join(p.info["cmdline"] or ()) for c in containers):
            ours.add(p.pid)
    return rss(ours)


async def start_phase(
    backend: Any, image: str | None, n: int, anchor: list[str], anchor_env: dict[str, str] | None
) -> tuple[list[float], list[float], list[float]]:
    raw, ours, close = [], [], []
    for i in range(n + 2):
        r = await asyncio.to_thread(timed, anchor, anchor_env)
        t = time.perf_counter()
        sbx = await backend.open_sandbox(
            SandboxSpec(rollout_id=f"start-{i}", image=image, gateway_port=18999)
        )
        await sbx.exec(["true"])
        o = time.perf_counter() - t
        t = time.perf_counter()
        await sbx.aclose()
        c = time.perf_counter() - t
        if i >= 2:  # warm-up: page cache, podman's storage lock
            raw.append(r)
            ours.append(o)
            close.append(c)
    return raw, ours, close


async def memory_phase(backend: Any, image: str | None, hold: int) -> Memory:
    sandboxes = [
        await backend.open_sandbox(SandboxSpec(rollout_id=f"mem-{i}", image=image, gateway_port=18999))
        for i in range(hold)
    ]
    runs = [asyncio.create_task(s.exec(ROLLOUT_CMD, timeout_s=600)) for s in sandboxes]
    try:
        groups = [await group_of(s) for s in sandboxes]
        up = await wait_all_up(groups)
        usage = [memcg_figures(g) for g in groups]
        tree_rss = [rss(procs_in(g)) for g in groups]
        outside = host_helpers(groups, [s.container for s in sandboxes if isinstance(s, PodmanSandbox)])
    finally:
        for t in runs:
            t.cancel()
        await asyncio.gather(*(s.aclose() for s in sandboxes), return_exceptions=True)
        await asyncio.gather(*runs, return_exceptions=True)
    return Memory(
        cgroup=statistics.fmean(u for u, _ in usage) / MIB,
        anon=statistics.fmean(a for _, a in usage) / MIB,
        rss=statistics.fmean(tree_rss) / MIB,
        outside=outside / hold / MIB,
        node_up=up,
    )


async def group_of(sbx: Any) -> Path:
    if isinstance(sbx, PodmanSandbox):
        rc, out, err = await sbx._backend.run("inspect", "-f", "{{.State.Pid}}", sbx.container)
        if rc != 0:
            raise RuntimeError(err.decode())
        return memcg_of(int(out))
    dirs = [d for d in sbx.cgroup.dirs if MEMCG in d.parents]
    if not dirs:
        raise RuntimeError("the local sandbox has no memory cgroup (run as root)")
    return dirs[0]


def bare_node_rss() -> float:
    proc = subprocess.Popen(ROLLOUT_CMD, stdout=subprocess.DEVNULL)
    try:
        time.sleep(3.0)
        return psutil.Process(proc.pid).memory_info().rss / MIB
    finally:
        proc.kill()
        proc.wait()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="sandboxes started one after another, per backend")
    ap.add_argument("--hold", type=int, default=8, help="sandboxes held open at once for the memory figures")
    ap.add_argument("--image", default=IMAGE)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ofrl-sbx-bench-"))
    local, podman = LocalBackend(root=root / "local"), PodmanBackend(root=root / "podman")
    if not await podman.image_exists(args.image):
        raise SystemExit(
            f"image {args.image} is not in podman's store: build it with scripts/build_images.sh"
        )
    raw_podman = ["podman", "run", "--rm", "--network", "none", "--entrypoint", "", args.image, "true"]
    print(
        f"start latency, {args.n} sandboxes one after another "
        "(open + first exec true), beside the bare runtime:"
    )
    for name, backend, image, anchor, env in (
        ("bubblewrap", local, None, RAW_BWRAP, None),
        ("podman", podman, args.image, raw_podman, podman.env),
    ):
        raw, ours, close = await start_phase(backend, image, args.n, anchor, env)
        print(f"  {name:10s} sandbox  {summary_ms(ours)}   close p50 {pct(close, 0.5) * 1000:6.1f} ms")
        print(f"  {name:10s} anchor   {summary_ms(raw)}   ({' '.join(anchor[:3])} ... true)")
    anchor_rss = bare_node_rss()
    print(
        f"memory per rollout, {args.hold} sandboxes at once each running `{' '.join(ROLLOUT_CMD[:2])} ...`:"
    )
    for name, backend, image in (("bubblewrap", local, None), ("podman", podman, args.image)):
        m = await memory_phase(backend, image, args.hold)
        print(
            f"  {name:10s} cgroup {m.cgroup:6.1f} MiB  (anonymous {m.anon:6.1f} MiB)  "
            f"RSS of its processes {m.rss:6.1f} MiB  outside the cgroup "
            f"{m.outside:5.1f} MiB   [{m.node_up}/{args.hold} running]"
        )
    print(f"  anchor     the same node process bare on the host: RSS {anchor_rss:6.1f} MiB")
    await local.aclose()
    await podman.aclose()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
