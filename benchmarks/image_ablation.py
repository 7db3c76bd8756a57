"""Where a GUI call's gateway CPU goes: the gateway of `multimodal.py`, beside copies of itself with the
per-image steps taken out one at a time and all together, and the bare relay (the anchor), in the same
interleaved rounds. A measurement only: a gateway without its pack write or its hashes records blobs
that do not exist, and is never a configuration of the product.

The steps a new screenshot costs the gateway (`gateway/images.py`, `store/`):
  decode  - strict base64 decode and the header sniff (the ablated gateway reuses one decoded image)
  sha256  - the content address (replaced by a counter)
  pack    - the blob's append to its pack file (`put_blob` returns at once)
  seen    - keeping the data URL in the seen-image cache, so a resend is a memcmp (nothing is kept)

Each variant is the same `python -m openforgerl.gateway` with a `sitecustomize` on its PYTHONPATH that
switches the named steps off before the gateway starts.

    python benchmarks/image_ablation.py [--calls 1000] [--rounds 3] [--images 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_overhead import Proc, start_gateway, start_relay
from multimodal import Rollout, base_screenshots, run, start_engine

STEPS = ("decode", "sha256", "pack", "seen")

# Run inside the ablated gateway at interpreter start (sitecustomize); OFF is filled in per variant.
_SITE = """
OFF = {off!r}
import itertools
import sys
print(f"ablated steps: {{sorted(OFF)}}", file=sys.stderr, flush=True)  # in the variant's log
import openforgerl.gateway.images as images
import openforgerl.store.sqlite as sqlite
if "seen" in OFF:
    images.SeenImages.add = lambda self, url, ref: None
if "pack" in OFF:
    async def put_blob(self, sha256, data, media_type):
        return None
    sqlite.SQLiteCallStore.put_blob = put_blob
if "sha256" in OFF:
    _count = itertools.count()
    class _Counter:
        def __init__(self, data):
            self.n = next(_count)
        def hexdigest(self):
            return f"{{self.n:064x}}"
    class _Hashlib:
        sha256 = _Counter
    images.hashlib = _Hashlib
if "decode" in OFF:
    import pybase64
    _real, _one = pybase64.b64decode, {{}}
    class _Decoder:
        @staticmethod
        def b64decode(data, validate=False):
            if "png" not in _one:
                _one["png"] = _real(data, validate=validate)
            return bytes(bytearray(_one["png"]))  # a fresh object, as a decode makes
    images.pybase64 = _Decoder
"""


def variants(only: list[str] | None) -> list[tuple[str, ...]]:
    singles = [(s,) for s in STEPS if only is None or s in only]
    return [(), *singles, tuple(STEPS)]


async def start_ablated(off: tuple[str, ...], engine: str, log_dir: Path) -> Proc:
    name = "gateway" if not off else "gateway-" + "-".join(off)
    site = log_dir / name / "site"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(_SITE.format(off=set(off)))
    return await start_gateway(name, engine, log_dir / f"{name}.db", log_dir, site)


async def main_async(args: argparse.Namespace) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="ablation-"))
    bases = base_screenshots(12)
    eng, url = await start_engine(log_dir)
    procs = [eng]
    try:
        targets = [await start_relay("relay", url, log_dir)]
        for off in variants(args.only):
            targets.append(await start_ablated(off, url, log_dir))
        procs += [t.popen for t in targets]
        cpu = {t.name: 0.0 for t in targets}
        calls = {t.name: 0 for t in targets}
        for rnd in range(args.rounds):
            for k, t in enumerate(targets if rnd % 2 == 0 else targets[::-1]):
                ro = Rollout(bases, 1000 * (rnd + 1) + 7 * k)  # every screenshot new to this proxy
                await run(t, [ro.body(i, args.images) for i in range(20)], args.conc)  # warm-up
                used, n, errors = await run(
                    t, [ro.body(100 + i, args.images) for i in range(args.calls)], args.conc
                )
                if errors:
                    raise RuntimeError(f"{t.name}: {errors} failed calls")
                cpu[t.name] += used
                calls[t.name] += n
        per = {k: cpu[k] / calls[k] * 1000 for k in cpu}
        full = per["gateway"]
        print(
            f"# {args.images} screenshot(s) per call (one new), C={args.conc}, {args.rounds} rounds of "
            f"{args.calls} calls, logs {log_dir}\n"
        )
        print("| proxy | CPU s/1k calls | / relay | saved vs gateway (ms/call) |")
        print("|---|---|---|---|")
        for name, value in per.items():
            saved = "" if name == "relay" else f"{full - value:.3f}"
            print(f"| {name} | {value:.3f} | {value / per['relay']:.2f} | {saved} |")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--images", type=int, default=1, help="screenshots per call (the newest is new)")
    p.add_argument("--conc", type=int, default=4)
    p.add_argument("--only", nargs="*", choices=STEPS, default=None, help="ablate only these steps alone")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
