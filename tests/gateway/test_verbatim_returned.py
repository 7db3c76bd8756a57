"""An echoed tool call the engine's parser made of text that is not JSON still reaches the engine as the
model sampled it: the gateway knows the message it returned for that completion.

The engine here speaks vLLM's wire (ids, logprobs, `/detokenize`) and answers as vLLM's streaming hermes
parser did for a real model's `<tool_call>{"name": "mccoinvend', "arguments": {"id": "1"}}</tool_call>`:
a call named `mccoinvend', ` whose arguments are not JSON. Nothing can read that call's meaning back from
the sampled text, so before, the echo went to the engine as the harness sent it and the chain broke. The
client is the official `openai` SDK, accumulating the stream as a harness does and echoing the call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from openai import AsyncOpenAI

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.server import start_gateway

RAW = '<tool_call>\n{"name": "mccoinvend\', "arguments": {"id": "1"}}\n</tool_call>'
SAMPLED = [101, 102, 103, 104, 105, 2]  # the reply's ids, the end-of-turn token last
NAME, ARGS = "mccoinvend', ", '{"id": "1"}}'


def _event(delta: dict[str, Any], ids: list[int], finish: str | None = None, **top: Any) -> bytes:
    choice = {
        "index": 0,
        "delta": delta,
        "finish_reason": finish,
        "token_ids": ids,
        "logprobs": {"content": [{"token": "t", "logprob": -0.5, "top_logprobs": []} for _ in ids]},
    }
    body = {"id": "c", "object": "chat.completion.chunk", "choices": [choice], **top}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _engine(seen: list[dict[str, Any]]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        if not body.get("stream"):  # the first call, answered whole
            call = {
                "id": "chatcmpl-tool-1",
                "type": "function",
                "function": {"name": NAME, "arguments": ARGS},
            }
            lps = [{"token": "t", "logprob": -0.5, "top_logprobs": []} for _ in SAMPLED]
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
                "token_ids": SAMPLED,
                "logprobs": {"content": lps},
            }
            return web.json_response(
                {"id": "c", "object": "chat.completion", "choices": [choice], "prompt_token_ids": [1, 2]}
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if len(seen) == 1:
            call = {"index": 0, "id": "chatcmpl-tool-1", "type": "function", "function": {"name": NAME}}
            await resp.write(
                _event({"role": "assistant", "tool_calls": [call]}, SAMPLED[:2], prompt_token_ids=[1, 2])
            )
            more = {"index": 0, "function": {"arguments": ARGS}}
            await resp.write(_event({"tool_calls": [more]}, SAMPLED[2:], "tool_calls"))
        else:
            await resp.write(
                _event({"role": "assistant", "content": "done"}, [7, 2], "stop", prompt_token_ids=[1])
            )
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def detokenize(request: web.Request) -> web.Response:
        tokens = (await request.json())["tokens"]
        return web.json_response({"prompt": RAW if tokens == SAMPLED[:-1] else "?"})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/detokenize", detokenize)
    app.router.add_get("/v1/models", models)
    return app


@pytest.fixture
async def engine_seen(store: Any) -> AsyncIterator[tuple[Any, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    runner = web.AppRunner(_engine(seen))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    gw = await start_gateway(OpenAICompatEngine(f"http://127.0.0.1:{port}/v1"), store, owns_engine=True)
    yield gw, seen
    await gw.aclose()
    await runner.cleanup()


async def _echo(gw: Any, edit: dict[str, str], stream: bool = True) -> None:
    """One tool call returned (streamed, and accumulated as a harness does, or whole) and echoed with
    `edit` applied to its function."""
    ro = await gw.open_rollout()
    client = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
    tools = [{"type": "function", "function": {"name": "x", "parameters": {"type": "object"}}}]
    ask = [{"role": "user", "content": "go"}]
    call: dict[str, Any] = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
    if stream:
        chunks = await client.chat.completions.create(model="m", messages=ask, tools=tools, stream=True)  # type: ignore[arg-type]
        async for chunk in chunks:
            for tc in chunk.choices[0].delta.tool_calls or []:
                call["id"] = tc.id or call["id"]
                call["function"]["name"] += (tc.function and tc.function.name) or ""
                call["function"]["arguments"] += (tc.function and tc.function.arguments) or ""
    else:
        whole = await client.chat.completions.create(model="m", messages=ask, tools=tools)  # type: ignore[arg-type]
        call = whole.choices[0].message.tool_calls[0].model_dump()  # type: ignore[index]
    assert call["function"] == {"name": NAME, "arguments": ARGS}
    call["function"] |= edit
    history = [*ask, {"role": "assistant", "content": None, "tool_calls": [call]}]
    history.append({"role": "tool", "tool_call_id": call["id"], "content": "no such tool"})
    again = await client.chat.completions.create(model="m", messages=history, tools=tools, stream=True)  # type: ignore[arg-type]
    assert [c.choices[0].delta.content async for c in again if c.choices] == ["done"]


@pytest.mark.parametrize("stream", [True, False])
async def test_the_returned_call_goes_back_as_sampled(engine_seen: Any, stream: bool) -> None:
    gw, seen = engine_seen
    await _echo(gw, {}, stream)
    assert seen[1]["messages"][1] == {"role": "assistant", "content": RAW}
    assert seen[1]["messages"][2]["role"] == "tool" and json.dumps(seen[1]["messages"][0]) == json.dumps(
        {"role": "user", "content": "go"}
    )


async def test_control_a_call_the_harness_changed_goes_as_sent(engine_seen: Any) -> None:
    gw, seen = engine_seen
    await _echo(gw, {"arguments": '{"id": "2"}}'})
    sent = seen[1]["messages"][1]
    assert sent["tool_calls"][0]["function"] == {"name": NAME, "arguments": '{"id": "2"}}'}
    assert "content" not in sent or sent["content"] in (None, "")
