"""What images cost the gateway: CPU per call with one and with five 1280x720 screenshots, next to the
bare relay of `gateway_overhead.py` (the floor: bytes in, bytes out, no parsing, no recording), and
the bytes the call log keeps for a rollout that resends its last five screenshots on every call.

One run, same engine for both proxies, rounds interleaved. The engine is a fake vLLM written here
(`--serve-engine`, its own process, not measured): it answers with vLLM's token fields and, per image
part, 880 expanded pads (what a 1280x720 screenshot costs Qwen3-VL, measured) plus
the local engine's `openforgerl_images` report, so the gateway records what it would in production.
Screenshots: synthetic desktop-like PNGs (text lines, windows, a gradient); every call brings one
new screenshot (each unique: a tEXt chunk numbers it) and resends the four before it, as a GUI agent
keeping its last five observations does. Modes: text only (the same body without the images), one
screenshot, five screenshots; non-streamed, 32 tokens.

Reported: proxy CPU seconds per 1,000 calls (psutil, user+system) for relay and gateway and their
ratio (target <= 2x). The gateway process keeps freed memory in its heap (`gateway/tuning.py`
`_tune_malloc`); a second relay, `relay+malloc`, gets the same glibc settings through the
environment, so the ratio is also shown against a relay that saves the same page faults. And for the
1,000-call five-screenshot rollout: the blob bytes, the call records' bytes, the database file and the blob
files beside it, against the unique images' size (target <= 1.1x) and against what inline base64
in every record would have cost.

    python benchmarks/multimodal.py --quick
    python benchmarks/multimodal.py --out results.json
    python benchmarks/multimodal.py --gateway-rev HEAD~1     # the gateway of another revision beside it
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import random
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_overhead import Proc, free_port, revision_src, spawn, start_gateway, start_relay, wait_ready

PADS_PER_SHOT = 880  # Qwen3-VL, 1280x720, patch 16, merge 2 (gui.md §5.3)
# glibc's environment names for what the gateway sets with mallopt (gateway/tuning.py `_tune_malloc`)
SAME_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(128 << 20),
    "MALLOC_TOP_PAD_": str(16 << 20),
}


# -- the engine (not measured) ---------------------------------------------------------------------
def serve_engine(port: int) -> None:
    """A fake vLLM: prompt ids with 880 pads per image part, 32 sampled ids with logprobs."""
    from aiohttp import web

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    out_ids = list(range(100, 132))
    lps = [{"token": f"t{i}", "logprob": -0.25, "bytes": [116], "top_logprobs": []} for i in out_ids]

    async def chat(request: web.Request) -> web.Response:
        raw = await request.read()
        images = raw.count(b'"type":"image_url"') + raw.count(b'"type": "image_url"')
        prompt = [1] * 200 + ([4102] + [4104] * PADS_PER_SHOT + [4103]) * images + [2] * 20
        body: dict[str, Any] = {
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": " ".join(f"t{i}" for i in out_ids)},
                    "logprobs": {"content": lps},
                    "finish_reason": "length",
                    "token_ids": out_ids,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": 32,
                "total_tokens": len(prompt) + 32,
            },
            "prompt_token_ids": prompt,
        }
        if images:
            body["openforgerl_images"] = [{"grid_thw": [1, 44, 80], "tokens": PADS_PER_SHOT}] * images
        return web.Response(
            body=json.dumps(body, separators=(",", ":")).encode(), content_type="application/json"
        )

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", lambda _r: web.json_response({"object": "list", "data": [{"id": "m"}]}))
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


async def start_engine(log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    p = spawn("engine", [sys.executable, __file__, "--serve-engine", str(port)], log_dir=log_dir)
    base = f"http://127.0.0.1:{port}"
    await wait_ready(base + "/v1/models", p)
    return p, base


# -- screenshots -----------------------------------------------------------------------------------
def base_screenshots(n: int, seed: int = 0) -> list[bytes]:
    """`n` desktop-like 1280x720 PNGs: title bars, windows, lines of text, a gradient."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    words = [
        "file",
        "edit",
        "view",
        "open",
        "save",
        "submit",
        "cancel",
        "search",
        "settings",
        "name",
        "email",
        "password",
        "login",
        "next",
        "back",
        "home",
        "about",
        "contact",
        "price",
        "total",
    ]
    shots = []
    for _ in range(n):
        img = Image.new("RGB", (1280, 720), (236, 236, 236))
        d = ImageDraw.Draw(img)
        for y in range(0, 720, 8):
            d.rectangle((0, y, 1280, y + 8), fill=(220 - y // 12, 228 - y // 20, 240))
        for _w in range(rng.randint(2, 4)):
            x0, y0 = rng.randint(0, 600), rng.randint(30, 300)
            x1, y1 = x0 + rng.randint(300, 680), y0 + rng.randint(200, 400)
            d.rectangle((x0, y0, x1, y1), fill=(255, 255, 255), outline=(90, 90, 90))
            d.rectangle((x0, y0, x1, y0 + 22), fill=(rng.randint(40, 90), rng.randint(80, 140), 200))
            for line in range(y0 + 30, y1 - 12, 14):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
                d.text((x0 + 8, line), text, fill=(20, 20, 20))
            bx = x0 + rng.randint(10, max(11, x1 - x0 - 90))
            d.rectangle((bx, y1 - 34, bx + 80, y1 - 10), fill=(30, 120, 220))
            d.text((bx + 10, y1 - 30), rng.choice(words), fill=(255, 255, 255))
        d.rectangle((0, 0, 1280, 26), fill=(40, 40, 48))
        d.text((10, 7), "  ".join(rng.choice(words) for _ in range(8)), fill=(230, 230, 230))
        out = io.BytesIO()
        img.save(out, format="PNG")
        shots.append(out.getvalue())
    return shots


def numbered(png: bytes, k: int) -> bytes:
    """`png` made unique: a tEXt chunk carrying `k` after IHDR (a valid PNG, same pixels)."""
    payload = b"step\0" + str(k).encode()
    chunk = (
        struct.pack(">I", len(payload)) + b"tEXt" + payload + struct.pack(">I", zlib.crc32(b"tEXt" + payload))
    )
    return png[:33] + chunk + png[33:]


class Rollout:
    """The screenshots of a GUI rollout: one new per step, the last five resent."""

    def __init__(self, bases: list[bytes], seed: int) -> None:
        self.bases, self.seed = bases, seed
        self._urls: dict[int, str] = {}
        self.unique_bytes = 0

    def url(self, k: int) -> str:
        if k not in self._urls:
            data = numbered(self.bases[k % len(self.bases)], self.seed * 1_000_000 + k)
            self.unique_bytes += len(data)
            self._urls[k] = "data:image/png;base64," + base64.b64encode(data).decode()
        return self._urls[k]

    def body(self, step: int, images: int) -> bytes:
        content: list[dict[str, Any]] = [
            {"type": "text", "text": f"Step {step}: click the submit button. " * 4}
        ]
        for k in range(max(0, step - images + 1), step + 1) if images else ():
            content.append({"type": "image_url", "image_url": {"url": self.url(k)}})
        body = {
            "model": "m",
            "max_tokens": 32,
            "temperature": 1.0,
            "logprobs": True,
            "messages": [
                {"role": "system", "content": "You are a GUI agent. Answer with one action. " * 20},
                {"role": "user", "content": content},
            ],
        }
        return json.dumps(body).encode()


# -- load --------------------------------------------------------------------------------------------
async def run(target: Proc, bodies: list[bytes], conc: int) -> tuple[float, int, int]:
    """CPU seconds of the target's process over `bodies` (sent in order, `conc` at a time), calls, errors."""
    queue = list(reversed(bodies))
    errors = 0
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=600)
    ) as s:

        async def worker() -> None:
            nonlocal errors
            while queue:
                body = queue.pop()
                async with s.post(
                    target.url, data=body, headers={"Content-Type": "application/json", **target.headers}
                ) as r:
                    data = await r.read()
                    if r.status != 200 or b"choices" not in data:
                        errors += 1

        cpu0 = target.cpu_seconds()
        await asyncio.gather(*(worker() for _ in range(conc)))
        return target.cpu_seconds() - cpu0, len(bodies), errors


