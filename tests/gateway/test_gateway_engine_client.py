"""The OpenAI-compatible engine client: knobs per dialect, replica pinning, SGLang's id shapes."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from openforgerl.engines.base import EngineCall, EngineError
from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.engines.scripted_server import start_scripted_server

BODY = {"model": "client-name", "messages": [{"role": "user", "content": "hi"}], "include_reasoning": False}


def test_vllm_knobs_are_forced():
    eng = OpenAICompatEngine("http://127.0.0.1:1/v1")
    payload, _ = eng._prepare(BODY, "served", stream=False)
    out = orjson.loads(payload)
    assert out["model"] == "served" and out["return_token_ids"] is True and out["include_reasoning"] is True
    assert out["logprobs"] is True and out["top_logprobs"] == 0 and out["stream"] is False
    kept = orjson.loads(eng._prepare({**BODY, "logprobs": True, "top_logprobs": 3}, "served", stream=True)[0])
    assert kept["top_logprobs"] == 3 and kept["stream"] is True


def test_sglang_knobs():
    eng = OpenAICompatEngine("http://127.0.0.1:1", dialect="sglang")
    payload, headers = eng._prepare(BODY, "served", stream=False)
    out = orjson.loads(payload)
    assert out["return_token_ids"] is True and out["return_meta_info"] is True
    _, headers = eng._prepare(BODY, "served", stream=True)
    assert headers["x-sglext-return-input-ids"] == "1" and headers["x-sglext-return-output-ids"] == "1"


def test_rollouts_are_pinned_and_spread():
    eng = OpenAICompatEngine(["http://a:1/v1", "http://b:1/v1", "http://c:1"])
    picks = {f"r{i}": eng.pick(f"r{i}").engine_id for i in range(60)}
    assert all(eng.pick(k).engine_id == v for k, v in picks.items())
    assert set(picks.values()) == {"a:1", "b:1", "c:1"}


async def test_replicas_through_gateway(make_gateway, store):
    from openai import AsyncOpenAI

    from openforgerl.gateway.server import start_gateway

    engines = [ScriptedEngine(lambda t: "hello"), ScriptedEngine(lambda t: "hello")]
    servers = [await start_scripted_server(e) for e in engines]
    gw = await start_gateway(OpenAICompatEngine([s.url + "/v1" for s in servers]), store, owns_engine=True)
    try:
        seen: dict[str, set[str]] = {}
        # Each rollout's replica is a hash of its random id: with 12 rollouts all landed on one replica in
        # 1 run of 2,048 (measured once in a parallel run); with 40, once in 2**39.
        for _ in range(40):
            ro = await gw.open_rollout()
            c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
            for _ in range(2):
                await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            seen[ro["rollout_id"]] = {r.engine for r in await store.list_calls(ro["rollout_id"])}  # type: ignore[misc]
        assert all(len(v) == 1 for v in seen.values())  # one replica per rollout
        assert len(set().union(*seen.values())) == 2  # both replicas used
    finally:
        await gw.aclose()
        for s in servers:
            await s.aclose()


def _sglang_app() -> web.Application:
    """SGLang's wire shape: ids in `sglext` (stream: a final chunk), `reasoning_content`."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {"token": "ok", "logprob": -0.5, "top_logprobs": []},
                        {"token": "", "logprob": -0.25, "top_logprobs": []},
                    ]
                },
            }
            return web.json_response(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "choices": [choice],
                    "sglext": {"input_ids": [1, 2, 3], "output_ids": [7, 2]},
                }
            )
        assert request.headers["x-sglext-return-output-ids"] == "1"
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text, lp, fin in (("o", -0.5, None), ("k", -0.25, "stop")):
            chunk = {
                "id": "x",
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": text},
                        "finish_reason": fin,
                        "logprobs": {"content": [{"token": text, "logprob": lp, "top_logprobs": []}]},
                    }
                ],
            }
            await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        final = {
            "id": "x",
            "object": "chat.completion.chunk",
            "choices": [],
            "sglext": {"input_ids": [1, 2, 3], "output_ids": [7, 2]},
        }
        await resp.write(b"data: " + orjson.dumps(final) + b"\n\ndata: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.mark.parametrize("stream", [False, True])
async def test_sglang_dialect_ids(aiohttp_free_port, stream):
    runner = web.AppRunner(_sglang_app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", aiohttp_free_port).start()
    eng = OpenAICompatEngine(f"http://127.0.0.1:{aiohttp_free_port}", dialect="sglang", model="m")
    call = EngineCall(dict(BODY), "r")
    try:
        if stream:
            ids, lps, prompt = [], [], None
            async for chunk in eng.stream(call):
                ids += chunk.token_ids
                lps += chunk.logprobs
                prompt = chunk.prompt.ids if chunk.prompt else prompt
        else:
            res = await eng.complete(call)
            ids, lps, prompt = res.token_ids, res.logprobs, res.prompt.ids
        assert (prompt, ids, lps) == ([1, 2, 3], [7, 2], [-0.5, -0.25])
    finally:
        await eng.aclose()
        await runner.cleanup()


@pytest.fixture
def aiohttp_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pass_through_reads_go_unread_and_decode_once():
    """On the pass-through path vLLM's events are forwarded unread and decoded once at the end; a
    read is cut before its first final event (so earlier events are not held back with it); only an
    error event is read at once. Keys escaped inside a string value never count."""

    def event(tid: int, lp: float, finish: str | None = None, content: str = "x") -> bytes:
        choice = {
            "index": 0,
            "delta": {"content": content},
            "finish_reason": finish,
            "token_ids": [tid],
            "logprobs": {"content": [{"token": content, "logprob": lp, "bytes": [1], "top_logprobs": []}]},
        }
        return b"data: " + orjson.dumps({"id": "c", "choices": [choice]}) + b"\n\n"

    eng = OpenAICompatEngine("http://127.0.0.1:9/v1")
    first = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],'
        b'"prompt_token_ids":[1,2,3]}\n\n'
    )
    tricky = '"error" "choices":[] "finish_reason":"stop"'  # escaped in the JSON: not keys
    usage = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3}}\n\n'
    reads = [first + event(11, -0.5), event(12, -1.25, content=tricky), event(2, -0.125, "stop") + usage]
    chunks = [c for r in reads for c in eng._read(r, "e", raw_only=True)[0]]
    assert all(c.decode is not None and not c.token_ids for c in chunks)
    assert [c.raw for c in chunks] == reads and [c.final for c in chunks] == [False, False, True]

    coalesced, done = eng._read(b"".join(reads) + b"data: [DONE]\n\n", "e", raw_only=True)
    assert done and [c.final for c in coalesced] == [False, True]  # cut before the finish event
    assert coalesced[0].raw == reads[0] + reads[1] and coalesced[1].raw == reads[2]
    decoded = chunks[0].decode(b"".join(c.raw for c in coalesced))
    assert decoded.prompt.json == b"[1,2,3]" and decoded.token_ids == [11, 12, 2]
    assert decoded.logprobs == [-0.5, -1.25, -0.125] and decoded.finish_reason == "stop"
    assert decoded.content == "x" + tricky + "x"

    with pytest.raises(EngineError):  # an error event is read at once
        eng._read(b'data: {"error":{"message":"boom"}}\n\n', "e", raw_only=True)
    (chunk,), _ = eng._read(reads[1], "e", raw_only=False)  # callers that need chunk dicts get them read
    assert chunk.decode is None and chunk.token_ids == [12] and chunk.body["id"] == "c"
    with pytest.raises(EngineError):
        chunks[0].decode(b"data: {not json\n\n")


