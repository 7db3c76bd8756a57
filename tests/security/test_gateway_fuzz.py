"""10,000+ mutated requests at both planes of a real gateway: never a 5xx, every refusal in its
protocol's own error shape, and the gateway healthy, unpaused and untainted afterwards.

Seeds are the real request bodies captured from the harness CLIs: Chat Completions from Qwen Code,
opencode, mini-swe-agent and OpenClaw (`tests/security/captures`, bodies copied from
`shared/reference/harness-captures`, which is read too when present), Responses from Codex and
OpenClaw and Anthropic Messages from Claude Code and OpenClaw (`tests/protocols/captures`), plus
valid admin bodies. Each request gets one to three mutations: type flips, deletions, deep nesting (past the
recorder's limit), huge strings, bad JSON, content encodings (valid, garbage, unknown), content types,
query strings, methods, paths, keys, and `stream` on. Requests stay valid HTTP/1.1: a request line or
header block aiohttp's parser rejects never reaches a protocol and is out of scope here.

The engine is an in-process fake that answers "ok" at once (the model's decision only), so the run
is about the gateway: about a minute on a shared 2-core box.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import random
import zlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from openforgerl.engines.base import EngineCall, EngineChunk, EngineResult, PromptIds
from openforgerl.gateway.server import start_gateway
from openforgerl.store.sqlite import SQLiteCallStore

N_REQUESTS = 10_500
CONCURRENCY = 16
ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/reference/harness-captures")
ROUTES = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}


class InstantEngine:
    """Answers every call with one sampled token ("ok"): the model's decision, nothing else."""

    engine_id = "instant"

    def _body(self) -> dict[str, Any]:
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }

    async def complete(self, call: EngineCall) -> EngineResult:
        return EngineResult(self._body(), PromptIds(ids=[1, 2, 3]), [7], [-0.5], "stop", self.engine_id)

    async def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **head,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        yield EngineChunk(
            chunk({"role": "assistant", "content": ""}),
            prompt=PromptIds(ids=[1, 2, 3]),
            engine_id=self.engine_id,
        )
        yield EngineChunk(chunk({"content": "ok"}), [7], [-0.5], engine_id=self.engine_id)
        yield EngineChunk(chunk({}, "stop"), finish_reason="stop", engine_id=self.engine_id, final=True)
        usage = {
            **head,
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
        yield EngineChunk(usage, engine_id=self.engine_id, final=True)

    async def models(self) -> list[str]:
        return ["m"]

    async def count_tokens(self, body: dict[str, Any]) -> int:
        return 3

    async def detokenize(self, ids: list[int], route_key: str) -> str | None:
        return "ok"  # verbatim history then reads every echoed assistant turn of a rollout that was answered

    async def aclose(self) -> None:
        return None


# ----------------------------------------------------------------------------------- seeds


def _protocol(path: str) -> str | None:
    for name, suffix in ROUTES.items():
        if path.split("?")[0].endswith(suffix):
            return name
    return None


def load_seeds() -> dict[str, list[bytes]]:
    """Captured request bodies by protocol, as JSON bytes."""
    seeds: dict[str, list[bytes]] = {name: [] for name in ROUTES}
    gzipped = [
        *sorted((ROOT / "tests/protocols/captures").glob("*.json.gz")),
        *sorted((Path(__file__).parent / "captures").glob("*.json.gz")),
    ]  # Chat Completions ones
    for path in gzipped:
        capture = json.loads(gzip.decompress(path.read_bytes()))
        if (name := _protocol(capture.get("path", ""))) and isinstance(capture.get("body"), dict):
            seeds[name].append(orjson.dumps(capture["body"]))
    for path in sorted(SHARED.rglob("*.json")) if SHARED.is_dir() else []:
        try:
            capture = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if (
            isinstance(capture, dict)
            and isinstance(capture.get("body"), dict)
            and capture.get("method") == "POST"
        ):
            if name := _protocol(capture.get("path", "")):
                seeds[name].append(orjson.dumps(capture["body"]))
    return seeds


ADMIN_SEEDS = {
    "open": {
        "task_id": "t",
        "harness": "codex",
        "group_id": "g",
        "sample_index": 0,
        "metadata": {"a": [1]},
        "budget_s": 300.0,
    },
    "reward": {"reward": 1.0, "components": {"tests": 1.0}, "verifier_log": "ok"},
    "outcome": {
        "status": "ok",
        "reward": 0.0,
        "reward_components": {},
        "verifier_log": "",
        "in_batch": True,
        "drop_reason": None,
        "finished_at": 1.0,
    },
}

# ----------------------------------------------------------------------------------- mutations

VALUES: list[Any] = [
    None,
    0,
    -1,
    1.5,
    "__BIG__",
    1e308,
    "",
    "x",
    "é\u0000\ud7ff",
    True,
    False,
    [],
    {},
    [None],
    {"type": None},
    [[[]]],
    {"role": 5},
    "A" * 2000,
]
DEEP = b'"__DEEP__"'


def _containers(value: Any, rng: random.Random) -> Any:
    """A random container inside `value` (walked from the top), or `value` itself."""
    node = value
    for _ in range(rng.randint(0, 6)):
        kids = (
            [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, dict | list)]
            if isinstance(node, dict | list)
            else []
        )
        if not kids:
            break
        node = rng.choice(kids)
    return node


