"""The OpenAI-compatible engine client: knobs per dialect, replica pinning, SGLang's id shapes."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from openforgerl.engines.base import EngineCall
from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.engines.scripted import ScriptedEngine, start_scripted_server

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
        for _ in range(12):
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
            choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop",
                      "logprobs": {"content": [{"token": "ok", "logprob": -0.5, "top_logprobs": []},
                                               {"token": "", "logprob": -0.25, "top_logprobs": []}]}}
            return web.json_response({"id": "x", "object": "chat.completion", "choices": [choice],
                                      "sglext": {"input_ids": [1, 2, 3], "output_ids": [7, 2]}})
        assert request.headers["x-sglext-return-output-ids"] == "1"
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text, lp, fin in (("o", -0.5, None), ("k", -0.25, "stop")):
            chunk = {"id": "x", "object": "chat.completion.chunk", "choices": [{
                "index": 0, "delta": {"content": text}, "finish_reason": fin,
                "logprobs": {"content": [{"token": text, "logprob": lp, "top_logprobs": []}]}}]}
            await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        final = {"id": "x", "object": "chat.completion.chunk", "choices": [],
                 "sglext": {"input_ids": [1, 2, 3], "output_ids": [7, 2]}}
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
                prompt = chunk.prompt_token_ids or prompt
        else:
            res = await eng.complete(call)
            ids, lps, prompt = res.token_ids, res.logprobs, res.prompt_token_ids
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


def test_scan_reads_plain_token_events_and_refuses_the_rest():
    from openforgerl.engines.openai_compat import _Extract

    def event(tid: int, lp: float, top: list, finish: str | None = None, content: str = "x") -> bytes:
        choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish, "token_ids": [tid],
                  "logprobs": {"content": [{"token": content, "logprob": lp, "bytes": [1], "top_logprobs": top}]}}
        return b"data: " + orjson.dumps({"id": "c", "choices": [choice]}) + b"\n\n"

    tricky = '"logprob":-1.0, "token_ids":[5] "error"'  # escaped inside a JSON string: never a key
    raw = event(11, -0.5, []) + event(12, -1.25, [], content=tricky) + event(2, -0.125, [], "stop")
    chunk = _Extract.scan(raw.replace(b'"error"', b'"err"'), "e")
    assert chunk is not None and chunk.token_ids == [11, 12, 2] and chunk.logprobs == [-0.5, -1.25, -0.125]
    assert chunk.finish_reason == "stop" and chunk.final
    top = [{"token": "y", "logprob": -2.0, "bytes": [2]}]
    assert _Extract.scan(event(11, -0.5, top), "e") is None  # top-k entries: parse it properly instead
    assert _Extract.scan(b'data: {"choices":[],"usage":{"prompt_tokens":3}}\n\n', "e") is None