def test_split_prompt_ids_cuts_only_a_compact_int_array():
    from openforgerl.engines.openai_compat import split_prompt_ids

    body = {
        "id": "c",
        "choices": [{"index": 0, "message": {"content": '"prompt_token_ids":[9]'}, "token_ids": [4]}],
        "usage": {"prompt_tokens": 3},
        "prompt_token_ids": [1, 22, 333],
    }
    raw = orjson.dumps(body)
    rest, ids = split_prompt_ids(raw)
    assert ids == b"[1,22,333]" and orjson.loads(rest) == {
        k: v for k, v in body.items() if k != "prompt_token_ids"
    }
    first = orjson.dumps(
        {"prompt_token_ids": [7], **{k: v for k, v in body.items() if k != "prompt_token_ids"}}
    )
    rest, ids = split_prompt_ids(first)  # also when it is the first key
    assert ids == b"[7]" and "prompt_token_ids" not in orjson.loads(rest)
    assert split_prompt_ids(orjson.dumps({**body, "prompt_token_ids": [1.5]})) is None  # not ints
    assert split_prompt_ids(orjson.dumps({**body, "prompt_token_ids": ["a"]})) is None
    assert split_prompt_ids(orjson.dumps({"id": "c"})) is None  # absent
    assert (
        split_prompt_ids(raw.replace(b'"prompt_token_ids":[1,22,333]', b'"prompt_token_ids":[1, 22]')) is None
    )


