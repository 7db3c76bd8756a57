"""Tokens/s of `openforgerl engine` vs vllm-cpu on the same model at 1, 8 and 32 concurrent requests.

Each request is a chat completion with `return_token_ids` + `logprobs` (what the gateway asks for),
`ignore_eos` and a fixed `max_tokens`, so both engines generate exactly the same number of tokens.
Throughput = completion tokens of all requests / wall time of the whole wave. One warm-up wave first.

    python benchmarks/engine.py --quick                 # 64 tokens/request, starts both servers
    python benchmarks/engine.py --vllm-url http://127.0.0.1:8001   # reuse a running vllm (same model)
    python benchmarks/engine.py --no-vllm
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from openforgerl.engines.chat_format import TINY_ASSETS
from openforgerl.engines.local import vllm_cpu

PROMPT = [
    {"role": "system", "content": "You are zero, a compact coding agent."},
    {"role": "user", "content": "Write the text 'alpha beta' to the file notes.txt."},
]


async def one(session: aiohttp.ClientSession, url: str, max_tokens: int) -> int:
    body = {
        "model": "tiny",
        "messages": PROMPT,
        "max_tokens": max_tokens,
        "temperature": 1.0,
        "ignore_eos": True,
        "logprobs": True,
        "return_token_ids": True,
    }
    async with session.post(url + "/v1/chat/completions", json=body) as r:
        data = await r.json()
        if r.status != 200:
            raise RuntimeError(f"{r.status}: {data}")
    return len(data["choices"][0]["token_ids"])


async def wave(url: str, concurrency: int, max_tokens: int) -> float:
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(s, url, max_tokens) for _ in range(concurrency)))
        return sum(counts) / (time.perf_counter() - start)


def measure(url: str, batches: list[int], max_tokens: int) -> dict[int, float]:
    asyncio.run(wave(url, 2, 8))  # warm-up
    return {b: asyncio.run(wave(url, b, max_tokens)) for b in batches}


def start_local(model: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "openforgerl.engines.local",
        "--model",
        str(model),
        "--port",
        str(port),
        "--served-model-name",
        "tiny",
    ]
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def run_engine(
    name: str, args: argparse.Namespace, batches: list[int], max_tokens: int
) -> dict[int, float] | None:
    if name == "vllm" and args.vllm_url:
        return measure(args.vllm_url.rstrip("/"), batches, max_tokens)
    if name == "vllm" and vllm_cpu.vllm_python() is None:
        print("vllm venv missing (scripts/install_vllm.sh); skipping vllm-cpu", file=sys.stderr)
        return None
    port = vllm_cpu.free_port()
    log = Path(tempfile.gettempdir()) / f"openforgerl-bench-{name}-{port}.log"
    proc = (
        start_local(args.model, port, log) if name == "local" else vllm_cpu.start_vllm(args.model, port, log)
    )
    try:
        vllm_cpu.wait_healthy(f"http://127.0.0.1:{port}", proc, 1200)
        return measure(f"http://127.0.0.1:{port}", batches, max_tokens)
    finally:
        vllm_cpu.stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=TINY_ASSETS)
    ap.add_argument("--quick", action="store_true", help="64 tokens per request instead of 128")
    ap.add_argument("--vllm-url", default=None, help="reuse a running vllm serving the same model")
    ap.add_argument("--no-vllm", action="store_true")
    args = ap.parse_args()
    batches, max_tokens = [1, 8, 32], 64 if args.quick else 128
    results = {"openforgerl engine": run_engine("local", args, batches, max_tokens)}
    if not args.no_vllm:
        results["vllm-cpu 0.32.0"] = run_engine("vllm", args, batches, max_tokens)
    print(
        f"\nmodel {args.model}, {max_tokens} new tokens/request, "
        "return_token_ids + logprobs, tokens/s (total)"
    )
    print("| engine | " + " | ".join(f"batch {b}" for b in batches) + " |")
    print("|---|" + "---|" * len(batches))
    for name, res in results.items():
        cells = [f"{res[b]:.0f}" if res else "n/a" for b in batches]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