def _set_somewhere(body: Any, value: Any, rng: random.Random) -> None:
    node = _containers(body, rng)
    if isinstance(node, dict):
        node[rng.choice([*node.keys(), "extra", "stream", "messages", "input", "tools"]) if node else "k"] = (
            value
        )
    elif isinstance(node, list):
        if node:
            node[rng.randrange(len(node))] = value
        else:
            node.append(value)


def flip(body: Any, rng: random.Random) -> Any:
    _set_somewhere(body, copy.deepcopy(rng.choice(VALUES)), rng)  # a fresh one: shared ones would form cycles
    return body


def delete(body: Any, rng: random.Random) -> Any:
    node = _containers(body, rng)
    if isinstance(node, dict) and node:
        del node[rng.choice(list(node))]
    elif isinstance(node, list) and node:
        del node[rng.randrange(len(node))]
    return body


def deepen(body: Any, rng: random.Random) -> Any:
    _set_somewhere(body, "__DEEP__", rng)
    return body


def huge(body: Any, rng: random.Random) -> Any:
    _set_somewhere(body, "h" * rng.choice([50_000, 600_000, 2_500_000]), rng)
    return body


def streamed(body: Any, rng: random.Random) -> Any:
    if isinstance(body, dict):
        body["stream"] = True
    return body


# Echoed assistant turns whose tool calls are malformed (verbatim history reads each one it is shown).
BAD_TURNS: list[Any] = [
    {"role": "assistant", "content": "ok", "tool_calls": 5},
    {"role": "assistant", "content": "ok", "tool_calls": "x"},
    {"role": "assistant", "content": "ok", "tool_calls": [7]},
    {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c", "type": "function", "function": 7}]},
    {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c", "type": "function", "function": []}]},
    {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [{"function": {"name": 3, "arguments": {"n": "__BIG__"}}}],
    },
]


def echo_bad_turn(body: Any, rng: random.Random) -> Any:
    for key in ("messages", "input"):
        if isinstance(body, dict) and isinstance(body.get(key), list):
            body[key].insert(rng.randint(0, len(body[key])), copy.deepcopy(rng.choice(BAD_TURNS)))
    return body


BODY_MUTATIONS = [flip, flip, flip, delete, delete, deepen, huge, streamed, echo_bad_turn]


def encode(body: Any, rng: random.Random) -> bytes:
    raw = orjson.dumps(body)
    if DEEP in raw:
        depth = rng.choice([60, 127, 129, 200, 255, 400, 1100])
        raw = raw.replace(DEEP, b"[" * depth + b"{}" + b"]" * depth, 1).replace(DEEP, b"1")
    return raw.replace(b'"__BIG__"', b"1" + b"0" * 30)  # past 64 bits


def break_json(raw: bytes, rng: random.Random) -> bytes:
    choice = rng.randrange(6)
    if choice == 0:
        return raw[: rng.randrange(max(1, len(raw)))]
    if choice == 1:
        at = rng.randrange(max(1, len(raw)))
        return raw[:at] + rng.choice([b"\xff\xfe", b"}", b"NaN", b"\x00", b'"', b"[[["]) + raw[at:]
    if choice == 2:
        return b""
    if choice == 3:
        return rng.choice([b"null", b"[]", b"42", b'"s"', b"true"])
    if choice == 4:
        return raw.replace(b'"', b"'", 3)
    return b'{"a":' * 3000  # never closed


@dataclass
class Req:
    method: str
    url: str
    headers: dict[str, str]
    data: bytes | None
    shape: str  # "openai", "anthropic" or "admin"


def wire_mutations(req: Req, rng: random.Random) -> None:
    """Encodings, content types, queries, methods: on the request, not its JSON."""
    roll = rng.random()
    if roll < 0.12 and req.data is not None:
        enc = rng.choice(
            ["gzip", "gzip-garbage", "deflate", "br", "zstd", "identity", "compress", "GZIP", "gzip, br"]
        )
        if enc == "gzip":
            req.data = gzip.compress(req.data)
        elif enc == "deflate":
            req.data = zlib.compress(req.data)
        elif enc == "gzip-garbage":
            enc, req.data = "gzip", b"\x1f\x8b\x08\x00garbage" + req.data[:50]
        req.headers["Content-Encoding"] = enc
    elif roll < 0.20:
        req.headers["Content-Type"] = rng.choice(
            [
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=zz",
                "application/json; charset=latin-1",
                "image/png",
            ]
        )
    elif roll < 0.28:
        req.url += rng.choice(
            [
                "?beta=true",
                "?beta=false&x=%ff%fe",
                "?timeout=nan",
                "?a=" + "q" * 3000,
                "?=&&==",
                "?beta=true&beta=1",
                "?%00=1",
            ]
        )
    elif roll < 0.33:
        req.method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])


