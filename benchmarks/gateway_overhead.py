"""What the gateway costs: added latency and proxy CPU per call, against a floor and an anchor.

One run, rounds interleaved (each round visits every target in rotated order), all against the
scripted fast fake engine (vLLM wire shape, real tokenizer ids):
  direct   - the client talks to the engine itself (baseline)
  relay    - a bare aiohttp pass-through written here (the floor: no parsing, no recording)
  gateway  - openforgerl's gateway, recording every call to SQLite
  litellm  - LiteLLM's proxy (the anchor), when `--litellm-python` points at a venv that has it
Modes: non-streamed 32 tokens and streamed 128 tokens, at concurrency 1, 64 and 256. Reported:
added latency p50/p99 (target percentile minus direct's, same rounds), TTFT for streams, and
the proxy process's CPU seconds per 1,000 calls (psutil, user+system, children included).
Then a paced engine (20 ms per token, streamed, C=64 and 256) where the gateway's throughput should
match direct; the box's CPU use is printed beside it (2 cores host engine, client and proxy here).

    python benchmarks/gateway_overhead.py --quick
    python benchmarks/gateway_overhead.py --litellm-python .venv-litellm/bin/python --out results.json
    python benchmarks/gateway_overhead.py --quick --no-paced --gateway-rev 48b4e7a   # old vs new gateway
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parents[1]


# -- the floor: a bare relay ---------------------------------------------------------------------
def event_loop_name() -> str:
    """The loop both proxies run on: the gateway uses uvloop when it is installed, and so does the relay,
    so the floor and the gateway differ only in what they do per call."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    return f"uvloop {uvloop.__version__}"


def serve_relay(port: int, upstream: str) -> None:
    """A minimal aiohttp pass-through: bytes in, bytes out, SSE relayed chunk by chunk."""
    from aiohttp import web

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    session: dict[str, aiohttp.ClientSession] = {}

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if "s" not in session:
            session["s"] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
            )
        async with session["s"].post(
            upstream + request.path, data=body, headers={"Content-Type": "application/json"}
        ) as up:
            if up.content_type != "text/event-stream":
                return web.Response(status=up.status, body=await up.read(), content_type=up.content_type)
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", relay)
    app.router.add_get("/v1/models", lambda _r: web.json_response({"data": []}))
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# -- processes -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    url: str  # chat-completions URL
    headers: dict[str, str] = field(default_factory=dict)
    model: str = "m"

    def cpu_seconds(self) -> float:
        try:
            p = psutil.Process(self.popen.pid)
            total = sum(p.cpu_times()[:2])
            for child in p.children(recursive=True):
                total += sum(child.cpu_times()[:2])
            return total
        except psutil.Error:
            return float("nan")


def spawn(
    name: str, args: list[str], env: dict[str, str] | None = None, log_dir: Path | None = None
) -> subprocess.Popen[bytes]:
    out = open(log_dir / f"{name}.log", "wb") if log_dir else subprocess.DEVNULL
    return subprocess.Popen(
        args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=ROOT
    )


