"""GUI environments on this box: action -> next screenshot latency (ours vs raw), memory per environment,
and how many concurrent GUI rollouts of a scripted policy complete (README quotes the output).

1. latency: a click on the to-do board followed by the screenshot that shows its result, median of N
   (a 0.25 s pause between iterations stands for the model's turn and is not timed):
   - browser, raw: Playwright `page.mouse.click` + `page.screenshot()` in this process;
   - browser, ours: `POST /act {"action": "click", ..., "screenshot": true}` from a client *inside* a
     real bubblewrap sandbox to the computer service (HTTP + validation + settle + PNG);
   - desktop, raw: `xdotool mousemove x y click 1` + `mss` grab + `mss.tools.to_png` on an
     Xvfb+openbox display with a visible Chromium, in this process;
   - desktop, ours: the same `POST /act` inside a sandbox running the desktop environment.
   Target: ours <= 1.3x raw.
2. memory: PSS of every process of the environment's sandbox (service, Playwright driver, Chromium,
   Xvfb, openbox), idle after the latency run.
3. concurrency: N rollouts at once (default 16), each its own sandbox running a shipped browser task's
   service and its oracle (a scripted policy through the computer service) and the verifier; all must
   reach reward 1 within the task's budget.

Anchors (measured on this machine kind): `page.screenshot()` PNG 34 ms;
pixel click+type+click 0.16 s; 1 browser 390 MB PSS, 8 browsers 189 MB PSS each; `xdotool click` ~100 ms,
mss grab 0.2-0.4 ms + to_png 9-10 ms; desktop + headful Chromium 125-213 MB PSS; plan 8-16 concurrent
GUI rollouts (the 2 cores are the limit). Other jobs share the cores: expect +-30 %.

Usage: python benchmarks/gui_env.py [--iterations 15] [--concurrency 16] [--only latency|concurrency]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from openforgerl.envs.gui.suite.app_data import CARDS
from openforgerl.envs.gui.suite.families import GUI_SUITE
from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.local import LocalBackend, raise_nofile_limit
from openforgerl.tasks.loader import load_runtime

POINT = (640, 650)  # an empty spot of the board page: the click changes nothing, both sides do the same
PAUSE_S = 0.25
CLIENT = r"""
import json, sys, time, urllib.request
n, x, y, pause = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
base = "http://127.0.0.1:8765"
for _ in range(600):
    try:
        urllib.request.urlopen(base + "/healthz", timeout=2); break
    except Exception:
        time.sleep(0.2)
body = json.dumps({"action": "click", "x": x, "y": y, "screenshot": True}).encode()
out = []
for _ in range(n):
    time.sleep(pause)
    t0 = time.perf_counter()
    req = urllib.request.Request(base + "/act", data=body, headers={"Content-Type": "application/json"})
    png = urllib.request.urlopen(req, timeout=30).read()
    out.append(time.perf_counter() - t0)
    assert png[:4] == b"\x89PNG"
print(json.dumps(out))
"""


def _ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "median_ms": round(statistics.median(s) * 1000, 1),
        "p90_ms": round(s[int(0.9 * (len(s) - 1))] * 1000, 1),
    }


def _apps() -> tuple[Any, str]:
    from openforgerl.env.apps import build_apps

    _, server = build_apps({"board": {"cards": CARDS}}, "bench", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def raw_playwright(n: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    from openforgerl.env.computer.chromium import CHROMIUM_ARGS, chromium_path

    server, base = _apps()
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
        page.goto(base + "/board")
        for _ in range(n):
            time.sleep(PAUSE_S)
            t0 = time.perf_counter()
            page.mouse.click(*POINT)
            page.screenshot(type="png")
            out.append(time.perf_counter() - t0)
        browser.close()
    server.shutdown()
    return out


def raw_xdotool(n: int) -> list[float]:
    import mss
    import mss.tools
    from playwright.sync_api import sync_playwright

    from openforgerl.env.computer.chromium import CHROMIUM_ARGS, chromium_path
    from openforgerl.envs.desktop.xserver import open_display

    server, base = _apps()
    x = open_display()
    out = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium_path(),
                headless=False,
                env=x.env,
                args=[*CHROMIUM_ARGS, "--start-maximized"],
            )
            browser.new_context(no_viewport=True).new_page().goto(base + "/board")
            time.sleep(1.0)
            with getattr(mss, "MSS", mss.mss)(display=x.display) as sct:
                for _ in range(n):
                    time.sleep(PAUSE_S)
                    t0 = time.perf_counter()
                    subprocess.run(
                        ["xdotool", "mousemove", str(POINT[0]), str(POINT[1]), "click", "1"],
                        env=x.env,
                        check=True,
                    )
                    shot = sct.grab({"left": 0, "top": 0, "width": 1280, "height": 720})
                    mss.tools.to_png(shot.rgb, shot.size)
                    out.append(time.perf_counter() - t0)
            browser.close()
    finally:
        x.close()
        server.shutdown()
    return out


def _pss_kb(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:"))
    return total


async def ours(task: str, n: int) -> tuple[list[float], int]:
    """Latency from a client inside the sandbox, then the sandbox's PSS (MB)."""
    rt = load_runtime(GUI_SUITE / task)
    backend = LocalBackend()
    files = {**rt.files(), "client.py": CLIENT.encode()}
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id=f"bench-{task}", files=files, lifetime_s=900))
    try:
        await sbx.spawn(list(rt.service_argv()))
        res = await sbx.exec(
            [sys.executable, "-I", "/workdir/client.py", str(n), str(POINT[0]), str(POINT[1]), str(PAUSE_S)],
            timeout_s=600,
        )
        if res.returncode != 0:
            raise RuntimeError(res.stderr.decode()[-1500:])
        samples = json.loads(res.stdout.decode().strip().splitlines()[-1])
        pids = sbx.cgroup.pids() if sbx.cgroup is not None else set()
        return samples, _pss_kb(pids) // 1024
    finally:
        await sbx.aclose()
        await backend.aclose()