async def cpu_matrix(
    relay: Proc,
    relay_malloc: Proc,
    gateway: Proc,
    bases: list[bytes],
    args: argparse.Namespace,
    old: Proc | None = None,
) -> list[dict[str, Any]]:
    """`old`: the gateway of an older revision, measured in the same rounds (`--gateway-rev`)."""
    rows = []
    targets = [relay, relay_malloc, gateway, *([old] if old is not None else [])]
    for images in (0, 1, 5):
        cpu = {t.name: 0.0 for t in targets}
        calls = {t.name: 0 for t in targets}
        errs = 0
        # Screenshots unique to each row and proxy: the gateway keeps what it stored (its seen-image
        # cache, the store's known hashes), so a row reusing an earlier row's screenshots would bring
        # it no new image at all and measure less than a GUI rollout costs.
        rollouts = {t.name: Rollout(bases, 10 * (k + 1) + images) for k, t in enumerate(targets)}
        for rnd in range(args.rounds):
            order = targets if rnd % 2 == 0 else targets[::-1]
            for t in order:
                start = rnd * args.calls
                bodies = [rollouts[t.name].body(start + i, images) for i in range(args.calls)]
                await run(t, bodies[:8], args.conc)  # warm-up calls, not counted
                used, n, e = await run(t, bodies[8:], args.conc)
                cpu[t.name] += used
                calls[t.name] += n
                errs += e
        per = {k: cpu[k] / calls[k] * 1000 for k in cpu}
        size = len(rollouts["gateway"].body(10, images))
        rows.append(
            {
                "images": images,
                "request_kb": size / 1024,
                "relay_cpu_s_per_1k": per["relay"],
                "relay_malloc_cpu_s_per_1k": per[relay_malloc.name],
                "gateway_cpu_s_per_1k": per["gateway"],
                "ratio": per["gateway"] / per["relay"],
                "ratio_relay_malloc": per["gateway"] / per[relay_malloc.name],
                "calls": calls["gateway"],
                "errors": errs,
            }
        )
        r = rows[-1]
        line = (
            f"| {images} | {r['request_kb']:.0f} | {r['relay_cpu_s_per_1k']:.2f} "
            f"| {r['relay_malloc_cpu_s_per_1k']:.2f} | {r['gateway_cpu_s_per_1k']:.2f} "
            f"| {r['ratio']:.2f} | {r['ratio_relay_malloc']:.2f} | {r['calls']} | {errs} |"
        )
        if old is not None:
            r["old_cpu_s_per_1k"] = per[old.name]
            line += (
                f" {per[old.name]:.2f} | {per[old.name] / per['relay']:.2f} "
                f"| {per['gateway'] / per[old.name]:.3f} |"
            )
        print(line, flush=True)
    return rows


