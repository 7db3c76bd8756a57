"""CPU to admit one Chat call with screenshots, in process: the data URLs lifted out of the bytes before
parsing (`gateway/lifted.py`, what the gateway does now) against the anchor, the plain path (parse the
whole body, find and check the images from the strings, serialise the body for the engine). Both ends
include what differs between the paths: parse and depth check, image lookup (every screenshot already
seen, as on a resent history), the record's reference copy, and the engine body's serialisation.

    python benchmarks/image_admission.py [--calls 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multimodal import Rollout, base_screenshots

from openforgerl.gateway.calls import parse_body
from openforgerl.gateway.images import ImagePolicy, SeenImages, find_images, stored_copy
from openforgerl.gateway.lifted import lift_data_urls


def plain(raw: bytes, seen: SeenImages) -> bytes:
    body = parse_body(raw)
    media = find_images(body, ImagePolicy(), seen)
    assert media is not None
    for url, ref in media.fresh:
        seen.add(url, ref)
    stored_copy(body, media.replace)
    return orjson.dumps(body)


def lifted(raw: bytes, seen: SeenImages) -> bytes:
    found = lift_data_urls(raw)
    assert found is not None
    body = parse_body(found.lean)
    media = find_images(body, ImagePolicy(), seen, found)
    assert media is not None and media.lifted == len(found.spans)
    for url, ref in media.fresh:
        seen.add(url, ref)
    found.with_refs(media.replace)  # the record's request: the lean bytes with references
    return found.splice(orjson.dumps(body))  # the engine's payload: the client's bytes spliced back


def per_call(path: Any, bodies: list[bytes]) -> float:
    seen = SeenImages()
    for raw in bodies[:8]:  # the screenshots are seen once (decoded, hashed) before the clock starts
        path(raw, seen)
    t = time.process_time()
    for raw in bodies:
        path(raw, seen)
    return (time.process_time() - t) / len(bodies)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    ro = Rollout(base_screenshots(6), 1)
    print(
        "| screenshots/call | round | plain us/call (anchor) | "
        "lifted us/call | lifted / plain |\n|---|---|---|---|---|"
    )
    for images in (1, 5):
        bodies = [ro.body(7, images)] * args.calls  # one history, resent: every screenshot already seen
        assert plain(bodies[0], SeenImages()) == lifted(
            bodies[0], SeenImages()
        )  # the engine gets the same bytes
        for r in range(args.rounds):
            arms = [plain, lifted] if r % 2 == 0 else [lifted, plain]
            cost = {arm: per_call(arm, bodies) for arm in arms}
            print(
                f"| {images} | {r} | {cost[plain] * 1e6:.0f} | {cost[lifted] * 1e6:.0f} | "
                f"{cost[lifted] / cost[plain]:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