class Generator:
    """Deterministic stream of mutated requests for both planes."""

    def __init__(self, seeds: dict[str, list[bytes]], model: dict[str, Any], admin: dict[str, Any]) -> None:
        self.rng = random.Random(20261201)
        self.seeds, self.model, self.admin = seeds, model, admin

    def _body(self, seed: bytes) -> tuple[bytes, bool]:
        rng = self.rng
        if rng.random() < 0.1:
            return break_json(seed, rng), False
        body = orjson.loads(seed)
        for mutate in rng.sample(BODY_MUTATIONS, rng.randint(1, 3)):
            body = mutate(body, rng)
        return encode(body, rng), isinstance(body, dict) and body.get("stream") is True

    def model_request(self) -> Req:
        rng = self.rng
        name = rng.choice([n for n in ROUTES if self.seeds[n]])
        ro = self.model["rollouts"][rng.randrange(len(self.model["rollouts"]))]
        route = ROUTES[name]
        if name == "anthropic" and rng.random() < 0.1:
            route += "/count_tokens"
        data, _ = self._body(rng.choice(self.seeds[name]))
        key = rng.choices([ro["api_key"], self.model["rollouts"][0]["api_key"], "wrong", ""], [8, 1, 1, 1])[0]
        headers = {"Content-Type": "application/json"}
        if name == "anthropic":
            headers["x-api-key"] = key
        else:
            headers["Authorization"] = f"Bearer {key}"
        rid = ro["rollout_id"] if rng.random() < 0.95 else rng.choice(["nope", "..", "%2e%2e", "a" * 300])
        path = (
            f"/r/{rid}{route}"
            if rng.random() < 0.95
            else f"/r/{rid}/v1/{rng.choice(['x', 'rollouts', 'admin/pause'])}"
        )
        req = Req(
            "POST", self.model["url"] + path, headers, data, "anthropic" if name == "anthropic" else "openai"
        )
        wire_mutations(req, rng)
        return req

    def admin_request(self) -> Req:
        rng = self.rng
        target = rng.choice(self.admin["rollouts"])
        kind = rng.choice(
            ["open", "reward", "outcome", "close", "get", "calls", "pause", "resume", "metrics", "bad"]
        )
        path, data, method = {
            "open": ("/rollouts", "open", "POST"),
            "reward": (f"/rollouts/{target}/reward", "reward", "POST"),
            "outcome": (f"/rollouts/{target}/outcome", "outcome", "POST"),
            "close": (f"/rollouts/{target}/close", None, "POST"),
            "get": (f"/rollouts/{target}", None, "GET"),
            "calls": (f"/rollouts/{target}/calls", None, "GET"),
            "pause": (
                "/admin/pause?timeout="
                + rng.choice(["nan", "abc", "-1", "inf", "-inf", "1e999", "%00", "--"]),
                None,
                "POST",
            ),
            "resume": ("/admin/resume", None, "POST"),
            "metrics": ("/metrics", None, "GET"),
            "bad": (
                rng.choice(["/rollouts/x/y/z", "/admin", "/admin/pause/x", "/r/x/v1/chat/completions"]),
                "open",
                "POST",
            ),
        }[kind]
        raw = None if data is None else self._body(orjson.dumps(ADMIN_SEEDS[data]))[0]
        headers = {"Content-Type": "application/json"}
        headers["Authorization"] = rng.choices([f"Bearer {self.admin['token']}", "Bearer x", ""], [10, 1, 1])[
            0
        ]
        req = Req(method, self.admin["url"] + path, headers, raw, "admin")
        if "timeout" not in path:  # a *valid* pause is a real admin action: never sent
            wire_mutations(req, rng)
        return req

    def __iter__(self):
        for _ in range(N_REQUESTS):
            yield self.admin_request() if self.rng.random() < 0.2 else self.model_request()