async def wait_ready(url: str, proc: subprocess.Popen[bytes], limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{url}: process exited with {proc.returncode}")
            try:
                async with s.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def start_engine(name: str, delay_ms: float, log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    p = spawn(
        name,
        [
            sys.executable,
            "-m",
            "openforgerl.engines.scripted_server",
            "--port",
            str(port),
            "--token-delay-ms",
            str(delay_ms),
        ],
        log_dir=log_dir,
    )
    base = f"http://127.0.0.1:{port}"
    await wait_ready(base + "/v1/models", p)
    return p, base


async def start_relay(name: str, engine: str, log_dir: Path, env: dict[str, str] | None = None) -> Proc:
    port = free_port()
    p = spawn(
        name, [sys.executable, __file__, "--serve-relay", str(port), "--upstream", engine], env, log_dir
    )
    base = f"http://127.0.0.1:{port}"
    await wait_ready(base + "/v1/models", p)
    return Proc(name, p, base + "/v1/chat/completions")


async def start_gateway(name: str, engine: str, store: Path, log_dir: Path, src: Path | None = None) -> Proc:
    """The gateway of this checkout, or of the source tree `src` (an older revision, `--gateway-rev`)."""
    port, admin_port, token = free_port(), free_port(), secrets.token_urlsafe(16)
    env = {"OPENFORGERL_ADMIN_TOKEN": token, **({"PYTHONPATH": str(src)} if src is not None else {})}
    # Every call of a run goes to one rollout, where real load spreads over many: lift the per-rollout
    # share of calls in flight (64) so C=256 measures the proxy, not a rollout's 429s (a revision older
    # than the share has no such flag; one that has it gets the same lift, or its C=256 row counts 429s).
    share = ["--max-in-flight-per-rollout", "2048"] if src is None or _has_share_flag(src) else []
    p = spawn(
        name,
        [
            sys.executable,
            "-m",
            "openforgerl.gateway",
            "--engine",
            engine + "/v1",
            "--port",
            str(port),
            "--admin-port",
            str(admin_port),
            "--store",
            str(store),
            *share,
        ],
        env=env,
        log_dir=log_dir,
    )
    admin = f"http://127.0.0.1:{admin_port}"
    await wait_ready(admin + "/healthz", p)
    auth = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(headers=auth) as s,
        s.post(admin + "/rollouts", json={"task_id": "bench"}) as r,
    ):
        ro = await r.json()
    return Proc(
        name, p, ro["openai_base_url"] + "/chat/completions", {"Authorization": f"Bearer {ro['api_key']}"}
    )


async def start_litellm(python: str, engine: str, log_dir: Path) -> Proc:
    port = free_port()
    cfg = log_dir / "litellm.yaml"
    cfg.write_text(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: hosted_vllm/scripted-tiny\n"
        f"      api_base: {engine}/v1\n      api_key: none\nlitellm_settings:\n  callbacks: []\n"
    )
    litellm = str(Path(python).parent / "litellm")
    key = "sk-" + os.urandom(32).hex()  # LiteLLM refuses to start without a master key
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_MODE": "PRODUCTION",
        "LITELLM_MASTER_KEY": key,
    }
    p = spawn(
        "litellm", [litellm, "--config", str(cfg), "--port", str(port), "--host", "127.0.0.1"], env, log_dir
    )
    base = f"http://127.0.0.1:{port}"
    await wait_ready(base + "/health/liveliness", p, limit_s=240)
    return Proc("litellm", p, base + "/v1/chat/completions", {"Authorization": f"Bearer {key}"})


def _has_share_flag(src: Path) -> bool:
    """Whether the gateway of the source tree `src` takes `--max-in-flight-per-rollout`."""
    return any("max_in_flight_per_rollout" in p.read_text(errors="replace") for p in src.rglob("*.py"))