def latency(n: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for kind, task, raw in (
        ("browser", "board-add-01", raw_playwright),
        ("desktop", "desktop-board-02", raw_xdotool),
    ):
        raw_s = raw(n)
        our_s, mem = asyncio.run(ours(task, n))
        r, o = _ms(raw_s), _ms(our_s)
        report[kind] = {
            "raw": r,
            "ours": o,
            "ratio": round(o["median_ms"] / r["median_ms"], 2),
            "pss_mb": mem,
        }
        print(
            f"{kind:8s} action->screenshot  raw {r['median_ms']:6.1f} ms   ours {o['median_ms']:6.1f} ms   "
            f"ratio {report[kind]['ratio']:.2f}x (target <= 1.3x)   sandbox PSS {mem} MB",
            flush=True,
        )
    print(
        "anchors: page.screenshot() PNG 34 ms; xdotool click ~100 ms + mss 0.3 ms + to_png 9-10 ms; "
        "1 browser 390 MB PSS (189 MB each of 8); desktop + headful Chromium 125-213 MB PSS",
        flush=True,
    )
    return report


async def _one_rollout(backend: LocalBackend, root: Path, i: int) -> dict[str, Any]:
    rt = load_runtime(root)
    t0 = time.monotonic()
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id=f"bench-c{i}", files=rt.files(), lifetime_s=900))
    try:
        await sbx.spawn(list(rt.service_argv()))
        err = await rt.run_oracle(sbx)
        verdict = await rt.verify(sbx)
        seconds = time.monotonic() - t0
        return {
            "task": rt.task_id,
            "reward": verdict.reward,
            "seconds": round(seconds, 1),
            "error": err[:300],
            "over_budget": seconds > rt.budget_s,
        }
    finally:
        await sbx.aclose()


def _mem_available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


async def _sample_low(low: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        low[0] = min(low[0], _mem_available_mb())
        await asyncio.sleep(0.5)


async def concurrency(k: int) -> dict[str, Any]:
    raise_nofile_limit()
    roots = [
        p
        for p in sorted(GUI_SUITE.iterdir())
        if (p / "task.toml").is_file() and load_runtime(p).kind == "browser"
    ]
    chosen = [roots[(i * 7) % len(roots)] for i in range(k)]
    backend = LocalBackend()
    base = _mem_available_mb()
    low, stop = [base], asyncio.Event()
    sampler = asyncio.create_task(_sample_low(low, stop))
    t0 = time.monotonic()
    try:
        results = await asyncio.gather(
            *(_one_rollout(backend, r, i) for i, r in enumerate(chosen)), return_exceptions=True
        )
    finally:
        stop.set()
        await sampler
        await backend.aclose()
    wall = time.monotonic() - t0
    ok = [r for r in results if isinstance(r, dict) and r["reward"] == 1.0 and not r["over_budget"]]
    report = {
        "concurrent": k,
        "completed": len(ok),
        "wall_s": round(wall, 1),
        "mem_available_drop_mb": base - low[0],
        "per_env_mb": round((base - low[0]) / k),
        "max_rollout_s": max((r["seconds"] for r in results if isinstance(r, dict)), default=None),
        "failures": [
            r if isinstance(r, dict) else repr(r) for r in results if not (isinstance(r, dict) and r in ok)
        ],
    }
    print(
        f"concurrency: {len(ok)}/{k} GUI rollouts at once reached reward 1 within budget in {wall:.1f} s "
        f"(slowest {report['max_rollout_s']} s; target 16/16, none over budget); MemAvailable -"
        f"{report['mem_available_drop_mb']} MB at peak = {report['per_env_mb']} MB per environment "
        "(anchor: -176 MB each of 8 browsers)",
        flush=True,
    )
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--only", choices=("latency", "concurrency"), default=None)
    ap.add_argument("--json", type=Path, default=None)
    ns = ap.parse_args()
    report: dict[str, Any] = {}
    if ns.only in (None, "latency"):
        report["latency"] = latency(ns.iterations)
    if ns.only in (None, "concurrency"):
        report["concurrency"] = asyncio.run(concurrency(ns.concurrency))
    if ns.json:
        ns.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