# ----------------------------------------------------------------------------------- checks


def shape_ok(shape: str, body: Any) -> bool:
    if shape == "anthropic":
        err = body.get("error") if isinstance(body, dict) else None
        return (
            body.get("type") == "error"
            and isinstance(err, dict)
            and bool(err.get("message"))
            and isinstance(err.get("type"), str)
        )
    err = body.get("error") if isinstance(body, dict) else None
    return isinstance(err, dict) and bool(err.get("message")) and isinstance(err.get("type"), str)


def _shape_for(req: Req) -> str:
    """The model plane answers in the shape of the route's protocol (Anthropic for `/messages`)."""
    if req.shape == "admin":
        return "admin"
    return "anthropic" if "/messages" in req.url.split("?")[0] else "openai"


async def send(http: aiohttp.ClientSession, req: Req, tally: Counter[str], bad: list[str]) -> None:
    async with http.request(
        req.method, req.url, data=req.data, headers=req.headers, skip_auto_headers=["Content-Type"]
    ) as r:
        payload = await r.read()
        tally[f"{r.status // 100}xx"] += 1
        if r.status >= 500:
            bad.append(f"{r.status} {req.method} {req.url[:120]} {payload[:200]!r}")
            return
        if r.status < 400 or req.method == "HEAD":
            return
        try:
            body = orjson.loads(payload)
        except orjson.JSONDecodeError:
            body = None
        if not shape_ok(_shape_for(req), body):
            bad.append(f"shape {r.status} {req.method} {req.url[:120]} {payload[:200]!r}")


async def test_ten_thousand_mutated_requests(tmp_path: Path) -> None:
    seeds = load_seeds()
    assert all(len(v) >= 2 for v in seeds.values()), {k: len(v) for k, v in seeds.items()}
    store = SQLiteCallStore(tmp_path / "calls.db")
    gw = await start_gateway(InstantEngine(), store, max_body_bytes=2 * 1024 * 1024)  # type: ignore[arg-type]
    try:
        model = {"url": gw.model_url, "rollouts": [await gw.open_rollout(task_id=f"m{i}") for i in range(4)]}
        admin = {
            "url": gw.admin_url,
            "token": gw.admin_token,
            "rollouts": [(await gw.open_rollout(task_id=f"a{i}"))["rollout_id"] for i in range(4)] + ["nope"],
        }
        tally: Counter[str] = Counter()
        bad: list[str] = []
        gate = asyncio.Semaphore(CONCURRENCY)
        conn = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as http:

            async def one(req: Req) -> None:
                async with gate:
                    await send(http, req, tally, bad)

            await asyncio.gather(*(one(req) for req in Generator(seeds, model, admin)))
            async with http.get(gw.model_url + "/healthz") as r:
                health = await r.json()
        assert sum(tally.values()) == N_REQUESTS
        kinds = Counter(b.split(" http")[0] + " " + b.split(" ", 3)[-1][:60] for b in bad)
        assert bad == [], f"{len(bad)} bad answers: {kinds.most_common(8)}"
        assert tally["2xx"] > 500 and tally["4xx"] > 5000, tally  # both well exercised
        assert health["ok"] and not health["paused"] and not gw.gateway.gate.paused
        for ro in model["rollouts"]:
            record = await store.get_rollout(ro["rollout_id"])
            assert record is not None and not record.infra_tainted, record
            calls = await store.list_calls(ro["rollout_id"])
            assert not [c.error for c in calls if c.error is not None and c.error.kind.is_infra]
            async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:  # what the taint step reads
                for path in (f"/rollouts/{ro['rollout_id']}/calls", f"/rollouts/{ro['rollout_id']}"):
                    async with http.get(gw.admin_url + path) as r:
                        assert r.status == 200, (path, (await r.read())[:200])
    finally:
        await gw.aclose()
        await store.aclose()
