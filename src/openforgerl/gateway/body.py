"""A request body's own checks, before any call state exists: its encoding, JSON
shape, nesting depth and seed.

Each refusal is a `GatewayError` (a 4xx in the route's protocol), never a recorded gateway fault.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from openforgerl.gateway.errors import GatewayError

__all__ = ["MAX_BODY_DEPTH", "check_depth", "check_seed", "decode_body", "parse_body", "reason"]

# Deepest JSON body accepted. The record writer (orjson) stops at 254 nested containers and the
# record reader (pydantic's JSON parser) at about 200, and a body sits one level inside its record
# (a translated body a few more): 128 leaves room for both, and real harness bodies nest < 20.
MAX_BODY_DEPTH = 128
_DEPTH_PROBE = 254 - MAX_BODY_DEPTH  # lists wrapped around a body: orjson then fails iff it is too deep
# Counting brackets (two C scans, ~0.7 us per KB) spares the probe (~0.9 us per KB) only when it finds
# few enough, which a small body does (a GUI call's lean body: ~2 KB, 1 us instead of 8); an agent's long
# history has more dicts than that, so on it the count would only add to the probe (measured: 474 KB,
# 327 us of counting on top of 407 us of probe).
_COUNTED_BYTES = 16 * 1024


def decode_body(raw: bytes, encoding: str, limit: int) -> bytes:
    """`raw` decoded per its Content-Encoding (identity, gzip, deflate), at most `limit` bytes."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return raw
    if enc not in ("gzip", "x-gzip", "deflate"):
        raise GatewayError(415, f"unsupported Content-Encoding {encoding[:40]!r}")
    # gzip: wbits 16+15; deflate: zlib-wrapped (15) as the RFC says, raw (-15) as some clients send
    for wbits in (31,) if enc != "deflate" else (15, -15):
        try:
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(raw, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise GatewayError(413, "request body too large once decoded")
        if inflater.eof:
            return out
    raise GatewayError(400, f"request body is not valid {enc} data")


def reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc or type(exc).__name__)[:200]


def check_depth(body: Any, raw: bytes) -> None:
    """400 when `body` nests deeper than `MAX_BODY_DEPTH` (see there why that is the limit)."""
    if len(raw) <= 2 * MAX_BODY_DEPTH:
        return  # too short to be that deep
    if len(raw) <= _COUNTED_BYTES and raw.count(b"[") + raw.count(b"{") <= MAX_BODY_DEPTH:
        return  # too few openings to be that deep
    probe: Any = body
    for _ in range(_DEPTH_PROBE):
        probe = [probe]
    try:
        orjson.dumps(probe)  # C speed (about 20 us for an 85 KB agent body), exact
    except orjson.JSONEncodeError:
        raise GatewayError(400, f"request body nests deeper than {MAX_BODY_DEPTH} levels") from None


# A sampling seed as the engines take it: vLLM validates it into int64 and torch's generator refuses
# more; orjson reads a longer integer as a float, which an engine may take apart its own way.
_SEED_MIN, _SEED_MAX = -(2**63), 2**63 - 1


def check_seed(engine_body: dict[str, Any]) -> None:
    """400 when the engine body's `seed` is not a 64-bit integer (`{"seed": 2**70}`): the client's
    mistake, refused before it is recorded or reaches an engine (two dict reads a call)."""
    seed = engine_body.get("seed")
    if seed is not None and not (type(seed) is int and _SEED_MIN <= seed <= _SEED_MAX):
        raise GatewayError(400, "'seed' must be an integer in the signed 64-bit range", param="seed")


def parse_body(raw: bytes) -> dict[str, Any]:
    """`raw` as a JSON object no deeper than `MAX_BODY_DEPTH`, or a 400."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise GatewayError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "request body must be a JSON object")
    check_depth(body, raw)
    return body