async def test_deadline_guard_times_out_and_lets_other_cancellations_through():
    import asyncio

    from openforgerl.gateway.deadlines import DeadlineWatch

    watch = DeadlineWatch(period_s=0.02)
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        with watch.guard(loop.time() + 0.05):
            await asyncio.sleep(5)
    with watch.guard(loop.time() + 5):  # finishes in time: nothing happens
        await asyncio.sleep(0.01)
    with watch.guard(None):
        await asyncio.sleep(0)

    async def cancelled_from_outside() -> None:
        with watch.guard(loop.time() + 5):
            await asyncio.sleep(5)

    task = asyncio.create_task(cancelled_from_outside())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not watch._guards


def test_scan_events_agrees_with_the_json_parser_or_declines():
    """The byte scan of unread events gives what parsing them gives (ids, logprobs, text, finish,
    prompt ids), or declines (None) for shapes it does not know, never something else."""
    from openforgerl.engines.openai_compat import scan_events

    def event(
        delta: dict,
        tid: int | None = None,
        lp: float = -0.5,
        finish: str | None = None,
        top: list | None = None,
    ) -> bytes:
        choice: dict = {"index": 0, "delta": delta}
        if tid is not None:
            choice["logprobs"] = {
                "content": [{"token": "t", "logprob": lp, "bytes": [1], "top_logprobs": top or []}]
            }
        choice["finish_reason"] = finish
        if tid is not None:
            choice["token_ids"] = [tid]
        return (
            b"data: "
            + orjson.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})
            + b"\n\n"
        )

    head = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        b'"finish_reason":null}],"prompt_token_ids":[1,2,3]}\n\n'
    )
    plain = (
        head
        + event({"reasoning": "hmm"}, 5, -1.5)
        + event({"content": 'say "hi"\\n\u00e9\U0001f600'}, 6, -2e-05)
        + event({}, 7, -9999.0, "stop")
        + b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3}}\n\n'
    )
    eng = OpenAICompatEngine("http://127.0.0.1:9/v1")
    scanned, parsed = scan_events(plain), eng._parse_read(plain, "")[0]
    assert scanned is not None and scanned.prompt.json == b"[1,2,3]" and parsed.prompt.ids == [1, 2, 3]
    assert (scanned.token_ids, scanned.logprobs, scanned.content, scanned.finish_reason, scanned.final) == (
        parsed.token_ids,
        parsed.logprobs,
        parsed.content,
        parsed.finish_reason,
        parsed.final,
    )
    assert scanned.content == 'say "hi"\\n\u00e9\U0001f600'
    tool = event({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, 8)
    assert scan_events(plain + tool) is None  # tool calls: parsed instead
    assert (
        scan_events(event({"content": "x"}, 9, top=[{"token": "y", "logprob": -3.0, "bytes": [2]}])) is None
    )
    assert scan_events(event({"refusal": None, "content": "x"}, 9)) is None  # a delta shape it does not know
    assert (
        scan_events(plain.replace(b'"token_ids":[6]', b'"token_ids":[6,6]')) is None
    )  # ids without logprobs
    assert scan_events(plain[:-30] + b"\n\n") is None  # a torn event