def revision_src(rev: str, into: Path) -> Path:
    """`src/` of git revision `rev` of this repository, extracted under `into` (PYTHONPATH wins over the
    venv's editable install, so `python -m openforgerl.gateway` runs that revision's gateway)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def print_old_vs_new(rows: list[dict[str, Any]], old: str) -> None:
    """This checkout's gateway CPU per 1k calls against `old`'s, row by row (same run, same rounds)."""
    print(f"\ngateway CPU per 1k calls, this checkout vs {old} (target: within 5 %)")
    print("| mode | C | new CPU s/1k | old CPU s/1k | new/old |")
    print("|---|---|---|---|---|")
    by = {(r["target"], r["mode"], r["c"]): r for r in rows}
    for (target, mode, c), r in by.items():
        other = by.get((old, mode, c))
        if target == "gateway" and other is not None:
            ratio = r["cpu_s_per_1k"] / other["cpu_s_per_1k"]
            print(f"| {mode} | {c} | {_f(r['cpu_s_per_1k'])} | {_f(other['cpu_s_per_1k'])} | {ratio:.3f} |")


# -- load ----------------------------------------------------------------------------------------
def request_body(stream: bool, tokens: int) -> bytes:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": tokens,
        "temperature": 1.0,
        "logprobs": True,
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are a helpful agent. " * 80},
            {"role": "user", "content": "Please describe the repository layout. " * 50},
        ],
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    errors: int = 0
    calls: int = 0
    cpu: float = 0.0
    wall: float = 0.0


async def one_call(s: aiohttp.ClientSession, target: Proc, body: bytes, stream: bool, out: Sample) -> None:
    t0 = time.perf_counter()
    try:
        async with s.post(
            target.url, data=body, headers={"Content-Type": "application/json", **target.headers}
        ) as r:
            if not stream:
                data = await r.read()
                ok = r.status == 200 and b"choices" in data
                ttft = None
            else:
                ttft, tail = None, b""
                async for chunk in r.content.iter_any():
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    tail = (tail + chunk)[-64:]
                ok = r.status == 200 and b"[DONE]" in tail
    except aiohttp.ClientError:
        ok, ttft = False, None
    out.calls += 1
    if not ok:
        out.errors += 1
        return
    out.latencies.append(time.perf_counter() - t0)
    if ttft is not None:
        out.ttfts.append(ttft)


async def run_batch(target: Proc, n: int, conc: int, stream: bool, tokens: int, out: Sample) -> None:
    body = request_body(stream, tokens)
    left = [n]
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=600)
    ) as s:

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await one_call(s, target, body, stream, out)

        cpu0, t0 = target.cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        out.wall += time.perf_counter() - t0
        out.cpu += target.cpu_seconds() - cpu0


async def warm(target: Proc, conc: int, stream: bool, tokens: int, cap: int) -> None:
    # A fresh process's first few hundred calls are slower (allocator, caches, the new SQLite
    # file growing): warm up long enough that concurrency 1 measures the steady state.
    await run_batch(target, min(max(2 * conc, 200), cap), conc, stream, tokens, Sample())


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# -- the matrix ----------------------------------------------------------------------------------
async def matrix(targets: list[Proc], direct: Proc, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    modes = [("nonstream", False, 32), ("stream", True, 128)]
    for mode, stream, tokens in modes:
        for conc in args.concurrency:
            n = args.requests[conc]
            samples = {t.name: Sample() for t in [direct, *targets]}
            order = [direct, *targets]
            for t in order:
                lite_cap = 20 if conc == 1 else args.litellm_requests  # LiteLLM is slow: 20 warm calls at C=1
                await warm(t, conc, stream, tokens, lite_cap if t.name == "litellm" else n)
            for rnd in range(args.rounds):
                k = rnd % len(order)
                for t in order[k:] + order[:k]:
                    per = max(conc, min(n, args.litellm_requests)) if t.name == "litellm" else n
                    await run_batch(t, max(1, per // args.rounds), conc, stream, tokens, samples[t.name])
            rows += summarize(mode, conc, samples, direct.name)
            print_rows(rows[-len(samples) :], header=not rows[: -len(samples)])
    return rows


def summarize(mode: str, conc: int, samples: dict[str, Sample], base: str) -> list[dict[str, Any]]:
    d = samples[base]
    out = []
    for name, s in samples.items():
        ok = len(s.latencies)
        row = {
            "target": name,
            "mode": mode,
            "c": conc,
            "calls": s.calls,
            "errors": s.errors,
            "rps": ok / s.wall if s.wall else float("nan"),
            "p50_ms": pct(s.latencies, 0.5) * 1e3,
            "p99_ms": pct(s.latencies, 0.99) * 1e3,
            "ttft_p50_ms": pct(s.ttfts, 0.5) * 1e3 if s.ttfts else None,
            "cpu_s_per_1k": s.cpu / s.calls * 1000 if s.calls else float("nan"),
        }
        row["added_p50_ms"] = row["p50_ms"] - pct(d.latencies, 0.5) * 1e3
        row["added_p99_ms"] = row["p99_ms"] - pct(d.latencies, 0.99) * 1e3
        row["added_ttft_p50_ms"] = (
            (row["ttft_p50_ms"] - pct(d.ttfts, 0.5) * 1e3) if s.ttfts and d.ttfts else None
        )
        row["ratio"] = row["rps"] / (len(d.latencies) / d.wall) if d.wall else float("nan")
        out.append(row)
    return out


def _f(v: Any, nd: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and v != v) else f"{v:.{nd}f}"


def print_rows(rows: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print(
            "| target | mode | C | calls | err | req/s | ratio | p50 ms | added p50 ms | added p99 ms "
            "| added TTFT p50 ms | proxy CPU s/1k |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = "(engine)" if r["target"] == "direct" else _f(r["cpu_s_per_1k"])
        print(
            f"| {r['target']} | {r['mode']} | {r['c']} | {r['calls']} | {r['errors']} | {_f(r['rps'], 0)} "
            f"| {_f(r['ratio'])} | {_f(r['p50_ms'])} | {_f(r['added_p50_ms'])} | {_f(r['added_p99_ms'])} "
            f"| {_f(r['added_ttft_p50_ms'])} | {cpu} |",
            flush=True,
        )


async def paced(direct: Proc, targets: list[Proc], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Throughput against an engine paced like a real one (streamed), at each paced concurrency, with
    how busy the whole box was (engine, client and proxy share its cores: where the box is saturated,
    throughput measures everyone's CPU rather than the proxy's transparency)."""
    out: list[dict[str, Any]] = []
    for conc, n in args.paced:
        samples = {t.name: Sample() for t in [direct, *targets]}
        busy = {t.name: [] for t in [direct, *targets]}
        order = [direct, *targets]
        for t in order:
            await warm(t, min(conc, 16), True, 8, 64)
        for rnd in range(args.rounds):
            k = rnd % len(order)
            for t in order[k:] + order[:k]:
                psutil.cpu_percent()
                await run_batch(t, n // args.rounds, conc, True, args.paced_tokens, samples[t.name])
                busy[t.name].append(psutil.cpu_percent())
        rows = summarize(f"paced stream {args.paced_tokens} tok @20ms", conc, samples, direct.name)
        for row in rows:
            row["box_busy_pct"] = sum(busy[row["target"]]) / len(busy[row["target"]])
        print()
        print_rows(rows)
        print(
            "box CPU busy % (all cores, per target's rounds): "
            + ", ".join(f"{r['target']} {r['box_busy_pct']:.0f}" for r in rows)
        )
        out += rows
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI-size run (fewer calls, 2 rounds)")
    p.add_argument("--litellm-python", default=None, help="python of a venv with litellm[proxy]")
    p.add_argument("--out", default=None, help="write rows as JSON here")
    p.add_argument(
        "--gateway-rev",
        default=None,
        help="also run the gateway of this git revision (old vs new, same run: the regression check)",
    )
    p.add_argument("--no-paced", action="store_true", help="skip the paced-engine throughput rows")
    p.add_argument("--serve-relay", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--upstream", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.concurrency = [1, 64, 256]
    if args.quick:
        args.requests, args.rounds, args.litellm_requests = {1: 400, 64: 512, 256: 512}, 2, 64
        args.paced, args.paced_tokens = [(64, 256)], 32
    else:
        args.requests, args.rounds, args.litellm_requests = {1: 2000, 64: 2000, 256: 3000}, 4, 300
        args.paced, args.paced_tokens = [(64, 512), (256, 1024)], 128
    return args


async def main_async(args: argparse.Namespace) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="gwbench-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        eng, eng_url = await start_engine("engine", 0.0, log_dir)
        paced_eng, paced_url = await start_engine("engine_paced", 20.0, log_dir)
        procs += [eng, paced_eng]
        direct = Proc("direct", eng, eng_url + "/v1/chat/completions")
        relay = await start_relay("relay", eng_url, log_dir)
        gateway = await start_gateway("gateway", eng_url, log_dir / "calls.db", log_dir)
        procs += [relay.popen, gateway.popen]
        targets = [relay, gateway]
        if args.gateway_rev:
            old_name = f"gateway@{args.gateway_rev}"
            src = revision_src(args.gateway_rev, log_dir / "old")
            old_gw = await start_gateway(old_name, eng_url, log_dir / "calls_old.db", log_dir, src=src)
            procs.append(old_gw.popen)
            targets.append(old_gw)
        if args.litellm_ok:
            litellm = await start_litellm(args.litellm_python, eng_url, log_dir)
            procs.append(litellm.popen)
            targets.append(litellm)
        else:
            print(f"(litellm skipped: no --litellm-python venv given or found: {args.litellm_python})")
        print(
            f"# gateway overhead ({'quick' if args.quick else 'full'}), {psutil.cpu_count()} CPUs, "
            f"event loop of relay and gateway: {event_loop_name()}, logs {log_dir}\n"
        )
        rows = await matrix(targets, direct, args)
        if args.gateway_rev:
            print_old_vs_new(rows, f"gateway@{args.gateway_rev}")
        if args.no_paced:
            args.rows = rows
            return
        p_direct = Proc("direct", paced_eng, paced_url + "/v1/chat/completions")
        p_relay = await start_relay("relay", paced_url, log_dir)
        p_gw = await start_gateway("gateway", paced_url, log_dir / "calls_paced.db", log_dir)
        procs += [p_relay.popen, p_gw.popen]
        rows += await paced(p_direct, [p_relay, p_gw], args)
        args.rows = rows
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.serve_relay is not None:
        serve_relay(args.serve_relay, args.upstream)
        return
    args.litellm_ok = bool(args.litellm_python) and Path(args.litellm_python).exists()
    args.rows = []
    asyncio.run(main_async(args))
    if args.out:
        Path(args.out).write_text(json.dumps(args.rows, indent=1))


if __name__ == "__main__":
    main()