async def storage(
    gateway_url: str, log_dir: Path, bases: list[bytes], args: argparse.Namespace
) -> dict[str, Any]:
    """A fresh gateway and store; one rollout of `args.storage_calls` five-screenshot calls."""
    db = log_dir / "storage.db"
    gw = await start_gateway("gateway_storage", gateway_url, db, log_dir)
    try:
        ro = Rollout(bases, 3)  # not a seed of `cpu_matrix` (and a fresh gateway and store anyway)
        bodies = [ro.body(i, 5) for i in range(args.storage_calls)]
        inline = sum(len(b) for b in bodies)
        _, _, errors = await run(gw, bodies, 1)
    finally:
        gw.popen.terminate()
        gw.popen.wait(timeout=30)
    return db_figures(db, log_dir, ro, inline, errors)


def db_figures(db: Path, log_dir: Path, ro: Rollout, inline: int, errors: int) -> dict[str, Any]:
    """What the store holds after the storage rollout (the gateway has stopped)."""
    from openforgerl.store.sqlite import SQLiteCallStore

    log = SQLiteCallStore(db)
    blob_count, blob_bytes = log.read_blob_usage()  # the blob files beside the db (and its blobs table)
    log.close()
    blob_disk = sum(p.stat().st_blocks * 512 for p in Path(f"{db}.blobs").glob("packs/*"))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (calls, record_bytes) = conn.execute("SELECT count(*), sum(length(body)) FROM calls").fetchone()
    refs = conn.execute("SELECT body FROM calls LIMIT 1").fetchone()[0]
    # the engine's prompt ids (880 expanded pads per screenshot): training data, not image storage
    id_bytes = sum(
        len(json.dumps(json.loads(b)["prompt_token_ids"], separators=(",", ":")))
        for (b,) in conn.execute("SELECT body FROM calls")
    )
    conn.close()
    file_bytes = sum(p.stat().st_size for p in log_dir.glob("storage.db*") if p.is_file()) + blob_bytes
    scale = 1000 / max(1, calls)
    out = {
        "calls": calls,
        "errors": errors,
        "unique_images": blob_count,
        "unique_image_bytes": ro.unique_bytes,
        "blob_bytes": blob_bytes,
        "record_bytes": record_bytes,
        "prompt_id_bytes": id_bytes,
        "db_file_bytes": file_bytes,
        "blob_disk_bytes": blob_disk,
        "ratio_images": (blob_bytes + record_bytes - id_bytes) / ro.unique_bytes,
        "per_1k_calls_mb": file_bytes * scale / 2**20,
        "ratio_blobs": blob_bytes / ro.unique_bytes,
        "ratio_file": file_bytes / ro.unique_bytes,
        "inline_request_bytes": inline,
        "base64_in_records": b";base64," in bytes(refs),
    }
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer calls (a CI-size run)")
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    p.add_argument("--serve-engine", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--gateway-rev",
        default=None,
        help="also measure the gateway of this git revision, same rounds (old vs new)",
    )
    args = p.parse_args(argv)
    args.rounds, args.conc = 2, 4
    args.calls = 60 if args.quick else 500
    args.storage_calls = 1000
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    log_dir = Path(tempfile.mkdtemp(prefix="mmbench-"))
    procs: list[subprocess.Popen[bytes]] = []
    t0 = time.perf_counter()
    bases = base_screenshots(12)
    print(f"# multimodal gateway cost, {psutil.cpu_count()} CPUs, logs {log_dir}")
    print(
        f"screenshots: 1280x720 PNG, {sum(map(len, bases)) / len(bases) / 1024:.0f} KiB on average "
        f"(made in {time.perf_counter() - t0:.1f} s); engine answers {PADS_PER_SHOT} pads per image\n"
    )
    try:
        eng, eng_url = await start_engine(log_dir)
        procs.append(eng)
        relay = await start_relay("relay", eng_url, log_dir)
        relay_malloc = await start_relay("relay+malloc", eng_url, log_dir, SAME_MALLOC)
        gateway = await start_gateway("gateway", eng_url, log_dir / "calls.db", log_dir)
        procs += [relay.popen, relay_malloc.popen, gateway.popen]
        old = None
        if args.gateway_rev:
            old = await start_gateway(
                f"gateway@{args.gateway_rev}",
                eng_url,
                log_dir / "old.db",
                log_dir,
                revision_src(args.gateway_rev, log_dir / "old"),
            )
            procs.append(old.popen)
        print(
            f"CPU per call, non-streamed, C={args.conc}, {args.rounds} interleaved rounds "
            "(anchor: the bare relay; target gateway <= 2x relay)\n"
        )
        head = (
            "| screenshots/call | request KiB | relay CPU s/1k | relay+malloc CPU s/1k | gateway CPU s/1k "
            "| gateway/relay | gateway/(relay+malloc) | calls | err |"
        )
        rule = "|---|---|---|---|---|---|---|---|---|"
        if old is not None:
            head += f" {old.name} CPU s/1k | old/relay | new/old |"
            rule += "---|---|---|"
        print(head)
        print(rule)
        rows = await cpu_matrix(relay, relay_malloc, gateway, bases, args, old)
        st = await storage(eng_url, log_dir, bases, args)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    print(
        f"\nStorage, one rollout of {st['calls']} calls resending its last 5 screenshots "
        f"(anchor: the unique images' bytes; target <= 1.1x)\n"
    )
    print(
        "| unique images | unique image MiB | blob MiB (on disk) | "
        "records MiB (of which prompt ids) | db + blob files MiB "
        "| (blobs + records w/o ids)/unique | file/unique | inline base64 requests MiB | base64 in records |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    mib = 2**20
    print(
        f"| {st['unique_images']} | {st['unique_image_bytes'] / mib:.1f} | {st['blob_bytes'] / mib:.1f} "
        f"({st['blob_disk_bytes'] / mib:.1f}) "
        f"| {st['record_bytes'] / mib:.1f} ({st['prompt_id_bytes'] / mib:.1f}) "
        f"| {st['db_file_bytes'] / mib:.1f} "
        f"| {st['ratio_images']:.3f} | {st['ratio_file']:.3f} | {st['inline_request_bytes'] / mib:.1f} "
        f"| {st['base64_in_records']} |"
    )
    print(f"\nbytes stored per 1,000 calls: {st['per_1k_calls_mb']:.1f} MiB; errors: {st['errors']}")
    return {"cpu": rows, "storage": st}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.serve_engine is not None:
        serve_engine(args.serve_engine)
        return
    result = asyncio.run(main_async(args))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
